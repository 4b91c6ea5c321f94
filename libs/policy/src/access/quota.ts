import { ErrorCode, ServeError, keyOfQuotaSubject, keyQuotaSubject, type AppQuota, type QuotaDemandReport, type QuotaRole } from "@sloserve/contracts";

/**
 * Per-app quotas and their admission (issue 30; docs/RELIABILITY.md "Quotas"): one app's flood is
 * refused at the door, at once, instead of queueing in front of every other app's queries.
 *
 * **The rule.** An app's quota `{rate_qps R, burst B, max_concurrency C}` is a token bucket (the
 * classic shaper, e.g. Linux tc's TBF or RFC 2697's committed bucket): tokens accrue at R a second up
 * to B saved; a query takes one, and with none left it is refused with the time until the next one
 * (`Retry-After`, whole seconds, at least 1; 1 for the concurrency limit, whose slots come back with
 * answers, not with time). Beside it a concurrency limit: at most C of the app's queries admitted
 * and not yet answered; each admitted query holds a {@link QuotaTicket} that the caller releases
 * exactly once, whatever the outcome (answer, error, timeout). Apps without a quota are admitted
 * without any bookkeeping.
 *
 * **Many processes, one quota.** Queries enter at every frontend (HTTP, gRPC) and, from NATS callers,
 * at every dispatcher (a queue group); a frontend's queries pass the dispatcher uncharged. No process
 * asks anyone per query: each enforces a share of the quota, and the shares are rebalanced from what
 * the processes report. Every `reportEveryMs` (500 ms), queries or not, each process publishes its
 * demand per app (the queries offered to it, admitted or refused, per second over the period); it
 * recomputes its shares from its own last report and the last one heard from every other live process
 * ({@link shareQuota}) whenever it reports and whenever it hears a report:
 *
 * - while the app's total demand D fits (D ≤ R), each process gets its demand plus an equal part of
 *   the rest, (R − D) / N: a process whose demand jumps finds room at once;
 * - when it does not, max-min fair shares (water-filling): a process asking less than an equal part
 *   gets what it asks, the others split the rest equally.
 *
 * Burst and concurrency follow the rate share w = r / R: a bucket of max(1, B·w) tokens, and C·w
 * queries in flight rounded to whole ones by largest remainders (ties by process id, so that the
 * shares add up to C), at least one. A process with no share still holds one token and one slot, so a
 * process that starts to receive an app's queries is not shut out until its next report.
 *
 * **Error bound.** Processes that hold the same reports hold shares adding up to R exactly; with the
 * floors of one, the app as a whole gets at most B + N tokens at once and C + N − 1 queries in flight
 * (N processes). Over any T seconds the app is admitted at most R·T + B + N queries, plus R × one
 * period (0.5 s) each time demand moves between processes (one process's shares are a period newer
 * than another's), and up to a whole quota more for a period after a process starts (it assumes it is
 * alone until the others' reports arrive). A process whose reports stop is forgotten after
 * `peerTimeoutMs` (1.5 s), at once when it says it leaves. A single process enforces the quota exactly.
 *
 * **API keys.** With access control on, an API key may have a quota of its own, with the same rule
 * (`key:<id>` in this table, the reports and on the bus; libs/contracts quotas.ts). Keys exist at the
 * frontends only, so a key's quota is shared among the frontends alone: dispatchers' reports do not
 * count in its shares. A query sent with a key passes its key's quota first, then its app's
 * ({@link QuotaAdmission.admitQuery}): a key over its own quota is refused without spending its app's
 * tokens, so one key's flood does not use up the app's quota for its other keys; nothing is taken
 * from either until both admit it, and its ticket gives both slots back.
 *
 * Pure: time comes in as `nowMs`; the services publish and read the reports (libs/bus quota-sync.ts).
 * Caveat: shares follow where demand is, not who sends it.
 */

export const QUOTA_DEFAULTS = {
  /** How often each process reports its demand and rebalances its shares, ms. */
  reportEveryMs: 500,
  /** A process not heard from for this long (three reports) has gone, ms. */
  peerTimeoutMs: 1_500,
};
export type QuotaOptions = typeof QUOTA_DEFAULTS;

/** One process's demand for an app: the queries offered to it per second over its last report period. */
export interface ProcessDemand {
  process: string;
  demandQps: number;
}

/** What one process enforces of an app's quota. */
export interface QuotaShare {
  rateQps: number;
  burst: number;
  maxConcurrency: number;
}

/**
 * Shares `quota` among the processes that admit its app's queries, by their demand (the rule in the
 * header): each process's rate, burst and concurrency. Every process computes the same shares from
 * the same reports.
 */
