import { describe, expect, it } from "vitest";
import { estimate, sampleRoutes } from "../../src/pipelines/estimator.js";
import { configCostPerHour, type Pipeline, type PipelineConfig, type ProfileSet } from "../../src/pipelines/pipeline.js";
import { bestHardware, initializePlan, planPipeline, serviceTimeCheck } from "../../src/pipelines/planner.js";
import { createRng, sampleExponential } from "../../src/common/rng.js";

const one: Pipeline = { name: "one", models: ["m"], edges: [] };
const evenly = (qps: number, seconds: number): number[] => Array.from({ length: qps * seconds }, (_, i) => (i * 1000) / qps);

describe("planner", () => {
  it("planner - infeasible when the batch-1 service time on the fastest hardware exceeds the SLO", () => {
    const profiles: ProfileSet = { m: [{ hardware: "cpu", pricePerHour: 0.1, batchLatencyMs: [[1, 120]] }] };
    const r = planPipeline({ pipeline: one, profiles, sloMs: 100, arrivalsMs: evenly(1, 10) });
    expect(r.feasible).toBe(false);
    expect(r.reason).toBe("service time 120.0 ms at batch 1 on the fastest hardware exceeds the SLO of 100 ms on the path m: model m cannot fit: it alone takes 120.0 ms on cpu, its fastest hardware at batch 1");
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

  // Hand-computed cases (arithmetic in the comments).
  describe("planner - hand-computed", () => {
    const cpu = (points: Array<[number, number]>, batchSizes?: number[]) => ({ hardware: "cpu", pricePerHour: 0.1, batchLatencyMs: points, ...(batchSizes ? { batchSizes } : {}) });

    it("planner - Algorithm 1's check names the longest path and, when none alone exceeds the SLO, its slowest model", () => {
      // a → b (50 ms) and a → c (80 ms), a 30 ms: paths a→b = 30 + 50 = 80, a→c = 30 + 80 = 110 > 100.
      const p: Pipeline = { name: "d", models: ["a", "b", "c"], edges: [{ from: "a", to: "b" }, { from: "a", to: "c", probability: 0.5 }] };
      const profiles: ProfileSet = { a: [cpu([[1, 30]])], b: [cpu([[1, 50]])], c: [cpu([[1, 80]]), { hardware: "gpu", pricePerHour: 1, batchLatencyMs: [[1, 90]] }] };
      const check = serviceTimeCheck(p, profiles, 100);
      expect(check).toMatchObject({ feasible: false, serviceTimeMs: 110, path: ["a", "c"], latencyMs: { a: 30, b: 50, c: 80 }, hardware: { c: "cpu" } });
      expect(check.reason).toBe("service time 110.0 ms at batch 1 on the fastest hardware exceeds the SLO of 100 ms on the path a → c: the slowest on it is model c (80.0 ms on cpu); the path takes a 30.0 ms + c 80.0 ms");
      // The planner says the same, with no estimator call.
      expect(planPipeline({ pipeline: p, profiles, sloMs: 100, arrivalsMs: evenly(1, 10), routes: new Uint32Array(10) })).toMatchObject({ feasible: false, reason: check.reason, estimatorCalls: 0 });
      // 110 ≤ 120: feasible; the reason gives the service time.
      expect(serviceTimeCheck(p, profiles, 120)).toMatchObject({ feasible: true, reason: "service time 110.0 ms (a → c) fits the SLO of 120 ms" });
      // A label names stages as the caller knows them.
      expect(serviceTimeCheck(one, { m: [cpu([[1, 120]])] }, 100, (m) => `stage ${m} (model digits-cnn-m)`).reason).toContain("stage m (model digits-cnn-m) cannot fit: it alone takes 120.0 ms on cpu");
    });

    it("planner - IncreaseBatch goes to the next size that exists as a variant (batchSizes), then a replica goes", () => {
      // T(1) = 10, T(2) = 12, T(4) = 16, T(8) = 24 ms; only b1 and b8 exist as variants. 100 queries every
      // 6 ms: λ = 99 / 594 ms = 1/6 per ms.
      // Algorithm 1: μ(b1) = 1/10 per ms → ⌈(1/6)/(1/10)⌉ = ⌈1.67⌉ = 2 replicas; each query finds a free
      // replica (a query every 6 ms, each replica busy 10 ms of every 12) → every latency 10 ms ≤ 40.
      // Algorithm 2, round 1: RemoveReplica (1×b1, $0.1/h) is unstable (ρ = 1.67) → rejected; the
      // compound IncreaseBatch + RemoveReplica × 1 → 1×b8 ($0.1/h; b8, not ×2 = b2: no such variant):
      // q0 runs 0-10 (10 ms), q1 (at 6) 10-20 (14), then batches of two every T(2) = 12 ms keep pace
      // with a query every 6 ms: q2 (12) and q3 (18) run 20-32 (20 and 14), q4 and q5 32-44, … →
      // P99 = 20 ≤ 40 at $0.1/h → taken. Round 2: nothing left (b8 is the largest, 1 replica).
      const profiles: ProfileSet = { m: [cpu([[1, 10], [2, 12], [4, 16], [8, 24]], [1, 8])] };
      const arrivals = Array.from({ length: 100 }, (_, i) => 6 * i);
      const init = initializePlan({ pipeline: one, profiles, sloMs: 40, arrivalsMs: arrivals });
      expect(init.config).toEqual({ m: { hardware: "cpu", maxBatch: 1, replicas: 2 } });
      expect(init.p99Ms).toBe(10);
      const r = planPipeline({ pipeline: one, profiles, sloMs: 40, arrivalsMs: arrivals });
      expect(r.config).toEqual({ m: { hardware: "cpu", maxBatch: 8, replicas: 1 } });
      expect(r.steps.slice(1)).toEqual(["IncreaseBatch + RemoveReplica × 1 m = 1×cpu b8: $0.100/h"]);
      expect(r.p99Ms).toBe(20);
      // Without batchSizes IncreaseBatch doubles (InferLine): b2 is enough (the first of the equal-cost
      // compounds); then the cost-neutral IncreaseBatch steps to b4 and b8 (still feasible) as in the paper.
      const doubled = planPipeline({ pipeline: one, profiles: { m: [cpu([[1, 10], [2, 12], [4, 16], [8, 24]])] }, sloMs: 40, arrivalsMs: arrivals });
      expect(doubled.steps.slice(1)).toEqual(["IncreaseBatch + RemoveReplica × 1 m = 1×cpu b2: $0.100/h", "IncreaseBatch m = 1×cpu b4: $0.100/h", "IncreaseBatch m = 1×cpu b8: $0.100/h"]);
      expect(doubled.config).toEqual({ m: { hardware: "cpu", maxBatch: 8, replicas: 1 } });
    });

    it("planner - the held-back quarter of the sample must meet the SLO too; replicas are added until it does", () => {
      // One model, T(1) = 10 ms, batch 1 only, SLO 40 ms. 2000 queries every 20 ms, except that in the
      // last quarter (queries 1500-1999, held back) ten groups of five arrive at once (queries
      // 1500 + 50g … 1500 + 50g + 4 at 20·(1500 + 50g) ms).
      const profiles: ProfileSet = { m: [cpu([[1, 10]])] };
      const arrivals = Array.from({ length: 2000 }, (_, i) => {
        const g = Math.floor((i - 1500) / 50);
        return i >= 1500 && (i - 1500) % 50 < 5 ? 20 * (1500 + 50 * g) : 20 * i;
      });
      // The whole trace plans (holdoutShare 0): one replica; each group's queries take 10, 20, 30, 40
      // and 50 ms, so 10 of 2000 (0.5%) miss and P99 ≤ 40 → feasible with one replica.
      const whole = planPipeline({ pipeline: one, profiles, sloMs: 40, arrivalsMs: arrivals, holdoutShare: 0 });
      expect(whole.config).toEqual({ m: { hardware: "cpu", maxBatch: 1, replicas: 1 } });
      expect(whole.holdoutP99Ms).toBeUndefined();
      // With a quarter held back (500 ≥ MIN_HOLDOUT_QUERIES): the first 1500 plan one replica (P99 10 ms);
      // 10 of the 500 held back miss (2% > 0.5%) → a second replica: 10, 10, 20, 20, 30 ms, none misses.
      const r = planPipeline({ pipeline: one, profiles, sloMs: 40, arrivalsMs: arrivals });
      expect(r.config).toEqual({ m: { hardware: "cpu", maxBatch: 1, replicas: 2 } });
      expect(r.steps.slice(-3)).toEqual([
        "hold-out: 2.00% of the held-back 500 queries miss the SLO (more than 0.50%; P99 50.0 ms)",
        "bottleneck m (utilisation 0.50): 2 replicas",
        "hold-out repaired: $0.200/h",
      ]);
      expect(r.holdoutP99Ms).toBe(30);
      expect(r.reason).toContain("replicas added until at most 0.50% of the held-back 500 queries miss it");
    });

    it("planner - a cascade: the stability bound scales λ by s_m, the bottleneck gets the replica", () => {
      // fast (T(1) = 2 ms) → accurate (T(1) = 10 ms) taken by 1 query in 4. A query every 4 ms for 400
      // queries: λ = 399 / 1596 = 0.25 per ms. fast: ⌈0.25 · 2⌉ = 1 replica (ρ = 0.5); accurate:
      // ⌈0.25 · 0.25 · 10⌉ = ⌈0.625⌉ = 1 (ρ = 0.625). Every 4th query (mask 1 for q ≡ 3 mod 4) goes on:
      // accurate gets one query every 16 ms and is busy 10 of them → no queue: latency 2 + 10 = 12 ms for
      // those, 2 ms for the rest → P99 = 12 ≤ 15, feasible at once with 1 + 1 replicas.
      const p: Pipeline = { name: "cascade", models: ["fast", "accurate"], edges: [{ from: "fast", to: "accurate", probability: 0.25 }] };
      const profiles: ProfileSet = { fast: [cpu([[1, 2]])], accurate: [cpu([[1, 10]])] };
      const arrivals = Array.from({ length: 400 }, (_, i) => 4 * i);
      const routes = Uint32Array.from({ length: 400 }, (_, i) => (i % 4 === 3 ? 1 : 0));
      const r = initializePlan({ pipeline: p, profiles, sloMs: 15, arrivalsMs: arrivals, routes });
      expect(r.config).toEqual({ fast: { hardware: "cpu", maxBatch: 1, replicas: 1 }, accurate: { hardware: "cpu", maxBatch: 1, replicas: 1 } });
      expect(r.p99Ms).toBe(12);
      // Every query on to accurate (all masks 1): λ·s = 0.25 per ms against μ = 0.1 → ⌈2.5⌉ = 3 replicas;
      // a query every 4 ms, each busy 10 ms: three replicas take turns (0-10, 4-14, 8-18, 12-22 on the
      // first again) → no queue, P99 = 12 again.
      const all = initializePlan({ pipeline: p, profiles, sloMs: 15, arrivalsMs: arrivals, routes: new Uint32Array(400).fill(1) });
      expect(all.config!.accurate!.replicas).toBe(3);
      expect(all.p99Ms).toBe(12);
    });
  });
});
