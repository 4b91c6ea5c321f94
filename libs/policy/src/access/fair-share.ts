import { ErrorCode, ServeError } from "@sloserve/contracts";

/**
 * Weighted fair admission between apps on a congested worker pool (issue 30; docs/ARCHITECTURE.md
 * "The query path"): an app within its fair share keeps its latency while another app floods the same
 * workers, and the flood's excess is refused at once (`fair_share_exceeded`, HTTP 429 with
 * `Retry-After`, gRPC RESOURCE_EXHAUSTED) instead of taking the workers' time from every other app.
 *
 * **Work, not queries.** Each query is charged its cost, the worker time one query of its variant
 * takes (the dispatcher reads it from the workers' reports: busy time over queries served); a pool's
 * capacity is the worker time it has a second (its workers' threads) × `targetUtilisation` (1: all
 * of it, so that the load admitted under contention still crosses the INFaaS scale-up threshold of
 * 80% and the forecasts of admitted load still ask for more workers: a flood is held to what the pool
 * serves now, and the pool still grows). A pool is the workers of one hardware kind.
 *
 * **The rule**, per pool, on a sliding window of `windowMs` (1 s, in `bucketMs` slices):
 *
 * - every app's demand is the work offered to it per second over the window (admitted or refused);
 * - with fewer than two apps offering work, or when the demands add up to no more than the capacity,
 *   every query is admitted (nothing changes without contention);
 * - otherwise each app's share is its weighted max-min fair share of the capacity (water-filling,
 *   {@link weightedFairShares}): an app asking less than its weighted part gets what it asks, the rest
 *   is split by weight among the others. A query is admitted while its app's admitted work over the
 *   window, this query included, stays within its share × the window (+ one query's cost), and
 *   refused otherwise, with the time until a window slice frees room.
 *
 * **Weights**: an app's quota rate (`rate_qps`); apps without a quota weigh as much as the heaviest
 * quota among the apps present (1 when none has one), so having no quota never means less than having one.
 *
 * Pure: time comes in as `nowMs`; costs, capacity and weights as arguments. Caveats: each dispatcher
 * judges the queries it sees against the whole pool's capacity (with several dispatchers sharing the
 * queries, a flood is cut later); the pool is the hardware kind, not the workers a variant runs on.
 */

export const FAIR_SHARE_DEFAULTS = {
  /** The window demand and admitted work are measured over, ms. */
  windowMs: 1_000,
  /** Its slices, ms. */
  bucketMs: 100,
  /** The share of the pool's worker time handed out under contention. */
  targetUtilisation: 1,
};
export type FairShareOptions = typeof FAIR_SHARE_DEFAULTS;

/** An app's demand and weight, for {@link weightedFairShares}. */
export interface AppDemand {
  app: string;
  /** Work offered per second (or any unit of the capacity). */
  demand: number;
  /** > 0. */
  weight: number;
}

/**
 * Weighted max-min fair shares of `capacity` (water-filling): apps are satisfied in order of demand
 * per weight; an app whose demand fits its weighted part of what is left gets it, the others share the
 * rest by weight. The shares add up to min(capacity, Σ demand).
 */
export function weightedFairShares(capacity: number, apps: readonly AppDemand[]): Map<string, number> {
  const shares = new Map<string, number>();
  const order = [...apps].sort((a, b) => a.demand / a.weight - b.demand / b.weight || (a.app < b.app ? -1 : a.app > b.app ? 1 : 0));
  let left = Math.max(0, capacity);
  let weightLeft = order.reduce((s, a) => s + a.weight, 0);
  for (const a of order) {
    const part = weightLeft > 0 ? (left * a.weight) / weightLeft : 0;
    const give = Math.min(Math.max(0, a.demand), part);
    shares.set(a.app, give);
    left -= give;
    weightLeft -= a.weight;
  }
  return shares;
}

/** One app's offered and admitted work per window slice. */
class AppWindow {
  readonly offered: number[];
  readonly admitted: number[];
  constructor(slices: number) {
    this.offered = new Array<number>(slices).fill(0);
    this.admitted = new Array<number>(slices).fill(0);
  }
  sum(what: number[]): number {
    let s = 0;
    for (const x of what) s += x;
    return s;
  }
  empty(): boolean {
    return this.sum(this.offered) === 0;
  }
}

/** One pool's apps and the slice the window ends at. */
class Pool {
  readonly apps = new Map<string, AppWindow>();
  slice = -1;
}

/** A query to admit: its app, the app's weight input, its cost and its pool's capacity. */
export interface FairShareQuery {
  pool: string;
  app: string;
  /** The app's quota rate (its weight); undefined: no quota. */
  quotaQps: number | undefined;
  /** Worker time one query takes, seconds (≥ 0; 0 when unknown: the query counts nothing). */
  costS: number;
  /** The pool's worker time per second (its workers' threads). */
  capacity: number;
}

