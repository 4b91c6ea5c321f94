/**
 * Utilisation: the one formula every reader of worker reports uses (the VM autoscaler's rules, the
 * model autoscaler's packing, the simulator's machines, the live replay's start reading).
 */
import type { WorkerReport } from "@sloserve/contracts";

/** Each variant's threads, by name (a `Map` of variant records fits). */
export interface VariantThreads {
  get(variant: string): { threads: number } | undefined;
}

/**
 * The busy share of what a worker offers in one report: for a CPU worker Σ busy fraction × threads of
 * each variant / the worker's threads, for an accelerator worker Σ busy fraction / accelerators. The
 * VM autoscaler reads the mean of a worker's reports since its last tick ({@link FleetObservation}).
 * A variant the lookup does not know counts one thread.
 */
export function reportUtilization(report: WorkerReport, variants: VariantThreads): number {
  let busy = 0;
  for (const v of report.variants) busy += v.utilisation * (report.hardware === "cpu" ? (variants.get(v.variant)?.threads ?? 1) : 1);
  const offered = report.hardware === "cpu" ? report.threads : Math.max(1, report.accelerators ?? 1);
  return Math.min(1, busy / offered);
}
