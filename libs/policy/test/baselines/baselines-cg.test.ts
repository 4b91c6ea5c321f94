import { describe, expect, it } from "vitest";
import { planCoarseGrained } from "../../src/baselines/baselines-cg.js";
import type { Pipeline, ProfileSet } from "../../src/pipelines/pipeline.js";

const chain: Pipeline = { name: "chain", models: ["a", "b"], edges: [{ from: "a", to: "b" }] };
const line = (t1: number, slope: number, price: number) => [
  { hardware: "gpu", pricePerHour: price, batchLatencyMs: [1, 2, 4, 8, 16, 32].map((b) => [b, t1 + slope * (b - 1)] as [number, number]) },
  { hardware: "cpu", pricePerHour: price / 10, batchLatencyMs: [[1, 10 * t1]] as Array<[number, number]> },
];
// a: T(b) = 10 + (b − 1); b: T(b) = 20 + 2(b − 1).
const profiles: ProfileSet = { a: line(10, 1, 1), b: line(20, 2, 2) };
const evenly = Array.from({ length: 1000 }, (_, i) => i * 10); // 100 qps for 10 s
const bursty = [...evenly, ...Array.from({ length: 50 }, (_, i) => 5000.5 + i)].sort((x, y) => x - y);

describe("baselines-cg", () => {
  it("baselines-cg - one batch size for the whole pipeline, the largest within the SLO", () => {
    // b = 16: 25 + 50 = 75 ≤ 100; b = 32: 41 + 82 = 123 > 100 → 16. Unit: min(16/25 ms, 16/50 ms) = 320 qps.
    const r = planCoarseGrained({ pipeline: chain, profiles, sloMs: 100, arrivalsMs: evenly, mode: "mean" });
    expect(r.batch).toBe(16);
    expect(r.unitQps).toBeCloseTo(320, 9);
    expect(r.units).toBe(1); // 100 qps mean
    expect(r.config).toEqual({ a: { hardware: "gpu", maxBatch: 16, replicas: 1 }, b: { hardware: "gpu", maxBatch: 16, replicas: 1 } });
    expect(r.costPerHour).toBe(3);
  });

  it("baselines-cg - CG-Peak provisions for the busiest SLO-wide window", () => {
    // 50 extra queries within 50 ms at t = 5 s: a 100 ms window holds 10 + 50 = 60 → 600 qps → ⌈600/320⌉ = 2 units.
    const mean = planCoarseGrained({ pipeline: chain, profiles, sloMs: 100, arrivalsMs: bursty, mode: "mean" });
    const peak = planCoarseGrained({ pipeline: chain, profiles, sloMs: 100, arrivalsMs: bursty, mode: "peak" });
    expect(mean.units).toBe(1);
    expect(peak.rateQps).toBe(600);
    expect(peak.units).toBe(2);
    expect(peak.costPerHour).toBe(6);
    expect(peak.reason).toBe("peak rate 600.0 qps / 320.0 qps per unit (batch 16) → 2 units");
  });

  it("baselines-cg - infeasible when batch 1 misses the SLO", () => {
    expect(planCoarseGrained({ pipeline: chain, profiles, sloMs: 20, arrivalsMs: evenly, mode: "peak" }).feasible).toBe(false);
  });
});
