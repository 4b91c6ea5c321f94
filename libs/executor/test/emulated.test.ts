import { describe, expect, it } from "vitest";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createRng, peakQps, quantile } from "@sloserve/policy";
import type { Tensor, VariantProfile } from "@sloserve/contracts";
import {
  DEFAULT_P99_RATIO,
  calibrationFor,
  drawLatencyMs,
  emulationCalibrationSchema,
  latencyModel,
  linearLatencyModel,
  profilePoints,
  zeroOutputs,
} from "../src/emulated-latency.js";
import { emulatedBackend, readEmulationCalibration } from "../src/emulated-backend.js";
import { measureLatencies } from "../src/profiler.js";
import type { ModelBackend } from "../src/backend.js";

/**
 * The emulated engine (BACKEND=emulated): its latency model (lognormal draws at the calibrated median
 * and P99, interpolated between batch sizes), its zero outputs, its calibration file, and the backend
 * itself with the waits recorded instead of slept.
 */

const near = (actual: number, expected: number, relative: number): void => {
  expect(Math.abs(actual - expected) / expected, `${actual} vs ${expected}`).toBeLessThan(relative);
};

const profile = (latencyMs: Record<string, number>, latencyP99Ms?: Record<string, number>): VariantProfile => ({
  loadLatencyMs: 0,
  latencyMs,
  ...(latencyP99Ms ? { latencyP99Ms } : {}),
  peakQps: 1,
  memoryBytes: 0,
  accuracy: null,
  sampleShape: {},
  worker: "w",
  profiledAtMs: 0,
});

const query = (rows: number): Tensor[] => [{ name: "x", datatype: "FP32", shape: [rows, 4], data: new Float32Array(rows * 4) }];

