import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { decodeModel, quantizeDynamicInt8, quantizeWeightsInt8 } from "@sloserve/onnx";
import { loadDigits } from "../src/data.js";
import { exportNetwork } from "../src/export.js";
import { accuracy, type LayerSpec } from "../src/network.js";
import { trainNetwork } from "../src/training.js";
import { DEFAULT_CACHE_DIR, checkZooCache, readManifest } from "../src/zoo.js";
import { maxAbsDiff, ortProbabilities } from "./ort-helpers.js";

describe("zoo - int8 quantisation", () => {
  const { train, test } = loadDigits();
  const mlp: LayerSpec[] = [{ type: "flatten" }, { type: "dense", units: 64 }, { type: "relu" }, { type: "dense", units: 10 }];
  const { network } = trainNetwork(mlp, [1, 28, 28], train, { epochs: 1, batchSize: 32, learningRate: 0.003, trainSubset: 4000 }, 4);
  const float = exportNetwork(network, "q");

  it("zoo - int8 weights with DequantizeLinear run in onnxruntime and keep accuracy", async () => {
    const int8 = quantizeDynamicInt8(float);
    // 50 890 float weights (203 KB) become int8 (51 KB) plus 74 scales and zero points.
    expect(int8.length).toBeLessThan(float.length * 0.3);
    const graph = decodeModel(int8).graph;
    expect(graph.nodes.map((n) => n.opType)).toEqual(["DequantizeLinear", "DequantizeLinear", "Flatten", "Gemm", "Relu", "Gemm", "Softmax"]);
    expect(graph.nodes[0]!.attributes.get("axis")!.i).toBe(0); // per output channel of W [out, in]
    const q = graph.initializers.find((t) => t.name === "dense0.weight_quantized")!;
    expect(q.data).toBeInstanceOf(Int8Array);
    expect(graph.initializers.find((t) => t.name === "dense0.weight_scale")!.dims).toEqual([64]);
    expect(graph.initializers.some((t) => t.name === "dense0.weight")).toBe(false);

    const floatAccuracy = accuracy(await ortProbabilities(float, test.inputs, test.count), test.labels, 10);
    const int8Probabilities = await ortProbabilities(int8, test.inputs, test.count);
    const int8Accuracy = accuracy(int8Probabilities, test.labels, 10);
    expect(Math.abs(int8Accuracy - floatAccuracy)).toBeLessThan(0.01);
    // Not a no-op: the outputs move, slightly.
    const diff = maxAbsDiff(int8Probabilities, network.predictProba(test.inputs, test.count));
    expect(diff).toBeGreaterThan(0);
    expect(diff).toBeLessThan(0.1);
  });

  it("zoo - per-tensor scales and the error report", async () => {
    const { model, weights } = quantizeWeightsInt8(float, { perChannel: false });
    expect(weights.map((w) => [w.name, w.axis])).toEqual([["dense0.weight", null], ["dense1.weight", null]]);
    // Rounding error is at most half a quantisation step: max|w| / 127 / 2.
    const w0 = network.layers[1]!.params[0]!.data;
    const maxAbs = w0.reduce((m, v) => Math.max(m, Math.abs(v)), 0);
    expect(weights[0]!.maxAbsError).toBeLessThanOrEqual((maxAbs / 127 / 2) * 1.0001);
    expect(decodeModel(model).graph.initializers.find((t) => t.name === "dense0.weight_scale")!.dims).toEqual([]);
    const probabilities = await ortProbabilities(model, test.inputs.subarray(0, 784 * 100), 100);
    expect(probabilities.length).toBe(1000);
  });

  it("zoo - weights below minElements and non-Gemm weights stay float", () => {
    const cnn: LayerSpec[] = [{ type: "conv", filters: 2, kernel: 3 }, { type: "relu" }, { type: "maxpool", size: 2 }, { type: "flatten" }, { type: "dense", units: 10 }];
    const small = exportNetwork(trainNetwork(cnn, [1, 28, 28], train, { epochs: 1, batchSize: 32, learningRate: 0.003, trainSubset: 64 }, 1).network, "c");
    expect(quantizeWeightsInt8(small).weights.map((w) => w.name)).toEqual(["dense0.weight"]);
    expect(quantizeWeightsInt8(small, { minElements: 10_000 }).weights).toEqual([]);
  });
});

// With the full family cached (`npm run zoo`), quantise every model and measure it on the test split.
const fullCacheProblem = await checkZooCache();

describe("zoo - int8 variants of the cached digits family", () => {
  it("zoo - every cached model keeps its accuracy within one point at int8", async () => {
    expect(fullCacheProblem, `the digits family cache: ${fullCacheProblem}; build it with \`npm run zoo\` (npm test does)`).toBeNull();
    const { test } = loadDigits();
    const manifest = (await readManifest(DEFAULT_CACHE_DIR))!;
    for (const entry of manifest.models) {
      const float = await readFile(join(DEFAULT_CACHE_DIR, entry.files.onnx));
      const int8 = quantizeDynamicInt8(float);
      // Dense weights dominate every model but the CNNs' conv layers, which stay float.
      expect(int8.length, entry.name).toBeLessThan(float.length * 0.6);
      const int8Accuracy = accuracy(await ortProbabilities(int8, test.inputs, test.count), test.labels, 10);
      expect(Math.abs(int8Accuracy - entry.testAccuracy), entry.name).toBeLessThanOrEqual(0.01);
    }
  });
});
