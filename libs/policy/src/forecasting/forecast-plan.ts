import { fitHoltWinters, holtWinters, lastValueForecaster, scoreHoltWinters, seasonalNaive, type HoltWintersParams } from "./forecast.js";

/**
 * The live forecaster's choice of model (MArk §4.2, DESIGN §3 "Predictive provisioning"): with less
 * than one season of history, the last value; with one season, seasonal-naive; with two seasons and a
 * horizon, the model chosen by validation on the history ({@link validatedForecast}): Holt-Winters with
 * the configured season (a day), an hour, or none, or the last value, whichever forecast the held-back
 * end of the history best; chosen and refitted every `refitEvery` units. Pure: the fitted parameters travel in the state.
 *
 * Why: a trace without a daily cycle (Twitter's 1% sample stream) fitted with a daily season replays
 * yesterday's spikes as today's forecast (forecasts of 122 and 142 qps where the load was ~63, and
 * 4.9% of queries overflowed to Lambda in mark-twitter); validation sees that a daily season does not
 * forecast the recent past and drops it, while a trace with a real daily cycle keeps it.
 */

export interface ForecastPlanOptions {
  /** Units per season (1440 one-minute units = one day). */
  season: number;
  /** Units forecast. @default 60 */
  horizon?: number;
  /** Units between refits of Holt-Winters. @default 60 */
  refitEvery?: number;
}

export interface ForecastPlanState {
  params?: HoltWintersParams;
  fittedAtLength?: number;
  /** Validation MAE of each model tried at the last refit (Holt-Winters by season: "1440", "60", "none"; and "last-value"). */
  validation?: Record<string, number>;
}

export interface ForecastPlan {
  values: number[];
  method: string;
  state: ForecastPlanState;
}

export function planForecast(history: readonly number[], options: ForecastPlanOptions, state: ForecastPlanState = {}): ForecastPlan {
  const horizon = options.horizon ?? 60;
  const observed = history.filter((v) => !Number.isNaN(v)).length;
  if (observed === 0) return { values: new Array<number>(horizon).fill(0), method: "none (no history yet)", state };
  if (history.length < options.season) return { values: lastValueForecaster.forecast(history, horizon), method: lastValueForecaster.name, state };
  if (history.length < 2 * options.season + horizon) {
    const f = seasonalNaive(options.season);
    return { values: f.forecast(history, horizon), method: f.name, state };
  }
  return validatedForecast(history, options, state);
}

/** Holt-Winters is fitted on at most this many recent units (a week of minutes; more when two seasons and a horizon need it): it bounds the work on long traces. */
export const FIT_HISTORY_UNITS = 7 * 1440;

/** Seasons planForecast tries: the configured one, an hour (when shorter), and none (Holt's linear trend). */
export const HOURLY_SEASON = 60;

function seasonLabel(m: number): string {
  return m === 1 ? "none" : String(m);
}

/** Mean absolute error of the last value carried `horizon` units ahead, from origins every 30 units from `from` on. */
function scoreLastValue(history: readonly number[], from: number, horizon: number): number {
  let err = 0;
  let n = 0;
  let last = NaN;
  for (let i = 0; i < from && i < history.length; i++) if (!Number.isNaN(history[i]!)) last = history[i]!;
  for (let origin = from; origin + horizon <= history.length; origin++) {
    if ((origin - from) % 30 === 0 && !Number.isNaN(last)) {
      for (let h = 0; h < horizon; h++) {
        const a = history[origin + h]!;
        if (!Number.isNaN(a)) {
          err += Math.abs(last - a);
          n++;
        }
      }
    }
    if (!Number.isNaN(history[origin]!)) last = history[origin]!;
  }
  return n > 0 ? err / n : Infinity;
}

/**
 * The model chosen by validation on the history: the last quarter of it (at most one configured season,
 * at least four horizons) is held back; the candidates are Holt-Winters with the configured season (a
 * day), with {@link HOURLY_SEASON} when shorter, and with none (season 1, γ = 0: level and trend only),
 * each with α/β/γ grid-fitted on the rest (at most its last {@link FIT_HISTORY_UNITS} units, or 2 seasons
 * + a horizon if more), and the last value; each is scored by the MAE of the `horizon`-step forecasts made
 * every 30 units over the held-back part, and the lowest wins. A Holt-Winters winner is refitted on the
 * recent history including the held-back part. The choice stands until the next refit (every
 * `refitEvery` units). A season without two seasons and a horizon before the held-back part is not tried.
 */
export function validatedForecast(history: readonly number[], options: ForecastPlanOptions, state: ForecastPlanState = {}): ForecastPlan {
  const horizon = options.horizon ?? 60;
  let next = state;
  if (state.fittedAtLength === undefined || history.length - state.fittedAtLength >= (options.refitEvery ?? 60)) {
    const n = history.length;
    // At least four horizons held back (seven forecasts scored), so that one burst does not decide.
    const held = Math.max(4 * horizon, Math.min(options.season, Math.floor(n / 4)));
    const seasons = [...new Set([options.season, ...(HOURLY_SEASON < options.season ? [HOURLY_SEASON] : []), 1])];
    const validation: Record<string, number> = { "last-value": scoreLastValue(history, n - held, horizon) };
    let best: { season: number | undefined; mae: number } = { season: undefined, mae: validation["last-value"]! };
    for (const m of seasons) {
      const need = 2 * m + horizon;
      if (n - held < need) continue;
      const window = history.slice(Math.max(0, n - held - Math.max(need, FIT_HISTORY_UNITS) - held));
      const train = window.slice(0, window.length - held);
      const grid = m === 1 ? { gammas: [0] } : {};
      const fit = fitHoltWinters(train, { season: m, horizon, ...grid });
      const mae = scoreHoltWinters(window, fit.params, { from: train.length, horizon });
      validation[seasonLabel(m)] = mae;
      if (mae < best.mae) best = { season: m, mae };
    }
    const m = best.season;
    if (m === undefined) {
      next = { fittedAtLength: n, validation };
    } else {
      const recent = history.slice(Math.max(0, n - held - Math.max(2 * m + horizon, FIT_HISTORY_UNITS)));
      const fit = fitHoltWinters(recent, { season: m, horizon, ...(m === 1 ? { gammas: [0] } : {}) });
      next = { params: fit.params, fittedAtLength: n, validation };
    }
  }
  const f = next.params ? holtWinters(next.params) : lastValueForecaster;
  return { values: f.forecast(history, horizon), method: f.name, state: next };
}

/**
 * Holt-Winters with the configured season and α/β/γ fitted by grid search on the history
 * (`fitHoltWinters`), refitted every `refitEvery` units: the "holt-winters" predictor (predictors.ts)
 * at any length.
 */
export function fittedHoltWinters(history: readonly number[], options: ForecastPlanOptions, state: ForecastPlanState = {}): ForecastPlan {
  const horizon = options.horizon ?? 60;
  let next = state;
  if (!state.params || state.fittedAtLength === undefined || history.length - state.fittedAtLength >= (options.refitEvery ?? 60)) {
    const fit = fitHoltWinters(history, { season: options.season, horizon });
    next = { params: fit.params, fittedAtLength: history.length };
  }
  const f = holtWinters(next.params as HoltWintersParams);
  return { values: f.forecast(history, horizon), method: f.name, state: next };
}