export type FairShareDecision =
  | { admitted: true; contended: boolean }
  | { admitted: false; retryAfterS: number; shareS: number; demandS: number; error: ServeError };

/**
 * Weighted fair admission in one dispatcher (the rule in the header): {@link admit} per query. The
 * quota rates of the apps seen are remembered for the weights of the others.
 */
export class FairShareAdmission {
  private readonly pools = new Map<string, Pool>();
  private readonly slices: number;
  private readonly quotaOf = new Map<string, number | undefined>();

  constructor(readonly options: FairShareOptions = FAIR_SHARE_DEFAULTS) {
    this.slices = Math.max(1, Math.round(options.windowMs / options.bucketMs));
  }

  /** Moves a pool's window to `nowMs`: slices that fell out are emptied, apps with nothing left forgotten. */
  private roll(pool: Pool, nowMs: number): void {
    const slice = Math.floor(nowMs / this.options.bucketMs);
    if (slice <= pool.slice) return;
    const steps = pool.slice < 0 ? this.slices : Math.min(this.slices, slice - pool.slice);
    for (const [app, w] of pool.apps) {
      for (let k = 1; k <= steps; k++) {
        const i = (((pool.slice + k) % this.slices) + this.slices) % this.slices;
        w.offered[i] = 0;
        w.admitted[i] = 0;
      }
      if (w.empty()) pool.apps.delete(app);
    }
    pool.slice = slice;
  }

  private weightOf(app: string, apps: Iterable<string>): number {
    const own = this.quotaOf.get(app);
    if (own !== undefined && own > 0) return own;
    let heaviest = 0;
    for (const a of apps) heaviest = Math.max(heaviest, this.quotaOf.get(a) ?? 0);
    return heaviest > 0 ? heaviest : 1;
  }

  /** Admits a query or refuses it `fair_share_exceeded`; an admitted query's work counts against its app's share. */
  admit(q: FairShareQuery, nowMs: number): FairShareDecision {
    let pool = this.pools.get(q.pool);
    if (!pool) this.pools.set(q.pool, (pool = new Pool()));
    this.roll(pool, nowMs);
    this.quotaOf.set(q.app, q.quotaQps);
    const cost = Number.isFinite(q.costS) && q.costS > 0 ? q.costS : 0;
    let mine = pool.apps.get(q.app);
    if (!mine) pool.apps.set(q.app, (mine = new AppWindow(this.slices)));
    const i = ((pool.slice % this.slices) + this.slices) % this.slices;
    mine.offered[i] = (mine.offered[i] ?? 0) + cost;
    const admit = (contended: boolean): FairShareDecision => {
      mine.admitted[i] = (mine.admitted[i] ?? 0) + cost;
      return { admitted: true, contended };
    };
    if (cost === 0 || pool.apps.size < 2) return admit(false);
    const windowS = this.options.windowMs / 1000;
    const capacity = Math.max(0, q.capacity) * this.options.targetUtilisation;
    const names = [...pool.apps.keys()];
    const demands = names.map((app) => ({ app, demand: (pool.apps.get(app) as AppWindow).sum((pool.apps.get(app) as AppWindow).offered) / windowS, weight: this.weightOf(app, names) }));
    if (demands.reduce((s, d) => s + d.demand, 0) <= capacity) return admit(false);
    const share = weightedFairShares(capacity, demands).get(q.app) ?? 0;
    const used = mine.sum(mine.admitted);
    if (used <= share * windowS) return admit(true);
    // Room comes back as the oldest slices leave the window: the first slice whose leaving makes room.
    let freed = 0;
    let waitSlices = this.slices;
    for (let k = 1; k <= this.slices; k++) {
      freed += mine.admitted[(i + k) % this.slices] ?? 0;
      if (used - freed <= share * windowS) {
        waitSlices = k;
        break;
      }
    }
    const retryAfterS = Math.max(1, Math.ceil((waitSlices * this.options.bucketMs) / 1000));
    const demandS = mine.sum(mine.offered) / windowS;
    const pct = (x: number): string => `${Math.round((x / Math.max(q.capacity, 1e-12)) * 100)}%`;
    const error = new ServeError(
      ErrorCode.fairShareExceeded,
      `app '${q.app}' is over its fair share of the congested ${q.pool} workers: it asks for ${pct(demandS)} of their time, its share is ${pct(share)} while ${demands.length - 1} other app(s) use them: retry after ${retryAfterS} s`,
      { app: q.app, pool: q.pool, retry_after_s: retryAfterS, demand_s: demandS, share_s: share, capacity_s: capacity, apps: demands.length },
    );
    return { admitted: false, retryAfterS, shareS: share, demandS, error };
  }
}
