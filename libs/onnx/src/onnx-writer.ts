/**
 * An ONNX ModelProto encoder for plain graphs (https://github.com/onnx/onnx/blob/main/onnx/onnx.proto,
 * field numbers as in that file; docs/IR.md for the semantics). It writes what the zoo's digit models
 * and the int8 rewrite need — nodes with int/float/string/list attributes, float32/int8/int64
 * initializers as little-endian `raw_data`, and typed graph inputs/outputs with symbolic dimensions —
 * and nothing more.
 *
 * Defaults: IR version 8 and the default-domain opset 13 (ONNX 1.10-era, read by every current
 * runtime). Repeated int64 fields are written unpacked, as proto2 (which onnx.proto uses) specifies.
 */
import { ProtoWriter } from "./protobuf.js";

/** TensorProto.DataType values used here. */
export const OnnxDataType = { FLOAT: 1, UINT8: 2, INT8: 3, INT32: 6, INT64: 7 } as const;
export type OnnxDataTypeCode = (typeof OnnxDataType)[keyof typeof OnnxDataType];

/** An attribute value; the variant fixes its ONNX AttributeType. */
export type OnnxAttribute =
  | { readonly type: "int"; readonly value: number }
  | { readonly type: "ints"; readonly value: readonly number[] }
  | { readonly type: "float"; readonly value: number }
  | { readonly type: "floats"; readonly value: readonly number[] }
  | { readonly type: "string"; readonly value: string };

/** A graph node. */
export interface OnnxNode {
  readonly opType: string;
  readonly inputs: readonly string[];
  readonly outputs: readonly string[];
  readonly name?: string;
  readonly domain?: string;
  readonly attributes?: Readonly<Record<string, OnnxAttribute>>;
}

/** A constant tensor stored in the model. */
export interface OnnxInitializer {
  readonly name: string;
  readonly dims: readonly number[];
  readonly data: Float32Array | Int8Array | Uint8Array | Int32Array | BigInt64Array;
}

/** A typed graph input or output; string dimensions are symbolic (`dim_param`). */
export interface OnnxValueInfo {
  readonly name: string;
  readonly elemType: OnnxDataTypeCode;
  readonly shape: readonly (number | string)[];
}

/** A graph. Nodes must be in topological order. */
export interface OnnxGraph {
  readonly name: string;
  readonly nodes: readonly OnnxNode[];
  readonly initializers: readonly OnnxInitializer[];
  readonly inputs: readonly OnnxValueInfo[];
  readonly outputs: readonly OnnxValueInfo[];
  readonly docString?: string;
}

/** A model: a graph plus versioning and metadata. */
export interface OnnxModel {
  readonly graph: OnnxGraph;
  /** @default 8 */
  readonly irVersion?: number;
  /** Default-domain opset. @default 13 */
  readonly opsetVersion?: number;
  readonly producerName?: string;
  readonly producerVersion?: string;
  readonly docString?: string;
  readonly metadata?: Readonly<Record<string, string>>;
}

// AttributeProto.AttributeType
const ATTR = { FLOAT: 1, INT: 2, STRING: 3, FLOATS: 6, INTS: 7 } as const;

/** The element type code and little-endian bytes of an initializer's data. */
export function tensorBytes(data: OnnxInitializer["data"]): { dataType: OnnxDataTypeCode; raw: Uint8Array } {
  let dataType: OnnxDataTypeCode;
  if (data instanceof Float32Array) dataType = OnnxDataType.FLOAT;
  else if (data instanceof Int8Array) dataType = OnnxDataType.INT8;
  else if (data instanceof Uint8Array) dataType = OnnxDataType.UINT8;
  else if (data instanceof Int32Array) dataType = OnnxDataType.INT32;
  else dataType = OnnxDataType.INT64;
  const raw = new Uint8Array(data.byteLength);
  const view = new DataView(raw.buffer);
  // Explicit little-endian writes, independent of the host's byte order.
  for (let i = 0; i < data.length; i++) {
    if (data instanceof Float32Array) view.setFloat32(i * 4, data[i]!, true);
    else if (data instanceof Int8Array) view.setInt8(i, data[i]!);
    else if (data instanceof Uint8Array) view.setUint8(i, data[i]!);
    else if (data instanceof Int32Array) view.setInt32(i * 4, data[i]!, true);
    else view.setBigInt64(i * 8, data[i]!, true);
  }
  return { dataType, raw };
}

