import { describe, expect, it } from "vitest";
import { decodeModel } from "@sloserve/onnx";
import { loadDigits } from "../src/data.js";
import { exportNetwork, networkFromOnnx } from "../src/export.js";
import { accuracy, type LayerSpec } from "../src/network.js";
import { trainNetwork } from "../src/training.js";
import { maxAbsDiff, ortProbabilities } from "./ort-helpers.js";

// Small networks that together use every layer type and option the exporter maps (Gemm, Relu,
// Flatten, Conv with padding and stride, MaxPool, AveragePool, Softmax), trained for ~100 steps.
const cases: { name: string; layers: LayerSpec[] }[] = [
  { name: "mlp (Flatten, Gemm, Relu)", layers: [{ type: "flatten" }, { type: "dense", units: 24 }, { type: "relu" }, { type: "dense", units: 10 }] },
  {
    name: "cnn (Conv pad/stride, MaxPool, AveragePool)",
    layers: [
      { type: "conv", filters: 4, kernel: 3, pad: 1 }, { type: "relu" }, { type: "maxpool", size: 2 },
      { type: "conv", filters: 6, kernel: 3, stride: 2 }, { type: "relu" }, { type: "avgpool", size: 2 },
      { type: "flatten" }, { type: "dense", units: 10 },
    ],
  },
];

describe("zoo - onnx export", () => {
  const { train, test } = loadDigits();

  for (const c of cases) {
    it(`zoo - exported ${c.name} matches the TypeScript forward pass in onnxruntime`, async () => {
      const { network } = trainNetwork(c.layers, [1, 28, 28], train, { epochs: 1, batchSize: 32, learningRate: 0.005, trainSubset: 3200 }, 9);
      const model = exportNetwork(network, "check");
      const batch = 128;
      const x = test.inputs.subarray(0, batch * 784);
      expect(maxAbsDiff(await ortProbabilities(model, x, batch), network.predictProba(x, batch))).toBeLessThan(1e-4);
      const tsAccuracy = accuracy(network.predictProba(test.inputs, test.count), test.labels, 10);
      const ortAccuracy = accuracy(await ortProbabilities(model, test.inputs, test.count), test.labels, 10);
      expect(ortAccuracy).toBe(tsAccuracy);
      expect(tsAccuracy).toBeGreaterThan(0.5); // trained (100 steps), far above chance (0.1)
    });
  }

  it("zoo - exported model declares IR 8, opset 13 and the [N,1,28,28] -> [N,10] signature", () => {
    const { network } = trainNetwork(cases[1]!.layers, [1, 28, 28], train, { epochs: 1, batchSize: 32, learningRate: 0.005, trainSubset: 64 }, 1);
    const model = decodeModel(exportNetwork(network, "sig", { metadata: { task: "image-classification" } }));
    expect(model.irVersion).toBe(8);
    expect(model.opsets.get("")).toBe(13);
    expect(model.graph.inputNames).toEqual(["input"]);
    expect(model.graph.outputNames).toEqual(["probabilities"]);
    expect(model.graph.nodes.map((n) => n.opType)).toEqual(["Conv", "Relu", "MaxPool", "Conv", "Relu", "AveragePool", "Flatten", "Gemm", "Softmax"]);
    expect(model.graph.nodes[0]!.attributes.get("pads")!.ints).toEqual([1, 1, 1, 1]);
    expect(model.graph.nodes[3]!.attributes.get("strides")!.ints).toEqual([2, 2]);
    expect(model.graph.nodes[7]!.attributes.get("transB")!.i).toBe(1);
    const conv = model.graph.initializers.find((t) => t.name === "conv0.weight")!;
    expect(conv.dims).toEqual([4, 1, 3, 3]);
    expect(Array.from(conv.data as Float32Array)).toEqual(Array.from(network.layers[0]!.params[0]!.data));
  });

  it("zoo - networkFromOnnx restores the exact weights", () => {
    const { network } = trainNetwork(cases[0]!.layers, [1, 28, 28], train, { epochs: 1, batchSize: 32, learningRate: 0.005, trainSubset: 320 }, 2);
    const restored = networkFromOnnx(exportNetwork(network, "r"), cases[0]!.layers, [1, 28, 28]);
    const x = test.inputs.subarray(0, 10 * 784);
    expect(Array.from(restored.predictProba(x, 10))).toEqual(Array.from(network.predictProba(x, 10)));
    expect(() => networkFromOnnx(exportNetwork(network, "r"), cases[1]!.layers, [1, 28, 28])).toThrow("model has no float initializer conv0.weight");
  });
});
