import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { createInbox, type Msg } from "@nats-io/transport-node";
import { connectBus, createLogger, makeHeaders, type Bus } from "@sloserve/bus";
import { MetadataStore } from "@sloserve/store";
import { startNats, startRedis, startService, tempDir, type ServerHandle, type ServiceHandle } from "@sloserve/stack";
import { waitFor } from "@sloserve/testing";
import { decodeTensors, encodeTensors, headers, subjects, type ModelRecord, type ScaleCommand, type Tensor, type VariantRecord } from "@sloserve/contracts";

/**
 * The emulated engine (BACKEND=emulated, libs/executor emulated-backend.ts) in the real executor
 * processes, on a real nats-server and redis-server: executor-cpu, executor-gpu and
 * executor-inferentia start on this CPU-only machine without CUDA or a Neuron server, report their
 * kind and accelerators, load a variant on command and answer its queries with zeros of the model's
 * output signature after the variant's latency (its profile, the calibration file, or
 * EMULATED_LATENCY_MS), each answer saying `"backend":"emulated"`.
 */

const T0 = Date.now();
let nats: ServerHandle;
let redis: ServerHandle;
let bus: Bus;
let store: MetadataStore;
const workers: Record<"cpu" | "gpu" | "inferentia", ServiceHandle | undefined> = { cpu: undefined, gpu: undefined, inferentia: undefined };

const model: ModelRecord = {
  name: "emu",
  app: "emu",
  task: "classification",
  dataset: "none",
  platform: "onnxruntime_onnx",
  inputs: [{ name: "x", datatype: "FP32", shape: [-1, 4] }],
  outputs: [
    { name: "probs", datatype: "FP32", shape: [-1, 10] },
    { name: "label", datatype: "INT64", shape: [-1] },
  ],
  object: "emu.onnx",
  sizeBytes: 4,
  sha256: "",
  registeredAtMs: T0,
  validationObject: null,
  validationCount: 0,
  profileShape: {},
};

const variant = (hardware: "cpu" | "gpu" | "inferentia", profile: VariantRecord["profile"]): VariantRecord => ({
  name: `emu--${hardware}-fp32-b4-t1`,
  model: "emu",
  app: "emu",
  hardware,
  maxBatch: 4,
  batchWaitMs: 0,
  quantization: "fp32",
  threads: 1,
  object: model.object,
  accuracy: 0.9,
  profiled: profile !== null,
  profile,
});

// The GPU variant's latency comes from its profile (no spread: P99 = median), the Inferentia one's from the
// calibration file, the CPU one's (neither) from EMULATED_LATENCY_MS.
const gpuVariant = variant("gpu", { loadLatencyMs: 10, latencyMs: { "1": 60, "4": 90 }, latencyP99Ms: { "1": 60, "4": 90 }, peakQps: 40, memoryBytes: 1 << 20, accuracy: 0.9, sampleShape: { x: [4] }, worker: "test", profiledAtMs: T0 });
const inferentiaVariant = variant("inferentia", null);
const cpuVariant = variant("cpu", null);

beforeAll(async () => {
  [nats, redis] = await Promise.all([startNats(), startRedis()]);
  bus = await connectBus({ servers: nats.url, name: "emulated-test", log: createLogger("emulated-test", "warn") });
  store = MetadataStore.connect(redis.url);
  // Never read by the emulated engine, but the worker fetches a variant's binary as for any load.
  await bus.models.putBlob({ name: model.object }, new Uint8Array([1, 2, 3, 4]));
  await store.createModel(model, [gpuVariant, inferentiaVariant, cpuVariant]);
  const calibration = join(tempDir("emulated"), "calibration.json");
  writeFileSync(calibration, JSON.stringify({ models: { emu: { inferentia: { batches: { "1": { p50: 40, p99: 40 }, "2": { p50: 50, p99: 50 } } } } } }));
  const env = { NATS_URL: nats.url, REDIS_URL: redis.url, BACKEND: "emulated", WORKER_MEMORY_MB: "512" };
  [workers.cpu, workers.gpu, workers.inferentia] = await Promise.all([
    startService("executor-cpu", { ...env, WORKER_ID: "cpu-emulated-1", WORKER_THREADS: "2", EMULATED_LATENCY_MS: "30+10" }, { timeoutMs: 60_000 }),
    startService("executor-gpu", { ...env, WORKER_ID: "gpu-emulated-1", ACCELERATORS: "2" }, { timeoutMs: 60_000 }),
    startService("executor-inferentia", { ...env, WORKER_ID: "inferentia-emulated-1", ACCELERATORS: "8", EMULATED_CALIBRATION: calibration }, { timeoutMs: 60_000 }),
  ]);
}, 120_000);

afterAll(async () => {
  await Promise.all([workers.cpu?.stop(), workers.gpu?.stop(), workers.inferentia?.stop()]);
  await bus?.close();
  await store?.close();
  await Promise.all([nats?.stop(), redis?.stop()]);
});

