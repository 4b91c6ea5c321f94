/**
 * Maps a trained {@link Network} onto an ONNX graph, one node per layer, with the zoo's signature:
 * `input` float32 [N, 1, 28, 28] → `probabilities` float32 [N, classes] (Softmax over axis 1), N a
 * symbolic batch dimension.
 *
 * dense → Gemm(transB = 1), conv → Conv, maxpool → MaxPool, avgpool → AveragePool, relu → Relu,
 * flatten → Flatten(axis = 1); initializers are the layers' float32 weights.
 */
import { AvgPool2d, Conv2d, Dense, MaxPool2d } from "./layers.js";
import { Network, type LayerSpec } from "./network.js";
import { OnnxDataType, decodeModel, encodeModel, type OnnxGraph, type OnnxInitializer, type OnnxNode } from "@sloserve/onnx";
import { createRng } from "@sloserve/policy";

/** Names of the graph's input and output. */
export const INPUT_NAME = "input";
export const OUTPUT_NAME = "probabilities";
/** The symbolic batch dimension. */
export const BATCH_DIM = "N";

/** Builds the ONNX graph of `network` (per-sample input shape `network.inShape`). */
export function networkToGraph(network: Network, name: string): OnnxGraph {
  const nodes: OnnxNode[] = [];
  const initializers: OnnxInitializer[] = [];
  let current = INPUT_NAME;
  for (const layer of network.layers) {
    const out = layer.name;
    if (layer instanceof Dense) {
      initializers.push({ name: layer.weight.name, dims: layer.weight.shape, data: layer.weight.data });
      initializers.push({ name: layer.bias.name, dims: layer.bias.shape, data: layer.bias.data });
      nodes.push({
        opType: "Gemm", name: layer.name, inputs: [current, layer.weight.name, layer.bias.name], outputs: [out],
        attributes: { transB: { type: "int", value: 1 } },
      });
    } else if (layer instanceof Conv2d) {
      initializers.push({ name: layer.weight.name, dims: layer.weight.shape, data: layer.weight.data });
      initializers.push({ name: layer.bias.name, dims: layer.bias.shape, data: layer.bias.data });
      const { kernel: k, pad: p, stride: s } = layer;
      nodes.push({
        opType: "Conv", name: layer.name, inputs: [current, layer.weight.name, layer.bias.name], outputs: [out],
        attributes: {
          kernel_shape: { type: "ints", value: [k, k] },
          pads: { type: "ints", value: [p, p, p, p] },
          strides: { type: "ints", value: [s, s] },
        },
      });
    } else if (layer instanceof MaxPool2d || layer instanceof AvgPool2d) {
      nodes.push({
        opType: layer instanceof MaxPool2d ? "MaxPool" : "AveragePool", name: layer.name, inputs: [current], outputs: [out],
        attributes: {
          kernel_shape: { type: "ints", value: [layer.size, layer.size] },
          strides: { type: "ints", value: [layer.stride, layer.stride] },
        },
      });
    } else if (layer.kind === "relu") {
      nodes.push({ opType: "Relu", name: layer.name, inputs: [current], outputs: [out] });
    } else if (layer.kind === "flatten") {
      nodes.push({ opType: "Flatten", name: layer.name, inputs: [current], outputs: [out], attributes: { axis: { type: "int", value: 1 } } });
    } else {
      throw new Error(`no ONNX mapping for layer ${layer.name} (${layer.kind})`);
    }
    current = out;
  }
  nodes.push({ opType: "Softmax", name: "softmax", inputs: [current], outputs: [OUTPUT_NAME], attributes: { axis: { type: "int", value: 1 } } });
  return {
    name,
    nodes,
    initializers,
    inputs: [{ name: INPUT_NAME, elemType: OnnxDataType.FLOAT, shape: [BATCH_DIM, ...network.inShape] }],
    outputs: [{ name: OUTPUT_NAME, elemType: OnnxDataType.FLOAT, shape: [BATCH_DIM, network.outFeatures] }],
  };
}

/** Serialises `network` as an ONNX model (IR 8, opset 13). */
export function exportNetwork(
  network: Network,
  name: string,
  options: { docString?: string; producerVersion?: string; metadata?: Record<string, string> } = {},
): Uint8Array {
  return encodeModel({
    graph: networkToGraph(network, name),
    producerName: "sloserve-zoo",
    ...options,
  });
}

/**
 * Rebuilds a {@link Network} of architecture `layers` from an exported model's initializers (matched
 * by name), so a cached `.onnx` file can be run through the TypeScript forward pass again.
 */
export function networkFromOnnx(bytes: Uint8Array, layers: readonly LayerSpec[], inShape: readonly number[]): Network {
  const weights = new Map(decodeModel(bytes).graph.initializers.map((t) => [t.name, t]));
  const network = new Network(layers, inShape, createRng(0));
  for (const p of network.params) {
    const t = weights.get(p.name);
    if (!t || !(t.data instanceof Float32Array)) throw new Error(`model has no float initializer ${p.name}`);
    if (t.dims.join(",") !== p.shape.join(",")) throw new Error(`initializer ${p.name}: dims [${t.dims.join(", ")}], expected [${p.shape.join(", ")}]`);
    p.data.set(t.data);
  }
  return network;
}
