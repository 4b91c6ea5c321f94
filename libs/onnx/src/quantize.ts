/**
 * Weight-only int8 quantisation of an ONNX model: an ONNX-graph rewrite for the variant generator.
 *
 * Every float32 2-D initializer used as the weight (input B) of a `Gemm` or `MatMul` node is replaced
 * by an int8 initializer plus a `DequantizeLinear` node that restores it to float at run time:
 *   W  →  DequantizeLinear(W_quantized: int8, W_scale: float, W_zero_point: int8) → W
 * The quantisation is symmetric (zero point 0, codes in [−127, 127]) with scale = max|w| / 127, per
 * output channel (`axis` attribute, opset ≥ 13) or per tensor (opset 10–12, or on request). This is the
 * weight-only scheme of onnxruntime's `quantize_dynamic` without its dynamic activation quantisation
 * (MatMulInteger): activations stay float, the file shrinks ~4× for dense-heavy models, and the model
 * runs on any ONNX runtime. Caveat: whether it runs faster depends on the runtime (onnxruntime may fold
 * the DequantizeLinear nodes back into float constants at load time).
 *
 * The rewrite works on raw protobuf fields: everything it does not touch (other nodes, value_info,
 * metadata, functions, unknown fields) is copied byte for byte.
 */
import { decodeModel, type DecodedTensor } from "./onnx-reader.js";
import { OnnxDataType, encodeNode, encodeTensor } from "./onnx-writer.js";
import { ProtoWriter, fieldBytes, readFields } from "./protobuf.js";

/** Options of {@link quantizeWeightsInt8}. */
export interface QuantizeOptions {
  /** One scale per output channel (needs opset ≥ 13); otherwise one per tensor. @default true */
  readonly perChannel?: boolean;
  /** Leave weights with fewer elements than this in float. @default 0 */
  readonly minElements?: number;
}

/** What was quantised, per weight. */
export interface QuantizedWeight {
  readonly name: string;
  readonly dims: readonly number[];
  /** Channel axis of the scales, or null for one per-tensor scale. */
  readonly axis: number | null;
  /** Largest |w − dequantize(quantize(w))| over the tensor. */
  readonly maxAbsError: number;
}

/** Result of {@link quantizeWeightsInt8}. */
export interface QuantizeResult {
  readonly model: Uint8Array;
  readonly weights: readonly QuantizedWeight[];
}

