import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Subscription } from "@nats-io/transport-node";
import { connectBus, createLogger, type Bus } from "@sloserve/bus";
import { Catalog, MetadataStore } from "@sloserve/store";
import { startNats, startRedis, type ServerHandle } from "@sloserve/stack";
import { waitFor } from "@sloserve/testing";
import { ManualClock, batchingTunedEventSchema, subjects, type ArrivalsReport, type BatchingTunedEvent, type ModelRecord, type VariantRecord } from "@sloserve/contracts";
import { BatchTuner } from "../src/batching.js";

/**
 * The registrar's batch tuner on a real nats-server and redis-server, with a manual clock: arrival
 * reports carry the model's tightest SLO; the tuner writes each profiled variant's Wbatch (libs/policy
 * planBatchWaits) to Redis and announces it; a catalog following the registry events sees it.
 *
 * Profile (hand-made): T(b) = 40 + 10b ms at b = 1, 2, 4, 8 (see libs/policy batch-wait.test.ts):
 * SLO 600 → Nbatch 8, Wbatch 7·120/8 = 105 ms; SLO 200 → Nbatch 6, Wbatch 5·100/6 = 83.33 ms.
 */

const T0 = 1_800_000_000_000;
const clock = new ManualClock(T0);
let nats: ServerHandle;
let redis: ServerHandle;
let bus: Bus;
let store: MetadataStore;
let tuner: BatchTuner;
let catalog: Catalog;
const events: BatchingTunedEvent[] = [];
const subs: Subscription[] = [];

const profile = { loadLatencyMs: 10, latencyMs: { "1": 50, "2": 60, "4": 80, "8": 120 }, peakQps: 8000 / 120, memoryBytes: 0, accuracy: 0.9, sampleShape: {}, worker: "w", profiledAtMs: T0 };
const variant = (name: string, o: Partial<VariantRecord> = {}): VariantRecord => ({
  name, model: "m", app: "shop", hardware: "cpu", maxBatch: 8, batchWaitMs: 0, quantization: "fp32", threads: 1, object: "model/m.onnx", accuracy: 0.9, profiled: true, profile, ...o,
});
const model: ModelRecord = {
  name: "m", app: "shop", task: "t", dataset: "d", platform: "onnxruntime_onnx", inputs: [{ name: "x", datatype: "FP32", shape: [-1, 4] }], outputs: [],
  object: "model/m.onnx", sizeBytes: 1, sha256: "", registeredAtMs: T0, validationObject: null, validationCount: 0, profileShape: {},
};
const report = (minSloMs: number | null, atMs = clock.now()): ArrivalsReport => ({ app: "shop", dispatcher: "d1", atMs, windowMs: 1000, arrivals: 3, models: { m: { queries: 3, minSloMs } }, infeasible: 0 });
const waitOf = async (name: string): Promise<number | undefined> => (await store.getVariant(name))?.batchWaitMs;

beforeAll(async () => {
  [nats, redis] = await Promise.all([startNats(), startRedis()]);
  const log = createLogger("batching-test", "warn");
  bus = await connectBus({ servers: nats.url, name: "batching-test", log });
  store = MetadataStore.connect(redis.url);
  await store.createModel(model, [variant("m--b8"), variant("m--b1", { maxBatch: 1 }), variant("m--b8-unprofiled", { profiled: false, profile: null })]);
  catalog = new Catalog(store);
  await catalog.load();
  subs.push(
    bus.nc.subscribe(subjects.batchingTunedAll, { callback: (_e, m) => void events.push(batchingTunedEventSchema.parse(m.json())) }),
    bus.nc.subscribe(subjects.registryEvents, { callback: (_e, m) => void catalog.applyEvent(m.subject, m.json()) }),
  );
  tuner = new BatchTuner(bus, store, clock, log);
});

afterAll(async () => {
  for (const s of subs) s.unsubscribe();
  await bus?.close();
  await store?.close();
  await Promise.all([nats?.stop(), redis?.stop()]);
});

describe("registrar batch tuner", () => {
  it("batch tuner - a loose SLO gives the profiled batch-8 variant its Wbatch, stored and announced", async () => {
    await tuner.applyArrivals(report(600));
    expect(await waitOf("m--b8")).toBe(105);
    expect(await waitOf("m--b1")).toBe(0); // nothing to wait for at max batch 1
    expect(await waitOf("m--b8-unprofiled")).toBe(0); // no profile: left alone
    await waitFor("the tuned event and the catalog at Wbatch 105", () => events.length === 1 && catalog.variants.get("m--b8")?.batchWaitMs === 105);
    expect(events[0]).toMatchObject({ model: "m", sloMs: 600, atMs: T0 });
    expect(events[0]!.variants.map((v) => [v.name, v.batchWaitMs])).toEqual([["m--b8", 105]]);
    expect(events[0]!.reasons["m--b8"]).toMatch(/^SLO 600 ms: Wbatch 0 → 105 ms; Nbatch 8 of max 8/);
    expect(catalog.variants.get("m--b8")?.batchWaitMs).toBe(105); // the registry event updated the catalog
  });

  it("batch tuner - the same SLO again changes nothing and announces nothing", async () => {
    clock.advance(1000);
    await tuner.applyArrivals(report(600));
    await tuner.retune("m"); // even forced: the stored Wbatch is already right
    // Both resolve after any announcement's publish was acknowledged; a round trip on the connection
    // our subscription is on then delivers it, if there was one.
    await bus.nc.flush();
    expect(events).toHaveLength(1);
  });

  it("batch tuner - a tighter SLO lowers Wbatch at once; a looser one waits for the SLO memory", async () => {
    clock.advance(1000);
    await tuner.applyArrivals(report(200));
    expect(await waitOf("m--b8")).toBe(83.33);
    expect(tuner.sloOf("m")).toBe(200);
    // 30 s later a second of looser queries only: kept at 200.
    clock.advance(30_000);
    await tuner.applyArrivals(report(600));
    expect(await waitOf("m--b8")).toBe(83.33);
    // Seconds with no SLO (model-specific queries) change nothing either.
    await tuner.applyArrivals(report(null));
    // 61 s after the 200 ms SLO was last seen: the looser one applies.
    clock.advance(31_000);
    await tuner.applyArrivals(report(600));
    expect(tuner.sloOf("m")).toBe(600);
    expect(await waitOf("m--b8")).toBe(105);
    await waitFor("the third tuned event", () => events.length === 3);
    expect(events.map((e) => e.sloMs)).toEqual([600, 200, 600]);
  });

  it("batch tuner - variants profiled later are tuned for the SLO already known", async () => {
    const late = variant("m--b4", { maxBatch: 4, profiled: false, profile: null });
    await store.putVariant(late);
    await tuner.applyProfiled("m");
    expect(await waitOf("m--b4")).toBe(0); // still unprofiled
    await store.putVariant({ ...late, profiled: true, profile });
    await tuner.applyProfiled("m");
    // SLO 600, max batch 4: b = 4: Wbatch 3·80/4 = 60, 60 + 80 = 140 ≤ 600 → Nbatch 4, Wbatch 60.
    expect(await waitOf("m--b4")).toBe(60);
    await tuner.applyProfiled("unknown-model"); // no SLO known: nothing to do
  });
});
