/**
 * One simulator: the InferLine Estimator (libs/policy estimator.ts, the Planner's fast path) and the
 * engine running the same pipeline configuration through the pipeline system (systems/inferline.ts,
 * the mapping the InferLine scenarios use) must agree, on the same arrival times and the same
 * per-query routes (sampleRoutes).
 *
 * Tolerance: the P99 latency within 1% (relative) and the SLO miss rate within 0.25 percentage points.
 * Why: both implement the same serving model (one FIFO queue per model shared by its replicas, an idle
 * replica takes min(queue, max batch) at once, the same interpolated T(b), answers handed on query by
 * query, no shedding), so the only legitimate differences are the order of events at exactly the same
 * instant (the Estimator runs replica changes, then batch completions, then arrivals; the engine runs
 * simultaneous events in the order it scheduled them) and floating-point rounding of event times. With
 * continuous arrival times such ties are rare (Gamma gaps with σ/μ = 4 are often ~0, hence a few),
 * so a handful of queries in 10^4 at most. A real difference in the model is far larger: the
 * Estimator's former hand-off of a finished batch to the next model as a whole (the engine routes
 * each served query on its own, so an idle downstream replica starts on the first) differed from the
 * engine by up to 4.9% in P99 and 6.8 points in miss rate on these cases, and would fail here.
 * Measured when this test was written: P99 within 0.2% (identical in 23 of 25 cases), miss rate
 * within 0.05 points.
 */
import {
  estimate, missRate, sampleRoutes, createRng, type Pipeline, type PipelineConfig, type ProfileSet, type ReplicaChange,
} from "@sloserve/policy";
import { describe, expect, it } from "vitest";
import { Simulator, arrivalTimes, constantRate, installPipeline, ScheduledArrivals } from "../src/index.js";
import { IMAGE_PROCESSING, INFERLINE_PROFILES, SOCIAL_MEDIA, VIDEO_MONITORING } from "../src/scenarios/inferline-common.js";

const P99_REL_TOL = 0.01;
const MISS_ABS_TOL = 0.0025;

const SINGLE: Pipeline = { name: "single", models: ["resnet152"], edges: [] };
const DIAMOND: Pipeline = {
  name: "diamond",
  models: ["detect", "vehicle", "person", "plate"],
  edges: [
    { from: "detect", to: "vehicle" },
    { from: "detect", to: "person", probability: 0.5 },
    { from: "vehicle", to: "plate" },
    { from: "person", to: "plate" },
  ],
};

const cfg = (m: Record<string, [hardware: string, maxBatch: number, replicas: number]>): PipelineConfig =>
  Object.fromEntries(Object.entries(m).map(([k, [hardware, maxBatch, replicas]]) => [k, { hardware, maxBatch, replicas }]));

interface Case {
  name: string;
  pipeline: Pipeline;
  config: PipelineConfig;
  qps: number;
  /** σ/μ of the Gamma inter-arrival gaps (libs/policy common/arrivals.ts; the InferLine paper's "CV 4" is σ/μ = 2). */
  cv: number;
  sloMs: number;
  schedule?: ReplicaChange[];
}

