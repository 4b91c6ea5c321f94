import { resolve } from "node:path";
import { pathToFileURL } from "node:url";
import { z } from "zod";
import { arrivalsReportSchema, compileOptions, subjects } from "@sloserve/contracts";
import { forecasterSettings } from "@sloserve/settings";
import { connectBus, runService, systemClock } from "@sloserve/bus";
import { MetadataStore } from "@sloserve/store";
import { DEFAULT_PREDICTOR, loadPredictor, parsePredictorSpec, parsePredictorsByApp, type Predictor } from "@sloserve/policy";
import { Forecaster } from "./forecaster.js";
import { ForecasterMetrics } from "./metrics.js";
import { startServiceMetrics } from "@sloserve/metrics";

/** forecaster: per-app arrival forecasts (MArk §4.2) on `forecast.<app>`, every unit. */
const envSchema = forecasterSettings;

/** A user's predictor module, by path (relative to the working directory). */
const importModule = (path: string): Promise<unknown> => import(pathToFileURL(resolve(path)).href);

await runService("forecaster", process.env, async (log) => {
  const options = compileOptions(envSchema, process.env, "forecaster");
  if (options.UNIT_S % options.SAMPLE_S !== 0) throw new Error(`invalid configuration: UNIT_S ${options.UNIT_S} is not a multiple of SAMPLE_S ${options.SAMPLE_S}`);
  const bus = await connectBus({ servers: options.NATS_URL, name: "forecaster", log, replicas: options.JS_REPLICAS });
  const store = MetadataStore.connect(options.REDIS_URL);
  const metrics = await startServiceMetrics(options, log);
  const forecastMetrics = new ForecasterMetrics(metrics.registry);
  const fallback = await loadPredictor(options.FORECASTER, importModule);
  const byApp: Record<string, Predictor> = {};
  for (const [app, name] of Object.entries(options.FORECASTER_BY_APP)) byApp[app] = await loadPredictor(name, importModule);
  const forecaster = new Forecaster(bus, store, { unitS: options.UNIT_S, sampleS: options.SAMPLE_S, horizon: options.HORIZON, season: options.SEASON, keep: options.KEEP }, log, { fallback, byApp });
  const sub = bus.nc.subscribe(subjects.arrivalsAll, {
    callback: (_err, msg) => {
      const parsed = arrivalsReportSchema.safeParse(msg.json());
      if (!parsed.success) return;
      forecaster.applyArrivals(parsed.data);
      forecastMetrics.arrivals.observe(parsed.data);
    },
  });
  // Close units on wall-clock boundaries (one second late, so that the last reports are in).
  const unitMs = options.UNIT_S * 1000;
  let timer: NodeJS.Timeout;
  const schedule = (): void => {
    const now = systemClock.now();
    const nextEnd = Math.floor(now / unitMs) * unitMs + unitMs;
    timer = setTimeout(() => {
      void forecaster.closeUnit(nextEnd).then((published) => forecastMetrics.published(published)).catch((err) => log.error({ err }, "forecast failed")).finally(schedule);
    }, nextEnd + 1000 - now);
  };
  schedule();
  return {
    info: { unitS: options.UNIT_S, sampleS: options.SAMPLE_S, horizon: options.HORIZON, predictor: fallback.name, predictorByApp: options.FORECASTER_BY_APP, metricsPort: metrics.port },
    async stop() {
      clearTimeout(timer);
      sub.unsubscribe();
      await metrics.close();
      await bus.close();
      await store.close();
    },
  };
});
