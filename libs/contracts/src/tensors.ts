import { ErrorCode, ServeError } from "./errors.js";

/**
 * Tensors as the Open Inference Protocol names them, and their checks against a model's
 * signature. A dimension of -1 in a signature is dynamic (any size ≥ 1 is accepted).
 */

export const DATATYPES = ["BOOL", "UINT8", "UINT16", "UINT32", "UINT64", "INT8", "INT16", "INT32", "INT64", "FP16", "FP32", "FP64"] as const;
export type Datatype = (typeof DATATYPES)[number];

export type TensorData =
  | Float32Array
  | Float64Array
  | Int8Array
  | Uint8Array
  | Int16Array
  | Uint16Array
  | Int32Array
  | Uint32Array
  | BigInt64Array
  | BigUint64Array;

export interface Tensor {
  name: string;
  datatype: Datatype;
  shape: number[];
  data: TensorData;
}

/** One input or output of a model: name, datatype and shape (-1 = dynamic). */
export interface TensorSpec {
  name: string;
  datatype: Datatype;
  shape: number[];
}

interface TypeInfo {
  bytes: number;
  make: (length: number) => TensorData;
  fromBuffer: (buffer: ArrayBuffer, byteOffset: number, length: number) => TensorData;
  /** onnxruntime's name for the element type. */
  ort: string;
  kind: "float" | "int" | "bigint" | "bool" | "half";
  min?: number;
  max?: number;
}

const typeInfo: Record<Datatype, TypeInfo> = {
  BOOL: { bytes: 1, make: (n) => new Uint8Array(n), fromBuffer: (b, o, n) => new Uint8Array(b, o, n), ort: "bool", kind: "bool" },
  UINT8: { bytes: 1, make: (n) => new Uint8Array(n), fromBuffer: (b, o, n) => new Uint8Array(b, o, n), ort: "uint8", kind: "int", min: 0, max: 255 },
  UINT16: { bytes: 2, make: (n) => new Uint16Array(n), fromBuffer: (b, o, n) => new Uint16Array(b, o, n), ort: "uint16", kind: "int", min: 0, max: 65535 },
  UINT32: { bytes: 4, make: (n) => new Uint32Array(n), fromBuffer: (b, o, n) => new Uint32Array(b, o, n), ort: "uint32", kind: "int", min: 0, max: 4294967295 },
  UINT64: { bytes: 8, make: (n) => new BigUint64Array(n), fromBuffer: (b, o, n) => new BigUint64Array(b, o, n), ort: "uint64", kind: "bigint", min: 0 },
  INT8: { bytes: 1, make: (n) => new Int8Array(n), fromBuffer: (b, o, n) => new Int8Array(b, o, n), ort: "int8", kind: "int", min: -128, max: 127 },
  INT16: { bytes: 2, make: (n) => new Int16Array(n), fromBuffer: (b, o, n) => new Int16Array(b, o, n), ort: "int16", kind: "int", min: -32768, max: 32767 },
  INT32: { bytes: 4, make: (n) => new Int32Array(n), fromBuffer: (b, o, n) => new Int32Array(b, o, n), ort: "int32", kind: "int", min: -2147483648, max: 2147483647 },
  INT64: { bytes: 8, make: (n) => new BigInt64Array(n), fromBuffer: (b, o, n) => new BigInt64Array(b, o, n), ort: "int64", kind: "bigint" },
  FP16: { bytes: 2, make: (n) => new Uint16Array(n), fromBuffer: (b, o, n) => new Uint16Array(b, o, n), ort: "float16", kind: "half" },
  FP32: { bytes: 4, make: (n) => new Float32Array(n), fromBuffer: (b, o, n) => new Float32Array(b, o, n), ort: "float32", kind: "float" },
  FP64: { bytes: 8, make: (n) => new Float64Array(n), fromBuffer: (b, o, n) => new Float64Array(b, o, n), ort: "float64", kind: "float" },
};

export function isDatatype(value: unknown): value is Datatype {
  return typeof value === "string" && value in typeInfo;
}

export function bytesPerElement(datatype: Datatype): number {
  return typeInfo[datatype].bytes;
}

