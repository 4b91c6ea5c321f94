/**
 * How an executor batches (MArk §4.3, InferLine §4) and what it does with queries that can no longer
 * meet their deadlines (DESIGN §3 "Batching"). One rule, called by the live executor
 * (libs/executor `VariantInstance`) and by the simulator's engine (libs/sim `Simulator`) alike.
 *
 * - A batch leaves when it holds `maxBatch` queries (Nbatch), or when its oldest query has waited
 *   `batchWaitMs` (Wbatch). With Wbatch = 0 an idle executor runs whatever is queued at once, and
 *   batches form by themselves while it is busy (the queue grows during a run). Waiting never makes a
 *   query late: a partial batch leaves early, at the latest start that still lets each of its queries
 *   finish by its deadline (Wbatch is tuned to the model's tightest SLO as the dispatchers last
 *   reported it, and a query with a tighter one may come before the re-tuning does).
 * - Before a batch is formed, the queries at the head of the queue that could not finish in time even
 *   if they ran alone now are taken out (`late`): the caller answers them with a clear error or sends
 *   them to overflow. Once the batch is formed, each of its queries that cannot finish within the
 *   batch's expected run time is taken out the same way (`cannotFinishInTime`), so a batch never
 *   starts a query silently late.
 * - The expected run time of a batch of b is the profiled T(b) times the slowdown observed on recent
 *   batches ({@link RunTimeEstimate}); without a profile, the moving average of observed batch times.
 *
 * Pure: time comes in as `nowMs`.
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
  return batchStep(queueLength, oldestQueuedAtMs, busy, nowMs, policy).decision;
}

/**
 * {@link decideBatch} as a step with nothing late. The decisions that repeat are shared, frozen objects
 * (the two "none", and "run" by size and reason): this runs once or twice per query in the
 * simulator's hot loop, where a fresh decision and step each time are most of what a query leaves
 * for the garbage collector. Reasons are constant strings for the same reason.
 */
function batchStep(queueLength: number, oldestQueuedAtMs: number | undefined, busy: boolean, nowMs: number, policy: BatchPolicy): BatchStep {
  if (busy) return NONE_BUSY;
  if (queueLength === 0 || oldestQueuedAtMs === undefined) return NONE_EMPTY;
  if (queueLength >= policy.maxBatch) return runStep(RUN_FULL, policy.maxBatch, "batch full (Nbatch)");
  const due = oldestQueuedAtMs + policy.batchWaitMs;
  if (nowMs >= due - 1e-9) return runStep(RUN_WAITED, queueLength, "the oldest query waited Wbatch");
  return { late: 0, decision: { action: "wait", untilMs: due, reason: "waiting for the batch to fill until Wbatch" } };
}

function frozenStep(decision: BatchDecision): BatchStep {
  return Object.freeze({ late: 0, decision: Object.freeze(decision) });
}

const NONE_BUSY = frozenStep({ action: "none", reason: "executor busy" });
const NONE_EMPTY = frozenStep({ action: "none", reason: "queue empty" });
/** Shared "run" steps by batch size, one table per reason (sizes up to MAX_SHARED_SIZE). */
const RUN_FULL: BatchStep[] = [];
const RUN_WAITED: BatchStep[] = [];
const MAX_SHARED_SIZE = 1024;

function runStep(table: BatchStep[], size: number, reason: string): BatchStep {
  const shared = table[size];
  if (shared !== undefined) return shared;
  const step = frozenStep({ action: "run", size, reason });
  if (Number.isInteger(size) && size >= 0 && size <= MAX_SHARED_SIZE) table[size] = step;
  return step;
}

/**
 * A query whose deadline can't be met even if it ran now (now + expected run time > deadline) must
 * not be started silently: the executor answers it with a clear error (or sends it to overflow).
 */
export function cannotFinishInTime(deadlineMs: number, nowMs: number, expectedRunMs: number): boolean {
  return nowMs + expectedRunMs > deadlineMs + 1e-9;
}

/** A FIFO of queries as the batching rule reads it (index 0 = the oldest). */
export interface BatchQueueView {
  readonly length: number;
  /** When the i-th query joined this queue, ms. */
  queuedAtMs(i: number): number;
  /** The i-th query's deadline, ms (Infinity when it has none). */
  deadlineMs(i: number): number;
}

export interface BatchStep {
  /** How many queries at the head cannot finish in time even alone: take them out first. */
  late: number;
  /** Then, for the queries after them: run a batch, wait, or nothing. */
  decision: BatchDecision;
}

/**
 * One step of a batcher that is free to start a batch (`busy` false) or not: the late head first,
 * then {@link decideBatch} over the rest. `expectedRunMs(b)` is the expected run time of a batch of b,
 * or a {@link RunTimeEstimate} (its `expectedMs(b, nowMs)`: the same, without a closure per batcher,
 * which the simulator calls once or twice per query).
 * Shedding happens only when the batcher could start a batch (a busy one is asked again when it frees).
 * Steps and decisions may be shared between calls (frozen, see `batchStep`): treat them as read-only.
 */
