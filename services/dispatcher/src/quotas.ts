import type { NatsConnection, Subscription } from "@nats-io/transport-node";
import type { QuotaAdmission, QuotaTicket } from "@sloserve/policy";
import type { DispatcherMetrics } from "./metrics.js";

/**
 * Apps' quotas at the dispatcher (docs/RELIABILITY.md "Quotas"; the rule: libs/policy access/quota.ts),
 * for the queries of NATS callers (`infer.app.*`, `infer.model.*`, `infer.variant.*`, pipeline stages
 * included); a frontend's come on `….admitted` and were charged there. A query over its app's limit is
 * refused `quota_exceeded` before it is read or counted as an arrival, so the autoscalers and the
 * forecaster see admitted load only; the refusal is counted in `sloserve_quota_refused_total`.
 *
 * The dispatcher does not answer the queries it routes (the executor answers the caller's inbox), so
 * an admitted query holds its concurrency slot until a message reaches that inbox: the dispatcher
 * listens there for one (the answer, an overflow answer, or its own error reply). An answer that never
 * comes (lost with a connection) gives the slot back once the query's deadline has passed by
 * {@link SLOT_GRACE_MS}. Costs: a subscription per admitted query of an app with a quota, and a copy of
 * its answer to the dispatcher. A caller that takes its replies outside `_INBOX.>` (which the NATS
 * users' permissions let the dispatcher listen to) holds its slot until its deadline.
 */

/** How long past its deadline a query whose answer was never seen keeps its slot, ms. */
export const SLOT_GRACE_MS = 2_000;

interface Held {
  ticket: QuotaTicket;
  untilMs: number;
  sub: Subscription;
}

export class DispatcherQuotas {
  /** Admitted queries still held, by the caller's inbox. */
  private readonly held = new Map<string, Held>();

  constructor(
    readonly admission: QuotaAdmission,
    private readonly nc: NatsConnection,
    private readonly metrics?: DispatcherMetrics,
  ) {}

  /** Whether `app` has a quota (else its queries are not charged): a map look-up. */
  hasQuota(app: string): boolean {
    return this.admission.quotaOf(app) !== undefined;
  }

  /**
   * Charges a query of `app` to its quota (an app without one is admitted and holds nothing) or throws its
   * `quota_exceeded`; an admitted query holds its slot until a message reaches `inbox` or `deadlineMs`
   * has passed. A caller reusing an inbox for a second query gives the first one's slot back.
   */
  charge(app: string, inbox: string, nowMs: number, deadlineMs: number): void {
    const a = this.admission.admit(app, nowMs);
    if (!a.admitted) {
      this.metrics?.quotaRefused(app, a.refusal.limit);
      throw a.refusal.error;
    }
    if (!this.hasQuota(app)) return;
    this.release(inbox);
    const sub = this.nc.subscribe(inbox, { max: 1, callback: () => this.release(inbox) });
    this.held.set(inbox, { ticket: a.ticket, untilMs: deadlineMs + SLOT_GRACE_MS, sub });
  }

  private release(inbox: string): void {
    const h = this.held.get(inbox);
    if (!h) return;
    this.held.delete(inbox);
    h.ticket.release();
    h.sub.unsubscribe();
  }

  /** Once a second: the slots of queries past their deadline whose answer was never seen; how many. */
  sweep(nowMs: number): number {
    let n = 0;
    for (const [inbox, h] of this.held) {
      if (h.untilMs > nowMs) continue;
      this.release(inbox);
      n++;
    }
    return n;
  }

  /** Admitted queries whose answer has not been seen yet. */
  get holding(): number {
    return this.held.size;
  }
}
