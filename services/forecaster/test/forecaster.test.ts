import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { Writable } from "node:stream";
import type { Subscription } from "@nats-io/transport-node";
import { connectBus, createLogger, type Bus } from "@sloserve/bus";
import { MetadataStore } from "@sloserve/store";
import { startNats, startRedis, type ServerHandle } from "@sloserve/stack";
import { waitFor } from "@sloserve/testing";
import { forecastMessageSchema, subjects, type ArrivalsReport, type ForecastMessage } from "@sloserve/contracts";
import { builtinPredictor, loadPredictor, type ModuleImporter } from "@sloserve/policy";
import { Forecaster } from "../src/forecaster.js";

/**
 * The forecaster shell on a real nats-server and redis-server: arrival reports in, per-unit max rates
 * (5 s windows) in Redis, each app's forecast out on forecast.<app>, made by the app's predictor from
 * the registry — a built-in one, a user's module loaded for real, and one that fails. Time is the unit
 * end passed to closeUnit (no clock read).
 */

const T0 = 1_800_000_000_000; // a whole minute
const dir = mkdtempSync(join(tmpdir(), "sloserve-forecaster-"));
const importFile: ModuleImporter = (path) => import(pathToFileURL(path).href);
let nats: ServerHandle;
let redis: ServerHandle;
let bus: Bus;
let store: MetadataStore;
let forecaster: Forecaster;
const logs: Array<{ level: number; msg: string; app?: string; predictor?: string }> = [];
const published: ForecastMessage[] = [];
let sub: Subscription;

beforeAll(async () => {
  [nats, redis] = await Promise.all([startNats(), startRedis()]);
  const sink = new Writable({ write: (chunk: Buffer, _enc, done) => { for (const l of chunk.toString().split("\n").filter(Boolean)) logs.push(JSON.parse(l)); done(); } });
  const log = createLogger("forecaster-test", "info", sink);
  bus = await connectBus({ servers: nats.url, name: "forecaster-test", log });
  store = MetadataStore.connect(redis.url);
  const peak = join(dir, "peak.mjs");
  writeFileSync(peak, 'export default { name: "recent-peak", forecast: (h, n) => new Array(n).fill(2 * Math.max(...h.slice(-2))) };');
  const broken = join(dir, "broken.mjs");
  writeFileSync(broken, 'export const forecaster = { name: "broken", forecast: () => { throw new Error("model file missing"); } };');
  forecaster = new Forecaster(bus, store, { unitS: 60, sampleS: 5, horizon: 3, season: 1440, keep: 100 }, log, {
    fallback: builtinPredictor("auto"),
    byApp: { ads: await loadPredictor(`module:${peak}`, importFile), broken: await loadPredictor(`module:${broken}`, importFile) },
  });
  sub = bus.nc.subscribe(subjects.forecastAll, { callback: (_e, m) => void published.push(forecastMessageSchema.parse(m.json())) });
});

afterAll(async () => {
  sub?.unsubscribe();
  await bus?.close();
  await store?.close();
  await Promise.all([nats?.stop(), redis?.stop()]);
  rmSync(dir, { recursive: true, force: true });
});

/** Per-second reports of one dispatcher for the minute starting at `startMs`: `rate(s)` arrivals in second s. */
function minute(app: string, startMs: number, rate: (s: number) => number, dispatcher = "d1"): void {
  for (let s = 0; s < 60; s++) {
    const report: ArrivalsReport = { app, dispatcher, atMs: startMs + (s + 1) * 1000, windowMs: 1000, arrivals: rate(s), models: {}, infeasible: 0 };
    forecaster.applyArrivals(report);
  }
}

describe("forecaster shell", () => {
  it("forecaster - per-unit max of 5 s windows, summed over dispatchers, forecast by each app's predictor", async () => {
    // shop: 10/s from two dispatchers (5 + 5), with seconds 20-24 at 40/s from one of them:
    // max window = (40 + 5) = 45/s. ads: 3/s flat.
    minute("shop", T0, () => 5, "d1");
    minute("shop", T0, (s) => (s >= 20 && s < 25 ? 40 : 5), "d2");
    minute("ads", T0, () => 3);
    minute("broken", T0, () => 7);
    const out = await forecaster.closeUnit(T0 + 60_000);
    const shop = out.find((m) => m.app === "shop")!;
    expect(shop).toMatchObject({ observed: 45, values: [45, 45, 45], method: "last-value", historyUnits: 1 }); // auto, under a season: last value
    const ads = out.find((m) => m.app === "ads")!;
    expect(ads).toMatchObject({ observed: 3, values: [6, 6, 6], method: "recent-peak" }); // the user's module: 2 × 3
    expect(out.find((m) => m.app === "broken")).toBeUndefined();
    expect(await store.getForecastHistory("shop")).toEqual([45]);
    expect(await store.getForecastHistory("broken")).toEqual([7]); // the history is kept though the predictor failed
    // closeUnit resolved after each publish was acknowledged; a round trip on the connection our
    // subscription is on has delivered them.
    await bus.nc.flush();
    expect(published.map((m) => m.app).sort()).toEqual(["ads", "shop"]);
    const failure = await waitFor("the predictor's failure logged", () => logs.find((l) => l.msg === "predictor failed: no forecast for this unit"));
    expect(failure).toMatchObject({ level: 50, app: "broken", predictor: `module:${join(dir, "broken.mjs")}` });
  });

  it("forecaster - the next unit: the module sees the whole history", async () => {
    minute("ads", T0 + 60_000, () => 5);
    const out = await forecaster.closeUnit(T0 + 120_000);
    expect(out.find((m) => m.app === "ads")).toMatchObject({ observed: 5, values: [10, 10, 10], historyUnits: 2 }); // 2 × max(3, 5)
    // shop had no reports this unit: an observed 0
    expect(out.find((m) => m.app === "shop")).toMatchObject({ observed: 0, values: [0, 0, 0] });
  });
  it("forecaster - a report's arrivals go to the seconds its window covers (a late timer's 1.5 s is not read as one second)", async () => {
    const t = T0 + 120_000;
    // 100 arrivals over [t, t + 1000), then a late report: 150 over [t + 1000, t + 2500), then 50 over [t + 2500, t + 3000).
    const one = new Forecaster(bus, store, { unitS: 3, sampleS: 1, horizon: 1, season: 1440, keep: 100 }, createLogger("forecaster-test", "silent"), { fallback: builtinPredictor("last-value") });
    for (const r of [[1000, 1000, 100], [2500, 1500, 150], [3000, 500, 50]] as const) one.applyArrivals({ app: "late-1s", dispatcher: "d1", atMs: t + r[0], windowMs: r[1], arrivals: r[2], models: {}, infeasible: 0 });
    const out = await one.closeUnit(t + 3000);
    // Seconds: 100, 100, 100 (not 100, 150, 50): the max 1 s rate is 100.
    expect(out.find((m) => m.app === "late-1s")).toMatchObject({ observed: 100 });
  });
});
