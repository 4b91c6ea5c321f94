import { allocate, elementCount, type CalibrationEntry, type EmulationCalibration, type Tensor, type TensorSpec } from "@sloserve/contracts";

export { calibrationEntrySchema, emulationCalibrationSchema, type CalibrationEntry, type EmulationCalibration } from "@sloserve/contracts";
import { interpolateBatchLatency, sampleNormal, type Rng } from "@sloserve/policy";

/**
 * The emulated engine's latency model (emulated-backend.ts), pure: no clock, no timers, randomness
 * from an injected RNG. A variant's batch latency at batch size b is lognormal with the median and P99
 * of its calibration at b: median·exp(σ·Z), Z standard normal, σ = ln(P99 / median) / z₀.₉₉. Between
 * calibrated batch sizes the median and the P99 are interpolated linearly (libs/policy
 * `interpolateBatchLatency`: flat below the smallest size, extrapolated past the largest).
 */

/** The 0.99 quantile of the standard normal: P99 = median·exp(σ·Z99) for a lognormal. */
export const Z99 = 2.3263478740408408;

/** Where a calibration gives no P99 (a profile that predates them, EMULATED_LATENCY_MS): P99 = this × the median. */
export const DEFAULT_P99_RATIO = 1.2;

/** Median and P99 of one batch's latency, ms. */
export interface LatencyQuantiles {
  p50: number;
  p99: number;
}

/** A batch size's calibrated latency, ms (P99 absent: {@link DEFAULT_P99_RATIO} × p50). */
export interface CalibrationPoint {
  batch: number;
  p50: number;
  p99?: number;
}

/** A batch size's latency quantiles, ms. */
export type LatencyModel = (batch: number) => LatencyQuantiles;

const p99Of = (p: CalibrationPoint): number => Math.max(p.p50, p.p99 ?? p.p50 * DEFAULT_P99_RATIO);

/** The quantiles at any batch size from calibrated ones (interpolated, see the module comment). */
export function latencyModel(points: readonly CalibrationPoint[]): LatencyModel {
  const valid = points.filter((p) => p.batch >= 1 && Number.isFinite(p.p50) && p.p50 >= 0);
  if (valid.length === 0) throw new Error("emulated latency: no calibrated batch size");
  const p50 = interpolateBatchLatency(valid.map((p) => [p.batch, p.p50] as const));
  const p99 = interpolateBatchLatency(valid.map((p) => [p.batch, p99Of(p)] as const));
  return (batch) => {
    const median = Math.max(0, p50(batch));
    return { p50: median, p99: Math.max(median, p99(batch)) };
  };
}

/** `median + perItem·b` ms for a batch of b rows, P99 {@link DEFAULT_P99_RATIO} × that (EMULATED_LATENCY_MS). */
export function linearLatencyModel(batchMs: number, itemMs: number): LatencyModel {
  return (batch) => {
    const median = Math.max(0, batchMs + itemMs * Math.max(1, batch));
    return { p50: median, p99: median * DEFAULT_P99_RATIO };
  };
}

/** A variant profile's latencies (libs/contracts `VariantProfile`: median, and P99 where measured, by batch size) as calibration points. */
export function profilePoints(latencyMs: Readonly<Record<string, number>>, latencyP99Ms?: Readonly<Record<string, number>>): CalibrationPoint[] {
  return Object.entries(latencyMs).map(([b, p50]) => {
    const p99 = latencyP99Ms?.[b];
    return { batch: Number(b), p50, ...(p99 !== undefined ? { p99 } : {}) };
  });
}

/** One draw of a batch's latency, ms: lognormal with the given median and P99 (σ = 0, the median itself, when P99 ≤ median). */
export function drawLatencyMs(q: LatencyQuantiles, rng: Rng): number {
  if (!(q.p50 > 0)) return 0;
  const sigma = q.p99 > q.p50 ? Math.log(q.p99 / q.p50) / Z99 : 0;
  return sigma === 0 ? q.p50 : q.p50 * Math.exp(sigma * sampleNormal(rng));
}

/**
 * A query's outputs, all zeros: each output of the model's signature with its datatype, the first
 * dimension, when dynamic, the query's rows (its first input's first dimension), any other dynamic
 * dimension 1.
 */
export function zeroOutputs(outputs: readonly TensorSpec[], rows: number): Tensor[] {
  return outputs.map((spec) => {
    const shape = spec.shape.map((d, i) => (d >= 0 ? d : i === 0 ? rows : 1));
    return { name: spec.name, datatype: spec.datatype, shape, data: allocate(spec.datatype, elementCount(shape)) };
  });
}

/** The rows of a query: its first input's first dimension (1 for a scalar or an empty query). */
export function queryRows(query: readonly Tensor[]): number {
  const d = query[0]?.shape[0];
  return d !== undefined && d > 0 ? d : 1;
}

/** The calibration entry of a variant: its own, else its model's on its hardware. */
export function calibrationFor(calibration: EmulationCalibration | undefined, variant: string | undefined, model: string, hardware: "cpu" | "gpu" | "inferentia"): CalibrationEntry | undefined {
  return (variant !== undefined ? calibration?.variants[variant] : undefined) ?? calibration?.models[model]?.[hardware];
}

/** A calibration entry's batches as calibration points. */
export function entryPoints(entry: CalibrationEntry): CalibrationPoint[] {
  return Object.entries(entry.batches).map(([b, q]) => ({ batch: Number(b), p50: q.p50, ...(q.p99 !== undefined ? { p99: q.p99 } : {}) }));
}