export function shareQuota(quota: AppQuota, demands: readonly ProcessDemand[]): Map<string, QuotaShare> {
  const byId = [...demands].sort((a, b) => (a.process < b.process ? -1 : a.process > b.process ? 1 : 0));
  const n = byId.length;
  const rates = new Map<string, number>();
  const total = byId.reduce((s, d) => s + Math.max(0, d.demandQps), 0);
  if (total <= quota.rate_qps) {
    for (const d of byId) rates.set(d.process, Math.max(0, d.demandQps) + (quota.rate_qps - total) / n);
  } else {
    // Water-filling: the smallest demands first, each taking at most an equal part of what is left.
    let left = quota.rate_qps;
    const ascending = [...byId].sort((a, b) => a.demandQps - b.demandQps);
    for (const [i, d] of ascending.entries()) {
      const give = Math.min(Math.max(0, d.demandQps), left / (n - i));
      rates.set(d.process, give);
      left -= give;
    }
  }
  // Concurrency by largest remainders, so that the whole shares add up to C.
  const exact = byId.map((d) => (quota.max_concurrency * (rates.get(d.process) ?? 0)) / quota.rate_qps);
  const whole = exact.map(Math.floor);
  let spare = quota.max_concurrency - whole.reduce((s, x) => s + x, 0);
  const order = exact.map((x, i) => ({ i, rest: x - Math.floor(x) })).sort((a, b) => b.rest - a.rest || a.i - b.i);
  for (const { i } of order) {
    if (spare <= 0) break;
    whole[i] = (whole[i] ?? 0) + 1;
    spare--;
  }
  const shares = new Map<string, QuotaShare>();
  for (const [i, d] of byId.entries()) {
    const rateQps = rates.get(d.process) ?? 0;
    shares.set(d.process, { rateQps, burst: Math.max(1, (quota.burst * rateQps) / quota.rate_qps), maxConcurrency: Math.max(1, whole[i] ?? 0) });
  }
  return shares;
}

/** Float slack when comparing tokens to one. */
const EPSILON = 1e-9;

/**
 * A token bucket: `rateQps` tokens a second, at most `capacity` saved up; it starts full. Time only
 * moves forward (an earlier `nowMs` adds nothing).
 */
export class TokenBucket {
  private tokens: number;
  private atMs: number;

  constructor(
    private rateQps: number,
    private capacity: number,
    nowMs: number,
  ) {
    this.tokens = capacity;
    this.atMs = nowMs;
  }

  private refill(nowMs: number): void {
    if (nowMs <= this.atMs) return;
    this.tokens = Math.min(this.capacity, this.tokens + ((nowMs - this.atMs) * this.rateQps) / 1000);
    this.atMs = nowMs;
  }

  /** New limits from now on: what was earned so far at the old rate is kept, up to the new capacity. */
  setLimits(rateQps: number, capacity: number, nowMs: number): void {
    this.refill(nowMs);
    this.rateQps = rateQps;
    this.capacity = capacity;
    this.tokens = Math.min(this.tokens, capacity);
  }

  /** Takes a token if there is one. */
  tryTake(nowMs: number): boolean {
    this.refill(nowMs);
    if (this.tokens < 1 - EPSILON) return false;
    this.tokens -= 1;
    return true;
  }

  /** Milliseconds until a token is there: 0 when one is, Infinity at a rate of 0. */
  waitMs(nowMs: number): number {
    this.refill(nowMs);
    if (this.tokens >= 1 - EPSILON) return 0;
    return this.rateQps > 0 ? ((1 - this.tokens) * 1000) / this.rateQps : Infinity;
  }

  /** Tokens saved up now. */
  available(nowMs: number): number {
    this.refill(nowMs);
    return this.tokens;
  }
}

/** An admitted query's hold on its app's concurrency: released once, on whatever outcome. */
export interface QuotaTicket {
  release(): void;
}

/** What holds nothing: the ticket of a query of an app without a quota. */
const NO_TICKET: QuotaTicket = { release() {} };

/** Why a query was refused: which limit, when to try again, and the error the caller gets (`quota_exceeded`, HTTP 429). */
export interface QuotaRefusal {
  /** The query's app. */
  app: string;
  /** The API key whose own quota refused it; absent when its app's quota did. */
  key?: string;
  limit: "rate_qps" | "max_concurrency";
  retryAfterS: number;
  error: ServeError;
}

export type Admission = { admitted: true; ticket: QuotaTicket } | { admitted: false; refusal: QuotaRefusal };

const ADMITTED_FREELY: Admission = { admitted: true, ticket: NO_TICKET };

