/**
 * Coarse-grained baselines of InferLine §6 ("Coarse-Grained Baseline Comparison"), after AutoScale
 * [Gandhi et al., TOCS 2012]: the pipeline is treated as one black box, profiled for the single largest
 * batch size that meets the SLO, and replicated as one unit (one replica of every model per unit).
 *
 * - Hardware: each model on its lowest-latency hardware (the black box is profiled as deployed).
 * - Batch: the largest power of two b (capped at each model's largest profiled batch) whose pipeline
 *   service time — the longest path's batch latencies — is within the SLO ("the single maximum batch
 *   size capable of meeting the SLO").
 * - Unit throughput: min over models of μ_m(b) / s_m (a unit is as fast as its slowest stage, counting
 *   only the queries that reach that stage).
 * - Units: ⌈rate / unit throughput⌉ where rate is the planning trace's mean (CG-Mean) or its peak
 *   measured over a sliding window as wide as the SLO (CG-Peak).
 */
import { bestHardware } from "../pipelines/planner.js";
import {
  configCostPerHour, latencyFn, maxProfiledBatch, scaleFactors, serviceTimeMs,
  type ModelConfig, type Pipeline, type PipelineConfig, type ProfileSet,
} from "../pipelines/pipeline.js";
import { trafficEnvelope } from "../pipelines/tuner.js";

export type CoarseGrainedMode = "mean" | "peak";

export interface CoarseGrainedInput {
  pipeline: Pipeline;
  profiles: ProfileSet;
  sloMs: number;
  /** Planning trace, arrival times in ms (sorted). */
  arrivalsMs: ArrayLike<number>;
  mode: CoarseGrainedMode;
}

export interface CoarseGrainedPlan {
  feasible: boolean;
  config?: PipelineConfig;
  units: number;
  batch: number;
  /** Pipeline queries per second one unit sustains. */
  unitQps: number;
  /** The rate provisioned for, queries per second. */
  rateQps: number;
  costPerHour: number;
  reason: string;
}

/** Config of `units` pipeline units at batch `batch` on each model's fastest hardware. */
export function unitConfig(pipeline: Pipeline, profiles: ProfileSet, batch: number, units: number): PipelineConfig {
  const config: Record<string, ModelConfig> = {};
  for (const m of pipeline.models) {
    const h = bestHardware(profiles, m);
    config[m] = { hardware: h.hardware, maxBatch: Math.min(batch, maxProfiledBatch(h)), replicas: units };
  }
  return config;
}

/** Queries per second one unit sustains: min over models of μ_m(b)/s_m. */
export function unitThroughputQps(pipeline: Pipeline, profiles: ProfileSet, config: PipelineConfig): number {
  const s = scaleFactors(pipeline);
  let min = Infinity;
  for (const m of pipeline.models) {
    const c = config[m]!;
    const h = profiles[m]!.find((x) => x.hardware === c.hardware)!;
    const mu = (1000 * c.maxBatch) / latencyFn(h)(c.maxBatch);
    min = Math.min(min, mu / (s[m] ?? 1));
  }
  return min;
}

export function planCoarseGrained(input: CoarseGrainedInput): CoarseGrainedPlan {
  const { pipeline, profiles, sloMs, arrivalsMs } = input;
  let batch = 0;
  const largest = Math.max(...pipeline.models.map((m) => maxProfiledBatch(bestHardware(profiles, m))));
  for (let b = 1; b <= largest; b *= 2) {
    if (serviceTimeMs(pipeline, profiles, unitConfig(pipeline, profiles, b, 1)) <= sloMs) batch = b;
    else break;
  }
  if (batch === 0) {
    return { feasible: false, units: 0, batch: 0, unitQps: 0, rateQps: 0, costPerHour: NaN, reason: "even batch 1 misses the SLO" };
  }
  const one = unitConfig(pipeline, profiles, batch, 1);
  const unitQps = unitThroughputQps(pipeline, profiles, one);
  const n = arrivalsMs.length;
  const span = n > 1 ? arrivalsMs[n - 1]! - arrivalsMs[0]! : 1;
  const rateQps = input.mode === "mean" ? (n > 1 ? (1000 * (n - 1)) / span : 0) : trafficEnvelope(arrivalsMs, [sloMs])[0]!;
  const units = Math.max(1, Math.ceil(rateQps / unitQps - 1e-9));
  const config = unitConfig(pipeline, profiles, batch, units);
  return {
    feasible: true, config, units, batch, unitQps, rateQps,
    costPerHour: configCostPerHour(profiles, config),
    reason: `${input.mode} rate ${rateQps.toFixed(1)} qps / ${unitQps.toFixed(1)} qps per unit (batch ${batch}) → ${units} units`,
  };
}
