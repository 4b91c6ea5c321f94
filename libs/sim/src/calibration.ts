/**
 * What the simulator makes of a calibration file (`npm run calibrate`; libs/contracts calibration.ts):
 * the host's contention as a function of the simulator's own state, and empirical draws of the
 * figures measured as samples (a launch's boot time, a function's run). Pure functions of the file
 * (and of a generator the caller seeds): nothing here reads a run it would be compared with.
 *
 * **The contention model.** The calibration measured, on one host, how much slower than profiled the
 * workers' batches ran (`slowdown`: Σ observed over Σ profiled busy time; `p50Ratio`: the median batch
 * over its profile) at a sweep of `demand` (Σ over the host's workers of their busy share at profiled
 * batch times: CPU-seconds of inference asked per second) with `booting` worker processes starting
 * meanwhile and `workers` worker processes serving. At the same demand, more processes than cores run
 * slower (each one's busy time counts the others' turns on the cores: on a 2-core host, demand 1.5 ran
 * 1.23× its profile on 2 workers, 2.0× on 3, 2.7× on 4). {@link contentionAt} reads that table: the
 * nearest booting level, then within it linear in the number of workers between the two nearest
 * workers levels measured (flat beyond the fewest and the most), each level read piecewise-linearly in
 * demand between its measured points (flat beyond its first and last). Points that do not say their
 * workers form a level of their own, read where the booting level has no point that says them (a
 * calibration without `workers` reads as before they were measured), and a reading that does not say
 * its workers reads all the booting level's points together (as before). What it does not model:
 * anything but demand, booting and serving processes and the variant a worker serves
 * ({@link variantContention}: each variant's own points when the calibration swept it; batch sizes,
 * memory bandwidth, other programs on the host than the ones measured), the workers levels of the booting
 * level other than the nearest one (a booting level measured on fewer workers reads its most workers
 * flat beyond), idle workers apart from busy ones (a worker serving counts as one whatever its share of
 * the demand), the spread of batch times within a second (a second's batches all run at its one
 * slowdown), and more than one host (every worker of the local provider runs on the host the
 * calibration measured).
 */
import { quantile, type Rng } from "@sloserve/policy";
import type { ContentionPoint } from "@sloserve/contracts";

/** What the host's contention does to a batch: observed over profiled busy time, and the median batch over its profile. */
export interface Contention {
  slowdown: number;
  p50Ratio: number;
}

/** One group's points (a booting level, a workers level), by ascending demand (duplicates merged). */
interface Curve {
  demand: number[];
  slowdown: number[];
  p50Ratio: number[];
}

/** One booting level: all its points together, and by the workers they say (ascending). */
interface Level {
  booting: number;
  /** Every point of the level, whatever its workers (the reading without workers, and of a level where none says them). */
  all: Curve;
  /** The workers levels measured, ascending, each its points. */
  workers: number[];
  byWorkers: Curve[];
}

/** A calibration's contention points, prepared for reading every second ({@link contentionModel}). */
export interface ContentionModel {
  /** The booting levels measured, ascending. */
  readonly levels: readonly number[];
  /** The workers levels the booting level read for `booting` measured, ascending (none: its points do not say them). */
  workersLevels(booting: number): readonly number[];
  /** The contention at a demand with `booting` processes starting and `workers` serving (absent: not said). */
  at(demand: number, booting: number, workers?: number): Contention;
}

/** Points by ascending demand, those at the same demand merged: the mean weighted by `samples` (plain mean when none has samples). */
function curveOf(points: readonly ContentionPoint[]): Curve {
  const byDemand = new Map<number, ContentionPoint[]>();
  for (const p of points) (byDemand.get(p.demand) ?? byDemand.set(p.demand, []).get(p.demand)!).push(p);
  const c: Curve = { demand: [], slowdown: [], p50Ratio: [] };
  for (const [demand, ps] of [...byDemand.entries()].sort((a, b) => a[0] - b[0])) {
    const total = ps.reduce((s, p) => s + p.samples, 0);
    const w = (p: ContentionPoint): number => (total > 0 ? p.samples / total : 1 / ps.length);
    c.demand.push(demand);
    c.slowdown.push(ps.reduce((s, p) => s + w(p) * p.slowdown, 0));
    c.p50Ratio.push(ps.reduce((s, p) => s + w(p) * p.p50Ratio, 0));
  }
  return c;
}

