/**
 * Trace files → counts per bin (pure: the CLI, or a test, reads the file; this parses its text).
 * Formats (those in libs/sim/data/): a one-column per-second CSV with a header
 * (`tweets`, then one count per line), or a per-minute CSV whose first two columns are `minute,count`
 * (further columns, e.g. `missing`, ignored). A zero count is a gap in the data in both (see
 * libs/sim/data/README.md); the scenarios decide what to do with gaps (mark-twitter fills them).
 */
import { maxRatePerUnit, median } from "@sloserve/policy";

export interface TraceData {
  /** Width of one bin: 1000 for a per-second file, 60 000 for a per-minute one. */
  binMs: number;
  /** Count per bin, in file order. */
  counts: number[];
}

/** The bundled Twitter trace (2021-08, 17 days per minute), relative to the repository root. */
export const DEFAULT_TWITTER_TRACE = "libs/sim/data/twitter_2021-08_per_minute.csv";

export function parseTrace(text: string): TraceData {
  const lines = text.split(/\r?\n/).filter((l) => l.trim() !== "");
  const header = (lines[0] ?? "").split(",").map((h) => h.trim().toLowerCase());
  const perMinute = header[0] === "minute";
  const body = /^[\d.]+$/.test(header[0] ?? "") ? lines : lines.slice(1);
  const offset = lines.length - body.length + 1;
  const counts: number[] = [];
  body.forEach((line, i) => {
    const cols = line.split(",");
    const v = Number(perMinute ? cols[1] : cols[0]);
    if (!Number.isFinite(v) || v < 0) throw new Error(`trace line ${i + offset}: "${line}" is not a count`);
    counts.push(v);
  });
  return { binMs: perMinute ? 60_000 : 1000, counts };
}

/** Mean rate (queries per second) of each complete minute of a trace. */
export function minuteRates(trace: TraceData): number[] {
  if (trace.binMs === 60_000) return trace.counts.map((c) => c / 60);
  const perMinute = Math.round(60_000 / trace.binMs);
  if (perMinute < 1 || perMinute * trace.binMs !== 60_000) throw new Error(`trace bins of ${trace.binMs} ms do not divide a minute`);
  const out: number[] = [];
  for (let m = 0; (m + 1) * perMinute <= trace.counts.length; m++) {
    let s = 0;
    for (let i = m * perMinute; i < (m + 1) * perMinute; i++) s += trace.counts[i] ?? 0;
    out.push(s / 60);
  }
  return out;
}

/** A minute below this share of the trace's median rate is a gap (the partial minute at a gap's edge). */
export const GAP_SHARE_OF_MEDIAN = 0.05;

/**
 * The rate at or under which a minute of a trace is a gap: 0, and the partial minutes at the edge of a
 * gap (the Twitter trace's daily one), below 5% of the median of the positive minutes.
 */
export function gapThreshold(perMinute: readonly number[]): number {
  const positive = perMinute.filter((x) => x > 0);
  return positive.length > 0 ? GAP_SHARE_OF_MEDIAN * median(positive) : 0;
}

/** What the forecaster sees of a trace: one value per minute, and how it was measured. */
export interface ForecastSeries {
  /** Per minute: queries per second (NaN: a gap in the data). */
  values: number[];
  /** "max of 5 s windows" (a per-second trace: MArk's measurement) or "mean per minute" (a per-minute trace: the finest it has). */
  measure: string;
}

/**
 * A trace as the forecaster's input (MArk §4.2: per minute, the maximum rate over 5 s windows —
 * forecast.ts `maxRatePerUnit`): exact for a per-second trace; a per-minute trace has no finer
 * resolution, so its mean rate per minute stands in. Gaps are NaN, which forecasters skip and
 * backtests do not score: minutes with no arrivals (a zero count is a gap in these traces, see
 * parseTrace) and the partial minutes at a gap's edge ({@link gapThreshold}), whose tiny values would
 * otherwise dominate a percentage error.
 */
export function forecastSeries(trace: TraceData, sampleS = 5): ForecastSeries {
  let values: number[];
  let measure: string;
  if (trace.binMs === 60_000) {
    values = trace.counts.map((c) => c / 60);
    measure = "mean per minute";
  } else if (trace.binMs === 1000) {
    values = maxRatePerUnit(trace.counts, sampleS, 60);
    measure = `max of ${sampleS} s windows`;
  } else {
    throw new Error(`trace bins of ${trace.binMs} ms: the forecaster's input needs per-second or per-minute counts`);
  }
  const gap = gapThreshold(values);
  return { values: values.map((v) => (v > gap ? v : NaN)), measure };
}
