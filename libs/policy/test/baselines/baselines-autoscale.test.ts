import { describe, expect, it } from "vitest";
import { autoScaleStep, autoScaleUnitPlan, unitsConfig, type AutoScaleState } from "../../src/baselines/baselines-autoscale.js";
import type { Pipeline, ProfileSet } from "../../src/pipelines/pipeline.js";

const plan = { unitQps: 100, rho: 0.5 };
const at = (qps: number, nowMs: number): number[] => Array.from({ length: qps * 10 }, (_, i) => nowMs - 10_000 + (i + 0.5) * (1000 / qps));

describe("baselines-autoscale", () => {
  it("baselines-autoscale - adds units only once the pipeline is overloaded", () => {
    const s: AutoScaleState = { units: 2, lowerSinceMs: null };
    // 150 qps < capacity 200: ⌈150 / 50⌉ = 3 would restore the planned headroom, but nothing is overloaded yet.
    expect(autoScaleStep({ nowMs: 100_000, recentArrivalsMs: at(150, 100_000), plan, state: s }).changed).toBe(false);
    // 250 qps > 200 → ⌈250 / 50⌉ = 5 units.
    const d = autoScaleStep({ nowMs: 100_000, recentArrivalsMs: at(250, 100_000), plan, state: s });
    expect(d.state.units).toBe(5);
    expect(d.reason).toBe("overloaded: 250.0 qps > capacity 200.0: 5 units");
  });

  it("baselines-autoscale - removes units after the wait timer", () => {
    let s: AutoScaleState = { units: 3, lowerSinceMs: null };
    const units: number[] = [];
    for (let t = 0; t <= 130_000; t += 10_000) {
      s = autoScaleStep({ nowMs: t, recentArrivalsMs: at(40, t), plan, state: s }).state;
      units.push(s.units);
    }
    // ⌈40/50⌉ = 1 suffices from t = 0; the scale-in happens at t = 120 s.
    expect(units).toEqual([3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 1, 1]);
  });

  // Two stages; b at batch 1 takes 50 ms (20 qps per replica), a 10 ms (100 qps); half the queries reach c (25 ms: 40 qps).
  const pipe: Pipeline = { name: "p", models: ["a", "b", "c"], edges: [{ from: "a", to: "b" }, { from: "b", to: "c", probability: 0.5 }] };
  const profiles: ProfileSet = {
    a: [{ hardware: "cpu", pricePerHour: 1, batchLatencyMs: [[1, 10]] }],
    b: [{ hardware: "gpu", pricePerHour: 1, batchLatencyMs: [[1, 50]] }],
    c: [{ hardware: "cpu", pricePerHour: 1, batchLatencyMs: [[1, 25]] }],
  };
  const unitCases = [
    // b: 2 × 20 = 40 qps is the slowest stage (a 100, c 40 / 0.5 = 80); 60 qps on 2 units → ρ = 60 / 80.
    { name: "the slowest stage bounds a unit", unit: { a: 1, b: 2, c: 1 }, units: 2, rate: 60, want: { unitQps: 40, rho: 0.75 } },
    // c: 1 × 40 / 0.5 = 80 qps against b's 4 × 20 = 80 and a's 100; 200 qps on 1 unit → ρ capped at 1.
    { name: "scale factors count and ρ is at most 1", unit: { a: 1, b: 4, c: 1 }, units: 1, rate: 200, want: { unitQps: 80, rho: 1 } },
  ];
  for (const c of unitCases) {
    it(`baselines-autoscale - a plan as the unit: ${c.name}`, () => {
      const unit = Object.fromEntries(Object.entries(c.unit).map(([m, r]) => [m, { hardware: profiles[m]![0]!.hardware, maxBatch: 1, replicas: r }]));
      const got = autoScaleUnitPlan(pipe, profiles, unit, c.units, c.rate);
      expect(got.unitQps).toBeCloseTo(c.want.unitQps, 9);
      expect(got.rho).toBeCloseTo(c.want.rho, 9);
      expect(Object.values(unitsConfig(unit, 3)).map((x) => x.replicas)).toEqual(Object.values(c.unit).map((r) => 3 * r));
    });
  }

  it("baselines-autoscale - a unit missing a model is named", () => {
    expect(() => autoScaleUnitPlan(pipe, profiles, { a: { hardware: "cpu", maxBatch: 1, replicas: 1 } }, 1, 10)).toThrow("unit configuration has no entry for model b");
  });
});