export function planBatch(queue: BatchQueueView, busy: boolean, nowMs: number, policy: BatchPolicy, expectedRunMs: ((size: number) => number) | RunTimeEstimate, shedLate = true): BatchStep {
  if (busy) return NONE_BUSY;
  let late = 0;
  if (shedLate) {
    const alone = typeof expectedRunMs === "function" ? expectedRunMs(1) : expectedRunMs.expectedMs(1, nowMs);
    while (late < queue.length && cannotFinishInTime(queue.deadlineMs(late), nowMs, alone)) late++;
  }
  const rest = queue.length - late;
  const first = batchStep(rest, rest > 0 ? queue.queuedAtMs(late) : undefined, false, nowMs, policy);
  const decision = first.decision;
  if (decision.action !== "wait") return late === 0 ? first : { late, decision };
  // The latest start at which every waiting query still finishes by its deadline (the batch as it is now).
  const run = typeof expectedRunMs === "function" ? expectedRunMs(rest) : expectedRunMs.expectedMs(rest, nowMs);
  let latestStart = Infinity;
  for (let i = late; i < queue.length; i++) latestStart = Math.min(latestStart, queue.deadlineMs(i) - run);
  if (latestStart <= nowMs + 1e-9) return { late, decision: { action: "run", size: rest, reason: "a waiting query's deadline cannot wait for Wbatch" } };
  if (latestStart < decision.untilMs) return { late, decision: { action: "wait", untilMs: latestStart, reason: "waiting for the batch to fill until a query's deadline" } };
  return { late, decision };
}

/** Weight of the newest batch in the moving average of the observed slowdown. */
export const RUN_TIME_EWMA_WEIGHT = 0.2;

/**
 * An estimate with no batch behind it for longer than this is stale: its excess over the profile
 * (slowdown − 1; for an unprofiled variant, the average itself) halves every
 * {@link RUN_TIME_STALE_HALF_LIFE_MS} after it. Without this, a replica whose estimate rose past its
 * queries' budgets would shed every query, never run another batch, and so never learn that it
 * recovered (a GC pause, a neighbour's burst): the decay lets a query through now and then, and its
 * batch is the evidence.
 */
export const RUN_TIME_STALE_AFTER_MS = 1_000;
export const RUN_TIME_STALE_HALF_LIFE_MS = 1_000;

/**
 * What a batch of b is expected to take on this executor: the profiled T(b) × the moving average of
 * observed / profiled over recent batches (1 until a batch has run), or, for an unprofiled variant, the
 * moving average of observed batch times (0 until a batch has run: nothing is shed before evidence);
 * an estimate gone stale (no batch for {@link RUN_TIME_STALE_AFTER_MS}) decays towards the profile.
 * Pure state: `observe` after each batch, `expectedMs` before one, both at the time given.
 */
export class RunTimeEstimate {
  /** Moving average of observed / profiled (profiled variants), as of the last batch. */
  slowdown = 1;
  /** Moving average of observed batch time, ms (unprofiled variants), as of the last batch. */
  averageMs = 0;
  /** When the last batch was observed (ms); -Infinity before the first. */
  private lastObservedMs = -Infinity;

  /**
   * @param profiledMs T(b) from the profile (a function, or an object whose `latencyMs(b)` gives it:
   * the same, without a closure per estimate), or undefined for an unprofiled variant.
   */
  constructor(private readonly profiledMs?: ((size: number) => number) | { latencyMs(size: number): number }) {}

  /** T(b) from the profile, undefined without one. */
  private profiled(size: number): number | undefined {
    const p = this.profiledMs;
    return p === undefined ? undefined : typeof p === "function" ? p(size) : p.latencyMs(size);
  }

  /** How much of the estimate's evidence is still trusted at `nowMs` (1 while fresh, halving once stale). */
  private trust(nowMs: number): number {
    const idle = nowMs - this.lastObservedMs;
    return idle <= RUN_TIME_STALE_AFTER_MS ? 1 : 0.5 ** ((idle - RUN_TIME_STALE_AFTER_MS) / RUN_TIME_STALE_HALF_LIFE_MS);
  }

  observe(size: number, observedMs: number, nowMs: number): void {
    const w = RUN_TIME_EWMA_WEIGHT;
    const trust = this.trust(nowMs);
    const average = this.averageMs * trust;
    this.averageMs = average === 0 ? observedMs : (1 - w) * average + w * observedMs;
    const p = this.profiled(size);
    if (p !== undefined && p > 0) this.slowdown = (1 - w) * this.decayedSlowdown(trust) + w * (observedMs / p);
    this.lastObservedMs = nowMs;
  }

  private decayedSlowdown(trust: number): number {
    return this.slowdown > 1 ? 1 + (this.slowdown - 1) * trust : this.slowdown;
  }

  expectedMs(size: number, nowMs: number): number {
    const p = this.profiled(size);
    const trust = this.trust(nowMs);
    return p !== undefined && p > 0 ? p * this.decayedSlowdown(trust) : this.averageMs * trust;
  }
}