describe("emulated latency", () => {
  it("emulated - draws have the calibrated median and P99 (20 000 draws, fixed seed)", () => {
    const model = latencyModel([
      { batch: 1, p50: 10, p99: 20 },
      { batch: 8, p50: 30, p99: 45 },
    ]);
    const rng = createRng(42);
    for (const [batch, p50, p99] of [
      [1, 10, 20],
      [8, 30, 45],
    ] as const) {
      const draws = Array.from({ length: 20_000 }, () => drawLatencyMs(model(batch), rng));
      near(quantile(draws, 0.5), p50, 0.02);
      near(quantile(draws, 0.99), p99, 0.05);
      expect(Math.min(...draws)).toBeGreaterThan(0);
    }
  });

  it("emulated - median and P99 interpolated between batch sizes, flat below, extrapolated above", () => {
    const model = latencyModel([
      { batch: 8, p50: 30, p99: 45 },
      { batch: 1, p50: 10, p99: 20 },
    ]);
    expect(model(4).p50).toBeCloseTo(10 + (20 * 3) / 7, 9);
    expect(model(4).p99).toBeCloseTo(20 + (25 * 3) / 7, 9);
    expect(model(1)).toEqual({ p50: 10, p99: 20 });
    expect(model(0.5)).toEqual({ p50: 10, p99: 20 });
    expect(model(15).p50).toBeCloseTo(50, 9);
    // Draws at an interpolated size centre on the interpolated median.
    const rng = createRng(7);
    near(quantile(Array.from({ length: 10_000 }, () => drawLatencyMs(model(4), rng)), 0.5), model(4).p50, 0.02);
  });

  it("emulated - without a P99 it is 1.2× the median; a P99 at the median gives the median itself", () => {
    expect(latencyModel([{ batch: 1, p50: 10 }])(1)).toEqual({ p50: 10, p99: 10 * DEFAULT_P99_RATIO });
    expect(latencyModel(profilePoints({ "1": 4, "2": 6 }, { "1": 4 }))(2)).toEqual({ p50: 6, p99: 6 * DEFAULT_P99_RATIO });
    const rng = createRng(1);
    expect(drawLatencyMs({ p50: 7, p99: 7 }, rng)).toBe(7);
    expect(drawLatencyMs({ p50: 0, p99: 0 }, rng)).toBe(0);
    expect(linearLatencyModel(5, 1)(3)).toEqual({ p50: 8, p99: 8 * DEFAULT_P99_RATIO });
    expect(() => latencyModel([])).toThrow(/no calibrated batch size/);
  });

  it("emulated - outputs are zeros of the signature's shapes and types, the batch dimension the query's rows", () => {
    const out = zeroOutputs(
      [
        { name: "probs", datatype: "FP32", shape: [-1, 10] },
        { name: "ids", datatype: "INT64", shape: [-1] },
        { name: "fixed", datatype: "UINT8", shape: [2, 3] },
        { name: "seq", datatype: "FP16", shape: [-1, -1, 5] },
      ],
      3,
    );
    expect(out.map((t) => [t.name, t.datatype, t.shape])).toEqual([
      ["probs", "FP32", [3, 10]],
      ["ids", "INT64", [3]],
      ["fixed", "UINT8", [2, 3]],
      ["seq", "FP16", [3, 1, 5]],
    ]);
    expect(out[0]!.data).toBeInstanceOf(Float32Array);
    expect(out[1]!.data).toBeInstanceOf(BigInt64Array);
    expect(out[2]!.data).toBeInstanceOf(Uint8Array);
    expect(out.map((t) => t.data.length)).toEqual([30, 3, 6, 15]);
    expect(out.every((t) => Array.from(t.data as ArrayLike<number | bigint>).every((v) => Number(v) === 0))).toBe(true);
  });

  it("emulated - the calibration file: a variant's entry wins over its model's on its hardware; bad files say why", () => {
    const calibration = emulationCalibrationSchema.parse({
      variants: { "m--gpu-fp32-b8-t1": { batches: { "1": { p50: 1, p99: 2 } } } },
      models: { m: { gpu: { batches: { "1": { p50: 3 } }, accuracy: 0.9 }, inferentia: { batches: { "4": { p50: 5, p99: 6 } }, loadMs: 100 } } },
    });
    expect(calibrationFor(calibration, "m--gpu-fp32-b8-t1", "m", "gpu")?.batches["1"]).toEqual({ p50: 1, p99: 2 });
    expect(calibrationFor(calibration, "m--gpu-fp32-b4-t1", "m", "gpu")?.accuracy).toBe(0.9);
    expect(calibrationFor(calibration, "m--inferentia-fp32-b4-t1", "m", "inferentia")?.loadMs).toBe(100);
    expect(calibrationFor(calibration, "m--cpu-fp32-b4-t1", "m", "cpu")).toBeUndefined();
    expect(calibrationFor(undefined, "v", "m", "cpu")).toBeUndefined();

    const dir = mkdtempSync(join(tmpdir(), "emulation-"));
    const bad = join(dir, "bad.json");
    writeFileSync(bad, JSON.stringify({ variants: { v: { batches: { "0": { p50: 1 } } } } }));
    expect(() => readEmulationCalibration(bad)).toThrow(/bad\.json.*positive integers/);
    writeFileSync(bad, JSON.stringify({ models: { m: { cpu: { batches: { "1": { p50: 5, p99: 2 } } } } } }));
    expect(() => readEmulationCalibration(bad)).toThrow(/p99 must be ≥ p50/);
    writeFileSync(bad, "{");
    expect(() => readEmulationCalibration(bad)).toThrow(/bad\.json/);
    const good = join(dir, "good.json");
    writeFileSync(good, JSON.stringify({ models: { m: { cpu: { batches: { "2": { p50: 5 } } } } } }));
    expect(readEmulationCalibration(good)).toEqual({ variants: {}, models: { m: { cpu: { batches: { "2": { p50: 5 } } } } } });
  });
});

