/**
 * Workloads: arrival processes, for the simulator and for the sample traces the pipeline planner runs its estimator on (DESIGN §6).
 *
 * Everything is a {@link RateSchedule} (a piecewise-constant rate in queries per second, one value per
 * bin of `binMs`) driven through an {@link ArrivalProcess} with a coefficient of variation:
 *
 * - **CV** is σ/μ of the inter-arrival times (not σ²/μ², which the InferLine text prints). CV = 1 is a
 *   Poisson process; CV = 0 is evenly spaced arrivals; CV = 4 is very bursty. Inter-arrival gaps are
 *   Gamma(shape = 1/CV², mean = 1/rate).
 * - Rates that change over time use the time-change construction: each gap is drawn with mean 1 in
 *   "expected arrivals" and then spent against the integrated rate Λ(t) = ∫ rate. For CV = 1 this is
 *   exactly an inhomogeneous Poisson process (so trace replay is Poisson within each second or minute);
 *   for other CVs it keeps the renewal process's shape within long bins and is an approximation across
 *   bin edges.
 *
 * Builders: {@link constantRate}, {@link stepRates}, {@link rampRates}, {@link spikeRates},
 * {@link traceRates} (per-second or per-minute counts scaled to a target peak).
 */
import { sampleGamma, type Rng } from "./rng.js";

/** A piecewise-constant arrival rate: `rates[i]` queries per second during [i·binMs, (i+1)·binMs). */
export interface RateSchedule {
  binMs: number;
  rates: ArrayLike<number>;
}

export function scheduleDurationMs(s: RateSchedule): number {
  return s.rates.length * s.binMs;
}

/** Expected number of arrivals in a schedule. */
export function expectedArrivals(s: RateSchedule): number {
  let sum = 0;
  for (let i = 0; i < s.rates.length; i++) sum += s.rates[i] ?? 0;
  return (sum * s.binMs) / 1000;
}

export function constantRate(qps: number, durationS: number): RateSchedule {
  return { binMs: 1000, rates: new Array<number>(Math.ceil(durationS)).fill(qps) };
}

export interface Step {
  durationS: number;
  qps: number;
}

/** Consecutive constant segments, e.g. 150 QPS for 300 s then 250 QPS for 300 s. Whole seconds. */
export function stepRates(steps: Step[]): RateSchedule {
  const rates: number[] = [];
  for (const s of steps) for (let i = 0; i < Math.round(s.durationS); i++) rates.push(s.qps);
  return { binMs: 1000, rates };
}

/** A linear ramp from `fromQps` to `toQps` over `durationS` seconds (per-second bins, midpoint rate). */
export function rampRates(fromQps: number, toQps: number, durationS: number): RateSchedule {
  const n = Math.ceil(durationS);
  const rates: number[] = [];
  for (let i = 0; i < n; i++) rates.push(fromQps + ((toQps - fromQps) * (i + 0.5)) / n);
  return { binMs: 1000, rates };
}

export interface Spike {
  startS: number;
  endS: number;
  qps: number;
}

/** A base schedule (or a flat base rate) with spikes laid over it: during a spike the rate is the spike's. */
export function spikeRates(base: RateSchedule | { qps: number; durationS: number }, spikes: Spike[]): RateSchedule {
  const sched = "rates" in base ? base : constantRate(base.qps, base.durationS);
  const rates = Array.from(sched.rates);
  for (const sp of spikes) {
    const from = Math.floor((sp.startS * 1000) / sched.binMs);
    const to = Math.ceil((sp.endS * 1000) / sched.binMs);
    for (let i = Math.max(0, from); i < Math.min(rates.length, to); i++) rates[i] = sp.qps;
  }
  return { binMs: sched.binMs, rates };
}

/** Concatenate schedules with the same bin width. */
export function concatRates(...parts: RateSchedule[]): RateSchedule {
  const binMs = parts[0]?.binMs ?? 1000;
  const rates: number[] = [];
  for (const p of parts) {
    if (p.binMs !== binMs) throw new Error(`concatRates: bin widths differ (${binMs} vs ${p.binMs})`);
    for (let i = 0; i < p.rates.length; i++) rates.push(p.rates[i] ?? 0);
  }
  return { binMs, rates };
}

export interface TraceOptions {
  /** Width of one trace bin: 1000 for per-second traces, 60 000 for per-minute. */
  binMs: number;
  /** Scale so that the largest bin's rate becomes this many QPS. Without it, counts are used as is. */
  peakQps?: number;
  /** Scale so that the smallest non-zero bin's rate becomes this (with peakQps: min-max mapping). */
  minQps?: number;
  /** First bin and number of bins to keep. */
  offsetBins?: number;
  bins?: number;
}

/**
 * Trace replay: bin counts (queries per bin) → rates in QPS. With `peakQps` the trace is scaled
 * linearly so its peak bin runs at peakQps; with `minQps` as well, it is mapped linearly so that
 * [min, max] → [minQps, peakQps] (INFaaS §6.1 maps the Twitter trace to 10-1000 QPS this way).
 */
