import { describe, expect, it } from "vitest";
import { initialVariantState, nextState, type VariantObservation, type VariantStateMemory } from "../src/index.js";

const base: VariantObservation = { loaded: true, loading: false, qps: 10, peakQps: 100, observedP50Ms: 20, profiledMs: 20 };

/** Carry the memory through a sequence of observations, one per second. */
function walk(obs: Array<Partial<VariantObservation>>, start: VariantStateMemory = initialVariantState(0)): string[] {
  let mem = start;
  return obs.map((o, i) => {
    mem = nextState(mem, { ...base, ...o }, (i + 1) * 1000).memory;
    return mem.state;
  });
}

describe("variant-state", () => {
  const cases: Array<{ name: string; obs: Array<Partial<VariantObservation>>; want: string[] }> = [
    { name: "inactive → loading → active", obs: [{ loaded: false, loading: false }, { loaded: false, loading: true }, {}], want: ["inactive", "loading", "active"] },
    // peak 100: 100 ≥ 100 overloads; 99 < 100 recovers.
    { name: "active ↔ overloaded at the profiled peak", obs: [{ qps: 99 }, { qps: 100 }, { qps: 140 }, { qps: 99 }], want: ["active", "overloaded", "overloaded", "active"] },
    // 20 ms × 1.2 = 24 ms: 25 ms is slow; three slow seconds in a row → interfered.
    { name: "interfered after 3 consecutive slow seconds", obs: [{ observedP50Ms: 25 }, { observedP50Ms: 25 }, { observedP50Ms: 25 }], want: ["active", "active", "interfered"] },
    // 24 ms is exactly the limit: not above it.
    { name: "the margin is exclusive", obs: [{ observedP50Ms: 24 }, { observedP50Ms: 24 }, { observedP50Ms: 24 }], want: ["active", "active", "active"] },
    { name: "a fast second resets the count", obs: [{ observedP50Ms: 30 }, { observedP50Ms: 30 }, { observedP50Ms: 21 }, { observedP50Ms: 30 }, { observedP50Ms: 30 }], want: ["active", "active", "active", "active", "active"] },
    { name: "idle seconds keep the count", obs: [{ observedP50Ms: 30 }, { observedP50Ms: 30 }, { observedP50Ms: null }, { observedP50Ms: 30 }], want: ["active", "active", "active", "interfered"] },
    { name: "interfered → active on the first fast second", obs: [{ observedP50Ms: 30 }, { observedP50Ms: 30 }, { observedP50Ms: 30 }, { observedP50Ms: 20 }], want: ["active", "active", "interfered", "active"] },
    { name: "overloaded wins over interfered", obs: [{ observedP50Ms: 30 }, { observedP50Ms: 30 }, { observedP50Ms: 30, qps: 120 }], want: ["active", "active", "overloaded"] },
    { name: "any → inactive when unloaded", obs: [{ qps: 120 }, { loaded: false }], want: ["overloaded", "inactive"] },
  ];
  for (const c of cases) {
    it(`variant-state - ${c.name}`, () => {
      expect(walk(c.obs)).toEqual(c.want);
    });
  }

  it("variant-state - an absolute floor keeps sub-millisecond noise from counting as interference", () => {
    // profiled 0.04 ms: 0.04 × 1.2 = 0.048 < 0.13 (slow without a floor); 0.048 + 2 = 2.048 > 0.13 with one.
    const cfg = { interferenceMargin: 0.2, interferenceSeconds: 3 };
    const run = (floor?: number): string => {
      let mem = initialVariantState(0);
      for (let i = 1; i <= 3; i++) mem = nextState(mem, { ...base, profiledMs: 0.04, observedP50Ms: 0.13 }, i * 1000, floor === undefined ? cfg : { ...cfg, interferenceFloorMs: floor }).memory;
      return mem.state;
    };
    expect(run()).toBe("interfered");
    expect(run(2)).toBe("active");
  });

  it("variant-state - reasons and since-times", () => {
    const s1 = nextState(initialVariantState(0), { ...base, qps: 150 }, 5000);
    expect(s1).toMatchObject({ changed: true, memory: { state: "overloaded", sinceMs: 5000 }, reason: "QPS 150 ≥ profiled peak 100" });
    const s2 = nextState(s1.memory, { ...base, qps: 160 }, 6000);
    expect(s2).toMatchObject({ changed: false, memory: { state: "overloaded", sinceMs: 5000 } });
  });

  it("variant-state - the margin and window are configurable", () => {
    // 50% margin: 20 × 1.5 = 30; 31 ms for one second is enough with interferenceSeconds 1.
    const s = nextState(initialVariantState(0), { ...base, observedP50Ms: 31 }, 1000, { interferenceMargin: 0.5, interferenceSeconds: 1 });
    expect(s.memory.state).toBe("interfered");
    expect(s.reason).toContain("× 1.5");
  });
});