/** Encodes a TensorProto with raw_data. */
export function encodeTensor(t: OnnxInitializer): ProtoWriter {
  const size = t.dims.reduce((a, b) => a * b, 1);
  if (size !== t.data.length) throw new Error(`initializer ${t.name}: dims [${t.dims.join(", ")}] hold ${size} values, data has ${t.data.length}`);
  const { dataType, raw } = tensorBytes(t.data);
  const w = new ProtoWriter();
  for (const d of t.dims) w.int(1, d); // dims
  w.int(2, dataType); // data_type
  w.string(8, t.name); // name
  w.bytes(9, raw); // raw_data
  return w;
}

function encodeAttribute(name: string, a: OnnxAttribute): ProtoWriter {
  const w = new ProtoWriter().string(1, name);
  switch (a.type) {
    case "float":
      w.float(2, a.value).int(20, ATTR.FLOAT);
      break;
    case "int":
      w.int(3, a.value).int(20, ATTR.INT);
      break;
    case "string":
      w.string(4, a.value).int(20, ATTR.STRING);
      break;
    case "floats":
      for (const v of a.value) w.float(7, v);
      w.int(20, ATTR.FLOATS);
      break;
    case "ints":
      for (const v of a.value) w.int(8, v);
      w.int(20, ATTR.INTS);
      break;
  }
  return w;
}

/** Encodes a NodeProto. */
export function encodeNode(n: OnnxNode): ProtoWriter {
  const w = new ProtoWriter();
  for (const i of n.inputs) w.string(1, i);
  for (const o of n.outputs) w.string(2, o);
  if (n.name) w.string(3, n.name);
  w.string(4, n.opType);
  for (const [name, attribute] of Object.entries(n.attributes ?? {})) w.message(5, encodeAttribute(name, attribute));
  if (n.domain) w.string(7, n.domain);
  return w;
}

/** Encodes a ValueInfoProto with a tensor type. */
export function encodeValueInfo(v: OnnxValueInfo): ProtoWriter {
  const shape = new ProtoWriter();
  for (const d of v.shape) {
    shape.message(1, typeof d === "number" ? new ProtoWriter().int(1, d) : new ProtoWriter().string(2, d));
  }
  const tensorType = new ProtoWriter().int(1, v.elemType).message(2, shape);
  return new ProtoWriter().string(1, v.name).message(2, new ProtoWriter().message(1, tensorType));
}

/** Encodes a GraphProto. */
export function encodeGraph(g: OnnxGraph): ProtoWriter {
  const w = new ProtoWriter();
  for (const n of g.nodes) w.message(1, encodeNode(n));
  w.string(2, g.name);
  for (const t of g.initializers) w.message(5, encodeTensor(t));
  if (g.docString) w.string(10, g.docString);
  for (const v of g.inputs) w.message(11, encodeValueInfo(v));
  for (const v of g.outputs) w.message(12, encodeValueInfo(v));
  return w;
}

/** Encodes a complete ModelProto, ready to write as a `.onnx` file. */
export function encodeModel(m: OnnxModel): Uint8Array {
  const w = new ProtoWriter();
  w.int(1, m.irVersion ?? 8); // ir_version
  w.string(2, m.producerName ?? "sloserve");
  if (m.producerVersion) w.string(3, m.producerVersion);
  if (m.docString) w.string(6, m.docString);
  w.message(7, encodeGraph(m.graph));
  w.message(8, new ProtoWriter().string(1, "").int(2, m.opsetVersion ?? 13)); // opset_import
  for (const [key, value] of Object.entries(m.metadata ?? {})) w.message(14, new ProtoWriter().string(1, key).string(2, value));
  return w.finish();
}