describe("emulated backend", () => {
  /** A backend whose waits are recorded, not slept. */
  function recorded(options: Omit<Parameters<typeof emulatedBackend>[1], "sleep">): { waits: number[]; backend: ReturnType<typeof emulatedBackend> } {
    const waits: number[] = [];
    return { waits, backend: emulatedBackend("gpu", { ...options, sleep: (ms) => (waits.push(ms), Promise.resolve()) }) };
  }
  const outputs = [{ name: "probs", datatype: "FP32" as const, shape: [-1, 10] }];
  const bytes = new Uint8Array();

  it("emulated backend - a batch waits a draw at its rows from the calibration, else the profile, else the fallback; answers zeros per query", async () => {
    const calibration = emulationCalibrationSchema.parse({ models: { m: { gpu: { batches: { "1": { p50: 2, p99: 2 }, "4": { p50: 8, p99: 8 } }, loadMs: 50, accuracy: 0.75 } } } });
    const a = recorded({ calibration, fallback: { batchMs: 5, itemMs: 1 }, rng: createRng(1) });
    expect(a.backend.hardware).toBe("gpu");
    const calibrated = await a.backend.load(bytes, { threads: 1, model: "m", quantization: "fp32", variant: "m--gpu-fp32-b4-t1", outputs, profile: profile({ "1": 100 }) });
    expect(calibrated.emulated?.accuracy).toBe(0.75);
    expect(calibrated.emulated?.quantiles?.(4)).toEqual({ p50: 8, p99: 8 });
    const answers = await calibrated.runBatch([query(1), query(2)]);
    expect(a.waits).toEqual([50, 6]); // the load, then a batch of 3 rows: 2 + (8 - 2)·2/3
    expect(answers.map((q) => q.map((t) => t.shape))).toEqual([[[1, 10]], [[2, 10]]]);
    expect(answers.flat().every((t) => (t.data as Float32Array).every((v) => v === 0))).toBe(true);

    const b = recorded({ fallback: { batchMs: 5, itemMs: 1 }, rng: createRng(1) });
    const profiled = await b.backend.load(bytes, { threads: 1, model: "m", quantization: "fp32", variant: "v", outputs, profile: { ...profile({ "1": 3, "2": 4 }, { "1": 3, "2": 4 }), loadLatencyMs: 20 } });
    expect(profiled.emulated).not.toHaveProperty("accuracy");
    expect(profiled.emulated?.quantiles?.(2)).toEqual({ p50: 4, p99: 4 });
    await profiled.runBatch([query(2)]);
    expect(b.waits).toEqual([20, 4]);

    const c = recorded({ fallback: { batchMs: 5, itemMs: 1 }, rng: createRng(1) });
    const unprofiled = await c.backend.load(bytes, { threads: 1, model: "m", quantization: "fp32", variant: "v", outputs, profile: null });
    await unprofiled.runBatch([query(1), query(1), query(1)]);
    expect(c.waits).toHaveLength(1);
    expect(c.waits[0]).toBeGreaterThan(8 * 0.8);
    expect(c.waits[0]).toBeLessThan(8 * DEFAULT_P99_RATIO * 1.6);
    // (the fallback is a distribution too: it says so)
    expect(unprofiled.emulated?.quantiles?.(3)).toEqual({ p50: 8, p99: 8 * DEFAULT_P99_RATIO });
  });

  it("emulated backend - refuses a load without the model's output signature", async () => {
    const { backend } = recorded({ fallback: { batchMs: 5, itemMs: 1 } });
    await expect(backend.load(bytes, { threads: 1, model: "m", quantization: "fp32", variant: "v" })).rejects.toThrow(/output signature/);
  });

  it("emulated backend - without an injected wait it sleeps on a timer", async () => {
    const backend = await emulatedBackend("inferentia", { fallback: { batchMs: 30, itemMs: 0 }, rng: createRng(3) }).load(bytes, { threads: 1, model: "m", quantization: "fp32", outputs, profile: null });
    const t0 = performance.now();
    await backend.runBatch([query(1)]);
    expect(performance.now() - t0).toBeGreaterThan(20);
  });
});

