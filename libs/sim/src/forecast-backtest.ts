/**
 * The forecasters' backtest on traces (`npm run forecast:backtest`, DESIGN §3: "report backtest error
 * (MAPE / under-provision rate) on the traces"): each predictor of the registry (libs/policy
 * predictors.ts) over each trace's forecaster input (trace.ts `forecastSeries`), scored by libs/policy
 * `backtestPredictor` on the forecast made `lead` minutes earlier (MArk provisions for t0 + τ, τ = 5 min).
 * Pure: the CLI (backtest-cli.ts) reads the files and loads the predictors; the result is a
 * ScenarioResult, so `npm run sim -- readme` puts it in reports/README.md beside the reproductions.
 */
import { backtestPredictor, type BacktestResult, type Predictor } from "@sloserve/policy";
import type { ScenarioResult } from "./scenario.js";
import { forecastSeries, type TraceData } from "./trace.js";

export interface BacktestTrace {
  /** How the report names it (e.g. its file name). */
  name: string;
  trace: TraceData;
  /** Its season, minutes, when not the options' (a one-day trace cannot have a daily one). */
  season?: number;
}

export interface ForecastBacktestOptions {
  /** Units per season. @default 1440 (a day of minutes) */
  season?: number;
  /** Minutes per forecast (MArk's Pw). @default 60 */
  horizon?: number;
  /** Score the forecast made this many minutes before the minute it is for. @default 5 */
  lead?: number;
  /** The first origin (minutes of history). @default min(2 × season + horizon, half the trace) */
  start?: number;
  /** Minutes between origins. @default 1 */
  every?: number;
}

export interface BacktestRow {
  trace: string;
  measure: string;
  minutes: number;
  season: number;
  result: BacktestResult;
}

const pct = (x: number): number => Math.round(x * 1000) / 10;
const r2 = (x: number): number => Math.round(x * 100) / 100;

/** The first origin for a series of n minutes (every predictor of a table starts at the same one). */
export function defaultStart(n: number, season: number, horizon: number): number {
  return Math.min(2 * season + horizon, Math.floor(n / 2));
}

export function runForecastBacktests(traces: readonly BacktestTrace[], predictors: readonly Predictor[], options: ForecastBacktestOptions = {}): BacktestRow[] {
  const horizon = options.horizon ?? 60;
  const lead = options.lead ?? 5;
  const rows: BacktestRow[] = [];
  for (const t of traces) {
    const season = t.season ?? options.season ?? 1440;
    const series = forecastSeries(t.trace);
    const start = options.start ?? defaultStart(series.values.length, season, horizon);
    for (const p of predictors) {
      const result = backtestPredictor(series.values, p, { start, season, horizon, lead, every: options.every ?? 1 });
      rows.push({ trace: t.name, measure: series.measure, minutes: series.values.length, season, result });
    }
  }
  return rows;
}

/**
 * The models a predictor used, in order of first use, without their fitted α/β/γ but with the season
 * Holt-Winters ran with (the auto predictor chooses it by validation: a day, an hour or none).
 */
export function modelsUsed(methods: readonly string[]): string {
  const names = methods.map((m) => {
    const season = /m=(\d+)\)$/.exec(m)?.[1];
    const base = m.replace(/\(α=.*$/, "");
    if (season === undefined || base === m) return base;
    return season === "1" ? `${base} (no season)` : `${base} (season ${season})`;
  });
  return names.filter((m, i, all) => all.indexOf(m) === i).join(" → ");
}

/** One printed / reported row per (trace, predictor). */
export function backtestTable(rows: readonly BacktestRow[]): Array<Record<string, string | number>> {
  return rows.map((r) => ({
    trace: r.trace,
    "input (per minute)": r.measure,
    minutes: r.minutes,
    season: r.season,
    predictor: r.result.predictor,
    "models used": modelsUsed(r.result.methods),
    "minutes scored": r.result.scored,
    "MAPE %": pct(r.result.mape),
    "RMSE (q/s)": r2(r.result.rmse),
    "under-provisioned %": pct(r.result.underProvisionRate),
    "mean shortfall %": pct(r.result.meanShortfall),
  }));
}

/** The report for reports/forecast-backtest.json (rendered by `npm run sim -- readme`). */
export function backtestReport(rows: readonly BacktestRow[], options: ForecastBacktestOptions & { notes?: string[] } = {}): ScenarioResult {
  const horizon = options.horizon ?? 60;
  const lead = options.lead ?? 5;
  const best = new Map<string, BacktestRow>();
  for (const r of rows) {
    const b = best.get(r.trace);
    if (!b || r.result.mape < b.result.mape) best.set(r.trace, r);
  }
  return {
    scenario: "forecast-backtest",
    paper:
      "MArk §4.2 forecasts the per-minute maximum arrival rate (5 s samples) 60 minutes ahead with an LSTM and lets users plug in their own predictor; " +
      "it reports no forecast error. Here: the backtest error (MAPE, under-provision rate) of each predictor on the traces.",
    ours: [...best.values()].map((r) => `${r.trace}: best MAPE ${pct(r.result.mape)}% (${r.result.predictor}), under-provisioned ${pct(r.result.underProvisionRate)}% of minutes`).join("; "),
    systems: [],
    table: backtestTable(rows),
    charts: [],
    notes: [
      `${(options.every ?? 1) === 1 ? "Each minute" : `Every ${options.every} minutes`}, every predictor forecasts the next ${horizon} minutes from the history before it (its state carried along, as the forecaster service carries it per app); the forecast made ${lead} minutes before a minute (MArk's τ, the machines' start time) is scored against that minute's actual.`,
      "Scoring starts once 2 seasons + a horizon are seen (or half the trace, if shorter), the same minute for every predictor of a trace; minutes without data (and the partial minutes at a gap's edge) are not scored.",
      "Under-provisioned: the forecast was below the actual, so capacity planned on it would have been short before the SLO monitor and overflow step in; mean shortfall: by how much, when short.",
      ...(options.notes ?? []),
    ],
  };
}
