/**
 * Workload forecasting for predictive provisioning: MArk §4.2.
 *
 * MArk samples the arrival rate in windows of Ps = 5 s, keeps the maximum rate of each prediction unit
 * Pu = 1 min, and every minute forecasts the next Pw = 60 per-minute maxima. MArk uses an LSTM and
 * exposes the predictor as a plug-in; here two classical forecasters stand in (DESIGN §3):
 *
 * - seasonal-naive: the value one season (default one day) earlier at the same phase;
 * - Holt-Winters, additive (level + trend + seasonal), with α/β/γ chosen by a small grid search that
 *   minimises the mean absolute error of the 60-step forecasts the model would have made over its
 *   history (see fitHoltWinters).
 *
 * Series may hold gaps as NaN (the Twitter trace's `missing=1` minutes): forecasters skip them when
 * they learn, and backtests do not score them.
 *
 * Caveats: both forecasters are point forecasts of the mean path; roughly half the minutes come out
 * under the actual (the backtest's under-provision rate measures it: forecast-backtest.ts,
 * `npm run forecast:backtest`). MArk absorbs the shortfall with Lambda overflow and the reactive SLO
 * monitor rather than with a forecast margin.
 */

/**
 * A forecaster: from a history (NaN = gap) to `horizon` forecasts of the steps after it. The interface a
 * user's predictor module implements (predictors.ts `module:<path>`; examples/predictor-recent-peak.js).
 */
export interface Forecaster {
  name: string;
  forecast(history: readonly number[], horizon: number): number[];
}

/**
 * MArk's measurement: per unit (default 60 s), the maximum over its sample windows (default 5 s) of
 * (queries in the window / window width). Input: arrivals per second. Only whole units are returned.
 */
export function maxRatePerUnit(perSecondCounts: readonly number[], sampleS = 5, unitS = 60): number[] {
  if (unitS % sampleS !== 0) throw new Error(`unit ${unitS} s is not a multiple of the sample window ${sampleS} s`);
  const units = Math.floor(perSecondCounts.length / unitS);
  const out: number[] = [];
  for (let u = 0; u < units; u++) {
    let max = 0;
    for (let w = u * unitS; w < (u + 1) * unitS; w += sampleS) {
      let n = 0;
      for (let s = w; s < w + sampleS; s++) n += perSecondCounts[s] ?? 0;
      max = Math.max(max, n / sampleS);
    }
    out.push(max);
  }
  return out;
}

/**
 * Spreads a report's count over the epoch seconds its window [atMs − windowMs, atMs) covers, in
 * proportion to the overlap: `[second, count share]` pairs. A report covers the time since the
 * sender's previous one, which its timer stretches under load (a one-second timer fires late when the
 * machine is busy, that is, in a burst); put whole on the second before `atMs`, a report of 1.2 s reads
 * as a second at 1.2 × the rate, and a second its window skipped reads as empty (a live replay's
 * forecaster saw 136 q/s in a burst whose busiest second of arrivals held 121, and the plan launched
 * on it where the simulator, counting arrivals at their times, did not). A window ≤ 0 puts the count
 * on the second before `atMs`.
 */
export function spreadOverSeconds(atMs: number, windowMs: number, count: number): Array<[second: number, count: number]> {
  const endSecond = Math.floor((atMs - 1) / 1000);
  if (!(windowMs > 0)) return [[endSecond, count]];
  const startMs = atMs - windowMs;
  const out: Array<[number, number]> = [];
  for (let second = Math.floor(startMs / 1000); second <= endSecond; second++) {
    const overlap = Math.min(atMs, (second + 1) * 1000) - Math.max(startMs, second * 1000);
    if (overlap > 0) out.push([second, (count * overlap) / windowMs]);
  }
  return out;
}

/** Marks gap minutes (missing flag set) as NaN. */
export function withGaps(values: readonly number[], missing: readonly boolean[]): number[] {
  return values.map((v, i) => (missing[i] ? NaN : v));
}

function lastObserved(history: readonly number[]): number {
  for (let i = history.length - 1; i >= 0; i--) {
    const v = history[i]!;
    if (!Number.isNaN(v)) return v;
  }
  return 0;
}

/** The last observed value, repeated: the naive baseline every forecaster should beat. */
export const lastValueForecaster: Forecaster = {
  name: "last-value",
  forecast(history, horizon) {
    return new Array<number>(horizon).fill(lastObserved(history));
  },
};

/**
 * Seasonal-naive: step h is the value one season before it; if that is a gap, two seasons before, and
 * so on; with no observation at that phase, the last observed value.
 */
export function seasonalNaive(season: number): Forecaster {
  return {
    name: `seasonal-naive(${season})`,
    forecast(history, horizon) {
      const out: number[] = [];
      const n = history.length;
      for (let h = 1; h <= horizon; h++) {
        let v = NaN;
        for (let i = n - 1 + h - season; i >= 0 && Number.isNaN(v); i -= season) v = history[i] ?? NaN;
        out.push(Number.isNaN(v) ? lastObserved(history) : v);
      }
      return out;
    },
  };
}

export interface HoltWintersParams {
  alpha: number;
  beta: number;
  gamma: number;
  season: number;
}

interface HwState {
  level: number;
  trend: number;
  seasonal: Float64Array;
  /** Index of the next observation. */
  t: number;
}

function meanOf(xs: readonly number[], from: number, to: number): { mean: number; n: number } {
  let sum = 0;
  let n = 0;
  for (let i = from; i < to && i < xs.length; i++) {
    const v = xs[i]!;
    if (!Number.isNaN(v)) {
      sum += v;
      n++;
    }
  }
  return { mean: n > 0 ? sum / n : NaN, n };
}

