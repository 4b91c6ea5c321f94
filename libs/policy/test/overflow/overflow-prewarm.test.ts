import { describe, expect, it } from "vitest";
import { PREWARM_DEFAULTS, prewarmForForecast, prewarmForLostCapacity } from "../../src/overflow/overflow-prewarm.js";

describe("overflow prewarm", () => {
  const lostCases = [
    // 50 q/s × 30 ms = 1.5 concurrent runs → 2 containers.
    { name: "one variant's load", lost: [{ variant: "a", arrivalsPerS: 50, functionLatencyMs: 30 }], containers: 2 },
    // 50 × 0.030 + 200 × 0.010 = 1.5 + 2 = 3.5 → 4.
    { name: "two variants add up", lost: [{ variant: "a", arrivalsPerS: 50, functionLatencyMs: 30 }, { variant: "b", arrivalsPerS: 200, functionLatencyMs: 10 }], containers: 4 },
    // 2 × 0.005 = 0.01 → at least 1 when any load was lost.
    { name: "a little load warms one", lost: [{ variant: "a", arrivalsPerS: 2, functionLatencyMs: 5 }], containers: 1 },
    // 100 q/s × 20 ms = 2.0 exactly → 2 (no rounding up of an exact product).
    { name: "an exact product is not rounded up", lost: [{ variant: "a", arrivalsPerS: 100, functionLatencyMs: 20 }], containers: 2 },
    // 1000 × 0.5 = 500 → capped at 32.
    { name: "capped at maxContainers", lost: [{ variant: "a", arrivalsPerS: 1000, functionLatencyMs: 500 }], containers: 32 },
    { name: "no load, nothing to warm", lost: [{ variant: "a", arrivalsPerS: 0, functionLatencyMs: 30 }], containers: 0 },
    { name: "nothing lost", lost: [], containers: 0 },
  ];
  for (const c of lostCases) {
    it(`overflow prewarm - capacity lost: ${c.name}`, () => {
      expect(prewarmForLostCapacity(c.lost).containers).toBe(c.containers);
    });
  }

  it("overflow prewarm - capacity lost: the containers load the variant needing most of them", () => {
    // a: 50 × 0.030 = 1.5; b: 200 × 0.010 = 2 → b.
    expect(prewarmForLostCapacity([{ variant: "a", arrivalsPerS: 50, functionLatencyMs: 30 }, { variant: "b", arrivalsPerS: 200, functionLatencyMs: 10 }]).variant).toBe("b");
    expect(prewarmForLostCapacity([{ variant: "a", arrivalsPerS: 0, functionLatencyMs: 30 }]).variant).toBeUndefined();
    expect(prewarmForForecast({ nextQps: 60, currentQps: 20, localCapacityQps: 30, functionLatencyMs: 100, variant: "v" }).variant).toBe("v");
  });

  it("overflow prewarm - capacity lost: the reason states the load", () => {
    expect(prewarmForLostCapacity([{ variant: "a", arrivalsPerS: 50, functionLatencyMs: 30 }]).reason).toBe("capacity lost carrying 50.0 q/s (1.50 concurrent function runs): warm 2");
    expect(prewarmForLostCapacity([]).reason).toBe("the lost capacity carried no load");
  });

  const forecastCases = [
    // 60 ≥ 1.5 × 20 and 40 ≥ 1; extra = 60 − max(20, 30) = 30 q/s × 100 ms = 3 → 3.
    { name: "a surge above the local capacity", f: { nextQps: 60, currentQps: 20, localCapacityQps: 30, functionLatencyMs: 100 }, containers: 3 },
    // 29 < 1.5 × 20 = 30: no surge.
    { name: "below the surge factor", f: { nextQps: 29, currentQps: 20, localCapacityQps: 0, functionLatencyMs: 100 }, containers: 0 },
    // 30 = 1.5 × 20: a surge; extra 30 − 20 = 10 × 0.1 = 1.
    { name: "exactly at the surge factor", f: { nextQps: 30, currentQps: 20, localCapacityQps: 0, functionLatencyMs: 100 }, containers: 1 },
    // 0.9 ≥ 1.5 × 0.2 but 0.7 < 1 q/s: noise.
    { name: "a small absolute change is noise", f: { nextQps: 0.9, currentQps: 0.2, localCapacityQps: 0, functionLatencyMs: 100 }, containers: 0 },
    // From nothing: 10 ≥ 0 and 10 ≥ 1; 10 × 0.05 = 0.5 → 1.
    { name: "from no load at all", f: { nextQps: 10, currentQps: 0, localCapacityQps: 0, functionLatencyMs: 50 }, containers: 1 },
    // 60 ≤ 100 of local capacity: the instances absorb it.
    { name: "a surge the local capacity absorbs", f: { nextQps: 60, currentQps: 20, localCapacityQps: 100, functionLatencyMs: 100 }, containers: 0 },
  ];
  for (const c of forecastCases) {
    it(`overflow prewarm - forecast: ${c.name}`, () => {
      expect(prewarmForForecast(c.f).containers).toBe(c.containers);
    });
  }

  it("overflow prewarm - forecast: reasons and configuration", () => {
    expect(prewarmForForecast({ nextQps: 60, currentQps: 20, localCapacityQps: 30, functionLatencyMs: 100 }).reason).toBe(
      "surge forecast: 60.0 q/s against 20.0 q/s now and 30.0 q/s of local capacity: warm 3 for 30.0 q/s",
    );
    expect(prewarmForForecast({ nextQps: 60, currentQps: 20, localCapacityQps: 100, functionLatencyMs: 100 }).reason).toBe("surge to 60.0 q/s fits the local capacity of 100.0 q/s");
    // A stricter factor: 60 < 4 × 20.
    expect(prewarmForForecast({ nextQps: 60, currentQps: 20, localCapacityQps: 0, functionLatencyMs: 100 }, { ...PREWARM_DEFAULTS, surgeFactor: 4 }).containers).toBe(0);
  });
});