export function traceRates(counts: ArrayLike<number>, options: TraceOptions): RateSchedule {
  const start = options.offsetBins ?? 0;
  const end = Math.min(counts.length, start + (options.bins ?? counts.length));
  const perSecond: number[] = [];
  for (let i = start; i < end; i++) perSecond.push(((counts[i] ?? 0) * 1000) / options.binMs);
  let max = 0;
  let min = Infinity;
  for (const r of perSecond) {
    if (r > max) max = r;
    if (r > 0 && r < min) min = r;
  }
  let rates = perSecond;
  if (options.peakQps !== undefined && max > 0) {
    const peak = options.peakQps;
    if (options.minQps !== undefined && max > min) {
      const lo = options.minQps;
      rates = perSecond.map((r) => (r <= 0 ? 0 : lo + ((r - min) * (peak - lo)) / (max - min)));
    } else {
      rates = perSecond.map((r) => (r * peak) / max);
    }
  }
  return { binMs: options.binMs, rates };
}

/** Source of arrival times (ms, increasing). `next` returns null once the process has ended. */
export interface ArrivalProcess {
  readonly endMs: number;
  next(rng: Rng): number | null;
}

/**
 * Renewal arrivals over a rate schedule, with inter-arrival CV `cv` (σ/μ). See the module comment for
 * the construction. `startMs` shifts the whole schedule.
 */
export class ScheduledArrivals implements ArrivalProcess {
  // (numbers from the start, see Sfc32 in @sloserve/policy rng.ts: `t` is stored per arrival)
  readonly endMs: number = 0;
  private readonly shape: number = 1;
  private bin = 0;
  private t = 0;
  private first = true;

  constructor(
    private readonly schedule: RateSchedule,
    private readonly cv = 1,
    private readonly startMs = 0,
  ) {
    if (!(cv >= 0)) throw new RangeError(`cv must be >= 0, got ${cv}`);
    this.shape = cv > 0 ? 1 / (cv * cv) : Infinity;
    this.t = startMs;
    this.endMs = startMs + scheduleDurationMs(schedule);
  }

  next(rng: Rng): number | null {
    // A gap measured in expected arrivals (mean 1). With CV = 0 the first gap is half a gap, so evenly
    // spaced arrivals sit in the middle of their slots and a bin of rate r holds exactly r·width of them.
    let g = this.shape === Infinity ? (this.first ? 0.5 : 1) : sampleGamma(rng, this.shape, 1 / this.shape);
    this.first = false;
    const { binMs, rates } = this.schedule;
    while (this.bin < rates.length) {
      const ratePerMs = (rates[this.bin] ?? 0) / 1000;
      const binEnd = this.startMs + (this.bin + 1) * binMs;
      const room = (binEnd - this.t) * ratePerMs;
      if (ratePerMs > 0 && room >= g) {
        this.t += g / ratePerMs;
        return this.t;
      }
      g -= room;
      this.t = binEnd;
      this.bin++;
    }
    return null;
  }
}

/** Gamma arrivals at a constant mean rate: the InferLine synthetic workload (CV 1 or 4). */
export function gammaArrivals(qps: number, cv: number, durationS: number, startMs = 0): ArrivalProcess {
  return new ScheduledArrivals(constantRate(qps, durationS), cv, startMs);
}

/** Arrival times of a process, for offline use (planners, estimators, tests). */
export function arrivalTimes(process: ArrivalProcess, rng: Rng, limit = Infinity): number[] {
  const out: number[] = [];
  for (let t = process.next(rng); t !== null && out.length < limit; t = process.next(rng)) out.push(t);
  return out;
}

/** Counts of arrival times per bin of `binMs`, over `durationMs`. */
export function binCounts(times: ArrayLike<number>, binMs: number, durationMs: number): number[] {
  const counts = new Array<number>(Math.ceil(durationMs / binMs)).fill(0);
  for (let i = 0; i < times.length; i++) {
    const b = Math.floor((times[i] ?? 0) / binMs);
    if (b >= 0 && b < counts.length) counts[b] = (counts[b] ?? 0) + 1;
  }
  return counts;
}

/**
 * Arrivals at given times (ms, non-decreasing), e.g. a trace drawn once and replayed through several
 * systems (the InferLine scenarios serve the same queries with every configuration). Ignores the rng.
 */
export class ReplayArrivals implements ArrivalProcess {
  readonly endMs: number;
  private i = 0;

  constructor(private readonly timesMs: ArrayLike<number>) {
    this.endMs = timesMs.length > 0 ? (timesMs[timesMs.length - 1] ?? 0) : 0;
  }

  next(): number | null {
    return this.i < this.timesMs.length ? (this.timesMs[this.i++] ?? null) : null;
  }
}

/**
 * Arrivals replaying a rate trace binned per minute (the Twitter trace, libs/sim/data/) or per second:
 * within bin i the arrivals are a Poisson process at the bin's rate `schedule.rates[i]` (queries per
 * second; for a per-minute trace, the minute's count ÷ 60 after any scaling), i.e. exponential gaps,
 * drawn from the rng passed to `next` (the simulator seeds one per stream; a live load replayer passes
 * `createRng(seed)`), so a seed gives the same arrival times everywhere. With `cv` ≠ 1 the gaps are
 * Gamma with that σ/μ (see ScheduledArrivals). Lazy: call `next(rng)` for each arrival in turn, so a
 * replayer can pace a 17-day trace without materialising it.
 */
export function traceArrivals(schedule: RateSchedule, cv = 1, startMs = 0): ArrivalProcess {
  return new ScheduledArrivals(schedule, cv, startMs);
}
