import { describe, expect, it } from "vitest";
import * as ort from "onnxruntime-node";
import { OnnxDataType, decodeModel, encodeModel, quantizeDynamicInt8, quantizeWeightsInt8, type OnnxNode } from "../src/index.js";

/** x [N, 4] → Gemm(W1 [3, 4], transB) → Relu → MatMul(W2 [3, 2]) → y [N, 2], with deterministic weights. */
function twoLayerModel(opsetVersion = 13): Uint8Array {
  const w1 = Float32Array.from({ length: 12 }, (_, i) => Math.sin(i + 1) * (i % 3 === 0 ? 4 : 1));
  const w2 = Float32Array.from({ length: 6 }, (_, i) => Math.cos(i) * 0.5);
  const nodes: OnnxNode[] = [
    { opType: "Gemm", name: "gemm", inputs: ["x", "w1"], outputs: ["h"], attributes: { transB: { type: "int", value: 1 } } },
    { opType: "Relu", name: "relu", inputs: ["h"], outputs: ["r"] },
    { opType: "MatMul", name: "matmul", inputs: ["r", "w2"], outputs: ["y"] },
  ];
  return encodeModel({
    graph: {
      name: "two",
      nodes,
      initializers: [{ name: "w1", dims: [3, 4], data: w1 }, { name: "w2", dims: [3, 2], data: w2 }],
      inputs: [{ name: "x", elemType: OnnxDataType.FLOAT, shape: ["N", 4] }],
      outputs: [{ name: "y", elemType: OnnxDataType.FLOAT, shape: ["N", 2] }],
    },
    opsetVersion,
    metadata: { keep: "me" },
  });
}

async function run(model: Uint8Array, x: Float32Array): Promise<Float32Array> {
  const session = await ort.InferenceSession.create(model);
  try {
    const out = await session.run({ x: new ort.Tensor("float32", x, [x.length / 4, 4]) });
    return out.y!.data as Float32Array;
  } finally {
    await session.release();
  }
}

describe("onnx - int8 weight quantisation", () => {
  const float = twoLayerModel();
  const x = Float32Array.from({ length: 40 }, (_, i) => ((i * 7) % 11) / 11 - 0.3);

  it("onnx - Gemm and MatMul weights become int8 + DequantizeLinear per output channel", async () => {
    const { model, weights } = quantizeWeightsInt8(float);
    // Per output channel: rows of a transB Gemm weight (axis 0), columns of a MatMul weight (axis 1).
    expect(weights.map((w) => [w.name, w.dims, w.axis])).toEqual([["w1", [3, 4], 0], ["w2", [3, 2], 1]]);
    const g = decodeModel(model).graph;
    expect(g.nodes.map((n) => n.opType)).toEqual(["DequantizeLinear", "DequantizeLinear", "Gemm", "Relu", "MatMul"]);
    expect(g.nodes[0]!.outputs).toEqual(["w1"]);
    expect(g.initializers.map((t) => t.name).sort()).toEqual(["w1_quantized", "w1_scale", "w1_zero_point", "w2_quantized", "w2_scale", "w2_zero_point"]);
    const codes = g.initializers.find((t) => t.name === "w1_quantized")!;
    expect(codes.data).toBeInstanceOf(Int8Array);
    // Symmetric: every channel's largest |w| maps to ±127.
    const c = codes.data as Int8Array;
    for (let row = 0; row < 3; row++) expect(Math.max(...Array.from(c.subarray(row * 4, row * 4 + 4), Math.abs))).toBe(127);
    expect(g.initializers.find((t) => t.name === "w2_scale")!.dims).toEqual([2]);
    // Untouched fields pass through: metadata and opset.
    expect(decodeModel(model).opsets.get("")).toBe(13);
    expect(new TextDecoder().decode(model).includes("keep")).toBe(true);

    const want = await run(float, x);
    const got = await run(model, x);
    const maxError = Math.max(...weights.map((w) => w.maxAbsError));
    expect(maxError).toBeGreaterThan(0);
    for (let i = 0; i < want.length; i++) expect(Math.abs(got[i]! - want[i]!)).toBeLessThan(0.05);
  });

  it("onnx - per-tensor scales below opset 13 or on request; minElements leaves small weights in float", () => {
    expect(quantizeWeightsInt8(twoLayerModel(12)).weights.map((w) => w.axis)).toEqual([null, null]);
    expect(quantizeWeightsInt8(float, { perChannel: false }).weights.map((w) => w.axis)).toEqual([null, null]);
    expect(quantizeWeightsInt8(float, { minElements: 10 }).weights.map((w) => w.name)).toEqual(["w1"]);
    expect(() => quantizeWeightsInt8(twoLayerModel(9))).toThrow("DequantizeLinear needs default-domain opset >= 10, model has 9");
    expect(quantizeDynamicInt8(float)).toEqual(quantizeWeightsInt8(float).model);
  });
});