/** One app's quota in one process: its share's bucket, its queries in flight, and the demand of the current period. */
class AppGate {
  inFlight = 0;
  offered = 0;
  maxConcurrency: number;
  readonly bucket: TokenBucket;

  constructor(
    public quota: AppQuota,
    share: QuotaShare,
    nowMs: number,
  ) {
    this.bucket = new TokenBucket(share.rateQps, share.burst, nowMs);
    this.maxConcurrency = share.maxConcurrency;
  }

  setShare(share: QuotaShare, nowMs: number): void {
    this.bucket.setLimits(share.rateQps, share.burst, nowMs);
    this.maxConcurrency = share.maxConcurrency;
  }
}

/** The slots of one query in its gates (its key's and its app's), given back together, once. */
class Ticket implements QuotaTicket {
  private held = true;
  constructor(private readonly gates: readonly AppGate[]) {}
  release(): void {
    if (!this.held) return;
    this.held = false;
    for (const gate of this.gates) gate.inFlight--;
  }
}

const quotaText = (q: AppQuota): string => `${q.rate_qps} queries/s with bursts of ${q.burst}, ${q.max_concurrency} in flight`;

/** How a refusal names whose quota it is: the app's, or the API key's. */
const ownerText = (subject: string): string => {
  const key = keyOfQuotaSubject(subject);
  return key === undefined ? `app '${subject}'` : `API key '${key}'`;
};

/**
 * Every app's quota in one admitting process (a frontend or a dispatcher): admission per query, the
 * demand report, and the shares rebalanced from every process's reports (the rule in the header).
 */
export class QuotaAdmission {
  private readonly gates = new Map<string, AppGate>();
  /** Other processes: their role, their last report's demand per app (and key), and when it was heard (this process's clock). */
  private readonly peers = new Map<string, { role: QuotaRole; heardAtMs: number; apps: Readonly<Record<string, number>> }>();
  /** When each app's last change was applied (set or removed), so that an older snapshot does not undo it. */
  private readonly changedAtMs = new Map<string, number>();
  /** This process's demand per app over its last report period, queries/s. */
  private demand: Record<string, number> = {};
  private periodStartMs: number;

  constructor(
    readonly process: string,
    readonly role: QuotaRole,
    nowMs: number,
    readonly options: QuotaOptions = QUOTA_DEFAULTS,
  ) {
    this.periodStartMs = nowMs;
  }

  /** An app's quota; undefined when it has none. */
  quotaOf(app: string): AppQuota | undefined {
    return this.gates.get(app)?.quota;
  }

  /** An app's quota is set (a quota) or removed (undefined), as a change event says. */
  setQuota(app: string, quota: AppQuota | undefined, nowMs: number): void {
    this.changedAtMs.set(app, nowMs);
    this.apply(app, quota, nowMs);
  }

  /**
   * Every quota, from a snapshot read at `readAtMs` (Redis, at start and now and then against lost
   * events): apps not in it lose their quota. An app changed by an event at or after `readAtMs` keeps
   * what the event said.
   */
  replaceQuotas(quotas: ReadonlyMap<string, AppQuota>, readAtMs: number, nowMs: number): void {
    const newer = (app: string): boolean => (this.changedAtMs.get(app) ?? -Infinity) >= readAtMs;
    for (const app of [...this.gates.keys()]) if (!quotas.has(app) && !newer(app)) this.apply(app, undefined, nowMs);
    for (const [app, quota] of quotas) if (!newer(app)) this.apply(app, quota, nowMs);
  }

  private apply(app: string, quota: AppQuota | undefined, nowMs: number): void {
    const gate = this.gates.get(app);
    if (quota === undefined) {
      // Tickets held keep their gate: their releases change nothing any more.
      this.gates.delete(app);
      return;
    }
    const share = this.shareOf(app, quota);
    if (gate) {
      gate.quota = quota;
      gate.setShare(share, nowMs);
    } else this.gates.set(app, new AppGate(quota, share, nowMs));
  }

  /**
   * This process's share of an app's (or a key's) quota, from its demand and the live peers' last
   * reports; a key's among the frontends only (dispatchers never admit by key).
   */
  private shareOf(app: string, quota: AppQuota): QuotaShare {
    const frontendsOnly = keyOfQuotaSubject(app) !== undefined;
    const demands: ProcessDemand[] = [{ process: this.process, demandQps: this.demand[app] ?? 0 }];
    for (const [process, peer] of this.peers) if (!frontendsOnly || peer.role === "frontend") demands.push({ process, demandQps: peer.apps[app] ?? 0 });
    return shareQuota(quota, demands).get(this.process) as QuotaShare;
  }

