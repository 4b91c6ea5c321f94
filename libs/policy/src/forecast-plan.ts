import { fitHoltWinters, holtWinters, lastValueForecaster, seasonalNaive, type HoltWintersParams } from "./forecast.js";

/**
 * The live forecaster's choice of model (MArk §4.2, DESIGN §3 "Predictive provisioning"): with less
 * than one season of history, the last value; with one season, seasonal-naive; with two seasons and a
 * horizon, Holt-Winters with α/β/γ fitted by grid search, refitted every `refitEvery` units. Pure:
 * the fitted parameters travel in the state.
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
  return fittedHoltWinters(history, options, state);
}

/**
 * Holt-Winters with α/β/γ fitted by grid search on the history (`fitHoltWinters`), refitted every
 * `refitEvery` units: planForecast's model once there are two seasons and a horizon, and the
 * "holt-winters" predictor (predictors.ts) at any length.
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
