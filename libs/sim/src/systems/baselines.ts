/**
 * The INFaaS paper's baselines (papers/infaas.txt §6, Table 5), as configurations of the same simulated
 * system so that only the policy differs:
 * - **Clipper+** (from TF Serving, Triton, Clipper): a developer-chosen variant, pre-loaded with a
 *   fixed number of instances; no autoscaling.
 * - **SM+** (from SageMaker, AI Platform): a developer-chosen variant, scaled horizontally (replicas
 *   only) by the same model autoscaler with vertical scaling switched off.
 */
import type { VariantProfile } from "@sloserve/policy";
import type { InfaasSystemOptions } from "./infaas.js";

type Common = Omit<InfaasSystemOptions, "mode" | "variants" | "preload">;

export function clipperPlus(variant: VariantProfile, instances: number, common: Common): InfaasSystemOptions {
  return { ...common, mode: "static", variants: [variant], preload: [{ variant: variant.name, count: instances }] };
}

export function smPlus(variant: VariantProfile, common: Common, initialInstances = 1): InfaasSystemOptions {
  return { ...common, mode: "horizontal", variants: [variant], preload: [{ variant: variant.name, count: initialInstances }] };
}

export function infaasSystem(variants: readonly VariantProfile[], preload: InfaasSystemOptions["preload"], common: Common): InfaasSystemOptions {
  return { ...common, mode: "infaas", variants, preload: preload ?? [] };
}