/** Rewrites `modelBytes` with int8 weights (see the module comment) and reports what changed. */
export function quantizeWeightsInt8(modelBytes: Uint8Array, options: QuantizeOptions = {}): QuantizeResult {
  const model = decodeModel(modelBytes);
  const opset = model.opsets.get("") ?? 0;
  if (opset < 10) throw new Error(`DequantizeLinear needs default-domain opset >= 10, model has ${opset}`);
  const perChannel = (options.perChannel ?? true) && opset >= 13;
  const { graph } = model;
  const initializers = new Map(graph.initializers.map((t) => [t.name, t]));
  const graphInputs = new Set(graph.inputNames);

  // Weight name → the channel axis each consumer implies (null when it is ambiguous).
  const axes = new Map<string, number | null>();
  for (const node of graph.nodes) {
    if (node.domain !== "" && node.domain !== "ai.onnx") continue;
    if (node.opType !== "Gemm" && node.opType !== "MatMul") continue;
    const name = node.inputs[1];
    if (!name) continue;
    const axis = node.opType === "Gemm" && node.attributes.get("transB")?.i === 1 ? 0 : 1;
    axes.set(name, axes.has(name) && axes.get(name) !== axis ? null : axis);
  }

  const taken = new Set([...initializers.keys(), ...graph.nodes.flatMap((n) => [...n.inputs, ...n.outputs])]);
  const unique = (base: string): string => {
    let name = base;
    for (let i = 1; taken.has(name); i++) name = `${base}_${i}`;
    taken.add(name);
    return name;
  };

  const newNodes: ProtoWriter[] = [];
  const newInitializers: ProtoWriter[] = [];
  const replaced = new Set<string>();
  const weights: QuantizedWeight[] = [];
  for (const [name, consumerAxis] of axes) {
    const t = initializers.get(name);
    if (!t || !(t.data instanceof Float32Array) || t.dataType !== OnnxDataType.FLOAT) continue;
    if (t.dims.length !== 2 || graphInputs.has(name) || t.data.length < (options.minElements ?? 0)) continue;
    const axis = perChannel && consumerAxis !== null ? consumerAxis : null;
    const q = quantizeTensor(t, axis);
    const qName = unique(`${name}_quantized`);
    const sName = unique(`${name}_scale`);
    const zName = unique(`${name}_zero_point`);
    const channelDims = axis === null ? [] : [t.dims[axis]!];
    newInitializers.push(encodeTensor({ name: qName, dims: t.dims, data: q.codes }));
    newInitializers.push(encodeTensor({ name: sName, dims: channelDims, data: q.scales }));
    newInitializers.push(encodeTensor({ name: zName, dims: channelDims, data: new Int8Array(q.scales.length) }));
    newNodes.push(encodeNode({
      opType: "DequantizeLinear", name: unique(`${name}_dequantize`), inputs: [qName, sName, zName], outputs: [name],
      attributes: axis === null ? {} : { axis: { type: "int", value: axis } },
    }));
    replaced.add(name);
    weights.push({ name, dims: t.dims, axis, maxAbsError: q.maxAbsError });
  }

  // GraphProto: the new nodes first (keeps the node list topologically sorted), then every original
  // field except the replaced initializers, then the new initializers.
  const g = new ProtoWriter();
  for (const n of newNodes) g.message(1, n);
  for (const f of graph.fields) {
    if (f.field === 5 && replaced.has(initializerName(fieldBytes(f)))) continue;
    g.raw(f);
  }
  for (const t of newInitializers) g.message(5, t);

  const m = new ProtoWriter();
  for (const f of model.fields) {
    if (f.field === 7) m.message(7, g);
    else m.raw(f);
  }
  return { model: m.finish(), weights };
}

/**
 * Weight-only int8 quantisation of a model's Gemm/MatMul weights, per output channel where the opset
 * allows. Returns the rewritten model; see {@link quantizeWeightsInt8} for the report.
 */
export function quantizeDynamicInt8(modelBytes: Uint8Array): Uint8Array {
  return quantizeWeightsInt8(modelBytes).model;
}

function initializerName(tensorBytes: Uint8Array): string {
  const f = readFields(tensorBytes).find((x) => x.field === 8);
  return f ? new TextDecoder().decode(fieldBytes(f)) : "";
}

/** Symmetric int8 codes and scales of a 2-D tensor, per channel along `axis` or per tensor (null). */
function quantizeTensor(t: DecodedTensor, axis: number | null): { codes: Int8Array; scales: Float32Array; maxAbsError: number } {
  const data = t.data as Float32Array;
  const [rows, cols] = t.dims as [number, number];
  const channels = axis === null ? 1 : t.dims[axis]!;
  const channelOf = (r: number, c: number): number => (axis === null ? 0 : axis === 0 ? r : c);
  const maxAbs = new Float64Array(channels);
  for (let r = 0; r < rows; r++) {
    for (let c = 0; c < cols; c++) {
      const ch = channelOf(r, c);
      maxAbs[ch] = Math.max(maxAbs[ch]!, Math.abs(data[r * cols + c]!));
    }
  }
  // A float32 scale, so the runtime dequantizes with exactly the value used here.
  const scales = Float32Array.from(maxAbs, (m) => (m > 0 ? m / 127 : 1));
  const codes = new Int8Array(data.length);
  let maxAbsError = 0;
  for (let r = 0; r < rows; r++) {
    for (let c = 0; c < cols; c++) {
      const i = r * cols + c;
      const scale = scales[channelOf(r, c)]!;
      const code = Math.max(-127, Math.min(127, Math.round(data[i]! / scale)));
      codes[i] = code;
      maxAbsError = Math.max(maxAbsError, Math.abs(data[i]! - code * scale));
    }
  }
  return { codes, scales, maxAbsError };
}
