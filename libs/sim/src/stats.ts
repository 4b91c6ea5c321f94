/**
 * Measurement helpers for the simulator: a latency sample with nearest-rank quantiles (exact up to
 * 2^22 values, bounded memory and error beyond: a simulated day at 1 000 QPS is 86 M queries), and
 * per-bin counters that controllers read as rates.
 */
import { quantileInPlace } from "@sloserve/policy";

/** Mantissa bits a histogram bucket keeps: buckets are 2^-12 ≈ 0.024% wide relative to their value. */
const HIST_MANTISSA_BITS = 12;
/** Values below 2^HIST_MIN_EXP ms (≈ 1 ns, zero included) share the lowest bucket; above 2^HIST_MAX_EXP ms (≈ 35 years) the highest. */
const HIST_MIN_EXP = -20;
const HIST_MAX_EXP = 40;
const HIST_BUCKETS = (HIST_MAX_EXP - HIST_MIN_EXP) << HIST_MANTISSA_BITS;
/** The high 32 bits of a double: sign, 11 exponent bits, the top 20 mantissa bits. */
const f64 = new Float64Array(1);
const u32 = new Uint32Array(f64.buffer);
const HI = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1 ? 1 : 0; // little-endian: the high word is [1]
const BIAS_KEY = (1023 + HIST_MIN_EXP) << HIST_MANTISSA_BITS;

/** Histogram bucket of a latency (zero and below: the lowest bucket; NaN: the highest, where a sort puts it). */
function bucketOf(v: number): number {
  if (!(v > 0)) return v === v ? 0 : HIST_BUCKETS - 1;
  f64[0] = v;
  const k = ((u32[HI] as number) >>> (20 - HIST_MANTISSA_BITS)) - BIAS_KEY;
  return k < 0 ? 0 : k >= HIST_BUCKETS ? HIST_BUCKETS - 1 : k;
}

/** The middle of a bucket's value range. */
function bucketMid(k: number): number {
  const exp = (k >> HIST_MANTISSA_BITS) + HIST_MIN_EXP;
  const frac = (k & ((1 << HIST_MANTISSA_BITS) - 1)) + 0.5;
  return 2 ** exp * (1 + frac / (1 << HIST_MANTISSA_BITS));
}

function addToHistogram(hist: Float64Array, values: Float64Array, n = values.length): void {
  for (let i = 0; i < n; i++) {
    const k = bucketOf(values[i] as number);
    hist[k] = (hist[k] as number) + 1;
  }
}

/** Nearest-rank q-quantile of n values counted in a histogram, observed within [min, max]. */
function histogramQuantile(hist: Float64Array, n: number, min: number, max: number, q: number): number {
  const rank = Math.min(n, Math.max(1, Math.ceil(q * n)));
  if (rank === n) return max;
  if (rank === 1) return min;
  let seen = 0;
  for (let k = 0; k < HIST_BUCKETS; k++) {
    seen += hist[k] as number;
    // The lowest bucket (zero and below ≈ 1 ns) holds the minimum: answer it (zeros stay exact).
    if (seen >= rank) return k === 0 ? min : Math.min(max, Math.max(min, bucketMid(k)));
  }
  return max;
}

const DEFAULT_EXACT_LIMIT = 1 << 22;
/** Largest chunk of a LatencySample's kept values: 65 536 values (512 kB). */
const CHUNK_MAX = 1 << 16;
/** Values a folded LatencySample holds before counting them into its histogram (32 kB). */
const PENDING = 1 << 12;

/**
 * One scratch buffer for the exact quantiles, reused from one call to the next (it grows to the
 * largest sample asked, at most `exactLimit` values: 32 MB by default): copying millions of values
 * into fresh memory costs more than the selection itself, and a run asks for several quantiles.
 */
let scratch = new Float64Array(0);

/** `parts` copied into the scratch buffer without their NaN values (what @sloserve/policy's `quantile` selects on). */
function copyWithoutNaN(parts: readonly Float64Array[]): Float64Array {
  let total = 0;
  for (const p of parts) total += p.length;
  if (scratch.length < total) scratch = new Float64Array(total);
  const xs = scratch;
  let n = 0;
  for (const p of parts) {
    for (let i = 0; i < p.length; i++) {
      const v = p[i] as number;
      if (v === v) xs[n++] = v;
    }
  }
  return xs.subarray(0, n);
}

export interface LatencySampleOptions {
  /**
   * Keep every value (exact quantiles) up to this many; past it, fold them into a log-bucketed
   * histogram of bounded size (see {@link LatencySample}). @default 4_194_304 (2^22: 32 MB of values)
   */
  exactLimit?: number;
}