/**
 * Classical initialisation from the first two seasons: trend = (mean of season two − mean of season
 * one) / season; the mean of season one is the level at its centre, (season − 1) / 2, so the level
 * before step 0 is mean₁ − trend·(season + 1)/2; seasonal index i = y_i − (mean₁ + trend·(i − (season − 1)/2))
 * (0 at gaps). Data that is exactly trend + season is then followed with zero error.
 * With less than two seasons of history: no seasonal component and no trend.
 */
function hwInit(history: readonly number[], season: number): HwState {
  const s1 = meanOf(history, 0, season);
  const s2 = meanOf(history, season, 2 * season);
  const seasonal = new Float64Array(season);
  if (s2.n === 0 || s1.n === 0) {
    return { level: Number.isNaN(s1.mean) ? lastObserved(history) : s1.mean, trend: 0, seasonal, t: 0 };
  }
  const trend = (s2.mean - s1.mean) / season;
  const centre = (season - 1) / 2;
  for (let i = 0; i < season; i++) {
    const v = history[i] ?? NaN;
    seasonal[i] = Number.isNaN(v) ? 0 : v - (s1.mean + trend * (i - centre));
  }
  return { level: s1.mean - trend * (centre + 1), trend, seasonal, t: 0 };
}

function hwStep(s: HwState, y: number, p: HoltWintersParams): void {
  const k = s.t % p.season;
  if (Number.isNaN(y)) {
    s.level += s.trend;
  } else {
    const old = s.seasonal[k]!;
    const level = p.alpha * (y - old) + (1 - p.alpha) * (s.level + s.trend);
    s.trend = p.beta * (level - s.level) + (1 - p.beta) * s.trend;
    s.seasonal[k] = p.gamma * (y - level) + (1 - p.gamma) * old;
    s.level = level;
  }
  s.t++;
}

function hwForecast(s: HwState, horizon: number, season: number): number[] {
  const out: number[] = [];
  for (let h = 1; h <= horizon; h++) {
    out.push(Math.max(0, s.level + h * s.trend + s.seasonal[(s.t + h - 1) % season]!));
  }
  return out;
}

/** Additive Holt-Winters with fixed parameters; forecasts are clamped at 0. */
export function holtWinters(params: HoltWintersParams): Forecaster {
  return {
    name: `holt-winters(α=${params.alpha}, β=${params.beta}, γ=${params.gamma}, m=${params.season})`,
    forecast(history, horizon) {
      const s = hwInit(history, params.season);
      for (const y of history) hwStep(s, y, params);
      return hwForecast(s, horizon, params.season);
    },
  };
}

export interface HoltWintersFitOptions {
  season: number;
  /** Forecast horizon scored by the fit. @default 60 */
  horizon?: number;
  /** Steps between scored forecast origins. @default 30 */
  every?: number;
  alphas?: readonly number[];
  betas?: readonly number[];
  gammas?: readonly number[];
}

export interface HoltWintersFit {
  params: HoltWintersParams;
  /** Mean absolute error of the scored forecasts with the chosen parameters. */
  mae: number;
  /** Parameter sets tried. */
  tried: number;
}

/**
 * Grid search for α, β, γ: for each candidate, run the filter over the history and, every `every`
 * steps after the first season, score the `horizon`-step forecast against what followed (mean absolute
 * error over non-gap steps). Scoring multi-step forecasts rather than one-step errors matters here:
 * one-step fits favour large α, which chases noise and hurts the 60-step path MArk plans with.
 */
export function fitHoltWinters(history: readonly number[], options: HoltWintersFitOptions): HoltWintersFit {
  const horizon = options.horizon ?? 60;
  const every = options.every ?? 30;
  const alphas = options.alphas ?? [0.05, 0.1, 0.2, 0.3, 0.5, 0.7, 0.9];
  const betas = options.betas ?? [0, 0.001, 0.01, 0.05];
  const gammas = options.gammas ?? [0.05, 0.1, 0.2, 0.4];
  let best: HoltWintersFit | undefined;
  let tried = 0;
  for (const alpha of alphas) {
    for (const beta of betas) {
      for (const gamma of gammas) {
        tried++;
        const params = { alpha, beta, gamma, season: options.season };
        // Origins after the first season, at multiples of `every`.
        const mae = scoreHoltWinters(history, params, { from: Math.ceil(options.season / every) * every, horizon, every });
        if (!best || mae < best.mae) best = { params, mae, tried: 0 };
      }
    }
  }
  if (!best) throw new Error("fitHoltWinters: empty grid");
  return { ...best, tried };
}

/**
 * Mean absolute error of the `horizon`-step Holt-Winters forecasts made every `every` units from origin
 * `from` on (origins whose horizon the history still covers), the filter run over the whole history:
 * the out-of-sample score planForecast chooses a season with. NaN steps are not scored; Infinity when
 * nothing is.
 */
export function scoreHoltWinters(history: readonly number[], params: HoltWintersParams, options: { from: number; horizon: number; every?: number }): number {
  const every = options.every ?? 30;
  const s = hwInit(history, params.season);
  let err = 0;
  let n = 0;
  for (let i = 0; i < history.length; i++) {
    hwStep(s, history[i]!, params);
    const origin = i + 1;
    if (origin >= options.from && (origin - options.from) % every === 0 && origin + options.horizon <= history.length) {
      const f = hwForecast(s, options.horizon, params.season);
      for (let h = 0; h < options.horizon; h++) {
        const a = history[origin + h]!;
        if (!Number.isNaN(a)) {
          err += Math.abs(f[h]! - a);
          n++;
        }
      }
    }
  }
  return n > 0 ? err / n : Infinity;
}

