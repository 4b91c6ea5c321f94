import { describe, expect, it } from "vitest";
import * as ort from "onnxruntime-node";
import { OnnxDataType, decodeModel, encodeModel, type OnnxModel } from "../src/index.js";

/** y = x·Wᵀ + b for x [N, 3], W [2, 3]: a one-node Gemm model. */
const gemmModel = (): OnnxModel => ({
  graph: {
    name: "g",
    nodes: [{ opType: "Gemm", name: "gemm", inputs: ["x", "w", "b"], outputs: ["y"], attributes: { transB: { type: "int", value: 1 }, alpha: { type: "float", value: 1 } } }],
    initializers: [
      { name: "w", dims: [2, 3], data: Float32Array.from([1, 2, 3, -1, 0.5, 0]) },
      { name: "b", dims: [2], data: Float32Array.from([0.25, -1]) },
      { name: "shape", dims: [2], data: BigInt64Array.from([-1n, 2n]) },
    ],
    inputs: [{ name: "x", elemType: OnnxDataType.FLOAT, shape: ["N", 3] }],
    outputs: [{ name: "y", elemType: OnnxDataType.FLOAT, shape: ["N", 2] }],
    docString: "one Gemm",
  },
  producerVersion: "1",
  metadata: { task: "test" },
});

describe("onnx - model encoder and decoder", () => {
  it("onnx - an encoded model decodes to the same graph", () => {
    const model = decodeModel(encodeModel(gemmModel()));
    expect(model.irVersion).toBe(8);
    expect(model.opsets.get("")).toBe(13);
    const g = model.graph;
    expect(g.name).toBe("g");
    expect(g.inputNames).toEqual(["x"]);
    expect(g.outputNames).toEqual(["y"]);
    expect(g.nodes.map((n) => [n.opType, n.name, n.inputs, n.outputs])).toEqual([["Gemm", "gemm", ["x", "w", "b"], ["y"]]]);
    expect(g.nodes[0]!.attributes.get("transB")!.i).toBe(1);
    expect(g.nodes[0]!.attributes.get("alpha")!.f).toBe(1);
    const byName = new Map(g.initializers.map((t) => [t.name, t]));
    expect(byName.get("w")!.dims).toEqual([2, 3]);
    expect(Array.from(byName.get("w")!.data as Float32Array)).toEqual([1, 2, 3, -1, 0.5, 0]);
    expect(byName.get("b")!.dataType).toBe(OnnxDataType.FLOAT);
    expect(Array.from(byName.get("shape")!.data as BigInt64Array)).toEqual([-1n, 2n]);
  });

  it("onnx - initializer data must fill its dims", () => {
    const bad = gemmModel();
    const model = { ...bad, graph: { ...bad.graph, initializers: [{ name: "w", dims: [2, 2], data: new Float32Array(3) }] } };
    expect(() => encodeModel(model)).toThrow("initializer w: dims [2, 2] hold 4 values, data has 3");
  });

  it("onnx - onnxruntime loads and runs an encoded model", async () => {
    const m = gemmModel();
    const used = { ...m, graph: { ...m.graph, initializers: m.graph.initializers.filter((t) => t.name !== "shape") } };
    const session = await ort.InferenceSession.create(encodeModel(used));
    try {
      const out = await session.run({ x: new ort.Tensor("float32", Float32Array.from([1, 1, 1, 0, 2, -2]), [2, 3]) });
      expect(Array.from(out.y!.data as Float32Array)).toEqual([6.25, -1.5, -1.75, 0]);
    } finally {
      await session.release();
    }
  });
});
