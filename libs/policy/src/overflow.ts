/**
 * Serverless overflow, per query: MArk §4.1 ("Bouncer": a request that cannot be served within RTmax
 * goes to Lambda at once) with the estimate of DESIGN §3 "Serverless overflow".
 *
 *   estimated completion = queue ahead / μ* + Wbatch + T(Nbatch)
 *
 * where μ* is the local serving rate (all local replicas of the variant, with batching) and Wbatch,
 * T(Nbatch) come from batch tuning. The query is served locally when the estimate fits in its remaining
 * SLO budget, else sent to the function provider. The estimate is deliberately pessimistic: it charges
 * the full Wbatch even when a queue exists (a full batch would leave at once), so overflow errs towards
 * meeting the SLO at Lambda's price. Planning ignores function cost (as MArk does); accounting does not.
 */

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
  return (1000 * input.queueAhead) / input.serviceRateQps + input.wbatchMs + input.batchLatencyMs;
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