/** A curve at a demand: piecewise-linear between its points, flat beyond its first and last. */
function read(c: Curve, demand: number): Contention {
  const d = c.demand;
  const n = d.length;
  if (!(demand > d[0]!)) return { slowdown: c.slowdown[0]!, p50Ratio: c.p50Ratio[0]! };
  if (demand >= d[n - 1]!) return { slowdown: c.slowdown[n - 1]!, p50Ratio: c.p50Ratio[n - 1]! };
  let i = 1;
  while (d[i]! < demand) i++;
  const t = (demand - d[i - 1]!) / (d[i]! - d[i - 1]!);
  return {
    slowdown: c.slowdown[i - 1]! + t * (c.slowdown[i]! - c.slowdown[i - 1]!),
    p50Ratio: c.p50Ratio[i - 1]! + t * (c.p50Ratio[i]! - c.p50Ratio[i - 1]!),
  };
}

/**
 * The contention table of a calibration, ready to read ({@link contentionAt} reads it once). Points at
 * the same demand, booting level and workers level are merged: their figures' mean weighted by
 * `samples` (plain mean when none has samples). Throws on an empty list or a figure that is not a
 * positive finite number.
 */
export function contentionModel(points: readonly ContentionPoint[]): ContentionModel {
  if (points.length === 0) throw new Error("contention: no point to read");
  for (const p of points) {
    if (!(p.slowdown > 0 && Number.isFinite(p.slowdown)) || !(p.p50Ratio > 0 && Number.isFinite(p.p50Ratio)) || !(p.demand >= 0 && Number.isFinite(p.demand))) {
      throw new Error(`contention: a point needs demand ≥ 0 and positive slowdown and p50Ratio, got ${JSON.stringify(p)}`);
    }
    if (p.workers !== undefined && !(p.workers > 0 && Number.isFinite(p.workers))) throw new Error(`contention: a point's workers must be positive, got ${JSON.stringify(p)}`);
  }
  const byLevel = new Map<number, ContentionPoint[]>();
  for (const p of points) (byLevel.get(p.booting) ?? byLevel.set(p.booting, []).get(p.booting)!).push(p);
  const levels: Level[] = [...byLevel.entries()]
    .sort((a, b) => a[0] - b[0])
    .map(([booting, ps]) => {
      const byWorkers = new Map<number, ContentionPoint[]>();
      for (const p of ps) if (p.workers !== undefined) (byWorkers.get(p.workers) ?? byWorkers.set(p.workers, []).get(p.workers)!).push(p);
      const workers = [...byWorkers.keys()].sort((a, b) => a - b);
      return { booting, all: curveOf(ps), workers, byWorkers: workers.map((w) => curveOf(byWorkers.get(w)!)) };
    });
  const levelFor = (booting: number): Level => {
    // The nearest level (a tie: the larger one); beyond the largest, the largest.
    let best = levels[0]!;
    for (const l of levels) if (Math.abs(l.booting - booting) <= Math.abs(best.booting - booting)) best = l;
    return best;
  };
  return {
    levels: levels.map((l) => l.booting),
    workersLevels: (booting) => [...levelFor(booting).workers],
    at(demand: number, booting: number, workers?: number): Contention {
      const l = levelFor(booting);
      // (not said, or the level's points do not say theirs: all of them, as before workers were read)
      if (workers === undefined || l.workers.length === 0) return read(l.all, demand);
      const ws = l.workers;
      const n = ws.length;
      if (!(workers > ws[0]!)) return read(l.byWorkers[0]!, demand);
      if (workers >= ws[n - 1]!) return read(l.byWorkers[n - 1]!, demand);
      let i = 1;
      while (ws[i]! < workers) i++;
      if (ws[i] === workers) return read(l.byWorkers[i]!, demand);
      const a = read(l.byWorkers[i - 1]!, demand);
      const b = read(l.byWorkers[i]!, demand);
      const t = (workers - ws[i - 1]!) / (ws[i]! - ws[i - 1]!);
      return { slowdown: a.slowdown + t * (b.slowdown - a.slowdown), p50Ratio: a.p50Ratio + t * (b.p50Ratio - a.p50Ratio) };
    },
  };
}

/**
 * A calibration's contention table per variant (the points' `variant`): the sweep runs each variant
 * alone on every worker, and how much slower than profiled a batch runs at a demand differs with the
 * variant (a 4 ms batch carries the executor's per-batch work and timer lateness in another proportion
 * than a 17 ms one). `forVariant(v)` reads v's own points, else (a variant the calibration did not
 * sweep, or none said) all the points together, as {@link contentionModel}.
 */
export interface VariantContention {
  /** The variants with points of their own. */
  readonly variants: readonly string[];
  forVariant(variant: string | undefined): ContentionModel;
}

export function variantContention(points: readonly ContentionPoint[]): VariantContention {
  const all = contentionModel(points);
  const byVariant = new Map<string, ContentionPoint[]>();
  for (const p of points) if (p.variant !== undefined) (byVariant.get(p.variant) ?? byVariant.set(p.variant, []).get(p.variant)!).push(p);
  const models = new Map([...byVariant.entries()].map(([v, ps]) => [v, contentionModel(ps)]));
  return {
    variants: [...models.keys()].sort(),
    forVariant: (variant) => (variant !== undefined ? models.get(variant) : undefined) ?? all,
  };
}

