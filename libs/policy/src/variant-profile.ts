import type { VariantRecord } from "@sloserve/contracts";
import type { VariantProfile } from "./selection.js";
import { variantPricePerSecond } from "./variant-price.js";

/**
 * A registered variant as the decision code sees it (selection, model autoscaling); undefined while
 * it is unprofiled, since unprofiled variants are never chosen. A CPU variant needs `threads` cores
 * of a worker, an accelerator variant one accelerator; each needs the memory its profile measured.
 */
export function toVariantProfile(v: VariantRecord): VariantProfile | undefined {
  if (!v.profiled || !v.profile) return undefined;
  return {
    name: v.name,
    model: v.model,
    app: v.app,
    hardware: v.hardware,
    batchSize: v.maxBatch,
    accuracy: v.accuracy ?? 0,
    latencyMs: Object.fromEntries(Object.entries(v.profile.latencyMs).map(([b, ms]) => [Number(b), ms])),
    peakQps: v.profile.peakQps,
    loadLatencyMs: v.profile.loadLatencyMs,
    pricePerS: variantPricePerSecond(v.hardware, v.threads),
    profiled: true,
    resources: v.hardware === "cpu" ? { threads: v.threads, memoryBytes: v.profile.memoryBytes } : { accelerators: 1, memoryBytes: v.profile.memoryBytes },
  };
}
