/**
 * What MArk's microbenchmarks (MArk §5.3: mark-surge, mark-interruptions) share: a flat load the
 * forecaster has learnt, and SLO attainment and Lambda share over windows of minutes, from runMark's
 * per-minute record (by arrival minute).
 */
import type { Chart, SystemResult } from "../scenario.js";
import { historyFromRates, type MarkRunResult } from "./mark-system.js";

/** A day of per-minute max rates of a flat Poisson load at `qps`: the forecaster expects it to go on. */
export function flatHistory(qps: number, seed: number): number[] {
  return historyFromRates(new Array<number>(1440).fill(qps), seed);
}

/** Queries of minutes [from, to) answered within their SLO, over those that arrived (1 without any). */
export function attainmentIn(run: MarkRunResult, from: number, to: number): number {
  const rows = (run.perMinuteSlo ?? []).filter((m) => m.minute >= from && m.minute < to);
  const arrivals = rows.reduce((a, m) => a + m.arrivals, 0);
  return arrivals > 0 ? rows.reduce((a, m) => a + m.met, 0) / arrivals : 1;
}

/** {@link attainmentIn} over named windows of minutes [from, to). */
export function attainments<K extends string>(run: MarkRunResult, windows: Readonly<Record<K, readonly [number, number]>>): Record<K, number> {
  const out = {} as Record<K, number>;
  for (const k of Object.keys(windows) as K[]) out[k] = attainmentIn(run, windows[k][0], windows[k][1]);
  return out;
}

/** Share of the queries of minutes [from, to) sent to Lambda. */
export function lambdaShareIn(run: MarkRunResult, from: number, to: number): number {
  const rows = (run.perMinuteSlo ?? []).filter((m) => m.minute >= from && m.minute < to);
  const arrivals = rows.reduce((a, m) => a + m.arrivals, 0);
  return arrivals > 0 ? rows.reduce((a, m) => a + m.toLambda, 0) / arrivals : 0;
}

/** The lowest attainment of a single minute in [from, to). */
export function worstMinute(run: MarkRunResult, from: number, to: number): number {
  const rows = (run.perMinuteSlo ?? []).filter((m) => m.minute >= from && m.minute < to && m.arrivals > 0);
  return Math.min(1, ...rows.map((m) => m.met / m.arrivals));
}

const pct = (x: number): number => Math.round(x * 10_000) / 100;

export const round = (x: number, d = 4): number => Math.round(x * 10 ** d) / 10 ** d;
/** A fraction as a percentage with one decimal: 0.98765 → "98.8%". */
export const percent = (x: number): string => `${(Math.round(x * 1000) / 10).toFixed(1)}%`;

/** A run as a scenario's system row: cost, SLO attainment and P99 of the whole run, and `extra`. */
export function systemRow(name: string, run: MarkRunResult, extra: Record<string, unknown>): SystemResult {
  return { name, cost_dollars: round(run.costDollars), slo_attainment: round(run.sim.sloAttainment, 5), p99_ms: round(run.sim.latencyMs.p99, 1), ...extra };
}

/** Per-minute SLO attainment (%) and Lambda share (%) of labelled runs. */
export function perMinuteCharts(id: string, title: string, runs: ReadonlyArray<{ label: string; run: MarkRunResult }>): Chart[] {
  const rows = (r: MarkRunResult) => (r.perMinuteSlo ?? []).filter((m) => m.arrivals > 0);
  return [
    {
      id: `${id}-slo`, title: `${title}: SLO attainment per minute`, xLabel: "minute", yLabel: "% of queries within the SLO", kind: "line",
      series: runs.map(({ label, run }) => ({ name: label, points: rows(run).map((m) => [m.minute, pct(m.met / m.arrivals)] as [number, number]) })),
    },
    {
      id: `${id}-lambda`, title: `${title}: share sent to Lambda per minute`, xLabel: "minute", yLabel: "% of queries", kind: "line",
      series: runs.map(({ label, run }) => ({ name: label, points: rows(run).map((m) => [m.minute, pct(m.toLambda / m.arrivals)] as [number, number]) })),
    },
  ];
}
