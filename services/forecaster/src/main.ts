import { z } from "zod";
import { arrivalsReportSchema, commonEnvSchema, compileOptions, subjects } from "@sloserve/contracts";
import { connectBus, runService, systemClock } from "@sloserve/bus";
import { MetadataStore } from "@sloserve/store";
import { Forecaster } from "./forecaster.js";

/** forecaster: per-app arrival forecasts (MArk §4.2) on `forecast.<app>`, every unit. */
const envSchema = commonEnvSchema.extend({
  /** Prediction unit Pu, seconds. @default 60 */
  UNIT_S: z.coerce.number().int().min(1).default(60),
  /** Sample window Ps, seconds (divides UNIT_S). @default 5 */
  SAMPLE_S: z.coerce.number().int().min(1).default(5),
  /** Units forecast, Pw. @default 60 */
  HORIZON: z.coerce.number().int().min(1).default(60),
  /** Units per season. @default 1440 (a day of minutes) */
  SEASON: z.coerce.number().int().min(2).default(1440),
  /** Units of history kept. @default 10080 (a week of minutes) */
  KEEP: z.coerce.number().int().min(2).default(10080),
});

await runService("forecaster", process.env, async (log) => {
  const options = compileOptions(envSchema, process.env, "forecaster");
  if (options.UNIT_S % options.SAMPLE_S !== 0) throw new Error(`invalid configuration: UNIT_S ${options.UNIT_S} is not a multiple of SAMPLE_S ${options.SAMPLE_S}`);
  const bus = await connectBus({ servers: options.NATS_URL, name: "forecaster", log });
  const store = MetadataStore.connect(options.REDIS_URL);
  const forecaster = new Forecaster(bus, store, { unitS: options.UNIT_S, sampleS: options.SAMPLE_S, horizon: options.HORIZON, season: options.SEASON, keep: options.KEEP }, log);
  const sub = bus.nc.subscribe(subjects.arrivalsAll, {
    callback: (_err, msg) => {
      const parsed = arrivalsReportSchema.safeParse(msg.json());
      if (parsed.success) forecaster.applyArrivals(parsed.data);
    },
  });
  // Close units on wall-clock boundaries (one second late, so that the last reports are in).
  const unitMs = options.UNIT_S * 1000;
  let timer: NodeJS.Timeout;
  const schedule = (): void => {
    const now = systemClock.now();
    const nextEnd = Math.floor(now / unitMs) * unitMs + unitMs;
    timer = setTimeout(() => {
      void forecaster.closeUnit(nextEnd).catch((err) => log.error({ err }, "forecast failed")).finally(schedule);
    }, nextEnd + 1000 - now);
  };
  schedule();
  return {
    info: { unitS: options.UNIT_S, sampleS: options.SAMPLE_S, horizon: options.HORIZON },
    async stop() {
      clearTimeout(timer);
      sub.unsubscribe();
      await bus.close();
      await store.close();
    },
  };
});
