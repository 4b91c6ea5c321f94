import { ArrivalsObserved, client } from "@sloserve/metrics";
import type { WorkerReport } from "@sloserve/contracts";

/**
 * The model autoscaler's Prometheus metrics (docs/METRICS.md "model-autoscaler"): its decisions by
 * action, the arrival reports it read, and the cluster as its workers' latest reports show it — live
 * workers by hardware, variant instances by state, arrivals per variant — read when scraped (it sees
 * every worker, those an autoscaler launched without a metrics endpoint of their own included).
 */
export class ModelAutoscalerMetrics {
  readonly arrivals: ArrivalsObserved;
  private readonly decisions: client.Counter<"action">;

  constructor(registry: client.Registry, reports: () => Iterable<WorkerReport>) {
    const registers = [registry];
    this.arrivals = new ArrivalsObserved(registry);
    this.decisions = new client.Counter({ name: "sloserve_model_decisions_total", help: "Model autoscaler decisions published, by action (replicate, upgrade, downgrade, remove, hold, escalate, abandon, …)", labelNames: ["action"], registers });
    new client.Gauge({
      name: "sloserve_cluster_workers",
      help: "Workers with a live report, by hardware",
      labelNames: ["hardware"],
      registers,
      collect() {
        this.reset();
        for (const r of reports()) this.inc({ hardware: r.hardware });
      },
    });
    new client.Gauge({
      name: "sloserve_cluster_variant_instances",
      help: "Variant instances in the cluster by state, from the workers' latest reports",
      labelNames: ["variant", "state"],
      registers,
      collect() {
        this.reset();
        for (const r of reports()) for (const v of r.variants) this.inc({ variant: v.variant, state: v.state }, Math.max(v.instances, v.state === "loading" ? 1 : 0));
      },
    });
    new client.Gauge({
      name: "sloserve_cluster_arrivals_per_second",
      help: "Queries per second arriving at each variant's instances, from the workers' latest reports",
      labelNames: ["variant"],
      registers,
      collect() {
        this.reset();
        for (const r of reports()) for (const v of r.variants) this.inc({ variant: v.variant }, v.arrivals);
      },
    });
  }

  decision(action: string): void {
    this.decisions.inc({ action });
  }
}
