/**
 * Backtest of a predictor (DESIGN §3 "Predictive provisioning": report backtest error on the traces).
 *
 * Rolling origin: at each origin t (t units of history observed: units 0 … t − 1), the predictor
 * forecasts `horizon` units from the history before t, carrying its state from origin to origin as the
 * forecaster service does; step h of that forecast is its value for unit t + h − 1. With `lead` L,
 * only step L is scored: the forecast made L units before the unit it is for — MArk provisions for
 * t0 + τ with τ = 5 min, the machines' start time, so what matters is the forecast made 5 minutes
 * earlier. Without `lead`, every step of the horizon is scored.
 *
 * Scored units are those whose actual is observed (not NaN) and positive; for them:
 * - MAPE = mean |F − A| / A (a fraction, not percent);
 * - RMSE = √(mean (F − A)²), in the series' unit (queries/s);
 * - under-provision rate = the share of scored units with F < A (capacity planned on F would have been
 *   short, before the reactive monitor and overflow), and the mean shortfall (A − F) / A over them.
 *
 * Pure: the series comes in (per-unit maximum rates, gaps as NaN).
 */
import type { Predictor } from "./predictors.js";
import type { ForecastPlanState } from "./forecast-plan.js";

export interface BacktestOptions {
  /** The first origin: units of history before the first forecast. */
  start: number;
  /** Units per season, passed to the predictor. */
  season: number;
  /** Units each forecast covers. @default 60 */
  horizon?: number;
  /** Score only step `lead` (1 … horizon) of each forecast; without it, every step. */
  lead?: number;
  /** Units between origins. @default 1 */
  every?: number;
}

export interface BacktestResult {
  predictor: string;
  /** Methods the predictor reported, in order of first use (auto moves from last-value to Holt-Winters). */
  methods: string[];
  mape: number;
  rmse: number;
  underProvisionRate: number;
  /** Mean of (A − F) / A over the under-forecast units (how short, when short); 0 when never short. */
  meanShortfall: number;
  /** Scored (origin, step) pairs. */
  scored: number;
  origins: number;
}

export function backtestPredictor(series: readonly number[], predictor: Predictor, options: BacktestOptions): BacktestResult {
  const horizon = options.horizon ?? 60;
  const every = options.every ?? 1;
  if (options.lead !== undefined && (!Number.isInteger(options.lead) || options.lead < 1 || options.lead > horizon)) {
    throw new Error(`lead ${options.lead} must be a whole number of units from 1 to the horizon ${horizon}`);
  }
  if (!Number.isInteger(every) || every < 1) throw new Error(`every ${every} must be a whole number of units ≥ 1`);
  const steps = options.lead !== undefined ? [options.lead] : Array.from({ length: horizon }, (_, i) => i + 1);
  const last = steps[steps.length - 1] as number;
  let ape = 0;
  let se = 0;
  let under = 0;
  let shortfall = 0;
  let scored = 0;
  let origins = 0;
  const methods: string[] = [];
  let state: ForecastPlanState = {};
  for (let origin = Math.max(0, options.start); origin + last - 1 < series.length; origin += every) {
    origins++;
    const plan = predictor.predict(series.slice(0, origin), { season: options.season, horizon }, state);
    state = plan.state;
    if (!methods.includes(plan.method)) methods.push(plan.method);
    for (const h of steps) {
      const a = series[origin + h - 1] as number;
      if (Number.isNaN(a) || a <= 0) continue;
      const f = plan.values[h - 1] as number;
      scored++;
      ape += Math.abs(f - a) / a;
      se += (f - a) * (f - a);
      if (f < a) {
        under++;
        shortfall += (a - f) / a;
      }
    }
  }
  return {
    predictor: predictor.name,
    methods,
    mape: scored > 0 ? ape / scored : NaN,
    rmse: scored > 0 ? Math.sqrt(se / scored) : NaN,
    underProvisionRate: scored > 0 ? under / scored : NaN,
    meanShortfall: under > 0 ? shortfall / under : 0,
    scored,
    origins,
  };
}
