import { z } from "zod";
import { commonEnvSchema, compileOptions } from "@sloserve/contracts";
import { connectBus, runEvery, runService, systemClock } from "@sloserve/bus";
import { Catalog, MetadataStore } from "@sloserve/store";
import { ModelAutoscalerController } from "./controller.js";
import { PipelineController } from "./pipelines.js";
import { ModelAutoscalerMetrics } from "./metrics.js";
import { startServiceMetrics } from "@sloserve/metrics";

/**
 * model-autoscaler: every second, per worker, INFaaS's model-level autoscaling (replicate, upgrade,
 * downgrade, remove, place elsewhere, escalate to the VM autoscaler), carried out by the rule the
 * simulator runs (libs/policy model-actions). Decisions go out on `decision.model.<worker>` with their
 * reasons; commands on `scale.model.<worker>`. Pipelines (InferLine): the pipeline controller plans
 * each registered pipeline and tunes it every second (pipelines.ts); its replica counts are floors the
 * model autoscaler places and keeps; its decisions go out on `decision.pipeline.<name>`.
 */
const envSchema = commonEnvSchema.extend({
  TICK_MS: z.coerce.number().int().positive().default(1000),
  /** INFaaS slack: scale up when capacity / load < SLACK. @default 1.05 */
  SLACK: z.coerce.number().min(1).max(2).default(1.05),
  /** The pipeline Tuner's period, ms. @default 1000 */
  PIPELINE_TICK_MS: z.coerce.number().int().positive().default(1000),
  /** Re-plan every pipeline from its live arrivals this often, ms. @default 300000 */
  PIPELINE_PLAN_PERIOD_MS: z.coerce.number().int().positive().default(300_000),
  /** Length of the planning trace, s. @default 300 */
  PIPELINE_TRACE_SECONDS: z.coerce.number().int().positive().max(3600).default(300),
  /** Sample queries per pipeline at registration (scale factors); 0: none. @default 100 */
  PIPELINE_SAMPLE_QUERIES: z.coerce.number().int().nonnegative().default(100),
  /** Planning rate of a spec without `planning.rate_qps`. @default 1 */
  PIPELINE_DEFAULT_RATE_QPS: z.coerce.number().positive().default(1),
  /** The Tuner's rules (libs/policy tuner.ts TunerOptions). @default paper, min, 15000 */
  TUNER_SCALE_UP_RULE: z.enum(["paper", "relative"]).default("paper"),
  TUNER_SCALE_DOWN_RHO: z.enum(["min", "min-replicated"]).default("min"),
  TUNER_SCALE_DOWN_DELAY_MS: z.coerce.number().int().nonnegative().default(15_000),
});

await runService("model-autoscaler", process.env, async (log) => {
  const options = compileOptions(envSchema, process.env, "model-autoscaler");
  const clock = systemClock;
  const bus = await connectBus({ servers: options.NATS_URL, name: "model-autoscaler", log, replicas: options.JS_REPLICAS });
  const store = MetadataStore.connect(options.REDIS_URL);
  const catalog = new Catalog(store);
  const metrics = await startServiceMetrics(options, log);
  const modelMetrics: ModelAutoscalerMetrics = new ModelAutoscalerMetrics(metrics.registry, () => controller.latestReports());
  const controller: ModelAutoscalerController = new ModelAutoscalerController(bus, catalog, log, clock, { autoscaler: { slack: options.SLACK }, metrics: modelMetrics });
  const pipelines = new PipelineController(bus, store, catalog, controller, log, clock, {
    planPeriodMs: options.PIPELINE_PLAN_PERIOD_MS,
    traceSeconds: options.PIPELINE_TRACE_SECONDS,
    sampleQueries: options.PIPELINE_SAMPLE_QUERIES,
    defaultRateQps: options.PIPELINE_DEFAULT_RATE_QPS,
    tuner: { scaleUpRule: options.TUNER_SCALE_UP_RULE, scaleDownRho: options.TUNER_SCALE_DOWN_RHO, scaleDownDelayMs: options.TUNER_SCALE_DOWN_DELAY_MS },
  });
  const subs = [...controller.subscribe(), ...pipelines.subscribe()];
  await catalog.load();
  await pipelines.load();
  const pipelineTimer = runEvery(options.PIPELINE_TICK_MS, () => pipelines.tick(), log, "pipeline tick");
  const timer = runEvery(options.TICK_MS, () => controller.tick(), log, "autoscaler tick");
  return {
    info: { metricsPort: metrics.port },
    async stop() {
      clearInterval(timer);
      clearInterval(pipelineTimer);
      for (const s of subs) s.unsubscribe();
      await metrics.close();
      await bus.close();
      await store.close();
    },
  };
});
