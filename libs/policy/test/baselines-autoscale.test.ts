import { describe, expect, it } from "vitest";
import { autoScaleStep, type AutoScaleState } from "../src/baselines-autoscale.js";

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
});
