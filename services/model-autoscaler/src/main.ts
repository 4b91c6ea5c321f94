import { z } from "zod";
import { commonEnvSchema, compileOptions } from "@sloserve/contracts";
import { connectBus, runService, systemClock } from "@sloserve/bus";
import { Catalog, MetadataStore } from "@sloserve/store";
import { ModelAutoscalerController } from "./controller.js";

/**
 * model-autoscaler: every second, per worker, INFaaS's model-level autoscaling (replicate, upgrade,
 * downgrade, remove, place elsewhere, escalate to the VM autoscaler), carried out by the rule the
 * simulator runs (libs/policy model-actions). Decisions go out on `decision.model.<worker>` with their
 * reasons; commands on `scale.model.<worker>`.
 */
const envSchema = commonEnvSchema.extend({
  TICK_MS: z.coerce.number().int().positive().default(1000),
  /** INFaaS slack: scale up when capacity / load < SLACK. @default 1.05 */
  SLACK: z.coerce.number().min(1).max(2).default(1.05),
});

await runService("model-autoscaler", process.env, async (log) => {
  const options = compileOptions(envSchema, process.env, "model-autoscaler");
  const clock = systemClock;
  const bus = await connectBus({ servers: options.NATS_URL, name: "model-autoscaler", log });
  const store = MetadataStore.connect(options.REDIS_URL);
  const catalog = new Catalog(store);
  const controller = new ModelAutoscalerController(bus, catalog, log, clock, { autoscaler: { slack: options.SLACK } });
  const subs = controller.subscribe();
  await catalog.load();
  let ticking = false;
  const timer = setInterval(() => {
    if (ticking) return; // a slow tick is never overlapped by the next
    ticking = true;
    const started = performance.now();
    void controller
      .tick()
      .catch((err: unknown) => log.error({ err }, "tick failed"))
      .finally(() => {
        ticking = false;
        const ms = performance.now() - started;
        if (ms > options.TICK_MS / 2) log.warn({ ms }, "slow autoscaler tick");
      });
  }, options.TICK_MS);
  return {
    async stop() {
      clearInterval(timer);
      for (const s of subs) s.unsubscribe();
      await bus.close();
      await store.close();
    },
  };
});
