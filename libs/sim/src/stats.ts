/**
 * Measurement helpers for the simulator: a growable latency sample with exact (nearest-rank)
 * quantiles, and per-bin counters that controllers read as rates.
 */
import { quantileSorted } from "@sloserve/policy";

/** A growable sample of latencies (ms). */
export class LatencySample {
  private buf = new Float64Array(1024);
  private n = 0;
  private sorted: Float64Array | null = null;
  sum = 0;
  max = 0;

  get count(): number {
    return this.n;
  }

  add(v: number): void {
    if (this.n === this.buf.length) {
      const next = new Float64Array(this.buf.length * 2);
      next.set(this.buf);
      this.buf = next;
    }
    this.buf[this.n++] = v;
    this.sum += v;
    if (v > this.max) this.max = v;
    this.sorted = null;
  }

  /** Exact nearest-rank q-quantile (q in [0, 1], see @sloserve/policy's quantileSorted); NaN when empty. */
  quantile(q: number): number {
    if (this.n === 0) return NaN;
    if (!this.sorted) this.sorted = this.buf.slice(0, this.n).sort();
    return quantileSorted(this.sorted, q);
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
    const b = Math.floor(tMs / this.binMs);
    while (this.counts.length <= b) this.counts.push(0);
    this.counts[b] = (this.counts[b] ?? 0) + n;
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
