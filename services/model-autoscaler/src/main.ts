import { z } from "zod";
import { compileOptions } from "@sloserve/contracts";
import { modelAutoscalerSettings } from "@sloserve/settings";
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
const envSchema = modelAutoscalerSettings;

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
