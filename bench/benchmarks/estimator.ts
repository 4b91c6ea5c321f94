/**
 * The InferLine estimator (libs/policy estimator.ts `estimate`): wall time to simulate one hour of
 * Poisson traffic at 150 QPS (≈ 540 000 queries) through a four-stage pipeline with a conditional
 * edge, the configuration of libs/policy/test/estimator.test.ts. The Planner calls it once per
 * candidate configuration, so its speed bounds how many configurations a plan can compare.
 */
import { createRng, estimate, sampleExponential, sampleRoutes, type Pipeline, type PipelineConfig, type ProfileSet } from "@sloserve/policy";
import { round, summarize } from "../lib/stats.js";

export interface EstimatorResult {
  /** Median wall time of one estimate over the hour, ms. */
  hourMs: number | null;
  runsMs: number[];
  queries: number;
  p99Ms: number;
  qps: number;
  note?: string;
}

export function runEstimator(options: { quick: boolean; log: (s: string) => void }): EstimatorResult {
  const pipeline: Pipeline = {
    name: "four",
    models: ["pre", "lang", "nmt", "img"],
    edges: [{ from: "pre", to: "lang" }, { from: "lang", to: "nmt", probability: 0.3 }, { from: "pre", to: "img" }],
  };
  const prof = (t1: number, slope: number): ProfileSet[string] => [
    { hardware: "gpu", pricePerHour: 1, batchLatencyMs: [1, 2, 4, 8, 16, 32].map((b) => [b, t1 + slope * (b - 1)] as [number, number]) },
  ];
  const profiles: ProfileSet = { pre: prof(3, 2.8), lang: prof(5, 0.5), nmt: prof(40, 4), img: prof(20, 2) };
  const config: PipelineConfig = {
    pre: { hardware: "gpu", maxBatch: 1, replicas: 1 },
    lang: { hardware: "gpu", maxBatch: 8, replicas: 1 },
    nmt: { hardware: "gpu", maxBatch: 8, replicas: 2 },
    img: { hardware: "gpu", maxBatch: 16, replicas: 1 },
  };
  const qps = 150;
  const rng = createRng(1);
  const arrivals: number[] = [];
  for (let t = sampleExponential(rng, qps / 1000); t < 3_600_000; t += sampleExponential(rng, qps / 1000)) arrivals.push(t);
  const arrivalsMs = Float64Array.from(arrivals);
  const routes = sampleRoutes(pipeline, arrivalsMs.length, rng);
  // One warm-up run (JIT), then timed runs.
  let p99 = estimate({ pipeline, profiles, config, arrivalsMs, routes }).p99Ms;
  const runs = options.quick ? 3 : 7;
  const ms: number[] = [];
  for (let i = 0; i < runs; i++) {
    const t0 = performance.now();
    p99 = estimate({ pipeline, profiles, config, arrivalsMs, routes }).p99Ms;
    ms.push(performance.now() - t0);
  }
  const hourMs = round(summarize(ms).p50);
  options.log(`  estimator: one hour at ${qps} QPS (${arrivalsMs.length} queries, 4 stages): median ${hourMs} ms over ${runs} runs`);
  return { hourMs, runsMs: ms.map((x) => round(x)), queries: arrivalsMs.length, p99Ms: round(p99), qps };
}
