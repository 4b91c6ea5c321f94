/**
 * Serverless overflow, per query: MArk §4.1 ("Bouncer": a request that cannot be served within RTmax
 * goes to Lambda at once) with the estimate of DESIGN §3 "Serverless overflow".
 *
 *   estimated completion = startup + queue ahead / μ* + Wbatch + T(Nbatch)
 *
 * where μ* is the local serving rate (all local replicas of the variant, with batching) and Wbatch,
 * T(Nbatch) come from batch tuning. The query is served locally when the estimate fits in its remaining
 * SLO budget, else sent to the function provider. The estimate is deliberately pessimistic: it charges
 * the full Wbatch even when a queue exists (a full batch would leave at once), so overflow errs towards
 * meeting the SLO at Lambda's price. Planning ignores function cost (as MArk does); accounting does not.
 *
 * `startup` is ours (the paper's Bouncer runs on an instance that is up): when nothing serves the
 * variant yet but capacity is on its way (an instance loading), the query could still be served
 * locally once it is up; `startup` is how long that takes (the live dispatcher charges the whole
 * profiled load latency, not knowing when the load began). With nothing serving and nothing starting
 * there is no local capacity: the estimate is infinite and the query overflows.
 *
 * {@link overflowInputFor} builds the input from what a caller sees of the variant's capacity (the
 * live dispatcher: instance counts from state events and worker reports, the variant's profile,
 * slowed down by what the reports observed, {@link observedOverflowCapacity}; the simulator: its ready
 * replicas), so both map the same figures the same way. {@link drainBacklog} is the live dispatcher's
 * estimate of the queue ahead between worker reports (the simulator sees its queues exactly).
 */
import { profiledLatencyAt } from "../variants/profiling.js";
import { DEFAULT_VARIANT_STATE_CONFIG } from "../selection/variant-state.js";

export interface OverflowInput {
  /** Queries waiting ahead of this one on the local path. */
  queueAhead: number;
  /** Local serving rate μ*, queries per second; 0 when no local capacity is up. */
  serviceRateQps: number;
  /** Wbatch, ms. */
  wbatchMs: number;
  /** T(Nbatch), ms. */
  batchLatencyMs: number;
  /** SLO budget left for this query (its deadline minus now), ms. */
  remainingBudgetMs: number;
  /** Time until the local capacity in `serviceRateQps` starts serving, ms (0: it serves now). @default 0 */
  startupMs?: number;
}

export type OverflowAction = "local" | "overflow";

export interface OverflowDecision {
  action: OverflowAction;
  /** The estimated local completion time, ms (Infinity without local capacity). */
  estimatedMs: number;
  reason: string;
}

/** Estimated local completion time of a query that joins the queue now, ms. */
export function estimateLocalCompletionMs(input: Omit<OverflowInput, "remainingBudgetMs">): number {
  if (input.serviceRateQps <= 0) return Infinity;
  return (input.startupMs ?? 0) + (1000 * input.queueAhead) / input.serviceRateQps + input.wbatchMs + input.batchLatencyMs;
}

/** Serve locally or overflow to functions (MArk §4.1). */
export function decideOverflow(input: OverflowInput): OverflowDecision {
  const estimatedMs = estimateLocalCompletionMs(input);
  if (!Number.isFinite(estimatedMs)) {
    return { action: "overflow", estimatedMs, reason: "no local capacity" };
  }
  if (estimatedMs <= input.remainingBudgetMs) {
    return { action: "local", estimatedMs, reason: `estimated ${estimatedMs.toFixed(1)} ms ≤ budget ${input.remainingBudgetMs.toFixed(1)} ms` };
  }
  return { action: "overflow", estimatedMs, reason: `estimated ${estimatedMs.toFixed(1)} ms > budget ${input.remainingBudgetMs.toFixed(1)} ms` };
}

/** Identical local instances of a variant: one group per variant live, one per replica in the simulator. */
export interface OverflowCapacity {
  instances: number;
  /** Profiled peak throughput of one instance (at its max batch), queries/s. */
  peakQpsPerInstance: number;
  /** Wbatch, ms. */
  wbatchMs: number;
  /** T(Nbatch): profiled latency of a full batch, ms. */
  batchLatencyMs: number;
}

/** What a caller sees of the local path of one query's variant. */
export interface OverflowView {
  /** Capacity serving now (live: Active, Overloaded and Interfered instances; simulator: ready replicas). */
  serving: readonly OverflowCapacity[];
  /**
   * Capacity on its way (instances loading or a load asked for) and how long until it serves, ms.
   * Counts only when nothing serves now.
   */
  starting?: { capacity: readonly OverflowCapacity[]; inMs: number };
  /** Queries waiting ahead of this one on the local path. */
  queueAhead: number;
  nowMs: number;
  /** The query's absolute deadline, ms. */
  deadlineMs: number;
}

/**
 * The overflow input from what the caller sees: μ* = Σ instances × peak QPS of the serving capacity,
 * Wbatch and T(Nbatch) the largest among it (a query may land on any replica), the remaining budget
 * the deadline minus now. With nothing serving, the starting capacity stands in, with its start-up
 * time; with neither, μ* = 0 (no local capacity).
 */
export function overflowInputFor(view: OverflowView): OverflowInput {
  const up = serviceRateOf(view.serving);
  const starting = up > 0 ? undefined : view.starting;
  const groups = starting ? starting.capacity : view.serving;
  let wbatchMs = 0;
  let batchLatencyMs = 0;
  for (const g of groups) {
    if (g.instances <= 0) continue;
    wbatchMs = Math.max(wbatchMs, g.wbatchMs);
    batchLatencyMs = Math.max(batchLatencyMs, g.batchLatencyMs);
  }
  return {
    queueAhead: view.queueAhead,
    serviceRateQps: starting ? serviceRateOf(starting.capacity) : up,
    wbatchMs,
    batchLatencyMs,
    remainingBudgetMs: view.deadlineMs - view.nowMs,
    ...(starting ? { startupMs: starting.inMs } : {}),
  };
}

