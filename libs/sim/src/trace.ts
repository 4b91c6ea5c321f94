/**
 * Trace files → counts per bin (pure: the CLI, or a test, reads the file; this parses its text).
 * Formats (those in libs/sim/data/ and /work/shared/traces/): a one-column per-second CSV with a header
 * (`tweets`, then one count per line), or a per-minute CSV whose first two columns are `minute,count`
 * (further columns, e.g. `missing`, ignored). A zero count is a gap in the data in both (see
 * libs/sim/data/README.md); the scenarios decide what to do with gaps (mark-twitter fills them).
 */
import { maxRatePerUnit } from "@sloserve/policy";

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
 * resolution, so its mean rate per minute stands in. Gaps (a minute with no arrivals at all: a zero
 * count is a gap in these traces, see parseTrace) are NaN, which forecasters skip and backtests do not
 * score.
 */
export function forecastSeries(trace: TraceData, sampleS = 5): ForecastSeries {
  if (trace.binMs === 60_000) return { values: trace.counts.map((c) => (c > 0 ? c / 60 : NaN)), measure: "mean per minute" };
  if (trace.binMs !== 1000) throw new Error(`trace bins of ${trace.binMs} ms: the forecaster's input needs per-second or per-minute counts`);
  const max = maxRatePerUnit(trace.counts, sampleS, 60);
  const values = max.map((v, m) => {
    for (let s = m * 60; s < (m + 1) * 60; s++) if ((trace.counts[s] ?? 0) > 0) return v;
    return NaN;
  });
  return { values, measure: `max of ${sampleS} s windows` };
}
