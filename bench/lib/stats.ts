/**
 * Small statistics helpers for the benchmarks: summaries and rounding. Quantiles and medians are
 * @sloserve/policy's (`quantile`, `quantileSorted`, `median`: nearest rank; the median interpolates).
 */
import { quantileSorted } from "@sloserve/policy";

export function mean(values: readonly number[]): number {
  if (values.length === 0) return NaN;
  let s = 0;
  for (const v of values) s += v;
  return s / values.length;
}

export interface Summary {
  n: number;
  p50: number;
  p90: number;
  p99: number;
  mean: number;
  min: number;
  max: number;
}

export function summarize(values: readonly number[]): Summary {
  if (values.length === 0) return { n: 0, p50: NaN, p90: NaN, p99: NaN, mean: NaN, min: NaN, max: NaN };
  const sorted = [...values].sort((a, b) => a - b);
  const at = (q: number): number => quantileSorted(sorted, q);
  return { n: sorted.length, p50: at(0.5), p90: at(0.9), p99: at(0.99), mean: mean(sorted), min: sorted[0] as number, max: sorted[sorted.length - 1] as number };
}

/** Rounds for reports: 3 significant digits below 100, integers above. */
export function round(x: number, digits = 3): number {
  if (!Number.isFinite(x)) return x;
  if (Math.abs(x) >= 100) return Math.round(x);
  const p = 10 ** Math.max(0, digits - 1 - Math.floor(Math.log10(Math.max(Math.abs(x), 1e-12))));
  return Math.round(x * p) / p;
}

/** Rounds every number in a summary. */
export function roundSummary(s: Summary): Summary {
  return { n: s.n, p50: round(s.p50), p90: round(s.p90), p99: round(s.p99), mean: round(s.mean), min: round(s.min), max: round(s.max) };
}

/** a / b, rounded, or null when either is missing. */
export function ratio(a: number | null | undefined, b: number | null | undefined): number | null {
  if (a === null || a === undefined || b === null || b === undefined || !Number.isFinite(a) || !Number.isFinite(b) || b === 0) return null;
  return round(a / b);
}
