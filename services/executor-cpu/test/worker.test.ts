import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { readFileSync } from "node:fs";
import { createInbox, type Msg, type Subscription } from "@nats-io/transport-node";
import { connectBus, createLogger, makeHeaders, type Bus } from "@sloserve/bus";
import { MetadataStore } from "@sloserve/store";
import { startNats, startRedis, ocrModels, type ServerHandle } from "@sloserve/stack";
import { waitFor } from "@sloserve/testing";
import { Worker, onnxBackend } from "@sloserve/executor";
import { ManualClock, contentTypes, encodeTensors, headers, subjects, stateEventSchema, workerReportSchema, type StateEvent, type VariantRecord, type WorkerReport } from "@sloserve/contracts";

/**
 * The worker shell with an injected clock, on a real nats-server and redis-server with a real ONNX
 * model (PaddleOCR's direction classifier): the clock decides what the batcher sheds and what the
 * state machine sees; the report timer is off and `tick()` is called by hand, one second of fake time
 * at a time. Profile figures are set by the test (peak 5 QPS) so that the states are known in advance.
 */

const model = ocrModels().find((m) => m.name === "ocr-cls")!;
const T0 = 1_800_000_000_000;
let nats: ServerHandle;
let redis: ServerHandle;
let bus: Bus;
let store: MetadataStore;
const clock = new ManualClock(T0);
let worker: Worker;
const events: StateEvent[] = [];
let stateSub: Subscription;

const variant: VariantRecord = {
  name: "ocr-cls--cpu-fp32-b4-t1",
  model: "ocr-cls",
  app: "ocr-cls",
  hardware: "cpu",
  maxBatch: 4,
  batchWaitMs: 0,
  quantization: "fp32",
  threads: 1,
  object: "ocr-cls.onnx",
  accuracy: null,
  profiled: true,
  profile: { loadLatencyMs: 50, latencyMs: { "1": 2, "2": 3, "4": 5 }, peakQps: 5, memoryBytes: 0, accuracy: null, sampleShape: { x: [3, 48, 192] }, worker: "test", profiledAtMs: T0 },
};

beforeAll(async () => {
  [nats, redis] = await Promise.all([startNats(), startRedis()]);
  const log = createLogger("worker-test", "warn");
  bus = await connectBus({ servers: nats.url, name: "worker-test", log });
  store = MetadataStore.connect(redis.url);
  await bus.models.putBlob({ name: variant.object }, readFileSync(model.path));
  await store.createModel(
    {
      name: "ocr-cls", app: "ocr-cls", task: "text-direction", dataset: "paddleocr", platform: "onnxruntime_onnx",
      inputs: [{ name: "x", datatype: "FP32", shape: [-1, 3, 48, 192] }], outputs: [], object: variant.object,
      sizeBytes: 0, sha256: "", registeredAtMs: T0, validationObject: null, validationCount: 0, profileShape: {},
    },
    [variant],
  );
  stateSub = bus.nc.subscribe(subjects.stateAll, { callback: (_e, m) => void events.push(stateEventSchema.parse(m.json())) });
  worker = new Worker(bus, store, onnxBackend("cpu", ["cpu"]), { id: "w-test", threads: 2, memoryBytes: 1 << 30, reportEveryMs: 3_600_000, profile: false }, log, clock);
  await worker.start();
});

afterAll(async () => {
  stateSub?.unsubscribe();
  await worker?.stop();
  await bus?.close();
  await store?.close();
  await Promise.all([nats?.stop(), redis?.stop()]);
});

/** Sends n queries to the variant's queue with the given deadline; resolves with every reply. */
async function send(n: number, deadlineMs: number): Promise<Msg[]> {
  const inbox = createInbox();
  const replies: Msg[] = [];
  const done = new Promise<void>((resolve) => {
    bus.nc.subscribe(inbox, {
      max: n,
      callback: (_e, m) => {
        replies.push(m);
        if (replies.length === n) resolve();
      },
    });
  });
  const x = { name: "x", datatype: "FP32" as const, shape: [1, 3, 48, 192], data: new Float32Array(3 * 48 * 192).fill(0.5) };
  for (let i = 0; i < n; i++) {
    await bus.js.publish(subjects.queue(variant.name), encodeTensors([x], {}), {
      headers: makeHeaders({ [headers.replyTo]: inbox, [headers.deadline]: deadlineMs, [headers.enqueuedAt]: clock.now(), [headers.requestId]: `q${i}` }),
    });
  }
  await done;
  return replies;
}