export function allocate(datatype: Datatype, length: number): TensorData {
  return typeInfo[datatype].make(length);
}

/** A typed view of `length` elements at `byteOffset`; copies when the offset is not aligned. */
export function viewOf(datatype: Datatype, bytes: Uint8Array, byteOffset: number, length: number): TensorData {
  const info = typeInfo[datatype];
  const absolute = bytes.byteOffset + byteOffset;
  if (absolute % info.bytes === 0) return info.fromBuffer(bytes.buffer as ArrayBuffer, absolute, length);
  // Not aligned: copy into a fresh buffer. (Node's Buffer.slice would return a view, not a copy.)
  const copy = new Uint8Array(length * info.bytes);
  copy.set(bytes.subarray(byteOffset, byteOffset + length * info.bytes));
  return info.fromBuffer(copy.buffer, 0, length);
}

const ortToDatatype: Record<string, Datatype> = Object.fromEntries(
  Object.entries(typeInfo).map(([dt, info]) => [info.ort, dt as Datatype]),
);

/** The Open Inference Protocol datatype of an onnxruntime element type, or undefined. */
export function datatypeFromOrt(ortType: string): Datatype | undefined {
  return ortToDatatype[ortType];
}

export function ortTypeOf(datatype: Datatype): string {
  return typeInfo[datatype].ort;
}

export function elementCount(shape: readonly number[]): number {
  let n = 1;
  for (const d of shape) n *= d;
  return n;
}

/** Rows [from, from + count) of a tensor whose first dimension is the row (a view, not a copy). */
export function tensorRows(t: Tensor, from: number, count: number): Tensor {
  const rowSize = elementCount(t.shape.slice(1));
  return { name: t.name, datatype: t.datatype, shape: [count, ...t.shape.slice(1)], data: t.data.subarray(from * rowSize, (from + count) * rowSize) as Tensor["data"] };
}

function shapeText(shape: readonly number[]): string {
  return `[${shape.join(", ")}]`;
}

/** Checks an input's declared datatype and shape against the model's spec. */
export function checkAgainstSpec(name: string, datatype: string, shape: readonly number[], spec: TensorSpec): void {
  if (datatype !== spec.datatype) {
    throw new ServeError(ErrorCode.invalidDatatype, `input '${name}' has datatype ${datatype}; the model expects ${spec.datatype}`);
  }
  const bad = shape.length !== spec.shape.length || shape.some((d, i) => {
    const want = spec.shape[i] ?? 0;
    return !Number.isInteger(d) || d < 1 || (want >= 0 && d !== want);
  });
  if (bad) {
    throw new ServeError(
      ErrorCode.invalidShape,
      `input '${name}' has shape ${shapeText(shape)}; the model expects ${shapeText(spec.shape)} (-1 = any size)`,
    );
  }
}

/** Checks a set of inputs (name, datatype, shape, element count) against a model's input signature. */
export function checkInputs(inputs: ReadonlyArray<{ name: string; datatype: string; shape: readonly number[]; length: number }>, signature: readonly TensorSpec[]): void {
  const seen = new Set<string>();
  for (const input of inputs) {
    const spec = signature.find((s) => s.name === input.name);
    if (!spec) {
      throw new ServeError(ErrorCode.unknownInput, `the model has no input named '${input.name}'; its inputs are: ${signature.map((s) => s.name).join(", ")}`);
    }
    if (seen.has(input.name)) throw new ServeError(ErrorCode.badRequest, `input '${input.name}' is given twice`);
    seen.add(input.name);
    checkAgainstSpec(input.name, input.datatype, input.shape, spec);
    const expected = elementCount(input.shape);
    if (input.length !== expected) {
      throw new ServeError(
        ErrorCode.invalidDataLength,
        `input '${input.name}' has ${input.length} elements but its shape ${shapeText(input.shape)} needs ${expected}`,
      );
    }
  }
  for (const spec of signature) {
    if (!seen.has(spec.name)) throw new ServeError(ErrorCode.missingInput, `missing input '${spec.name}' (${spec.datatype} ${shapeText(spec.shape)})`);
  }
}