  /** What this process enforces of an app's quota now (undefined: no quota). */
  shareNow(app: string, nowMs: number): (QuotaShare & { tokens: number; inFlight: number }) | undefined {
    const gate = this.gates.get(app);
    if (!gate) return undefined;
    return { ...this.shareOf(app, gate.quota), tokens: gate.bucket.available(nowMs), inFlight: gate.inFlight };
  }

  /**
   * Admits a query of `app` or refuses it: a concurrency slot, then a token. An admitted query's ticket
   * must be released once it is answered, failed or timed out.
   */
  admit(app: string, nowMs: number): Admission {
    return this.admitQuery(app, undefined, nowMs);
  }

  /**
   * Admits a query of `app` sent with the API key `keyId` (undefined: none, or access control off):
   * its key's quota first, then its app's (each: a concurrency slot, then a token), or refuses it at the
   * first that is over. Nothing is taken until every quota admits it; the ticket holds a slot in each
   * and must be released once the query is answered, failed or timed out. A key or app without a quota
   * is not checked.
   */
  admitQuery(app: string, keyId: string | undefined, nowMs: number): Admission {
    const subjects = keyId === undefined ? [app] : [keyQuotaSubject(keyId), app];
    const gates: AppGate[] = [];
    for (const subject of subjects) {
      const gate = this.gates.get(subject);
      if (!gate) continue;
      gate.offered++;
      const q = gate.quota;
      const who = ownerText(subject);
      const key = keyOfQuotaSubject(subject);
      if (gate.inFlight >= gate.maxConcurrency) {
        return this.refuse(app, key, "max_concurrency", 1, q, `${who} has ${q.max_concurrency} queries in flight, its quota's max_concurrency (quota: ${quotaText(q)}): try again when one is answered`);
      }
      const waitMs = gate.bucket.waitMs(nowMs);
      if (waitMs > 0) {
        // A share of 0 until the next rebalance: a period, rounded up to a second like any other wait.
        const retryAfterS = Math.max(1, Math.ceil((Number.isFinite(waitMs) ? waitMs : this.options.reportEveryMs) / 1000));
        return this.refuse(app, key, "rate_qps", retryAfterS, q, `${who} is over its quota's rate_qps of ${q.rate_qps} queries/s (quota: ${quotaText(q)}): retry after ${retryAfterS} s`);
      }
      gates.push(gate);
    }
    if (gates.length === 0) return ADMITTED_FREELY;
    for (const gate of gates) {
      gate.bucket.tryTake(nowMs);
      gate.inFlight++;
    }
    return { admitted: true, ticket: new Ticket(gates) };
  }

  private refuse(app: string, key: string | undefined, limit: QuotaRefusal["limit"], retryAfterS: number, q: AppQuota, message: string): Admission {
    const error = new ServeError(ErrorCode.quotaExceeded, message, { ...(key !== undefined ? { key } : {}), app, limit, retry_after_s: retryAfterS, rate_qps: q.rate_qps, burst: q.burst, max_concurrency: q.max_concurrency });
    return { admitted: false, refusal: { app, ...(key !== undefined ? { key } : {}), limit, retryAfterS, error } };
  }

  /** Another process's report (this process's own, echoed by the bus, is ignored): the shares are rebalanced with it. */
  observe(report: QuotaDemandReport, nowMs: number): void {
    if (report.process === this.process) return;
    if (report.leaving) this.peers.delete(report.process);
    else this.peers.set(report.process, { role: report.role, heardAtMs: nowMs, apps: report.apps });
    this.rebalance(nowMs);
  }

  private rebalance(nowMs: number): void {
    for (const [app, gate] of this.gates) gate.setShare(this.shareOf(app, gate.quota), nowMs);
  }

  /** The processes this one shares quotas with now (itself included). */
  processes(): number {
    return this.peers.size + 1;
  }

  /**
   * Every `reportEveryMs`: this process's demand over the period just ended (the report to publish),
   * then every share rebalanced from it and the live peers' reports; peers gone silent are forgotten.
   */
  report(nowMs: number, leaving = false): QuotaDemandReport {
    const seconds = Math.max(nowMs - this.periodStartMs, 1) / 1000;
    this.periodStartMs = nowMs;
    const demand: Record<string, number> = {};
    for (const [app, gate] of this.gates) {
      if (gate.offered > 0) demand[app] = gate.offered / seconds;
      gate.offered = 0;
    }
    this.demand = demand;
    for (const [process, peer] of this.peers) if (nowMs - peer.heardAtMs > this.options.peerTimeoutMs) this.peers.delete(process);
    this.rebalance(nowMs);
    return { process: this.process, role: this.role, at_ms: nowMs, every_ms: this.options.reportEveryMs, apps: demand, ...(leaving ? { leaving } : {}) };
  }
}
