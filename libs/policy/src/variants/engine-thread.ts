/**
 * Where an executor runs a variant's onnxruntime session: on its main thread ("inline") or in a
 * worker thread of its own ("thread"). onnxruntime-node runs inference synchronously on the calling
 * thread, so an inline batch blocks the executor's event loop for as long as it runs: the bus
 * (heartbeats, pulls, replies) and every other variant loaded on the executor wait that long. A thread
 * keeps them free, but every batch then costs two thread hops (its inputs posted to the thread, its
 * outputs posted back): ~0.1-0.3 ms of CPU and two thread wake-ups per batch, more than a small
 * model's whole batch takes (bench/README.md "the data path"). So a variant whose longest batch is
 * short runs inline, and one whose batches are long keeps its thread. Pure: the executor feeds it the
 * times it observes (onnxruntime's own time per run, without the hops) and moves the session when the
 * answer changes.
 */

import { median } from "../common/quantile.js";

export type EngineThread = "inline" | "thread";

/**
 * The longest batch (T(maxBatch), ms) that may run inline: blocking the event loop this long delays the
 * executor's other work (its other variants' batches, replies, pulls) by at most this, far less than
 * any SLO or bus timeout (heartbeats are seconds apart), while the two thread hops it saves cost
 * ~0.1-0.3 ms of CPU per batch and two thread wake-ups, each a scheduling delay on a busy machine.
 * 2 ms, not less: the estimate is an upper bound (ms × maxBatch / size, see {@link maxBatchEstimateMs}),
 * and inline runs are timed with the event-loop turn onnxruntime-node waits for, so a tiny model
 * (digits-tiny: T(1) ≈ T(8) ≈ 0.03 ms) measured at batch 1 on a loaded machine reads ~1 ms.
 */
export const INLINE_BATCH_MAX_MS = 2;
/** An inline variant goes back to a thread only past this multiple of {@link INLINE_BATCH_MAX_MS}, so that noise near the threshold does not move it back and forth (each move loads a session). */
export const INLINE_LEAVE_FACTOR = 2;
/**
 * Batches the estimate is taken over: the median of the last this many batches' estimates. A median,
 * so that the first runs of a session (onnxruntime warms up: a tiny model's first run takes ~5 ms)
 * and a GC pause now and then do not move it; and no move inline before this many batches.
 */
export const INLINE_MIN_BATCHES = 20;

/**
 * Models larger than this keep their thread for good, unobserved: moving a session means keeping the
 * model's bytes to open it again, and a CPU model this large (4 M fp32 parameters: ≥ 32 M
 * multiply-adds per batch of 8 from the weights alone) does not run a batch inline-short anyway.
 */
export const INLINE_MODEL_MAX_BYTES = 16 * 1024 * 1024;

/** Whether a session may ever run inline: a CPU session (GPU sessions are too dear to open twice) of a model of at most {@link INLINE_MODEL_MAX_BYTES}, serving a variant (of known max batch). */
export function mayRunInline(hardware: string, modelBytes: number, maxBatch: number | undefined): boolean {
  return hardware === "cpu" && maxBatch !== undefined && maxBatch >= 1 && modelBytes <= INLINE_MODEL_MAX_BYTES;
}

/**
 * An upper bound of T(maxBatch) from one batch of `size` that took `ms`: ms × maxBatch / size, which
 * is at least T(maxBatch) when batch time is affine in the batch size with a non-negative intercept
 * (T(b) = a + c·b, a ≥ 0), as inference times are. So a variant seen only at low load (batches of 1)
 * is judged as if its batches were full.
 */
export function maxBatchEstimateMs(ms: number, size: number, maxBatch: number): number {
  return (ms * Math.max(maxBatch, size)) / Math.max(1, size);
}

/**
 * Where the session should be, given where it is and the estimate of T(maxBatch) (undefined: no
 * evidence yet). Without evidence it stays where it is (a new session starts in a thread: the safe
 * side for a model of unknown cost).
 */
export function engineThreadPlan(current: EngineThread, estimateMs: number | undefined, batchesObserved: number): EngineThread {
  if (estimateMs === undefined || !Number.isFinite(estimateMs)) return current;
  if (current === "thread") return batchesObserved >= INLINE_MIN_BATCHES && estimateMs <= INLINE_BATCH_MAX_MS ? "inline" : "thread";
  return estimateMs > INLINE_BATCH_MAX_MS * INLINE_LEAVE_FACTOR ? "thread" : "inline";
}

/**
 * The state an executor keeps per session: the T(maxBatch) estimates of its last
 * {@link INLINE_MIN_BATCHES} runs, and where the session should run. `observe` after each run.
 */
export class EngineThreadChoice {
  /** The last INLINE_MIN_BATCHES estimates, as a ring. */
  private readonly recent: number[] = [];
  private next = 0;
  private batches = 0;
  private where: EngineThread;

  constructor(private readonly maxBatch: number, start: EngineThread = "thread") {
    this.where = start;
  }

  /** One run of `size` rows that took `ms` of onnxruntime's time; returns where the session should be now. */
  observe(size: number, ms: number): EngineThread {
    const e = maxBatchEstimateMs(ms, size, this.maxBatch);
    if (this.recent.length < INLINE_MIN_BATCHES) this.recent.push(e);
    else this.recent[this.next] = e;
    this.next = (this.next + 1) % INLINE_MIN_BATCHES;
    this.batches++;
    this.where = engineThreadPlan(this.where, this.maxBatchMs, this.batches);
    return this.where;
  }

  /** Where the session should be. */
  get thread(): EngineThread {
    return this.where;
  }

  /** The median of the recent T(maxBatch) estimates, ms (undefined before the first run). */
  get maxBatchMs(): number | undefined {
    return this.recent.length === 0 ? undefined : median(this.recent);
  }
}
