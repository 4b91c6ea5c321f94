import { describe, expect, it } from "vitest";
import { estimate, sampleRoutes } from "../src/estimator.js";
import { configCostPerHour, type Pipeline, type PipelineConfig, type ProfileSet } from "../src/pipeline.js";
import { bestHardware, initializePlan, planPipeline } from "../src/planner.js";
import { createRng, sampleExponential } from "../src/rng.js";

const one: Pipeline = { name: "one", models: ["m"], edges: [] };
const evenly = (qps: number, seconds: number): number[] => Array.from({ length: qps * seconds }, (_, i) => (i * 1000) / qps);

describe("planner", () => {
  it("planner - infeasible when the batch-1 service time on the fastest hardware exceeds the SLO", () => {
    const profiles: ProfileSet = { m: [{ hardware: "cpu", pricePerHour: 0.1, batchLatencyMs: [[1, 120]] }] };
    const r = planPipeline({ pipeline: one, profiles, sloMs: 100, arrivalsMs: evenly(1, 10) });
    expect(r.feasible).toBe(false);
    expect(r.reason).toBe("service time 120.0 ms at batch 1 on the fastest hardware exceeds the SLO of 100 ms");
  });

  it("planner - initialises on the lowest-latency hardware and adds replicas at the bottleneck", () => {
    const profiles: ProfileSet = {
      m: [
        { hardware: "cpu", pricePerHour: 0.1, batchLatencyMs: [[1, 50]] },
        { hardware: "gpu", pricePerHour: 1, batchLatencyMs: [[1, 30], [4, 30]] },
      ],
    };
    expect(bestHardware(profiles, "m").hardware).toBe("gpu");
    // 100 qps evenly (every 10 ms), T(1) = 30 ms: ⌈0.1/ms · 30 ms⌉ = 3 replicas, no queueing → P99 = 30.
    const r = initializePlan({ pipeline: one, profiles, sloMs: 100, arrivalsMs: evenly(100, 5) });
    expect(r.config).toEqual({ m: { hardware: "gpu", maxBatch: 1, replicas: 3 } });
    expect(r.p99Ms).toBe(30);
  });

  it("planner - downgrades to cheaper hardware when it still meets the SLO", () => {
    const profiles: ProfileSet = {
      m: [
        { hardware: "cpu", pricePerHour: 0.1, batchLatencyMs: [[1, 50]] },
        { hardware: "gpu", pricePerHour: 1, batchLatencyMs: [[1, 5], [8, 12]] },
      ],
    };
    // 10 qps evenly: one CPU replica at 50 ms per query never queues (ρ = 0.5) → $0.1/h beats any GPU plan.
    const r = planPipeline({ pipeline: one, profiles, sloMs: 100, arrivalsMs: evenly(10, 10) });
    expect(r.config).toEqual({ m: { hardware: "cpu", maxBatch: 1, replicas: 1 } });
    expect(r.costPerHour).toBeCloseTo(0.1, 12);
    expect(r.steps.at(-1)).toBe("DowngradeHW m = 1×cpu b1: $0.100/h");
  });

  it("planner - batching lets it remove replicas, and no single action then stays feasible", () => {
    // Social-media-like pipeline on Poisson arrivals at 100 qps for 30 s.
    const p: Pipeline = {
      name: "social", models: ["pre", "lang", "nmt", "img"],
      edges: [{ from: "pre", to: "lang" }, { from: "lang", to: "nmt", probability: 0.3 }, { from: "pre", to: "img" }],
    };
    const gpu = (t1: number, t32: number) => ({ hardware: "gpu", pricePerHour: 0.7, batchLatencyMs: [1, 2, 4, 8, 16, 32].map((b) => [b, t1 + ((t32 - t1) * (b - 1)) / 31] as [number, number]) });
    const cpu = (t1: number) => ({ hardware: "cpu", pricePerHour: 0.05, batchLatencyMs: [1, 2, 4].map((b) => [b, t1 * b] as [number, number]) });
    const profiles: ProfileSet = { pre: [cpu(3)], lang: [cpu(4), gpu(2, 8)], nmt: [gpu(25, 120), cpu(300)], img: [gpu(15, 160), cpu(900)] };
    const rng = createRng(42);
    const arrivals: number[] = [];
    for (let t = sampleExponential(rng, 0.1); t < 30_000; t += sampleExponential(rng, 0.1)) arrivals.push(t);
    const a = Float64Array.from(arrivals);
    const routes = sampleRoutes(p, a.length, rng);
    const slo = 150;
    const init = initializePlan({ pipeline: p, profiles, sloMs: slo, arrivalsMs: a, routes });
    const r = planPipeline({ pipeline: p, profiles, sloMs: slo, arrivalsMs: a, routes });
    expect(r.feasible).toBe(true);
    const config = r.config!;
    expect(r.p99Ms).toBeLessThanOrEqual(slo);
    expect(r.costPerHour).toBeLessThan(init.costPerHour);
    // lang moves to the CPU (cheaper), img batches on the GPU.
    expect(config.lang!.hardware).toBe("cpu");
    expect(config.img!.maxBatch).toBeGreaterThan(1);
    // Guarantee (2) of §4.3: removing any replica breaks the SLO.
    for (const m of p.models) {
      const c = config[m]!;
      if (c.replicas === 1) continue;
      const fewer: PipelineConfig = { ...config, [m]: { ...c, replicas: c.replicas - 1 } };
      expect(estimate({ pipeline: p, profiles, config: fewer, arrivalsMs: a, routes }).p99Ms).toBeGreaterThan(slo);
    }
    expect(configCostPerHour(profiles, config)).toBeCloseTo(r.costPerHour, 12);
    expect(r.estimatorCalls).toBeGreaterThan(0);
  });
});
