import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { readFileSync } from "node:fs";
import { connectBus, createLogger, type Bus } from "@sloserve/bus";
import { MetadataStore } from "@sloserve/store";
import { startNats, startRedis, ocrModels, type ServerHandle } from "@sloserve/stack";
import { waitFor } from "@sloserve/testing";
import { Worker, onnxBackend, type BackendFactory } from "@sloserve/executor";
import { ManualClock, type VariantRecord } from "@sloserve/contracts";

/**
 * What a worker reports it holds, for the model autoscaler (libs/policy model-actions): a GPU worker
 * (executor-gpu's logic on onnxruntime's CPU provider, as DESIGN §4 tests it) offering 2 accelerators,
 * with a GPU variant whose instances hold their footprint of GPU memory each. Instances being loaded are reported as `loading` and
 * hold their resources already. Real nats-server, redis-server and a real ONNX model (PaddleOCR's
 * direction classifier); the loads wait on a gate so that the test sees them in flight.
 */

const model = ocrModels().find((m) => m.name === "ocr-cls")!;
const T0 = 1_800_000_000_000;
let nats: ServerHandle;
let redis: ServerHandle;
let bus: Bus;
let store: MetadataStore;
const clock = new ManualClock(T0);
let worker: Worker;
let open: () => void = () => undefined;
let gate = Promise.resolve();

const variant: VariantRecord = {
  name: "ocr-cls--gpu-fp32-b4",
  model: "ocr-cls",
  app: "ocr-cls",
  hardware: "gpu",
  maxBatch: 4,
  batchWaitMs: 0,
  quantization: "fp32",
  threads: 1,
  object: "ocr-cls.onnx",
  accuracy: null,
  profiled: true,
  profile: { loadLatencyMs: 50, latencyMs: { "1": 2, "4": 5 }, peakQps: 800, memoryBytes: 1_000_000, accuracy: null, sampleShape: { x: [3, 48, 192] }, worker: "test", profiledAtMs: T0 },
};

beforeAll(async () => {
  [nats, redis] = await Promise.all([startNats(), startRedis()]);
  const log = createLogger("worker-resources-test", "warn");
  bus = await connectBus({ servers: nats.url, name: "worker-resources-test", log });
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
  const real = onnxBackend("gpu", ["cpu"]);
  const gated: BackendFactory = {
    hardware: "gpu",
    async load(bytes, o) {
      await gate;
      return real.load(bytes, o);
    },
  };
  worker = new Worker(bus, store, gated, { id: "w-gpu", threads: 4, memoryBytes: 1 << 30, accelerators: 2, reportEveryMs: 3_600_000, profile: false }, log, clock);
  await worker.start();
});

afterAll(async () => {
  open();
  await worker?.stop();
  await bus?.close();
  await store?.close();
  await Promise.all([nats?.stop(), redis?.stop()]);
});

describe("worker resources", () => {
  it("worker - reports accelerators, and loading instances that hold theirs", async () => {
    gate = new Promise<void>((resolve) => (open = resolve));
    const added = worker.execute({ id: "a1", action: "add", variant: variant.name, count: 2, reason: "test", atMs: T0 });
    // The loads wait on the gate: the report shows both loading, holding a thread, their memory and their
    // GPU memory (the footprint: the profile's memory) each — GPU instances share GPUs by footprint and
    // hold none whole (libs/policy accelerator-share.ts); each GPU offers 16 GiB by default.
    const loading = await waitFor("both instances loading in the report", () => {
      const { report } = worker.buildReport(clock.now());
      return report.variants.some((v) => v.loading === 2) && report;
    }, { intervalMs: 10 });
    expect(loading).toMatchObject({ accelerators: 2, acceleratorsUsed: 0, acceleratorMemoryBytes: 16 * 1024 ** 3, acceleratorMemoryUsedBytes: 2_000_000, threadsUsed: 2, memoryUsedBytes: 2_000_000 });
    expect(loading.variants).toMatchObject([{ variant: variant.name, state: "loading", instances: 0, loading: 2 }]);
    open();
    expect((await added).ok).toBe(true);
    clock.advance(1000);
    const ready = await worker.tick();
    expect(ready).toMatchObject({ accelerators: 2, acceleratorsUsed: 0, acceleratorMemoryUsedBytes: 2_000_000, threadsUsed: 2, memoryUsedBytes: 2_000_000 });
    expect(ready.variants).toMatchObject([{ variant: variant.name, state: "active", instances: 2, loading: 0 }]);
    await worker.execute({ id: "u1", action: "unload", variant: variant.name, count: 1, reason: "test", atMs: T0 + 1000 });
    clock.advance(1000);
    expect(await worker.tick()).toMatchObject({ acceleratorsUsed: 0, acceleratorMemoryUsedBytes: 1_000_000, threadsUsed: 1, memoryUsedBytes: 1_000_000 });
  });
});
