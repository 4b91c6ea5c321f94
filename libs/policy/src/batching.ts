/**
 * When an executor starts a batch (MArk §4.3, InferLine §4): a batch leaves when it holds
 * `maxBatch` queries, or when its oldest query has waited `batchWaitMs` (Wbatch). With
 * `batchWaitMs` = 0 an idle executor runs whatever is queued at once, and batches form by
 * themselves while it is busy (the queue grows during a run). Pure: time comes in as `nowMs`.
 */

export interface BatchPolicy {
  /** Nbatch: the most queries in one run. */
  maxBatch: number;
  /** Wbatch: the longest the oldest queued query waits for the batch to fill, ms. */
  batchWaitMs: number;
}

export type BatchDecision =
  | { action: "run"; size: number; reason: string }
  | { action: "wait"; untilMs: number; reason: string }
  | { action: "none"; reason: string };

export function decideBatch(queueLength: number, oldestQueuedAtMs: number | undefined, busy: boolean, nowMs: number, policy: BatchPolicy): BatchDecision {
  if (busy) return { action: "none", reason: "executor busy" };
  if (queueLength === 0 || oldestQueuedAtMs === undefined) return { action: "none", reason: "queue empty" };
  if (queueLength >= policy.maxBatch) return { action: "run", size: policy.maxBatch, reason: `batch full (${policy.maxBatch})` };
  const due = oldestQueuedAtMs + policy.batchWaitMs;
  if (nowMs >= due) return { action: "run", size: queueLength, reason: `oldest query waited ${nowMs - oldestQueuedAtMs} ms ≥ Wbatch ${policy.batchWaitMs} ms` };
  return { action: "wait", untilMs: due, reason: `waiting for the batch to fill until Wbatch` };
}

/**
 * A query whose deadline can't be met even if it ran now (now + expected run time > deadline) must
 * not be started silently: the executor answers it with a clear error (or sends it to overflow).
 */
export function cannotFinishInTime(deadlineMs: number, nowMs: number, expectedRunMs: number): boolean {
  return nowMs + expectedRunMs > deadlineMs;
}
