import type { ArrivalsReport } from "@sloserve/contracts";

interface AppWindow {
  arrivals: number;
  infeasible: number;
  overflowed: number;
  overflowFailed: number;
  overflowCostDollars: number;
  models: Map<string, { queries: number; minSloMs: number | null }>;
}

/**
 * Per-second arrival counts by app and model, with the tightest latency SLO seen, and the queries
 * sent to the function provider (serverless overflow) with their cost: what the dispatcher publishes
 * on `metrics.arrivals.<app>` for the model autoscaler and the forecaster. Overflowed queries are
 * arrivals too (counted by `count`); the overflow fields appear only in windows that had some.
 */
export class ArrivalCounter {
  private apps = new Map<string, AppWindow>();
  private since: number;

  constructor(nowMs: number, private readonly dispatcher: string) {
    this.since = nowMs;
  }

  private app(app: string): AppWindow {
    let a = this.apps.get(app);
    if (!a) this.apps.set(app, (a = { arrivals: 0, infeasible: 0, overflowed: 0, overflowFailed: 0, overflowCostDollars: 0, models: new Map() }));
    return a;
  }

  count(app: string, model: string, sloMs: number | undefined): void {
    const a = this.app(app);
    a.arrivals++;
    const m = a.models.get(model) ?? { queries: 0, minSloMs: null };
    m.queries++;
    if (sloMs !== undefined) m.minSloMs = m.minSloMs === null ? sloMs : Math.min(m.minSloMs, sloMs);
    a.models.set(model, m);
  }

  countInfeasible(app: string): void {
    const a = this.app(app);
    a.arrivals++;
    a.infeasible++;
  }

  /** A query the function provider served (`costDollars` billed) or failed. */
  countOverflow(app: string, outcome: { ok: boolean; costDollars: number }): void {
    const a = this.app(app);
    a.overflowed++;
    if (!outcome.ok) a.overflowFailed++;
    a.overflowCostDollars += outcome.costDollars;
  }

  /** The window's reports (one per app seen), and a new window. */
  take(nowMs: number): ArrivalsReport[] {
    const out: ArrivalsReport[] = [];
    for (const [app, a] of this.apps) {
      const report: ArrivalsReport = { app, dispatcher: this.dispatcher, atMs: nowMs, windowMs: nowMs - this.since, arrivals: a.arrivals, infeasible: a.infeasible, models: Object.fromEntries(a.models) };
      if (a.overflowed > 0) Object.assign(report, { overflowed: a.overflowed, overflowFailed: a.overflowFailed, overflowCostDollars: a.overflowCostDollars });
      out.push(report);
    }
    this.apps = new Map();
    this.since = nowMs;
    return out;
  }
}