describe("executor-cpu worker shell", () => {
  it("worker - loads a variant on command and reports it active", async () => {
    const result = await worker.execute({ id: "c1", action: "load", variant: variant.name, reason: "test", atMs: clock.now() });
    expect(result).toMatchObject({ ok: true, action: "load" });
    await waitFor("the active state event", () => events.some((e) => e.state === "active"));
    expect(events.map((e) => e.state)).toEqual(["loading", "active"]);
    expect(events.every((e) => e.atMs === T0)).toBe(true); // the injected clock, not the wall clock
  });

  it("worker - queries before their deadline are answered; past it, a clear deadline error (the shared batching rule)", async () => {
    const ok = await send(6, clock.now() + 60_000);
    expect(ok.map((m) => m.headers?.get(headers.error) ?? "")).toEqual(["", "", "", "", "", ""]);
    expect(ok.every((m) => m.headers?.get(headers.contentType) === contentTypes.wire)).toBe(true);
    const late = await send(3, clock.now() - 1);
    expect(late.map((m) => m.headers?.get(headers.error))).toEqual(["deadline_exceeded", "deadline_exceeded", "deadline_exceeded"]);
    expect(new TextDecoder().decode(late[0]!.data)).toContain("could not finish before its deadline");
  });

  it("worker - the state machine steps on fake seconds: 9 arrivals over the 5 s window ≥ peak 5 → overloaded, then active", async () => {
    // The 9 queries above arrived in this report period: 9 / 1 s = 9 QPS ≥ 5 (peak 5 × 1 instance).
    clock.advance(1000);
    const r1 = await worker.tick();
    expect(r1.variants[0]).toMatchObject({ variant: variant.name, state: "overloaded", instances: 1, arrivals: 9 });
    await waitFor("the overloaded state event", () => events.some((e) => e.state === "overloaded"));
    expect(events.at(-1)).toMatchObject({ state: "overloaded", previous: "active", atMs: T0 + 1000 });
    // Idle seconds: the 5 s window spreads 9 arrivals over 2 s (4.5 < 5) → back to active.
    clock.advance(1000);
    const r2 = await worker.tick();
    expect(r2.variants[0]).toMatchObject({ state: "active", arrivals: 0 });
    expect(r2.atMs).toBe(T0 + 2000);
  });

  it("worker - a worker stopped while it loads says the load is abandoned and leaves no record", async () => {
    // A second worker whose engine waits for the test before loading: stop() comes mid-load.
    let open!: () => void;
    const gate = new Promise<void>((resolve) => (open = resolve));
    const real = onnxBackend("cpu", ["cpu"]);
    const held = { ...real, load: async (...args: Parameters<typeof real.load>) => (await gate, real.load(...args)) };
    const w = new Worker(bus, store, held, { id: "w-stopping", threads: 1, memoryBytes: 1 << 30, reportEveryMs: 3_600_000, profile: false }, createLogger("worker-test", "warn"), clock);
    await w.start();
    const reports: WorkerReport[] = [];
    const reportSub = bus.nc.subscribe(subjects.workerMetrics("w-stopping"), { callback: (_e, m) => void reports.push(workerReportSchema.parse(m.json())) });
    const loading = w.execute({ id: "c-stop", action: "load", variant: variant.name, reason: "test", atMs: clock.now() });
    await waitFor("w-stopping's loading state event", () => events.some((e) => e.worker === "w-stopping" && e.state === "loading"));
    const stopped = w.stop();
    open();
    await stopped;
    // The load finished after the stop began: released, not started; the command fails.
    expect(await loading).toMatchObject({ ok: false, error: "worker stopping" });
    await waitFor("w-stopping's inactive state event", () => events.some((e) => e.worker === "w-stopping" && e.state === "inactive"));
    expect(events.filter((e) => e.worker === "w-stopping").map((e) => [e.state, e.reason])).toEqual([
      ["loading", "test"],
      ["inactive", "worker stopping: load abandoned"],
    ]);
    expect((await store.listInstances()).filter((i) => i.worker === "w-stopping")).toEqual([]);
    // Its last report says it leaves, with nothing loaded: readers forget it at once.
    await waitFor("w-stopping's last report (leaving)", () => reports.some((r) => r.leaving === true));
    reportSub.unsubscribe();
    expect(reports.at(-1)).toMatchObject({ worker: "w-stopping", leaving: true, variants: [] });
  });

  it("worker - unload makes the variant inactive", async () => {
    await worker.execute({ id: "c2", action: "unload", variant: variant.name, reason: "test", atMs: clock.now() });
    await waitFor("the inactive state event after the unload", () => events.at(-1)?.state === "inactive");
    expect(events.slice(-2).map((e) => e.state)).toEqual(["unloading", "inactive"]);
    expect((await worker.tick()).variants).toEqual([]);
  });
});