/** μ* of some capacity: Σ instances × peak QPS, queries/s. */
export function serviceRateOf(groups: readonly OverflowCapacity[]): number {
  let qps = 0;
  for (const g of groups) if (g.instances > 0) qps += g.instances * g.peakQpsPerInstance;
  return qps;
}

/** The figures of a variant record that its overflow capacity needs. */
export interface OverflowVariant {
  maxBatch: number;
  batchWaitMs: number;
  profile: { peakQps: number; latencyMs: Readonly<Record<string, number>>; loadLatencyMs: number } | null;
}

/**
 * `instances` instances of a profiled variant as overflow capacity: peak QPS from the profile, Wbatch
 * the variant's batch wait, T(Nbatch) the profiled latency at its max batch (profiledLatencyAt's rule:
 * the smallest profiled batch holding it). Undefined for an unprofiled variant: without a profile there
 * is no estimate, and the caller serves the query locally.
 */
export function variantOverflowCapacity(variant: OverflowVariant, instances: number): OverflowCapacity | undefined {
  const p = variant.profile;
  if (!p || p.peakQps <= 0 || Object.keys(p.latencyMs).length === 0) return undefined;
  return { instances, peakQpsPerInstance: p.peakQps, wbatchMs: variant.batchWaitMs, batchLatencyMs: profiledLatencyAt(p.latencyMs, variant.maxBatch) };
}

/** What a worker's latest one-second report says of a variant's batches there. */
export interface ObservedBatches {
  batches: number;
  /** Median batch run time, ms, and median batch size, over the report's second. */
  batchP50Ms: number;
  batchSizeP50: number;
}

/**
 * A variant's instances on one worker as they run now: when the worker's latest report ran at least
 * `minBatches` batches (the variant-state rule's evidence, 10), the median batch time over the profiled
 * time at the median batch size is a slowdown s (interference, a busy machine; never below 1, so a
 * fast second does not promise more than the profile); the instances' peak QPS is divided by s and
 * T(Nbatch) multiplied by it. Without that evidence the profile stands. The executor's run-time
 * estimate corrects its shedding the same way, with a moving average.
 */
export function observedOverflowCapacity(
  variant: OverflowVariant,
  instances: number,
  observed: ObservedBatches | undefined,
  minBatches: number = DEFAULT_VARIANT_STATE_CONFIG.minBatches,
): OverflowCapacity | undefined {
  const base = variantOverflowCapacity(variant, instances);
  if (!base || !variant.profile || !observed || observed.batches < Math.max(1, minBatches) || observed.batchP50Ms <= 0) return base;
  const profiledMs = profiledLatencyAt(variant.profile.latencyMs, Math.max(1, Math.round(observed.batchSizeP50)));
  const slowdown = profiledMs > 0 ? Math.max(1, observed.batchP50Ms / profiledMs) : 1;
  return { ...base, peakQpsPerInstance: base.peakQpsPerInstance / slowdown, batchLatencyMs: base.batchLatencyMs * slowdown };
}

/** A batch running on a replica: its size and when it started and is expected to end, ms. */
export interface BatchInService {
  size: number;
  startMs: number;
  endMs: number;
}

/**
 * The queries ahead of one that joins a variant's queue at `nowMs`: those waiting, plus the work still
 * left of the batches in service, in queries (a batch of b that is a third done counts 2b/3). Without
 * the second term a query that arrives while every replica has just started a batch is estimated at
 * Wbatch + T(Nbatch), though it cannot start before one of them ends; with the whole batches counted
 * it is charged a full T(Nbatch) more even when they are about to end. Only a caller that knows the
 * batches in service can use it; the dispatchers, live and simulated, use their backlog estimate
 * ({@link drainBacklog}), which keeps each query they queued until μ* has drained it, counting the
 * queries in service the same way, as a fluid.
 */
export function queueAheadOf(waiting: number, inService: Iterable<BatchInService>, nowMs: number): number {
  let ahead = waiting;
  for (const b of inService) {
    const span = b.endMs - b.startMs;
    if (b.size <= 0 || b.endMs <= nowMs) continue;
    ahead += span > 0 ? (b.size * Math.min(span, b.endMs - nowMs)) / span : b.size;
  }
  return ahead;
}

/** A dispatcher's estimate of the queries waiting in one variant's queue, at `atMs`. */
export interface BacklogEstimate {
  queries: number;
  atMs: number;
}

/**
 * The backlog estimate brought to `nowMs`: drained at μ* since it was last brought up to date (a fluid
 * queue; never below 0). The caller adds one for each query it queues. Why: the workers' one-second
 * reports give only the queries each replica holds (its prefetch, at most two batches), not what
 * waits in the JetStream queue, and they are up to a second old; during a burst the queue ahead is
 * what the dispatcher itself has put there since. With several dispatchers each counts its own share
 * (a caveat: the estimate is low by what the others queued), so callers take the larger of this and
 * the reported queue.
 */
export function drainBacklog(estimate: BacklogEstimate | undefined, nowMs: number, serviceRateQps: number): BacklogEstimate {
  if (!estimate) return { queries: 0, atMs: nowMs };
  const elapsedMs = Math.max(0, nowMs - estimate.atMs);
  return { queries: Math.max(0, estimate.queries - (serviceRateQps * elapsedMs) / 1000), atMs: Math.max(nowMs, estimate.atMs) };
}
