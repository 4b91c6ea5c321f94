import { describe, expect, it } from "vitest";
import { initialVariantState, nextState, observeWindow, DEFAULT_VARIANT_STATE_CONFIG, type VariantObservation, type VariantStateConfig, type VariantStateMemory } from "../../src/index.js";

/** The relative rule alone (no floor): the cases below are about the margin and the counting. */
const RELATIVE: VariantStateConfig = { interferenceMargin: 0.2, interferenceSeconds: 3 };

const base: VariantObservation = { loaded: true, loading: false, qps: 10, peakQps: 100, observedMs: 20, profiledMs: 20 };

/** Carry the memory through a sequence of observations, one per second. */
function walk(obs: Array<Partial<VariantObservation>>, start: VariantStateMemory = initialVariantState(0)): string[] {
  let mem = start;
  return obs.map((o, i) => {
    mem = nextState(mem, { ...base, ...o }, (i + 1) * 1000, RELATIVE).memory;
    return mem.state;
  });
}

describe("variant-state", () => {
  const cases: Array<{ name: string; obs: Array<Partial<VariantObservation>>; want: string[] }> = [
    { name: "inactive → loading → active", obs: [{ loaded: false, loading: false }, { loaded: false, loading: true }, {}], want: ["inactive", "loading", "active"] },
    // peak 100: 100 ≥ 100 overloads; 99 < 100 recovers.
    { name: "active ↔ overloaded at the profiled peak", obs: [{ qps: 99 }, { qps: 100 }, { qps: 140 }, { qps: 99 }], want: ["active", "overloaded", "overloaded", "active"] },
    // 20 ms × 1.2 = 24 ms: 25 ms is slow; three slow seconds in a row → interfered.
    { name: "interfered after 3 consecutive slow seconds", obs: [{ observedMs: 25 }, { observedMs: 25 }, { observedMs: 25 }], want: ["active", "active", "interfered"] },
    // 24 ms is exactly the limit: not above it.
    { name: "the margin is exclusive", obs: [{ observedMs: 24 }, { observedMs: 24 }, { observedMs: 24 }], want: ["active", "active", "active"] },
    { name: "a fast second resets the count", obs: [{ observedMs: 30 }, { observedMs: 30 }, { observedMs: 21 }, { observedMs: 30 }, { observedMs: 30 }], want: ["active", "active", "active", "active", "active"] },
    { name: "idle seconds keep the count", obs: [{ observedMs: 30 }, { observedMs: 30 }, { observedMs: null }, { observedMs: 30 }], want: ["active", "active", "active", "interfered"] },
    // Interfered gets no queries from selection: 3 seconds without evidence (count 3 → 2 → 1 → 0) end it.
    { name: "interfered → active after 3 seconds without evidence", obs: [{ observedMs: 30 }, { observedMs: 30 }, { observedMs: 30 }, { observedMs: null }, { observedMs: null }, { observedMs: null }], want: ["active", "active", "interfered", "interfered", "interfered", "active"] },
    { name: "interfered → active on the first fast second", obs: [{ observedMs: 30 }, { observedMs: 30 }, { observedMs: 30 }, { observedMs: 20 }], want: ["active", "active", "interfered", "active"] },
    { name: "overloaded wins over interfered", obs: [{ observedMs: 30 }, { observedMs: 30 }, { observedMs: 30, qps: 120 }], want: ["active", "active", "overloaded"] },
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
      for (let i = 1; i <= 3; i++) mem = nextState(mem, { ...base, profiledMs: 0.04, observedMs: 0.13 }, i * 1000, floor === undefined ? cfg : { ...cfg, interferenceFloorMs: floor }).memory;
      return mem.state;
    };
    expect(run()).toBe("interfered");
    expect(run(2)).toBe("active");
  });

  it("variant-state - reasons and since-times", () => {
    const s1 = nextState(initialVariantState(0), { ...base, qps: 150 }, 5000, RELATIVE);
    expect(s1).toMatchObject({ changed: true, memory: { state: "overloaded", sinceMs: 5000 }, reason: "QPS 150 ≥ profiled peak 100" });
    const s2 = nextState(s1.memory, { ...base, qps: 160 }, 6000, RELATIVE);
    expect(s2).toMatchObject({ changed: false, memory: { state: "overloaded", sinceMs: 5000 } });
  });

  it("variant-state - the margin and window are configurable", () => {
    // 50% margin: 20 × 1.5 = 30; 31 ms for one second is enough with interferenceSeconds 1.
    const s = nextState(initialVariantState(0), { ...base, observedMs: 31 }, 1000, { interferenceMargin: 0.5, interferenceSeconds: 1 });
    expect(s.memory.state).toBe("interfered");
    expect(s.reason).toContain("× 1.5");
  });

  it("variant-state - the observation is built from the window's figures (one set of units, live and simulated)", () => {
    // 12 batches: mean observed 300 / 12 = 25 ms, mean profiled 240 / 12 = 20 ms; peak 2 × 50 = 100.
    const w = { instances: 2, loading: 0, qps: 40, peakQpsPerInstance: 50, batches: 12, observedBatchMs: 300, profiledBatchMs: 240 };
    expect(observeWindow(w)).toEqual({ loaded: true, loading: false, qps: 40, peakQps: 100, observedMs: 25, profiledMs: 20 });
    // 9 batches < minBatches 10: no evidence either way.
    expect(observeWindow({ ...w, batches: 9 }).observedMs).toBeNull();
    // Default: 20 × 1.2 + 2 = 26 ms; 25 ms is within it, 27 ms is not.
    let mem = initialVariantState(0);
    for (let i = 1; i <= 3; i++) mem = nextState(mem, observeWindow(w), i * 1000, DEFAULT_VARIANT_STATE_CONFIG).memory;
    expect(mem.state).toBe("active");
    for (let i = 4; i <= 6; i++) mem = nextState(mem, observeWindow({ ...w, observedBatchMs: 27 * 12 }), i * 1000, DEFAULT_VARIANT_STATE_CONFIG).memory;
    expect(mem.state).toBe("interfered");
  });
});
