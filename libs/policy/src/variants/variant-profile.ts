import type { VariantRecord } from "@sloserve/contracts";
import type { VariantProfile } from "../selection/selection.js";
import { footprintOf, footprintPricePerSecond, variantResources } from "../placement/accelerator-share.js";

/**
 * A registered variant as the decision code sees it (selection, model autoscaling); undefined while
 * it is unprofiled, since unprofiled variants are never chosen. Its resources and price follow its
 * footprint (accelerator-share.ts): a CPU variant needs `threads` cores of a worker, a GPU variant its
 * share of the GPU's memory, an Inferentia variant its NeuronCores; each the memory its profile measured.
 */
export function toVariantProfile(v: VariantRecord): VariantProfile | undefined {
  if (!v.profiled || !v.profile) return undefined;
  const footprint = footprintOf(v);
  return {
    name: v.name,
    model: v.model,
    app: v.app,
    hardware: v.hardware,
    batchSize: v.maxBatch,
    accuracy: v.accuracy ?? 0,
    latencyMs: numericKeys(v.profile.latencyMs),
    peakQps: v.profile.peakQps,
    loadLatencyMs: v.profile.loadLatencyMs,
    pricePerS: footprintPricePerSecond(footprint),
    profiled: true,
    resources: variantResources(footprint),
    ...(v.profile.inputClasses ? { inputClasses: v.profile.inputClasses.map((c) => ({ elements: c.elements, latencyMs: numericKeys(c.latencyMs) })) } : {}),
  };
}

/** A profile's latencies by batch size, keyed by number. */
function numericKeys(latencyMs: Readonly<Record<string, number>>): Record<number, number> {
  return Object.fromEntries(Object.entries(latencyMs).map(([b, ms]) => [Number(b), ms]));
}