/**
 * The host's contention at a demand (Σ busy share at profiled batch times × threads, CPU-seconds per
 * second) with `booting` worker processes starting and `workers` serving: the nearest booting level
 * (a tie: the larger level; beyond the largest level measured, the largest), within it linear in
 * workers between the two nearest workers levels measured (flat beyond the fewest and the most; the
 * level's points without workers where none says them; all its points when `workers` is not given),
 * each piecewise-linear in demand between its measured points, flat below the first point and above
 * the last. Pure.
 */
export function contentionAt(points: readonly ContentionPoint[], demand: number, booting: number, workers?: number): Contention {
  return contentionModel(points).at(demand, booting, workers);
}

/** One of the samples, uniformly (an empirical draw: its mean is the samples' mean). Throws on none. */
export function drawSample(samples: readonly number[], rng: Rng): number {
  if (samples.length === 0) throw new Error("drawSample: no sample to draw from");
  return samples[Math.min(samples.length - 1, Math.floor(rng.next() * samples.length))]!;
}

/** Boot times measured with `together` launches at once (1: a launch alone). */
export interface BootSamples {
  together: number;
  ms: number;
}

/**
 * The boot time of a launch made while `together` launches (this one included) boot on the host, drawn
 * from a calibration's samples: `lone` (launches alone, `bootMs`) and `groups` (launches made at once,
 * `groupBoots`). Worker processes starting together share the host's cores, so a boot takes longer
 * the more start with it (measured: 1.5-1.9 s alone, 4.6 s for 4 at once, 13.5 s for 8 on two cores).
 * A count measured is drawn from its own samples; between two counts measured, a sample of the lower
 * one scaled by the medians' linear interpolation at `together`; beyond the most measured, a sample
 * of that count scaled by `together / count` (the boots share the host: each gets its part of it).
 * With no group samples, every launch draws from `lone` (as before they were measured). Pure but for
 * `rng`; throws when `lone` is empty.
 */
export function drawBootMs(lone: readonly number[], groups: readonly BootSamples[], together: number, rng: Rng): number {
  const byCount = new Map<number, number[]>([[1, [...lone]]]);
  for (const g of groups) if (g.together > 1) (byCount.get(g.together) ?? byCount.set(g.together, []).get(g.together)!).push(g.ms);
  if (byCount.size === 1) return drawSample(lone, rng);
  const counts = [...byCount.keys()].sort((a, b) => a - b);
  const k = Math.max(1, together);
  const exact = byCount.get(k);
  if (exact) return drawSample(exact, rng);
  const lower = counts.filter((c) => c < k).pop()!;
  const upper = counts.find((c) => c > k);
  const sample = drawSample(byCount.get(lower)!, rng);
  const lowMedian = medianOf(byCount.get(lower)!)!;
  if (upper === undefined) return sample * (k / lower);
  const highMedian = medianOf(byCount.get(upper)!)!;
  const at = lowMedian + ((highMedian - lowMedian) * (k - lower)) / (upper - lower);
  return lowMedian > 0 ? (sample * at) / lowMedian : at;
}

/** Nearest-rank median (as scripts/replay.ts takes its measured medians), undefined when there is none. */
export function medianOf(xs: readonly number[]): number | undefined {
  return xs.length > 0 ? quantile(xs, 0.5) : undefined;
}

/** The mean, undefined when there is none. */
export function meanOf(xs: readonly number[]): number | undefined {
  return xs.length > 0 ? xs.reduce((a, b) => a + b, 0) / xs.length : undefined;
}

/**
 * When a worker reports, ms from 0 to `untilMs`: every `periodMs` from a phase uniform in [0, periodMs)
 * (drawn from `rng`), each report late by a uniform draw in [0, √6 · jitterMs), so that the intervals
 * between reports have the standard deviation `jitterMs` (the calibration's `reports.jitterMs`: the
 * standard deviation of the intervals received). Timers fire late, never early; the lateness is drawn
 * afresh for each report, so the phase does not drift. Whole milliseconds, ascending, without repeats.
 */
export function reportTimes(periodMs: number, jitterMs: number, untilMs: number, rng: Rng): number[] {
  if (!(periodMs > 0)) throw new Error(`reportTimes: periodMs must be > 0, got ${periodMs}`);
  const phase = rng.next() * periodMs;
  const spread = Math.SQRT2 * Math.sqrt(3) * Math.max(0, jitterMs);
  const out: number[] = [];
  for (let k = 0; phase + k * periodMs <= untilMs; k++) out.push(Math.round(phase + k * periodMs + rng.next() * spread));
  out.sort((a, b) => a - b);
  return out.filter((t, i) => i === 0 || t !== out[i - 1]);
}
