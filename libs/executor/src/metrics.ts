import { BATCH_SIZE_BUCKETS, LATENCY_BUCKETS_SECONDS, boundCounter, boundHistogram, client, type BoundCounter, type BoundHistogram } from "@sloserve/metrics";
import type { VariantRecord, WorkerReport } from "@sloserve/contracts";

/**
 * An executor's Prometheus metrics (docs/METRICS.md "executor"): what it served per model and variant
 * and how, the latency of each query by phase, SLO attainment, batch sizes, and each second (from its
 * report) queue lengths, variant instances by state and the worker's threads and memory.
 *
 * The query path touches only children bound once per variant instance ({@link QueryMetrics}): a
 * counter increment or a histogram observation per query, no label set built or hashed per query
 * (libs/metrics bound.ts).
 */

/** The series one variant instance records into, bound to its model and variant. */
export interface QueryMetrics {
  ok: BoundCounter;
  error: BoundCounter;
  shed: BoundCounter;
  sloMet: BoundCounter;
  sloMissed: BoundCounter;
  queue: BoundHistogram;
  batchWait: BoundHistogram;
  inference: BoundHistogram;
  total: BoundHistogram;
  batchSize: BoundHistogram;
}

export class ExecutorMetrics {
  private readonly queries: client.Counter<"model" | "variant" | "outcome">;
  private readonly slo: client.Counter<"model" | "variant" | "result">;
  private readonly duration: client.Histogram<"model" | "variant" | "phase">;
  private readonly batchSize: client.Histogram<"model" | "variant">;
  private readonly queueLength: client.Gauge<"model" | "variant">;
  private readonly instances: client.Gauge<"model" | "variant" | "state">;
  private readonly threads: client.Gauge<"hardware">;
  private readonly threadsUsed: client.Gauge<"hardware">;
  private readonly memory: client.Gauge<"hardware">;
  private readonly memoryReserved: client.Gauge<"hardware">;
  private readonly bound = new Map<string, QueryMetrics>();

  constructor(registry: client.Registry) {
    const registers = [registry];
    this.queries = new client.Counter({ name: "sloserve_executor_queries_total", help: "Queries this executor answered, by model, variant and outcome (ok; error; shed: could not finish before its deadline)", labelNames: ["model", "variant", "outcome"], registers });
    this.slo = new client.Counter({ name: "sloserve_slo_queries_total", help: "Served queries that carried a latency SLO, by whether they met it (result: met | missed)", labelNames: ["model", "variant", "result"], registers });
    this.duration = new client.Histogram({ name: "sloserve_query_duration_seconds", help: "Latency of served queries by phase: queue (behind earlier batches), batch_wait (for its batch to fill), inference (the batch's run), total (from the frontend or dispatcher to the answer)", labelNames: ["model", "variant", "phase"], buckets: LATENCY_BUCKETS_SECONDS, registers });
    this.batchSize = new client.Histogram({ name: "sloserve_batch_size", help: "Queries per batch run", labelNames: ["model", "variant"], buckets: BATCH_SIZE_BUCKETS, registers });
    this.queueLength = new client.Gauge({ name: "sloserve_queue_length", help: "Queries this executor holds for a variant, not yet running (at its last report)", labelNames: ["model", "variant"], registers });
    this.instances = new client.Gauge({ name: "sloserve_variant_instances", help: "Variant instances on this worker by state (loading, active, overloaded, interfered, unloading)", labelNames: ["model", "variant", "state"], registers });
    this.threads = new client.Gauge({ name: "sloserve_worker_threads", help: "Threads this worker offers to its variants", labelNames: ["hardware"], registers });
    this.threadsUsed = new client.Gauge({ name: "sloserve_worker_threads_used", help: "Threads its loaded and loading instances hold", labelNames: ["hardware"], registers });
    this.memory = new client.Gauge({ name: "sloserve_worker_memory_bytes", help: "Memory this worker offers to variant instances", labelNames: ["hardware"], registers });
    this.memoryReserved = new client.Gauge({ name: "sloserve_worker_memory_reserved_bytes", help: "Memory its instances reserve (their profiled memory)", labelNames: ["hardware"], registers });
  }

  /** The series of one variant (the same object for all its instances). */
  forVariant(variant: Pick<VariantRecord, "name" | "model">): QueryMetrics {
    let m = this.bound.get(variant.name);
    if (!m) {
      const model = variant.model;
      const name = variant.name;
      const query = (outcome: string): BoundCounter => boundCounter(this.queries, { model, variant: name, outcome });
      const phase = (p: string): BoundHistogram => boundHistogram(this.duration, { model, variant: name, phase: p });
      m = {
        ok: query("ok"),
        error: query("error"),
        shed: query("shed"),
        sloMet: boundCounter(this.slo, { model, variant: name, result: "met" }),
        sloMissed: boundCounter(this.slo, { model, variant: name, result: "missed" }),
        queue: phase("queue"),
        batchWait: phase("batch_wait"),
        inference: phase("inference"),
        total: phase("total"),
        batchSize: boundHistogram(this.batchSize, { model, variant: name }),
      };
      this.bound.set(variant.name, m);
    }
    return m;
  }

  /** The worker's one-second report: gauges of queues, instances by state, threads and memory. */
  report(report: WorkerReport, modelOf: (variant: string) => string): void {
    this.queueLength.reset();
    this.instances.reset();
    for (const v of report.variants) {
      const model = modelOf(v.variant);
      this.queueLength.set({ model, variant: v.variant }, v.queueLength);
      this.instances.set({ model, variant: v.variant, state: v.state }, Math.max(v.instances, v.state === "loading" ? v.loading ?? 1 : 0));
    }
    const hardware = report.hardware;
    this.threads.set({ hardware }, report.threads);
    this.threadsUsed.set({ hardware }, report.threadsUsed);
    this.memory.set({ hardware }, report.memoryBytes);
    this.memoryReserved.set({ hardware }, report.memoryUsedBytes);
  }
}