describe("emulated backend: its profile", () => {
  const outputs = [{ name: "probs", datatype: "FP32" as const, shape: [-1, 10] }];
  const specs = [{ name: "x", datatype: "FP32" as const, shape: [-1, 4] }];
  /** An emulated engine whose waits are recorded, not slept (a wide spread: a few draws would be far from the median). */
  async function loaded(options: { calibration?: ReturnType<typeof emulationCalibrationSchema.parse>; profile?: VariantProfile | null; seed?: number }): Promise<{ waits: number[]; backend: ModelBackend }> {
    const waits: number[] = [];
    const factory = emulatedBackend("cpu", { fallback: { batchMs: 5, itemMs: 1 }, rng: createRng(options.seed ?? 1), sleep: (ms) => (waits.push(ms), Promise.resolve()), ...(options.calibration ? { calibration: options.calibration } : {}) });
    const backend = await factory.load(new Uint8Array(), { threads: 1, model: "m", quantization: "int8", variant: "m--cpu-int8-b4-t1", outputs, profile: options.profile ?? null });
    waits.length = 0;
    return { waits, backend };
  }
  const calibration = emulationCalibrationSchema.parse({
    variants: { "m--cpu-int8-b4-t1": { batches: { "1": { p50: 16.171, p99: 45.353 }, "2": { p50: 20.5, p99: 52 }, "4": { p50: 31.25, p99: 70.125 } }, loadMs: 0 } },
  });

  it("emulated profile - the profile of an emulated engine is its calibration's p50 and P99 per batch size, whatever it draws; peakQps follows from them", async () => {
    for (const seed of [1, 2, 3]) {
      const { waits, backend } = await loaded({ calibration, seed });
      const m = await measureLatencies(backend, specs, { x: [4] }, undefined, 4);
      expect(m.latencyMs).toEqual({ "1": 16.171, "2": 20.5, "4": 31.25 });
      expect(m.latencyP99Ms).toEqual({ "1": 45.353, "2": 52, "4": 70.125 });
      expect(peakQps(m.latencyMs, 4)).toBe((4 * 1000) / 31.25);
      expect(m.sampleShape).toEqual({ x: [4] });
      expect(m.peakRss).toBeGreaterThan(0);
      // (one run a batch size, its draw not what is recorded)
      expect(waits).toHaveLength(3);
      expect(waits).not.toContain(16.171);
    }
  });

  it("emulated profile - an engine serving a profile gives that profile back; the fallback its own distribution", async () => {
    const earlier: VariantProfile = { ...profile({ "1": 3, "2": 4, "4": 7 }, { "1": 5, "2": 6, "4": 11 }), loadLatencyMs: 0 };
    const fromProfile = await measureLatencies((await loaded({ profile: earlier })).backend, specs, {}, undefined, 4);
    expect([fromProfile.latencyMs, fromProfile.latencyP99Ms]).toEqual([earlier.latencyMs, earlier.latencyP99Ms]);
    const fallback = await measureLatencies((await loaded({})).backend, specs, {}, undefined, 4);
    expect(fallback.latencyMs).toEqual({ "1": 6, "2": 7, "4": 9 });
    for (const [b, ms] of Object.entries(fallback.latencyMs)) expect(fallback.latencyP99Ms[b]).toBeCloseTo(ms * DEFAULT_P99_RATIO, 12);
  });

  it("emulated profile - an emulated engine that does not say its distribution is timed, as any engine", async () => {
    const waits: number[] = [];
    const timed: ModelBackend = {
      emulated: { accuracy: 0.5 },
      runBatch: async (queries) => {
        waits.push(2);
        await new Promise((resolve) => setTimeout(resolve, 2));
        return queries.map(() => []);
      },
      release: () => Promise.resolve(),
    };
    const m = await measureLatencies(timed, specs, {}, undefined, 1, () => undefined, { minRuns: 3, maxRuns: 3, budgetMs: 0 });
    expect(waits.length).toBeGreaterThan(1);
    expect(m.latencyMs["1"]).toBeGreaterThanOrEqual(1.5);
  });
});