/** Flattens Open Inference Protocol `data` (flat or nested row-major arrays) into `out`. */
function flattenInto(data: unknown, out: unknown[], depth: number): void {
  if (!Array.isArray(data)) {
    out.push(data);
    return;
  }
  if (depth > 16) throw new ServeError(ErrorCode.invalidData, "tensor data is nested more than 16 levels deep");
  for (const item of data) flattenInto(item, out, depth + 1);
}

/** Whether `data` is an array none of whose elements is an array. */
function isFlat(data: unknown): data is readonly unknown[] {
  if (!Array.isArray(data)) return false;
  for (let i = 0; i < data.length; i++) if (Array.isArray(data[i])) return false;
  return true;
}

/** The error for element `i` of a JSON input (a function of its own, not a closure made for every input). */
function badElement(name: string, datatype: Datatype, flat: readonly unknown[], i: number): ServeError {
  return new ServeError(ErrorCode.invalidData, `input '${name}' element ${i} (${JSON.stringify(flat[i])}) is not a valid ${datatype} value`);
}

/**
 * Converts one Open Inference Protocol JSON input (`{name, datatype, shape, data}`) whose header
 * was already checked into a typed tensor, checking each element against the datatype.
 */
export function tensorFromJsonData(name: string, datatype: Datatype, shape: number[], data: unknown): Tensor {
  // Flat data (what clients mostly send) is read in place: copying it into a new array first, an
  // element at a time, cost more than the conversion (bench/README.md, "HTTP frontend CPU").
  let flat: readonly unknown[];
  if (isFlat(data)) flat = data;
  else {
    const nested: unknown[] = [];
    flattenInto(data, nested, 0);
    flat = nested;
  }
  const expected = elementCount(shape);
  if (flat.length !== expected) {
    throw new ServeError(ErrorCode.invalidDataLength, `input '${name}' has ${flat.length} elements but its shape ${shapeText(shape)} needs ${expected}`);
  }
  const info = typeInfo[datatype];
  const out = info.make(expected);
  switch (info.kind) {
    case "float": {
      const arr = out as Float32Array | Float64Array;
      for (let i = 0; i < expected; i++) {
        const v = flat[i];
        if (typeof v !== "number") throw badElement(name, datatype, flat, i);
        // JSON has no NaN or infinity; a literal too large for a double (1e999) parses as one.
        if (!Number.isFinite(v)) throw new ServeError(ErrorCode.invalidData, `input '${name}' element ${i} is not a finite number (a JSON number beyond the range of a double)`);
        arr[i] = v;
      }
      break;
    }
    case "int": {
      const arr = out as Int32Array;
      for (let i = 0; i < expected; i++) {
        const v = flat[i];
        if (typeof v !== "number" || !Number.isInteger(v) || v < (info.min ?? -Infinity) || v > (info.max ?? Infinity)) throw badElement(name, datatype, flat, i);
        arr[i] = v;
      }
      break;
    }
    case "bigint": {
      const arr = out as BigInt64Array;
      for (let i = 0; i < expected; i++) {
        const v = flat[i];
        if (typeof v !== "number" || !Number.isSafeInteger(v) || v < (info.min ?? -Infinity)) throw badElement(name, datatype, flat, i);
        arr[i] = BigInt(v);
      }
      break;
    }
    case "bool": {
      const arr = out as Uint8Array;
      for (let i = 0; i < expected; i++) {
        const v = flat[i];
        if (typeof v === "boolean") arr[i] = v ? 1 : 0;
        else if (v === 0 || v === 1) arr[i] = v;
        else throw badElement(name, datatype, flat, i);
      }
      break;
    }
    case "half":
      throw new ServeError(ErrorCode.invalidDatatype, `input '${name}': FP16 data is accepted in the binary tensor encoding only, not in JSON`);
  }
  return { name, datatype, shape, data: out };
}

/** Tensor data as a JSON-friendly array (BigInts become numbers, BOOL becomes booleans). */
export function tensorDataToJson(tensor: Tensor): Array<number | boolean> {
  const { data, datatype } = tensor;
  if (datatype === "BOOL") return Array.from(data as Uint8Array, (v) => v !== 0);
  if (data instanceof BigInt64Array || data instanceof BigUint64Array) return Array.from(data, (v) => Number(v));
  return Array.from(data as Float32Array);
}