// Loads: "moderate" keeps the bottleneck model near 60-70% busy, "heavy" near 90-100% (CG-Mean-like).
const cases: Case[] = [];
for (const cv of [1, 2, 4]) {
  cases.push(
    // ResNet152 on K80 at batch 8: T(8) = 169.5 ms → 47 QPS per replica.
    { name: `single stage, 3 replicas b8, moderate, cv ${cv}`, pipeline: SINGLE, config: cfg({ resnet152: ["k80", 8, 3] }), qps: 90, cv, sloMs: 400 },
    { name: `single stage, 2 replicas b32, heavy, cv ${cv}`, pipeline: SINGLE, config: cfg({ resnet152: ["k80", 32, 2] }), qps: 95, cv, sloMs: 1500 },
    { name: `linear (preprocess → resnet152), moderate, cv ${cv}`, pipeline: IMAGE_PROCESSING, config: cfg({ preprocess: ["cpu", 8, 1], resnet152: ["k80", 4, 4] }), qps: 100, cv, sloMs: 150 },
    { name: `linear (preprocess → resnet152), heavy, cv ${cv}`, pipeline: IMAGE_PROCESSING, config: cfg({ preprocess: ["cpu", 4, 3], resnet152: ["k80", 4, 3] }), qps: 100, cv, sloMs: 150 },
    { name: `two roots, conditional edge (social media), cv ${cv}`, pipeline: SOCIAL_MEDIA, config: cfg({ preprocess: ["cpu", 8, 1], resnet152: ["k80", 4, 6], langid: ["cpu", 32, 1], nmt: ["k80", 32, 1] }), qps: 200, cv, sloMs: 150 },
    { name: `fan-out, conditional chain (video), moderate, cv ${cv}`, pipeline: VIDEO_MONITORING, config: cfg({ detect: ["k80", 8, 3], vehicle: ["k80", 32, 2], person: ["k80", 32, 1], plate: ["cpu", 1, 3] }), qps: 200, cv, sloMs: 150 },
    { name: `fan-out, conditional chain (video), heavy, cv ${cv}`, pipeline: VIDEO_MONITORING, config: cfg({ detect: ["k80", 8, 1], vehicle: ["k80", 8, 1], person: ["k80", 8, 1], plate: ["k80", 8, 1] }), qps: 100, cv, sloMs: 150 },
    { name: `join after a conditional fan-out, cv ${cv}`, pipeline: DIAMOND, config: cfg({ detect: ["k80", 4, 3], vehicle: ["cpu", 1, 12], person: ["k80", 16, 1], plate: ["k80", 8, 1] }), qps: 80, cv, sloMs: 300 },
  );
}
cases.push({
  name: "replica schedule (scale up, then down while busy), cv 1",
  pipeline: IMAGE_PROCESSING,
  config: cfg({ preprocess: ["cpu", 8, 1], resnet152: ["k80", 4, 3] }),
  qps: 100, cv: 1, sloMs: 150,
  schedule: [
    { atMs: 10_000, model: "resnet152", replicas: 5 },
    { atMs: 25_000, model: "resnet152", replicas: 4 },
    { atMs: 40_000, model: "resnet152", replicas: 2 },
    { atMs: 40_000, model: "preprocess", replicas: 2 },
    { atMs: 50_000, model: "resnet152", replicas: 4 },
  ],
});

const DURATION_S = 60;

function runBoth(c: Case, seed: number): { est: { p99: number; miss: number; mean: number }; eng: { p99: number; miss: number; mean: number; dropped: number; completed: number } } {
  const profiles: ProfileSet = INFERLINE_PROFILES;
  const rng = createRng(seed);
  const arrivalsMs = Float64Array.from(arrivalTimes(new ScheduledArrivals(constantRate(c.qps, DURATION_S), c.cv), rng));
  const routes = sampleRoutes(c.pipeline, arrivalsMs.length, rng);
  const e = estimate({ pipeline: c.pipeline, profiles, config: c.config, arrivalsMs, routes, ...(c.schedule ? { replicaSchedule: c.schedule } : {}) });
  const sim = new Simulator({ seed, durationMs: DURATION_S * 1000, drainMs: 3_600_000 });
  const sys = installPipeline(sim, { pipeline: c.pipeline, profiles, config: c.config, arrivalsMs, routes, sloMs: c.sloMs });
  for (const ch of c.schedule ?? []) sim.at(ch.atMs, () => sys.setReplicas(ch.model, ch.replicas));
  const r = sim.run();
  return {
    est: { p99: e.p99Ms, miss: missRate(e.latenciesMs, c.sloMs), mean: e.meanMs },
    eng: { p99: r.latencyMs.p99, miss: 1 - r.sloAttainment, mean: r.latencyMs.mean, dropped: r.dropped, completed: r.completed },
  };
}

describe("estimator vs engine", () => {
  it.each(cases.map((c, i) => [c.name, c, i] as const))("estimator vs engine - %s", (_name, c, i) => {
    const { est, eng } = runBoth(c, 100 + i);
    expect(eng.dropped).toBe(0);
    expect(eng.completed).toBeGreaterThan(c.qps * DURATION_S * 0.9);
    expect(Math.abs(eng.p99 - est.p99) / est.p99).toBeLessThanOrEqual(P99_REL_TOL);
    expect(Math.abs(eng.miss - est.miss)).toBeLessThanOrEqual(MISS_ABS_TOL);
  });

  it("estimator vs engine - the cases span light to overloaded and every routing feature", () => {
    // Guard against the table drifting into cases that agree trivially (everything meets the SLO).
    const misses = cases.map((c, i) => runBoth(c, 100 + i).est.miss);
    expect(misses.filter((m) => m === 0).length).toBeLessThan(cases.length / 2);
    expect(misses.some((m) => m > 0.1)).toBe(true);
  });
});