/**
 * A growable sample of latencies (ms) with nearest-rank quantiles (see @sloserve/policy's
 * `quantileSorted`).
 *
 * - Up to `exactLimit` values (default 2^22 ≈ 4.2 M: a simulated hour at 1 000 QPS) every value is
 *   kept and quantiles are **exact** (selection on a copy, O(n), no full sort).
 * - Past it the sample switches for good to a histogram of fixed size (memory bounded whatever the
 *   count: 2 MB): buckets of relative width 2^-12, so a quantile is then the middle of the bucket that
 *   holds the nearest-rank value, clamped to the observed [min, max], within **±0.013%** of the exact
 *   value (0.04 ms at 300 ms; below 2^-20 ms ≈ 1 ns, the minimum: zeros stay exact). The count, sum
 *   (mean), min and max stay exact. NaN values (none in practice) are ignored by the exact quantiles.
 *   Values wait in a buffer of {@link PENDING} and are counted into the histogram a buffer at a time
 *   (counts do not depend on the order they are added in): one add is then a store, and the
 *   histogram's random reads and writes (a bucket per value, 20 k buckets between 20 and 300 ms) run
 *   back to back, where the processor overlaps their cache misses, not one per query between the
 *   simulator's own work.
 */
export class LatencySample {
  /** The values while exact, in chunks (1 024 values, doubling up to CHUNK_MAX: growing copies nothing); null once folded. */
  private chunks: Float64Array[] | null = [];
  /** The last chunk and how much of it is used; once folded, the values not yet counted into the histogram. */
  private cur = new Float64Array(0);
  private pos = 0;
  private hist: Float64Array | null = null;
  private n = 0;
  private readonly exactLimit: number;
  sum = 0;
  max = 0;
  private min = Infinity;

  constructor(options: LatencySampleOptions = {}) {
    this.exactLimit = Math.max(1, options.exactLimit ?? DEFAULT_EXACT_LIMIT);
  }

  get count(): number {
    return this.n;
  }

  /** Whether quantiles are exact (every value is still kept). */
  get exact(): boolean {
    return this.hist === null;
  }

  add(v: number): void {
    if (this.pos < this.cur.length) this.cur[this.pos++] = v;
    else this.addSlow(v);
    this.n++;
    this.sum += v;
    if (v > this.max) this.max = v;
    if (v < this.min) this.min = v;
  }

  /**
   * The last chunk is full: start another, or past `exactLimit` fold the values into the histogram;
   * once folded, the pending buffer is full: count it into the histogram.
   */
  private addSlow(v: number): void {
    const chunks = this.chunks;
    if (chunks !== null && this.n < this.exactLimit) {
      const size = Math.min(this.cur.length === 0 ? 1024 : Math.min(this.cur.length * 2, CHUNK_MAX), this.exactLimit - this.n);
      this.cur = new Float64Array(size);
      chunks.push(this.cur);
      this.cur[0] = v;
      this.pos = 1;
      return;
    }
    if (chunks !== null) {
      const hist = new Float64Array(HIST_BUCKETS);
      for (const c of chunks) addToHistogram(hist, c);
      this.hist = hist;
      this.chunks = null;
      this.cur = new Float64Array(PENDING);
    } else {
      this.flush();
    }
    this.cur[0] = v;
    this.pos = 1;
  }

  /** Folded: count the pending values into the histogram. */
  private flush(): void {
    if (this.pos === 0) return;
    addToHistogram(this.hist as Float64Array, this.cur, this.pos);
    this.pos = 0;
  }

  /** The values kept (exact mode), as views on the chunks. */
  private values(): Float64Array[] {
    const chunks = this.chunks as Float64Array[];
    return chunks.map((c, i) => (i === chunks.length - 1 ? c.subarray(0, this.pos) : c));
  }

  /**
   * Nearest-rank q-quantile (q in [0, 1]); NaN when empty. Exact while every value is kept (see the
   * class comment for the bounded error past `exactLimit`).
   */
  quantile(q: number): number {
    return this.quantiles([q])[0] as number;
  }

  /**
   * {@link quantile} for several q at once: the same values, from one copy of the sample (selection
   * only reorders the copy, so each k-th value found on it is the one a fresh copy would give).
   */
  quantiles(qs: readonly number[]): number[] {
    if (this.n === 0) return qs.map(() => NaN);
    if (this.chunks !== null) {
      const xs = copyWithoutNaN(this.values());
      return qs.map((q) => quantileInPlace(xs, q));
    }
    this.flush();
    return qs.map((q) => histogramQuantile(this.hist as Float64Array, this.n, this.min, this.max, q));
  }

  /**
   * The q-quantile of all the values of several samples together: what one sample that had been given
   * all of them (with `exactLimit`) would answer. Exact when they hold at most `exactLimit` values in all
   * (and every one is still exact); else from the sum of their histograms, as above.
   */
  static quantileOfUnion(samples: readonly LatencySample[], q: number, exactLimit = DEFAULT_EXACT_LIMIT): number {
    return LatencySample.quantilesOfUnion(samples, [q], exactLimit)[0] as number;
  }

