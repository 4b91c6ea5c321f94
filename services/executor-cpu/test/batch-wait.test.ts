import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { readFileSync } from "node:fs";
import { createInbox, type Msg } from "@nats-io/transport-node";
import { connectBus, createLogger, makeHeaders, systemClock, type Bus } from "@sloserve/bus";
import { MetadataStore } from "@sloserve/store";
import { startNats, startRedis, ocrModels, type ServerHandle } from "@sloserve/stack";
import { waitFor } from "@sloserve/testing";
import { Worker, onnxBackend } from "@sloserve/executor";
import { decodeTensors, encodeTensors, headers, subjects, type BatchingTunedEvent, type ModelProfiledEvent, type VariantRecord } from "@sloserve/contracts";

/**
 * Re-tuned Wbatch reaches the executor without a reload (the registrar's `registry.event.tuned.<model>`,
 * MArk §4.3), on a real nats-server and redis-server with a real ONNX model (PaddleOCR's direction
 * classifier). The Wbatch values are chosen so that the outcome does not depend on this machine's
 * speed: with Wbatch = 60 s a batch leaves only when it is full (Nbatch 4), and a partial batch waiting
 * on it leaves as soon as Wbatch drops to 0.
 */

const model = ocrModels().find((m) => m.name === "ocr-cls")!;
let nats: ServerHandle;
let redis: ServerHandle;
let bus: Bus;
let store: MetadataStore;
let worker: Worker;

const variant = (maxBatch: number): VariantRecord => ({
  name: `ocr-cls--cpu-fp32-b${maxBatch}-t1`,
  model: "ocr-cls",
  app: "ocr-cls",
  hardware: "cpu",
  maxBatch,
  batchWaitMs: 0,
  quantization: "fp32",
  threads: 1,
  object: "ocr-cls.onnx",
  accuracy: null,
  profiled: true,
  profile: { loadLatencyMs: 50, latencyMs: { "1": 2, "2": 3, "4": 5 }, peakQps: 800, memoryBytes: 0, accuracy: null, sampleShape: { x: [3, 48, 192] }, worker: "test", profiledAtMs: 0 },
});
const b4 = variant(4);
const b2 = variant(2);

beforeAll(async () => {
  [nats, redis] = await Promise.all([startNats(), startRedis()]);
  const log = createLogger("batch-wait-test", "warn");
  bus = await connectBus({ servers: nats.url, name: "batch-wait-test", log });
  store = MetadataStore.connect(redis.url);
  await bus.models.putBlob({ name: b4.object }, readFileSync(model.path));
  await store.createModel(
    {
      name: "ocr-cls", app: "ocr-cls", task: "text-direction", dataset: "paddleocr", platform: "onnxruntime_onnx",
      inputs: [{ name: "x", datatype: "FP32", shape: [-1, 3, 48, 192] }], outputs: [], object: b4.object,
      sizeBytes: 0, sha256: "", registeredAtMs: 0, validationObject: null, validationCount: 0, profileShape: {},
    },
    [b4, b2],
  );
  worker = new Worker(bus, store, onnxBackend("cpu", ["cpu"]), { id: "w-batch", threads: 2, memoryBytes: 1 << 30, reportEveryMs: 3_600_000, profile: false }, log, systemClock);
  await worker.start();
});

afterAll(async () => {
  await worker?.stop();
  await bus?.close();
  await store?.close();
  await Promise.all([nats?.stop(), redis?.stop()]);
});

/** What the registrar announces after re-tuning (libs/contracts batchingTunedEventSchema). */
async function announce(v: VariantRecord, batchWaitMs: number): Promise<void> {
  const event: BatchingTunedEvent = { model: v.model, sloMs: 1000, variants: [{ ...v, batchWaitMs }], reasons: { [v.name]: "test" }, atMs: systemClock.now() };
  await bus.js.publish(subjects.batchingTuned(v.model), JSON.stringify(event));
}