/** Loads a variant on a worker by a scale command and waits until it serves. */
async function load(worker: string, v: VariantRecord): Promise<void> {
  const command: ScaleCommand = { id: `load-${worker}`, action: "load", variant: v.name, reason: "emulated test", atMs: Date.now() };
  await bus.js.publish(subjects.scaleModel(worker), JSON.stringify(command));
  await waitFor(`${v.name} active on ${worker}`, async () => (await store.listInstances()).some((i) => i.variant === v.name && i.worker === worker && i.state === "active"), { timeoutMs: 20_000, intervalMs: 50 });
}

/** One query of `rows` rows through the variant's queue (as the dispatcher sends it); its answer's meta and outputs. */
async function query(v: VariantRecord, rows: number): Promise<{ meta: { id: string; served_by: Record<string, unknown>; timing_ms: { inference: number } }; outputs: Tensor[] }> {
  const inbox = createInbox();
  const answer = new Promise<Msg>((resolve) => bus.nc.subscribe(inbox, { max: 1, callback: (_e, m) => resolve(m) }));
  const x: Tensor = { name: "x", datatype: "FP32", shape: [rows, 4], data: new Float32Array(rows * 4).fill(0.5) };
  await bus.js.publish(subjects.queue(v.name), encodeTensors([x], { id: `q-${v.hardware}` }), {
    headers: makeHeaders({ [headers.replyTo]: inbox, [headers.deadline]: Date.now() + 30_000, [headers.enqueuedAt]: Date.now(), [headers.requestId]: `r-${v.hardware}` }),
  });
  const m = await answer;
  expect(m.headers?.get(headers.error) ?? "", new TextDecoder().decode(m.data)).toBe("");
  const { meta, tensors } = decodeTensors<{ id: string; served_by: Record<string, unknown>; timing_ms: { inference: number } }>(m.data);
  return { meta, outputs: tensors };
}

const allZero = (t: Tensor): boolean => Array.from(t.data as ArrayLike<number | bigint>).every((v) => Number(v) === 0);

describe("e2e emulated executors", () => {
  it("emulated - CPU, GPU and Inferentia workers start without accelerators, reporting their kind and accelerators", async () => {
    expect(workers.gpu?.info).toMatchObject({ worker: "gpu-emulated-1", backend: "emulated", accelerators: 2 });
    expect(workers.inferentia?.info).toMatchObject({ worker: "inferentia-emulated-1", backend: "emulated", accelerators: 8 });
    await waitFor("both workers' reports", async () => (await store.listWorkers()).length === 3, { timeoutMs: 5_000, intervalMs: 50 });
    const reports = new Map((await store.listWorkers()).map((r) => [r.worker, r]));
    expect(reports.get("gpu-emulated-1")).toMatchObject({ hardware: "gpu", accelerators: 2 });
    expect(reports.get("inferentia-emulated-1")).toMatchObject({ hardware: "inferentia", accelerators: 8 });
    expect(reports.get("cpu-emulated-1")).toMatchObject({ hardware: "cpu", threads: 2 });
  });

  it("emulated - a GPU variant answers zeros of the output signature after its profiled latency, served_by.backend emulated", async () => {
    await load("gpu-emulated-1", gpuVariant);
    const { meta, outputs } = await query(gpuVariant, 2);
    expect(meta.id).toBe("q-gpu");
    expect(meta.served_by).toMatchObject({ variant: gpuVariant.name, hardware: "gpu", worker: "gpu-emulated-1", batch_size: 1, backend: "emulated" });
    expect(outputs.map((t) => [t.name, t.datatype, t.shape])).toEqual([
      ["probs", "FP32", [2, 10]],
      ["label", "INT64", [2]],
    ]);
    expect(outputs.every(allZero)).toBe(true);
    // 2 rows: 60 + (90 - 60)·1/3 = 70 ms, waited on a timer.
    expect(meta.timing_ms.inference).toBeGreaterThanOrEqual(69);
    expect(meta.timing_ms.inference).toBeLessThan(70 + 200);
  });

  it("emulated - an Inferentia variant without a profile takes its latency from the calibration file", async () => {
    await load("inferentia-emulated-1", inferentiaVariant);
    const { meta, outputs } = await query(inferentiaVariant, 1);
    expect(meta.served_by).toMatchObject({ hardware: "inferentia", worker: "inferentia-emulated-1", backend: "emulated" });
    expect(outputs.map((t) => t.shape)).toEqual([[1, 10], [1]]);
    expect(outputs.every(allZero)).toBe(true);
    expect(meta.timing_ms.inference).toBeGreaterThanOrEqual(39);
    expect(meta.timing_ms.inference).toBeLessThan(40 + 200);
  });

  it("emulated - a variant with neither profile nor calibration waits EMULATED_LATENCY_MS (per batch + per row)", async () => {
    await load("cpu-emulated-1", cpuVariant);
    const { meta, outputs } = await query(cpuVariant, 3);
    expect(meta.served_by).toMatchObject({ hardware: "cpu", worker: "cpu-emulated-1", backend: "emulated" });
    expect(outputs.map((t) => t.shape)).toEqual([[3, 10], [3]]);
    expect(outputs.every(allZero)).toBe(true);
    // "30+10", 3 rows: median 60 ms, P99 72 ms (a lognormal draw: a few σ either side).
    expect(meta.timing_ms.inference).toBeGreaterThan(45);
    expect(meta.timing_ms.inference).toBeLessThan(90 + 200);
  });
});
