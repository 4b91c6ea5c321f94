import { describe, expect, it } from "vitest";
import { isBatchable, repositoryIndex, tritonDataType, tritonModelConfig, tritonModelStatistics, type InferenceCounts, type TensorSpec, type VariantState } from "../src/index.js";

/** Triton's extensions in Triton's terms: datatypes, model configuration, repository index, statistics. */

const image: TensorSpec = { name: "x", datatype: "FP32", shape: [-1, 3, -1, -1] };
const scores: TensorSpec = { name: "y", datatype: "FP32", shape: [-1, 2] };

describe("triton", () => {
  it.each([
    ["FP32", "TYPE_FP32"],
    ["INT64", "TYPE_INT64"],
    ["UINT8", "TYPE_UINT8"],
    ["BOOL", "TYPE_BOOL"],
    ["FP16", "TYPE_FP16"],
    ["BYTES", "TYPE_STRING"],
    ["BF16", "TYPE_BF16"],
    ["COMPLEX", "TYPE_INVALID"],
  ])("triton - datatype %s is %s", (datatype, want) => {
    expect(tritonDataType(datatype)).toBe(want);
  });

  it("triton - config of a batching model: the largest variant batch, dims without the batch dimension", () => {
    const config = tritonModelConfig("ocr-cls", { platform: "onnxruntime_onnx", inputs: [image], outputs: [scores] }, [1, 8, 4]);
    expect(config).toEqual({
      name: "ocr-cls",
      platform: "onnxruntime_onnx",
      backend: "onnxruntime",
      max_batch_size: 8,
      input: [{ name: "x", data_type: "TYPE_FP32", format: "FORMAT_NONE", dims: [3, -1, -1] }],
      output: [{ name: "y", data_type: "TYPE_FP32", dims: [2] }],
    });
  });

  it.each([
    // An output with a fixed first dimension: no batch dimension, whatever the variants say.
    ["a fixed first dimension", [image], [{ name: "y", datatype: "INT64", shape: [1, 2] }] as TensorSpec[], [4], 0, [-1, 3, -1, -1], [1, 2]],
    // No variants (none generated yet): no batch, the full shapes.
    ["no variant", [image], [scores], [], 0, [-1, 3, -1, -1], [-1, 2]],
    ["a scalar output", [image], [{ name: "n", datatype: "INT32", shape: [] }] as TensorSpec[], [8], 0, [-1, 3, -1, -1], []],
  ])("triton - config with %s: max_batch_size 0, the full shapes as dims", (_case, inputs, outputs, batches, maxBatch, inputDims, outputDims) => {
    const config = tritonModelConfig("m", { platform: "onnxruntime_onnx", inputs, outputs }, batches);
    expect([config.max_batch_size, config.input[0]!.dims, config.output[0]!.dims]).toEqual([maxBatch, inputDims, outputDims]);
  });

  it("triton - isBatchable needs a variable first dimension on every input and output", () => {
    expect(isBatchable({ inputs: [image], outputs: [scores] })).toBe(true);
    expect(isBatchable({ inputs: [image], outputs: [{ ...scores, shape: [1, 2] }] })).toBe(false);
    expect(isBatchable({ inputs: [{ ...image, shape: [] }], outputs: [scores] })).toBe(false);
  });

  it.each<[string, VariantState[], string, string]>([
    ["no instance", [], "UNAVAILABLE", "no instance loaded (loads on the first query)"],
    ["one active", ["active"], "READY", ""],
    ["an interfered one still serves", ["failed", "interfered"], "READY", ""],
    ["one loading", ["loading", "unloading"], "LOADING", ""],
    ["only failed and inactive", ["failed", "inactive"], "UNAVAILABLE", "no instance loaded (loads on the first query)"],
  ])("triton - repository index: %s is %s", (_case, states, state, reason) => {
    const instances = states.map((s) => ({ model: "m", state: s }));
    expect(repositoryIndex([{ name: "m" }], [...instances, { model: "other", state: "active" }], "1")).toEqual([{ name: "m", version: "1", state, reason }]);
  });

  it("triton - repository index with ready: the READY models only, in the given order", () => {
    const models = [{ name: "b" }, { name: "a" }, { name: "c" }];
    const instances = [{ model: "a", state: "active" as const }, { model: "c", state: "loading" as const }];
    expect(repositoryIndex(models, instances, "1").map((e) => [e.name, e.state])).toEqual([["b", "UNAVAILABLE"], ["a", "READY"], ["c", "LOADING"]]);
    expect(repositoryIndex(models, instances, "1", true).map((e) => e.name)).toEqual(["a"]);
  });

  it("triton - statistics: each phase counted once per success, executions are successes", () => {
    const counts: InferenceCounts = {
      successCount: 3,
      successNs: 30_000_000,
      failCount: 1,
      failNs: 2_000_000,
      queueNs: 6_000_000,
      computeInputNs: 300_000,
      computeInferNs: 15_000_000,
      computeOutputNs: 90_000,
      inferenceCount: 5, // rows: 1 + 2 + 2
      lastInferenceMs: 1_700_000_000_000,
    };
    expect(tritonModelStatistics("m", "1", counts)).toEqual({
      name: "m",
      version: "1",
      last_inference: 1_700_000_000_000,
      inference_count: 5,
      execution_count: 3,
      inference_stats: {
        success: { count: 3, ns: 30_000_000 },
        fail: { count: 1, ns: 2_000_000 },
        queue: { count: 3, ns: 6_000_000 },
        compute_input: { count: 3, ns: 300_000 },
        compute_infer: { count: 3, ns: 15_000_000 },
        compute_output: { count: 3, ns: 90_000 },
      },
      batch_stats: [],
    });
  });
});
