/**
 * SLO-aware batching parameters per (variant, hardware): MArk §4.3 "Batching".
 *
 * A batch leaves when it holds Nbatch queries or its oldest query has waited Wbatch. MArk grows the
 * batch size b from 1 until one of two constraints fails:
 *
 *   Wbatch + T(b) ≤ RTmax          (no query can miss the SLO because of batching alone)
 *   Wbatch + T(b) ≤ b / μ*_nb      (batching must beat serving the same b queries one at a time)
 *
 * where T(b) is the profiled latency of a batch of b and μ*_nb the profiled rate without batching.
 *
 * Our deviation, and why: b grows until the first (SLO) constraint fails, and Nbatch is the largest b
 * below that bound for which the second holds — not the last b before the second first fails. On the
 * paper's curves (and the simulator's: linear CPU curves, GPU curves linear between T(1) and T(8)) the
 * second constraint is monotone in b and both readings agree. Measured CPU profiles are not: onnxruntime
 * runs a batch of one on a faster matrix–vector path, and a shared machine adds noise, so T(2) can exceed
 * 1.33 × T(1) (where the second constraint fails at b = 2) while a batch of 64 still serves 64 queries
 * in a fraction of 64 × T(1). Stopping at b = 2 would throw that batch size away for one profile point.
 *
 * The paper does not say how Wbatch is derived from b. Our choice, stated here because every number
 * downstream depends on it: Wbatch(b) = (b − 1) · T(b) / b, the time for the b − 1 queries after the
 * first to arrive when arrivals match the batched capacity b / T(b) (so a saturated instance fills the
 * next batch while it runs the current one, and Wbatch(1) = 0). With a linear latency curve
 * (T(b) = b·T(1), a CPU that gains nothing from batching) the second constraint fails at b = 2, which
 * reproduces MArk's "no batching on CPU"; with a GPU-like flat curve it grows until the SLO binds.
 */

/** Profiled batch latency: (batch size) → milliseconds. */
export type BatchLatencyFn = (batch: number) => number;

/**
 * Linear interpolation over profiled points (e.g. powers of two 1..64), extrapolating linearly past
 * the last point from the last two. Points need not be sorted; batch sizes must be distinct and ≥ 1.
 */
export function interpolateBatchLatency(points: ReadonlyArray<readonly [number, number]>): BatchLatencyFn {
  if (points.length === 0) throw new Error("batch latency profile: no points");
  const sorted = [...points].sort((a, b) => a[0] - b[0]);
  for (let i = 1; i < sorted.length; i++) {
    if (sorted[i]![0] === sorted[i - 1]![0]) throw new Error(`batch latency profile: batch size ${sorted[i]![0]} appears twice`);
  }
  return (batch: number): number => {
    const first = sorted[0]!;
    if (sorted.length === 1) return first[1] * (batch / first[0]);
    if (batch <= first[0]) return first[1];
    for (let i = 1; i < sorted.length; i++) {
      const hi = sorted[i]!;
      if (batch <= hi[0]) {
        const lo = sorted[i - 1]!;
        return lo[1] + ((hi[1] - lo[1]) * (batch - lo[0])) / (hi[0] - lo[0]);
      }
    }
    const a = sorted[sorted.length - 2]!;
    const b = sorted[sorted.length - 1]!;
    return b[1] + ((b[1] - a[1]) * (batch - b[0])) / (b[0] - a[0]);
  };
}

export interface BatchTuningInput {
  /** Profiled latency of a batch, ms. */
  latencyMs: BatchLatencyFn;
  /** Response-time threshold RTmax, ms. */
  sloMs: number;
  /** Largest batch the runtime accepts. @default 64 */
  maxBatch?: number;
  /**
   * Batches the instance runs at once (e.g. model replicas on its cores). μ*_nb = concurrency / T(1).
   * @default 1
   */
  concurrency?: number;
}

export interface BatchTuning {
  /** Nbatch; 0 when even a batch of one misses the SLO. */
  nbatch: number;
  /** Wbatch, ms. */
  wbatchMs: number;
  /** T(Nbatch), ms. */
  batchLatencyMs: number;
  /** μ*: peak throughput with this batching, queries per second. */
  throughputQps: number;
  /** μ*_nb: peak throughput without batching, queries per second. */
  unbatchedQps: number;
  reason: string;
}

/** Wbatch for batch size b under the rule in the module comment. */
export function batchWaitMs(latencyMs: BatchLatencyFn, batch: number): number {
  return ((batch - 1) * latencyMs(batch)) / batch;
}

