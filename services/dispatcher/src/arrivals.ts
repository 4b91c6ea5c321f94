import type { ArrivalsReport } from "@sloserve/contracts";

/**
 * Per-second arrival counts by app and model, with the tightest latency SLO seen: what the
 * dispatcher publishes on `metrics.arrivals.<app>` for the model autoscaler and the forecaster.
 */
export class ArrivalCounter {
  private apps = new Map<string, { arrivals: number; infeasible: number; models: Map<string, { queries: number; minSloMs: number | null }> }>();
  private since: number;

  constructor(nowMs: number, private readonly dispatcher: string) {
    this.since = nowMs;
  }

  private app(app: string) {
    let a = this.apps.get(app);
    if (!a) this.apps.set(app, (a = { arrivals: 0, infeasible: 0, models: new Map() }));
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

  /** The window's reports (one per app seen), and a new window. */
  take(nowMs: number): ArrivalsReport[] {
    const out: ArrivalsReport[] = [];
    for (const [app, a] of this.apps) {
      out.push({ app, dispatcher: this.dispatcher, atMs: nowMs, windowMs: nowMs - this.since, arrivals: a.arrivals, infeasible: a.infeasible, models: Object.fromEntries(a.models) });
    }
    this.apps = new Map();
    this.since = nowMs;
    return out;
  }
}
