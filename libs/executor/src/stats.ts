/** Per-second counters of one variant instance, reset at each report. */
export class WindowStats {
  arrivals = 0;
  served = 0;
  errors = 0;
  batches = 0;
  busyMs = 0;
  private latencies: number[] = [];

  recordLatency(ms: number): void {
    if (this.latencies.length < 100_000) this.latencies.push(ms);
  }

  /** Returns the window's figures and starts a new window. */
  take(windowMs: number): { arrivals: number; served: number; errors: number; batches: number; latencyP50Ms: number; latencyP99Ms: number; utilisation: number } {
    const sorted = this.latencies.sort((a, b) => a - b);
    const pick = (q: number): number => (sorted.length ? (sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] as number) : 0);
    const out = {
      arrivals: this.arrivals,
      served: this.served,
      errors: this.errors,
      batches: this.batches,
      latencyP50Ms: pick(0.5),
      latencyP99Ms: pick(0.99),
      utilisation: windowMs > 0 ? this.busyMs / windowMs : 0,
    };
    this.arrivals = this.served = this.errors = this.batches = this.busyMs = 0;
    this.latencies = [];
    return out;
  }
}