/** MArk §4.3: the largest batch, grown from 1, for which both constraints still hold. */
export function tuneBatching(input: BatchTuningInput): BatchTuning {
  const maxBatch = input.maxBatch ?? 64;
  const concurrency = input.concurrency ?? 1;
  const t1 = input.latencyMs(1);
  const unbatchedQps = (1000 * concurrency) / t1;
  if (t1 > input.sloMs) {
    return {
      nbatch: 0, wbatchMs: 0, batchLatencyMs: t1, throughputQps: 0, unbatchedQps,
      reason: `T(1) = ${fmt(t1)} ms exceeds the SLO of ${fmt(input.sloMs)} ms: this instance cannot serve the model`,
    };
  }
  let best = 1;
  let stop = `reached the largest batch ${maxBatch}`;
  /** The first batch size above the chosen one where batching did not pay (for the reason). */
  let notPaying: string | undefined;
  for (let b = 2; b <= maxBatch; b++) {
    const t = input.latencyMs(b);
    const w = batchWaitMs(input.latencyMs, b);
    const sequentialMs = (1000 * b) / unbatchedQps;
    if (w + t > input.sloMs) {
      stop = `b = ${b}: Wbatch + T(b) = ${fmt(w + t)} ms > SLO ${fmt(input.sloMs)} ms`;
      break;
    }
    if (w + t > sequentialMs) {
      notPaying ??= `b = ${b} (Wbatch + T(b) = ${fmt(w + t)} ms > b/μnb = ${fmt(sequentialMs)} ms)`;
      continue;
    }
    best = b;
    notPaying = undefined;
  }
  const why = notPaying
    ? `batching does not pay from ${notPaying} to ${stop.startsWith("b = ") ? `the SLO bound (${stop})` : `the largest batch ${maxBatch}`}`
    : `stopped at ${stop}`;
  const t = input.latencyMs(best);
  return {
    nbatch: best,
    wbatchMs: batchWaitMs(input.latencyMs, best),
    batchLatencyMs: t,
    throughputQps: (1000 * concurrency * best) / t,
    unbatchedQps,
    reason: `Nbatch = ${best}; ${why}`,
  };
}

function fmt(x: number): string {
  return Number.isInteger(x) ? String(x) : x.toFixed(1);
}

/**
 * Profiled batch latencies as the profiler stores them (batch size → ms; libs/contracts
 * `VariantProfile.latencyMs`, selection's `VariantProfile.latencyMs`), or a latency curve (the
 * simulator's instance profiles).
 */
export type ProfiledLatencies = Readonly<Record<string, number>> | Readonly<Record<number, number>> | BatchLatencyFn;

/** What tuning needs of a variant (or of an instance type serving a model). */
export interface TunableProfile {
  latencyMs: ProfiledLatencies;
  /** The largest batch the variant runs (Nbatch cannot exceed it). */
  maxBatch: number;
  /** Batches run at once. @default 1 */
  concurrency?: number;
}

/** A latency curve from profiled points (interpolated, see {@link interpolateBatchLatency}) or as given. */
export function latencyCurve(latencyMs: ProfiledLatencies): BatchLatencyFn {
  if (typeof latencyMs === "function") return latencyMs;
  const points = Object.entries(latencyMs).map(([b, ms]) => [Number(b), Number(ms)] as const).filter(([b, ms]) => b >= 1 && Number.isFinite(ms));
  return interpolateBatchLatency(points);
}

/**
 * MArk §4.3 "light profiling" applied to one variant (or instance type): its Nbatch, Wbatch and μ*
 * under the SLO, from its profiled latencies. The one entry point of the tuning rule: the registrar
 * (live Wbatch of every profiled variant, through {@link planBatchWaits}), the machine plan (C_i per
 * instance type, `workerCapacityForApp`) and the simulator's MArk systems (each type's batching and
 * capacity) all call it.
 */
export function tunedBatching(profile: TunableProfile, sloMs: number): BatchTuning {
  return tuneBatching({ latencyMs: latencyCurve(profile.latencyMs), sloMs, maxBatch: profile.maxBatch, ...(profile.concurrency ? { concurrency: profile.concurrency } : {}) });
}

/** Wbatch of a profiled variant under an SLO, ms, rounded to 0.01 ms; 0 when even a batch of one misses the SLO. */
export function tunedBatchWaitMs(profile: TunableProfile, sloMs: number): number {
  const t = tunedBatching(profile, sloMs);
  return t.nbatch === 0 ? 0 : Math.round(t.wbatchMs * 100) / 100;
}
