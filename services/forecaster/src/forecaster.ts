import { subjects, type ArrivalsReport } from "@sloserve/contracts";
import type { Bus, Logger } from "@sloserve/bus";
import type { MetadataStore } from "@sloserve/store";
import { maxRatePerUnit, spreadOverSeconds, type ForecastPlanState, type Predictor } from "@sloserve/policy";

/**
 * The forecaster (MArk §4.2): sums the dispatchers' per-second arrival reports per app, keeps each
 * unit's (1 min) maximum rate over sample windows (5 s), and after every unit publishes the next
 * `horizon` (60) units' forecast on `forecast.<app>`, made by the app's predictor (libs/policy
 * predictors.ts: `auto` unless configured otherwise, or a user's module). The unit history lives in
 * Redis (MetadataStore's forecast history), so a restart keeps what it learnt; a predictor's own state
 * (Holt-Winters' fitted parameters) is relearnt.
 */

export interface ForecasterOptions {
  unitS: number;
  sampleS: number;
  horizon: number;
  /** Units per season for seasonal models. */
  season: number;
  /** Units of history kept. */
  keep: number;
}

/** Which predictor forecasts each app: `byApp[app]`, else `fallback`. */
export interface PredictorChoice {
  fallback: Predictor;
  byApp?: Readonly<Record<string, Predictor>>;
}

export interface ForecastMessage {
  app: string;
  atMs: number;
  unitS: number;
  sampleS: number;
  method: string;
  /** The last observed unit's max rate, queries/s. */
  observed: number;
  /** Max rate per unit for the next `values.length` units, queries/s. */
  values: number[];
  historyUnits: number;
}

export class Forecaster {
  /** app → epoch second → arrivals */
  private readonly seconds = new Map<string, Map<number, number>>();
  private readonly states = new Map<string, ForecastPlanState>();

  constructor(
    private readonly bus: Bus,
    private readonly store: MetadataStore,
    private readonly options: ForecasterOptions,
    private readonly log: Logger,
    private readonly predictors: PredictorChoice,
  ) {}

  /** The predictor that forecasts `app`. */
  predictorOf(app: string): Predictor {
    return this.predictors.byApp?.[app] ?? this.predictors.fallback;
  }

  applyArrivals(report: ArrivalsReport): void {
    let perApp = this.seconds.get(report.app);
    if (!perApp) this.seconds.set(report.app, (perApp = new Map()));
    // A report covers the time since the dispatcher's previous one: its arrivals go to the seconds of that window.
    for (const [second, count] of spreadOverSeconds(report.atMs, report.windowMs, report.arrivals)) perApp.set(second, (perApp.get(second) ?? 0) + count);
  }

  /**
   * Closes the unit ending at `endMs` for every app seen, and publishes each app's forecast. An app
   * whose predictor fails gets no forecast this unit (logged; its history is kept, and consumers ignore
   * forecasts that grow old); the other apps are not held up.
   */
  async closeUnit(endMs: number): Promise<ForecastMessage[]> {
    const { unitS, sampleS } = this.options;
    const lastSecond = Math.floor(endMs / 1000) - 1;
    const firstSecond = lastSecond - unitS + 1;
    const out: ForecastMessage[] = [];
    for (const [app, perApp] of this.seconds) {
      const counts: number[] = [];
      for (let s = firstSecond; s <= lastSecond; s++) counts.push(perApp.get(s) ?? 0);
      for (const s of perApp.keys()) if (s <= lastSecond) perApp.delete(s);
      const observed = maxRatePerUnit(counts, sampleS, unitS)[0] ?? 0;
      const history = await this.store.appendForecastHistory(app, observed, this.options.keep);
      const predictor = this.predictorOf(app);
      let plan;
      try {
        plan = predictor.predict(history, { season: this.options.season, horizon: this.options.horizon }, this.states.get(app));
      } catch (err) {
        this.log.error({ err, app, predictor: predictor.name, historyUnits: history.length }, "predictor failed: no forecast for this unit");
        continue;
      }
      this.states.set(app, plan.state);
      const message: ForecastMessage = { app, atMs: endMs, unitS, sampleS, method: plan.method, observed, values: plan.values.map((v) => Math.round(v * 1000) / 1000), historyUnits: history.length };
      await this.bus.js.publish(subjects.forecast(app), JSON.stringify(message));
      this.log.debug({ app, observed, method: plan.method, next: message.values[0] }, "forecast");
      out.push(message);
    }
    return out;
  }
}
