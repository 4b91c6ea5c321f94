/**
 * Reads the parts of an ONNX ModelProto that this project needs (graph nodes, initializers, inputs and
 * outputs, opsets), keeping each message's raw fields so a rewrite (the int8 quantiser, quantize.ts) can
 * pass through everything it does not touch. Field numbers are those of onnx.proto.
 */
import { fieldBytes, fieldInt, fieldInts, fieldString, readFields, type ProtoField } from "./protobuf.js";
import { OnnxDataType } from "./onnx-writer.js";

/** A decoded node attribute (only the scalar/list kinds; others are left as raw fields). */
export interface DecodedAttribute {
  readonly name: string;
  readonly i?: number;
  readonly f?: number;
  readonly s?: string;
  readonly ints?: readonly number[];
  readonly floats?: readonly number[];
}

/** A decoded NodeProto. */
export interface DecodedNode {
  readonly opType: string;
  readonly domain: string;
  readonly name: string;
  readonly inputs: readonly string[];
  readonly outputs: readonly string[];
  readonly attributes: ReadonlyMap<string, DecodedAttribute>;
}

/** A decoded TensorProto; `data` is null for types or layouts (external data) not decoded here. */
export interface DecodedTensor {
  readonly name: string;
  readonly dims: readonly number[];
  readonly dataType: number;
  readonly data: Float32Array | Int8Array | Uint8Array | Int32Array | BigInt64Array | null;
}

/** A decoded graph plus the raw fields of its GraphProto. */
export interface DecodedGraph {
  readonly name: string;
  readonly nodes: readonly DecodedNode[];
  readonly initializers: readonly DecodedTensor[];
  readonly inputNames: readonly string[];
  readonly outputNames: readonly string[];
  readonly fields: readonly ProtoField[];
}

/** A decoded model plus the raw fields of its ModelProto. */
export interface DecodedModel {
  readonly irVersion: number;
  /** Opset version per domain ("" is the default ONNX domain). */
  readonly opsets: ReadonlyMap<string, number>;
  readonly graph: DecodedGraph;
  readonly fields: readonly ProtoField[];
}

function decodeAttribute(bytes: Uint8Array): DecodedAttribute {
  let name = "";
  let i: number | undefined;
  let f: number | undefined;
  let s: string | undefined;
  const ints: number[] = [];
  const floats: number[] = [];
  for (const field of readFields(bytes)) {
    if (field.field === 1) name = fieldString(field);
    else if (field.field === 2 && field.wire === 5) f = fixed32(field)[0];
    else if (field.field === 3) i = fieldInt(field);
    else if (field.field === 4) s = fieldString(field);
    else if (field.field === 7) floats.push(...fixed32(field));
    else if (field.field === 8) ints.push(...fieldInts(field));
  }
  return { name, i, f, s, ints, floats };
}

/** Float values of a 32-bit field or of a packed run of them. */
function fixed32(field: ProtoField): number[] {
  const bytes = field.value as Uint8Array;
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const out: number[] = [];
  for (let p = 0; p + 4 <= bytes.byteLength; p += 4) out.push(view.getFloat32(p, true));
  return out;
}

/** Decodes a NodeProto. */
export function decodeNode(bytes: Uint8Array): DecodedNode {
  let opType = "";
  let domain = "";
  let name = "";
  const inputs: string[] = [];
  const outputs: string[] = [];
  const attributes = new Map<string, DecodedAttribute>();
  for (const f of readFields(bytes)) {
    if (f.field === 1) inputs.push(fieldString(f));
    else if (f.field === 2) outputs.push(fieldString(f));
    else if (f.field === 3) name = fieldString(f);
    else if (f.field === 4) opType = fieldString(f);
    else if (f.field === 5) {
      const a = decodeAttribute(fieldBytes(f));
      attributes.set(a.name, a);
    } else if (f.field === 7) domain = fieldString(f);
  }
  return { opType, domain, name, inputs, outputs, attributes };
}

/** Decodes a TensorProto (raw_data or the typed float/int32/int64 fields). */
export function decodeTensor(bytes: Uint8Array): DecodedTensor {
  let name = "";
  let dataType = 0;
  const dims: number[] = [];
  let raw: Uint8Array | null = null;
  const floats: number[] = [];
  const ints: number[] = [];
  let external = false;
  for (const f of readFields(bytes)) {
    if (f.field === 1) dims.push(...fieldInts(f));
    else if (f.field === 2) dataType = fieldInt(f);
    else if (f.field === 4) floats.push(...fixed32(f));
    else if (f.field === 5 || f.field === 7) ints.push(...fieldInts(f));
    else if (f.field === 8) name = fieldString(f);
    else if (f.field === 9) raw = fieldBytes(f);
    else if (f.field === 14 && fieldInt(f) === 1) external = true;
  }
  const count = dims.reduce((a, b) => a * b, 1);
  let data: DecodedTensor["data"] = null;
  if (!external) {
    if (raw) data = fromRaw(raw, dataType, count);
    else if (dataType === OnnxDataType.FLOAT && floats.length === count) data = Float32Array.from(floats);
    else if (dataType === OnnxDataType.INT8 && ints.length === count) data = Int8Array.from(ints);
    else if (dataType === OnnxDataType.UINT8 && ints.length === count) data = Uint8Array.from(ints);
    else if (dataType === OnnxDataType.INT32 && ints.length === count) data = Int32Array.from(ints);
    else if (dataType === OnnxDataType.INT64 && ints.length === count) data = BigInt64Array.from(ints.map(BigInt));
  }
  return { name, dims, dataType, data };
}

