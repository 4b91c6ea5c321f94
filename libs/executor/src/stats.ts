import { median, quantileSorted } from "@sloserve/policy";

export interface WindowFigures {
  arrivals: number;
  served: number;
  errors: number;
  batches: number;
  sloMisses: number;
  latencyP50Ms: number;
  latencyP99Ms: number;
  batchP50Ms: number;
  batchSizeP50: number;
  busyMs: number;
  /** Σ observed and Σ profiled batch run time (at each batch's size), ms: the interference evidence. */
  observedBatchMs: number;
  profiledBatchMs: number;
}

/** Per-second counters of one variant instance, reset at each report. */
export class WindowStats {
  arrivals = 0;
  served = 0;
  errors = 0;
  batches = 0;
  sloMisses = 0;
  busyMs = 0;
  profiledBatchMs = 0;
  private latencies: number[] = [];
  private batchMs: number[] = [];
  private batchSizes: number[] = [];

  recordLatency(ms: number): void {
    if (this.latencies.length < 100_000) this.latencies.push(ms);
  }

  recordBatch(ms: number, size: number, profiledMs: number): void {
    this.batches++;
    this.busyMs += ms;
    this.profiledBatchMs += profiledMs;
    if (this.batchMs.length < 10_000) {
      this.batchMs.push(ms);
      this.batchSizes.push(size);
    }
  }

  /** Returns the window's figures and starts a new window. */
  take(): WindowFigures {
    const sorted = this.latencies.sort((a, b) => a - b);
    const pick = (q: number): number => (sorted.length ? quantileSorted(sorted, q) : 0);
    const out: WindowFigures = {
      arrivals: this.arrivals,
      served: this.served,
      errors: this.errors,
      batches: this.batches,
      sloMisses: this.sloMisses,
      latencyP50Ms: pick(0.5),
      latencyP99Ms: pick(0.99),
      batchP50Ms: this.batchMs.length ? median(this.batchMs) : 0,
      batchSizeP50: this.batchSizes.length ? median(this.batchSizes) : 0,
      busyMs: this.busyMs,
      observedBatchMs: this.busyMs,
      profiledBatchMs: this.profiledBatchMs,
    };
    this.arrivals = this.served = this.errors = this.batches = this.sloMisses = this.busyMs = this.profiledBatchMs = 0;
    this.latencies = [];
    this.batchMs = [];
    this.batchSizes = [];
    return out;
  }
}

/** Sums the figures of several instances of one variant (medians: the larger, a conservative choice). */
export function mergeFigures(all: readonly WindowFigures[]): WindowFigures {
  const zero: WindowFigures = { arrivals: 0, served: 0, errors: 0, batches: 0, sloMisses: 0, latencyP50Ms: 0, latencyP99Ms: 0, batchP50Ms: 0, batchSizeP50: 0, busyMs: 0, observedBatchMs: 0, profiledBatchMs: 0 };
  return all.reduce(
    (a, f) => ({
      arrivals: a.arrivals + f.arrivals,
      served: a.served + f.served,
      errors: a.errors + f.errors,
      batches: a.batches + f.batches,
      sloMisses: a.sloMisses + f.sloMisses,
      latencyP50Ms: Math.max(a.latencyP50Ms, f.latencyP50Ms),
      latencyP99Ms: Math.max(a.latencyP99Ms, f.latencyP99Ms),
      batchP50Ms: Math.max(a.batchP50Ms, f.batchP50Ms),
      batchSizeP50: Math.max(a.batchSizeP50, f.batchSizeP50),
      busyMs: a.busyMs + f.busyMs,
      observedBatchMs: a.observedBatchMs + f.observedBatchMs,
      profiledBatchMs: a.profiledBatchMs + f.profiledBatchMs,
    }),
    zero,
  );
}
