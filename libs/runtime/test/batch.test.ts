import { describe, expect, it } from "vitest";
import type { Tensor, TensorSpec } from "@sloserve/contracts";
import { runConcatenated } from "../src/batch.js";

const x = (rows: number, width: number, first: number): Tensor => ({ name: "x", datatype: "FP32", shape: [rows, width], data: Float32Array.from({ length: rows * width }, (_, i) => first + i) });
const inputs: TensorSpec[] = [{ name: "x", datatype: "FP32", shape: [-1, -1] }];

describe("runConcatenated", () => {
  it("runConcatenated - concatenates queries of the same trailing dimensions, runs the others apart, answers in order", async () => {
    const runs: number[][] = [];
    // The "model" answers each row with its first value and its width: [rows, 2].
    const run = async (feeds: readonly Tensor[]): Promise<Tensor[]> => {
      const f = feeds[0] as Tensor;
      runs.push([...f.shape]);
      const [rows, width] = f.shape as [number, number];
      const out = new Float32Array(rows * 2);
      for (let r = 0; r < rows; r++) {
        out[2 * r] = (f.data as Float32Array)[r * width] as number;
        out[2 * r + 1] = width;
      }
      return [{ name: "y", datatype: "FP32", shape: [rows, 2], data: out }];
    };
    const queries = [[x(1, 2, 10)], [x(1, 3, 20)], [x(2, 2, 30)], [x(1, 3, 40)], [x(1, 4, 50)]];
    const out = await runConcatenated(queries, inputs, true, run);
    // Widths 2 (queries 0, 2: 3 rows), 3 (queries 1, 3: 2 rows), 4 (query 4 alone).
    expect(runs).toEqual([[3, 2], [2, 3], [1, 4]]);
    expect(out.map((q) => q[0]!.shape)).toEqual([[1, 2], [1, 2], [2, 2], [1, 2], [1, 2]]);
    expect(out.map((q) => Array.from(q[0]!.data as Float32Array))).toEqual([[10, 2], [20, 3], [30, 2, 32, 2], [40, 3], [50, 4]]);
  });
});
