/**
 * The arithmetic of profiling (INFaaS §3): which batch sizes to measure, when to stop, and how a
 * variant's profile follows from one run's measurements. Pure; the executor does the timing.
 */

export interface RepeatPolicy {
  /** @default 3 */
  minRuns: number;
  /** @default 15 */
  maxRuns: number;
  /** Stop repeating once the runs of one batch size took this long in total. @default 1500 */
  budgetMs: number;
}

export const DEFAULT_REPEAT: RepeatPolicy = { minRuns: 3, maxRuns: 15, budgetMs: 1500 };

/** Whether to time one more run of the same batch size. */
export function needMoreRuns(runsMs: readonly number[], policy: RepeatPolicy = DEFAULT_REPEAT): boolean {
  if (runsMs.length < policy.minRuns) return true;
  if (runsMs.length >= policy.maxRuns) return false;
  return runsMs.reduce((a, b) => a + b, 0) < policy.budgetMs;
}

/**
 * Whether to go on to the next (doubled) batch size: not past `maxBatch`, and not when the last
 * batch already took longer than `slowBatchMs` (a batch twice that size is of no use to a query
 * with an SLO, and would make profiling slow).
 */
export function nextBatchSize(current: number, lastMedianMs: number, maxBatch: number, slowBatchMs = 2000): number | undefined {
  const next = current * 2;
  if (next > maxBatch || lastMedianMs > slowBatchMs) return undefined;
  return next;
}

/** Peak throughput of a variant with max batch `maxBatch`: maxBatch / latency(maxBatch), queries/s. */
export function peakQps(latencyMs: Readonly<Record<string, number>>, maxBatch: number): number | undefined {
  const lat = latencyMs[String(maxBatch)];
  if (lat === undefined) return undefined;
  return (maxBatch * 1000) / Math.max(lat, 1e-3);
}

/** Share of rows whose highest score is at the label's index. `scores` is rows × classes. */
export function top1Accuracy(scores: ArrayLike<number>, classes: number, labels: ArrayLike<number>): number {
  const rows = labels.length;
  if (rows === 0) return 0;
  let right = 0;
  for (let r = 0; r < rows; r++) {
    let best = 0;
    let bestScore = -Infinity;
    for (let c = 0; c < classes; c++) {
      const v = scores[r * classes + c] as number;
      if (v > bestScore) {
        bestScore = v;
        best = c;
      }
    }
    if (best === labels[r]) right++;
  }
  return right / rows;
}

/**
 * Profiled latency of a batch of `size` queries: the latency of the smallest profiled batch size
 * that holds it (profiles are measured at powers of two), or of the largest one profiled.
 */
export function profiledLatencyAt(latencyMs: Readonly<Record<string, number>>, size: number): number {
  let best: number | undefined;
  let bestSize = Infinity;
  let largestSize = 0;
  let largest = 0;
  for (const [k, ms] of Object.entries(latencyMs)) {
    const b = Number(k);
    if (b >= size && b < bestSize) {
      bestSize = b;
      best = ms;
    }
    if (b > largestSize) {
      largestSize = b;
      largest = ms;
    }
  }
  return best ?? largest;
}