/** Publishes n queries to the variant's queue; resolves with the batch size each was served in. */
function send(v: VariantRecord, n: number): { published: Promise<void>; sizes: Promise<number[]>; replies: Msg[] } {
  const inbox = createInbox();
  const replies: Msg[] = [];
  const sizes = new Promise<number[]>((resolve) => {
    bus.nc.subscribe(inbox, {
      max: n,
      callback: (_e, m) => {
        replies.push(m);
        if (replies.length === n) resolve(replies.map((r) => decodeTensors<{ served_by: { batch_size: number } }>(r.data).meta.served_by.batch_size));
      },
    });
  });
  const x = { name: "x", datatype: "FP32" as const, shape: [1, 3, 48, 192], data: new Float32Array(3 * 48 * 192).fill(0.5) };
  const published = (async () => {
    for (let i = 0; i < n; i++) {
      await bus.js.publish(subjects.queue(v.name), encodeTensors([x], {}), {
        headers: makeHeaders({ [headers.replyTo]: inbox, [headers.deadline]: systemClock.now() + 120_000, [headers.enqueuedAt]: systemClock.now(), [headers.requestId]: `q${i}` }),
      });
    }
  })();
  return { published, sizes, replies };
}

describe("executor-cpu re-tuned batching", () => {
  it("batch-wait - a running instance takes a re-tuned Wbatch from the registry event, without a reload", async () => {
    await worker.execute({ id: "c1", action: "load", variant: b4.name, reason: "test", atMs: systemClock.now() });
    expect(worker.batchWaitMs(b4.name)).toBe(0); // as stored at load
    await announce(b4, 60_000);
    await waitFor("the running instance at Wbatch 60 s", () => worker.batchWaitMs(b4.name) === 60_000);
    expect(worker.batchWaitMs(b4.name)).toBe(60_000);
    // With Wbatch 60 s the batch leaves when it holds Nbatch = 4, whatever the spacing of the queries.
    const q = send(b4, 4);
    await q.published;
    expect(await q.sizes).toEqual([4, 4, 4, 4]);
  });

  it("batch-wait - a partial batch waiting on the old Wbatch leaves as soon as Wbatch drops", async () => {
    const q = send(b4, 2);
    await q.published;
    // Both are held by the instance, waiting for two more (or 60 s).
    await waitFor("two queries held by the instance", async () => (await worker.tick()).variants.find((v) => v.variant === b4.name)?.queueLength === 2);
    await announce(b4, 0);
    expect(await q.sizes).toEqual([2, 2]);
    expect(worker.batchWaitMs(b4.name)).toBe(0);
  });

  it("batch-wait - an instance loaded after the event batches with the announced Wbatch, not the older stored one", async () => {
    await announce(b2, 25);
    // The event is in before the load (Redis still says 0): the worker follows it on this same
    // connection, so once the publish is acknowledged a round trip has delivered it.
    await bus.nc.flush();
    expect((await store.getVariant(b2.name))?.batchWaitMs).toBe(0);
    await worker.execute({ id: "c2", action: "load", variant: b2.name, reason: "test", atMs: systemClock.now() });
    expect(worker.batchWaitMs(b2.name)).toBe(25);
  });

  it("batch-wait - a malformed event is ignored (and logged); events for other hardware are not applied", async () => {
    bus.nc.publish(subjects.batchingTuned("ocr-cls"), "not json");
    bus.nc.publish(subjects.batchingTuned("ocr-cls"), JSON.stringify({ model: "ocr-cls" }));
    await announce({ ...b2, hardware: "gpu" }, 99);
    await bus.nc.flush(); // the worker's subscription is on this connection: all three are delivered
    expect(worker.batchWaitMs(b2.name)).toBe(25);
  });

  it("batch-wait - an instance loaded before its profiling finished answers with the profiled accuracy once the event comes", async () => {
    const accuracyOf = (m: Msg) => decodeTensors<{ served_by: { accuracy: number | null } }>(m.data).meta.served_by.accuracy;
    const before = send(b4, 4);
    await before.published;
    await before.sizes;
    expect(before.replies.map(accuracyOf)).toEqual([null, null, null, null]);
    const event: ModelProfiledEvent = { model: b4.model, variants: [{ ...b4, accuracy: 0.93, profile: { ...b4.profile!, accuracy: 0.93 } }], removed: [] };
    await bus.js.publish(subjects.modelProfiled(b4.model), JSON.stringify(event));
    await waitFor("the profiled accuracy on the running instance", () => worker.variantRecord(b4.name)?.accuracy === 0.93);
    const after = send(b4, 4);
    await after.published;
    await after.sizes;
    expect(after.replies.map(accuracyOf)).toEqual([0.93, 0.93, 0.93, 0.93]);
  });
});