function fromRaw(raw: Uint8Array, dataType: number, count: number): DecodedTensor["data"] {
  const view = new DataView(raw.buffer, raw.byteOffset, raw.byteLength);
  switch (dataType) {
    case OnnxDataType.FLOAT: {
      if (raw.byteLength !== count * 4) return null;
      const out = new Float32Array(count);
      for (let i = 0; i < count; i++) out[i] = view.getFloat32(i * 4, true);
      return out;
    }
    case OnnxDataType.INT8:
      // Uint8Array.from copies (Buffer#slice would return a view of the whole file).
      return raw.byteLength === count ? new Int8Array(Uint8Array.from(raw).buffer) : null;
    case OnnxDataType.UINT8:
      return raw.byteLength === count ? Uint8Array.from(raw) : null;
    case OnnxDataType.INT32: {
      if (raw.byteLength !== count * 4) return null;
      const out = new Int32Array(count);
      for (let i = 0; i < count; i++) out[i] = view.getInt32(i * 4, true);
      return out;
    }
    case OnnxDataType.INT64: {
      if (raw.byteLength !== count * 8) return null;
      const out = new BigInt64Array(count);
      for (let i = 0; i < count; i++) out[i] = view.getBigInt64(i * 8, true);
      return out;
    }
    default:
      return null;
  }
}

function valueInfoName(bytes: Uint8Array): string {
  const f = readFields(bytes).find((x) => x.field === 1);
  return f ? fieldString(f) : "";
}

/** Decodes a GraphProto. */
export function decodeGraph(bytes: Uint8Array): DecodedGraph {
  const fields = readFields(bytes);
  let name = "";
  const nodes: DecodedNode[] = [];
  const initializers: DecodedTensor[] = [];
  const inputNames: string[] = [];
  const outputNames: string[] = [];
  for (const f of fields) {
    if (f.field === 1) nodes.push(decodeNode(fieldBytes(f)));
    else if (f.field === 2) name = fieldString(f);
    else if (f.field === 5) initializers.push(decodeTensor(fieldBytes(f)));
    else if (f.field === 11) inputNames.push(valueInfoName(fieldBytes(f)));
    else if (f.field === 12) outputNames.push(valueInfoName(fieldBytes(f)));
  }
  return { name, nodes, initializers, inputNames, outputNames, fields };
}

/** Decodes a ModelProto (the `.onnx` file format). */
export function decodeModel(bytes: Uint8Array): DecodedModel {
  const fields = readFields(bytes);
  let irVersion = 0;
  let graph: DecodedGraph | null = null;
  const opsets = new Map<string, number>();
  for (const f of fields) {
    if (f.field === 1) irVersion = fieldInt(f);
    else if (f.field === 7) graph = decodeGraph(fieldBytes(f));
    else if (f.field === 8) {
      let domain = "";
      let version = 0;
      for (const g of readFields(fieldBytes(f))) {
        if (g.field === 1) domain = fieldString(g);
        else if (g.field === 2) version = fieldInt(g);
      }
      opsets.set(domain === "ai.onnx" ? "" : domain, version);
    }
  }
  if (!graph) throw new Error("ONNX model has no graph");
  return { irVersion, opsets, graph, fields };
}

/** A graph input's or output's declared type: its ONNX element type (TensorProto.DataType) and dims (-1 where symbolic or absent). */
export interface DecodedValueInfo {
  readonly name: string;
  readonly elemType: number;
  readonly shape: readonly number[];
}

/** A ValueInfoProto: name, and the tensor type's element type and shape. */
function decodeValueInfo(bytes: Uint8Array): DecodedValueInfo {
  let name = "";
  let elemType = 0;
  const shape: number[] = [];
  for (const f of readFields(bytes)) {
    if (f.field === 1) name = fieldString(f);
    else if (f.field === 2) {
      // TypeProto: field 1, tensor_type { 1: elem_type, 2: shape { 1: dim { 1: dim_value | 2: dim_param } } }
      for (const t of readFields(fieldBytes(f))) {
        if (t.field !== 1) continue;
        for (const tt of readFields(fieldBytes(t))) {
          if (tt.field === 1) elemType = fieldInt(tt);
          else if (tt.field === 2) {
            for (const d of readFields(fieldBytes(tt))) {
              if (d.field !== 1) continue;
              let dim = -1;
              for (const dd of readFields(fieldBytes(d))) if (dd.field === 1) dim = fieldInt(dd);
              shape.push(dim > 0 ? dim : -1);
            }
          }
        }
      }
    }
  }
  return { name, elemType, shape };
}

/** The graph's outputs as the model declares them, without decoding the rest of it (its weights stay unread). */
export function readGraphOutputs(model: Uint8Array): DecodedValueInfo[] {
  for (const f of readFields(model)) {
    if (f.field === 7) return readFields(fieldBytes(f)).filter((g) => g.field === 12).map((g) => decodeValueInfo(fieldBytes(g)));
  }
  throw new Error("ONNX model has no graph");
}
