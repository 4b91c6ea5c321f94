import { z } from "zod";
import { commonEnvSchema } from "@sloserve/contracts";
import { DEFAULT_MODEL_AUTOSCALER_CONFIG } from "@sloserve/policy";

/** The model autoscaler's settings (services/model-autoscaler): INFaaS's model-level scaling and InferLine's pipeline Planner and Tuner. */
export const modelAutoscalerSettings = commonEnvSchema.extend({
  TICK_MS: z.coerce.number().int().positive().default(1000).describe("Period of the model autoscaler (INFaaS's per-worker rule, its actions, the variant-state views), ms."),
  SLACK: z.coerce.number().min(1).max(2).default(DEFAULT_MODEL_AUTOSCALER_CONFIG.slack).describe("INFaaS slack: scale up when capacity / load < SLACK."),
  PIPELINE_TICK_MS: z.coerce.number().int().positive().default(1000).describe("The pipeline Tuner's period, ms."),
  PIPELINE_PLAN_PERIOD_MS: z.coerce.number().int().positive().default(300_000).describe("Re-plan every pipeline from its live arrivals this often, ms."),
  PIPELINE_TRACE_SECONDS: z.coerce.number().int().positive().max(3600).default(300).describe("Length of the planning trace, s."),
  PIPELINE_SAMPLE_QUERIES: z.coerce.number().int().nonnegative().default(100).describe("Sample queries per pipeline at registration (scale factors); 0: none."),
  PIPELINE_DEFAULT_RATE_QPS: z.coerce.number().positive().default(1).describe("Planning rate of a spec without `planning.rate_qps`."),
  TUNER_SCALE_UP_RULE: z.enum(["paper", "relative"]).default("paper").describe("The Tuner's scale-up rule (libs/policy pipelines/tuner.ts): `paper` (InferLine §5: replicas for the exceeding live rate itself) or `relative` (the planned rate scaled by the worst relative exceedance)."),
  TUNER_SCALE_DOWN_RHO: z.enum(["min", "min-replicated"]).default("min").describe("The Tuner's scale-down utilisation ρ: the minimum over all models (`min`, InferLine §5) or over the models planned with more than one replica (`min-replicated`)."),
  TUNER_SCALE_DOWN_DELAY_MS: z.coerce.number().int().nonnegative().default(15_000).describe("The Tuner's quiet period before it scales down, ms."),
});
export type ModelAutoscalerSettings = z.infer<typeof modelAutoscalerSettings>;
