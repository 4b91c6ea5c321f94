import client from "prom-client";
import type { ArrivalsReport } from "@sloserve/contracts";

/** Histogram buckets of query latencies by phase, seconds: 0.5 ms to 30 s. */
export const LATENCY_BUCKETS_SECONDS = [0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 30];

/** Histogram buckets of batch sizes: the generator's max batches (powers of two to 64). */
export const BATCH_SIZE_BUCKETS = [1, 2, 4, 8, 16, 32, 64];

/**
 * What a service read from the dispatchers' per-second arrival reports (`metrics.arrivals.<app>`):
 * `sloserve_arrivals_observed_total{app}`, the queries they counted. The model autoscaler, the
 * forecaster and the registrar decide on these reports; beside the dispatchers' own
 * `sloserve_dispatcher_queries_total` it shows whether any report was lost on the way.
 */
export class ArrivalsObserved {
  private readonly counter: client.Counter<"app">;

  constructor(registry: client.Registry) {
    this.counter = new client.Counter({ name: "sloserve_arrivals_observed_total", help: "Queries counted in the dispatchers' arrival reports this service received, by app", labelNames: ["app"], registers: [registry] });
  }

  observe(report: ArrivalsReport): void {
    this.counter.inc({ app: report.app }, report.arrivals);
  }
}