  /** {@link quantileOfUnion} for several q at once (one copy of the values, or one sum of the histograms). */
  static quantilesOfUnion(samples: readonly LatencySample[], qs: readonly number[], exactLimit = DEFAULT_EXACT_LIMIT): number[] {
    let n = 0;
    let min = Infinity;
    let max = 0;
    let exact = true;
    for (const s of samples) {
      n += s.n;
      if (s.n > 0 && s.min < min) min = s.min;
      if (s.max > max) max = s.max;
      if (s.chunks === null) exact = false;
    }
    if (n === 0) return qs.map(() => NaN);
    if (exact && n <= exactLimit) {
      const xs = copyWithoutNaN(samples.flatMap((s) => s.values()));
      return qs.map((q) => quantileInPlace(xs, q));
    }
    const hist = new Float64Array(HIST_BUCKETS);
    for (const s of samples) {
      if (s.chunks !== null) {
        for (const c of s.values()) addToHistogram(hist, c);
      } else {
        s.flush();
        const h = s.hist as Float64Array;
        for (let k = 0; k < HIST_BUCKETS; k++) hist[k] = (hist[k] as number) + (h[k] as number);
      }
    }
    return qs.map((q) => histogramQuantile(hist, n, min, max, q));
  }

  mean(): number {
    return this.n === 0 ? NaN : this.sum / this.n;
  }
}

/** Counts per bin of `binMs` (default one second), growing as time advances. */
export class BinCounter {
  readonly counts: number[] = [];
  total = 0;

  constructor(readonly binMs = 1000) {}

  add(tMs: number, n = 1): void {
    this.addBin(Math.floor(tMs / this.binMs), n);
  }

  /** Add n to bin b (`Math.floor(tMs / binMs)`, for a caller that adds to several counters at one time). */
  addBin(b: number, n = 1): void {
    const c = this.counts;
    if (b >= 0 && b < c.length) {
      c[b] = (c[b] as number) + n;
      this.total += n;
    } else {
      this.addNewBin(b, n);
    }
  }

  /** {@link addBin} past the last bin (or below 0): kept out of `addBin`, which the engine calls per query, so that it stays small enough to inline. */
  private addNewBin(b: number, n: number): void {
    const c = this.counts;
    while (c.length <= b) c.push(0);
    c[b] = (c[b] ?? 0) + n;
    this.total += n;
  }

  /** Sum over whole bins that lie inside [fromMs, toMs). */
  sum(fromMs: number, toMs: number): number {
    const from = Math.max(0, Math.ceil(fromMs / this.binMs - 1e-9));
    const to = Math.min(this.counts.length, Math.floor(toMs / this.binMs + 1e-9));
    let s = 0;
    for (let i = from; i < to; i++) s += this.counts[i] ?? 0;
    return s;
  }

  /**
   * What was counted in [fromMs, toMs) for a span that need not fall on bins (a worker's report
   * period): each bin the span cuts counts for the share of it inside the span, its counts taken as
   * spread evenly over it — the bin that holds `nowMs` over its part up to now, the only part that
   * has counts yet. On whole bins, {@link sum}.
   */
  sumOver(fromMs: number, toMs: number, nowMs = Infinity): number {
    if (!(toMs > fromMs)) return 0;
    const b = this.binMs;
    const first = Math.max(0, Math.floor(fromMs / b));
    const last = Math.min(this.counts.length - 1, Math.ceil(toMs / b) - 1);
    let s = 0;
    for (let i = first; i <= last; i++) {
      const n = this.counts[i] ?? 0;
      if (n === 0) continue;
      const lo = i * b;
      const hi = Math.min((i + 1) * b, Math.max(lo, nowMs));
      if (hi <= lo) continue;
      const inside = Math.min(hi, toMs) - Math.max(lo, fromMs);
      if (inside > 0) s += (n * inside) / (hi - lo);
    }
    return s;
  }

  /** Mean rate per second over the last `windowMs` of complete bins before `nowMs`. */
  rate(nowMs: number, windowMs: number): number {
    const end = Math.floor(nowMs / this.binMs + 1e-9) * this.binMs;
    const start = Math.max(0, end - windowMs);
    if (end <= start) return 0;
    return (this.sum(start, end) * 1000) / (end - start);
  }

  /** The largest single-bin count, as a rate per second, over the last `windowMs` before `nowMs`. */
  maxRate(nowMs: number, windowMs: number): number {
    const end = Math.floor(nowMs / this.binMs + 1e-9);
    const start = Math.max(0, end - Math.round(windowMs / this.binMs));
    let m = 0;
    for (let i = start; i < Math.min(end, this.counts.length); i++) m = Math.max(m, this.counts[i] ?? 0);
    return (m * 1000) / this.binMs;
  }
}
