import type { VariantRecord } from "@sloserve/contracts";
import { SelectionIndex, toVariantProfile, type VariantRuntime } from "@sloserve/policy";
import type { ClusterView } from "./cluster.js";

/**
 * Keeps a SelectionIndex (libs/policy/selection) in step with the catalog (profiles) and the
 * cluster view (states, load), so that a model-less query's selection never waits on anything.
 */
export class SelectionView {
  readonly index = new SelectionIndex();
  private readonly names = new Set<string>();

  /** A variant was registered, profiled or changed. */
  upsert(v: VariantRecord): void {
    const profile = toVariantProfile(v);
    if (profile) {
      this.index.upsertVariant(profile);
      this.names.add(v.name);
    } else this.remove(v.name);
  }

  remove(name: string): void {
    this.index.removeVariant(name);
    this.names.delete(name);
  }

  /** Recomputes every variant's runtime view from the cluster (after a report or a state event). */
  refreshRuntime(cluster: ClusterView): void {
    for (const [variant, byWorker] of cluster.instances) {
      if (!this.index.variant(variant)) continue;
      const load = cluster.load.get(variant);
      let active = 0;
      let overloaded = 0;
      let interfered = 0;
      let loading = 0;
      const workers: VariantRuntime["workers"] = [];
      for (const [worker, state] of byWorker) {
        if (state === "active") active++;
        else if (state === "overloaded") overloaded++;
        else if (state === "interfered") interfered++;
        else if (state === "loading") loading++;
        if (state === "active") workers.push({ worker, qps: cluster.variantQpsOn(variant, worker) });
      }
      const state: VariantRuntime["state"] = active > 0 ? "active" : overloaded > 0 ? "overloaded" : interfered > 0 ? "interfered" : loading > 0 ? "loading" : "inactive";
      this.index.setRuntime(variant, { state, instances: active + overloaded + interfered, qps: load?.arrivalsPerS ?? 0, workers });
    }
    for (const v of this.names) {
      if (!cluster.instances.get(v)?.size) this.index.setRuntime(v, { state: "inactive", instances: 0, qps: 0, workers: [] });
    }
  }
}
