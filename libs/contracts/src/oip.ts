import { fileURLToPath } from "node:url";
import { z } from "zod";
import { ErrorCode, ServeError } from "./errors.js";
import { describeZodError, inferRequestSchema } from "./schemas.js";
import { bytesPerElement, checkInputs, isDatatype, tensorDataToJson, tensorFromJsonData, type Tensor, type TensorSpec } from "./tensors.js";
import { encodeTensors } from "./wire.js";

/**
 * The Open Inference Protocol (KServe v2) at the edge: requests in any of its encodings (JSON, the
 * HTTP binary tensor extension, gRPC) converted to the bus's binary tensor encoding after checking
 * them against the model's input signature, and answers encoded back (JSON or the binary extension).
 * Used by the frontend (HTTP and gRPC) and by the dispatcher for JSON queries from NATS callers.
 */

/** The Open Inference Protocol's gRPC definition (package `inference`, service `GRPCInferenceService`). */
export const oipGrpcProtoPath = fileURLToPath(new URL("../proto/open_inference_grpc.proto", import.meta.url));

/**
 * One input of a request, whatever the encoding: JSON `data` (flat or nested row-major), or `raw`
 * bytes (the binary extension's segment, gRPC `raw_input_contents`): the elements flattened in
 * row-major order, little-endian; BYTES elements each as a 4-byte little-endian length and the bytes.
 */
export interface OipInput {
  name: string;
  datatype: string;
  shape: number[];
  parameters?: Record<string, unknown>;
  data?: unknown;
  raw?: Uint8Array;
}

/** A request whatever its encoding. `outputs`: the outputs asked for (absent: all of them). */
export interface OipRequest {
  id?: string;
  parameters: Record<string, unknown>;
  inputs: OipInput[];
  outputs?: Array<{ name: string; parameters?: Record<string, unknown> }>;
}

/** The JSON header of a binary-extension request: an input's `data` may be absent (its bytes follow the header). */
const binaryHeaderSchema = inferRequestSchema.extend({
  inputs: z.array(inferRequestSchema.shape.inputs.element.extend({ data: z.unknown().optional() })).min(1),
});

/** Checks a JSON request body (or a binary-extension header) against the protocol's schema. */
export function parseOipJson(body: unknown, binaryHeader = false): OipRequest {
  const parsed = (binaryHeader ? binaryHeaderSchema : inferRequestSchema).safeParse(body);
  if (!parsed.success) throw new ServeError(ErrorCode.badRequest, `invalid inference request: ${describeZodError(parsed.error)}`);
  const { id, parameters, inputs, outputs } = parsed.data;
  return { ...(id === undefined ? {} : { id }), parameters: parameters ?? {}, inputs, ...(outputs ? { outputs } : {}) };
}

/** The request parameter `timeout_ms` when it is a positive number. */
export function oipTimeoutMs(parameters: Record<string, unknown>): number | undefined {
  const timeout = parameters["timeout_ms"];
  return typeof timeout === "number" && timeout > 0 ? timeout : undefined;
}

/**
 * An Open Inference Protocol JSON request body as the bus carries it: checked against the model's
 * input signature (names, datatypes and shapes first, then data length and element values) and
 * converted to the binary tensor encoding.
 *
 * Files (an image for the OCR pipeline) travel as UINT8 [n] tensors of their bytes; in JSON an input
 * whose signature is UINT8 [-1] may also come as a BYTES tensor of one base64 string
 * ({@link isFileInput}, {@link bytesInputToTensor}).
 */
export function oipJsonToWire(body: unknown, signature: readonly TensorSpec[]): { payload: Uint8Array; id: string | undefined; timeoutMs: number | undefined } {
  const request = parseOipJson(body);
  return { payload: oipRequestToWire(request, signature), id: request.id, timeoutMs: oipTimeoutMs(request.parameters) };
}

/**
 * A request in any encoding ({@link OipInput}) checked against the model's input signature (names,
 * datatypes and shapes first, then data length and element values) and converted to the bus's
 * binary tensor encoding. Raw inputs are copied into the message once, as bytes.
 */
export function oipRequestToWire(request: OipRequest, signature: readonly TensorSpec[]): Uint8Array {
  const files = request.inputs.map((i) => {
    if (i.datatype !== "BYTES") return undefined;
    return i.raw ? fileTensor(i, signature, () => oneBytesElement(i.name, i.raw as Uint8Array)) : bytesInputToTensor(i, signature);
  });
  const lengths = request.inputs.map((i) => {
    if (i.datatype !== "BYTES" && !isDatatype(i.datatype)) {
      throw new ServeError(ErrorCode.invalidDatatype, `input '${i.name}' has unknown datatype ${JSON.stringify(i.datatype)}`);
    }
    if (!i.raw && i.data === undefined) throw new ServeError(ErrorCode.invalidData, `input '${i.name}' has neither "data" nor parameters.binary_data_size`);
    if (!i.raw || i.datatype === "BYTES") return countElements(i.data);
    const width = bytesPerElement(i.datatype);
    if (i.raw.byteLength % width !== 0) {
      throw new ServeError(ErrorCode.invalidDataLength, `input '${i.name}' has ${i.raw.byteLength} bytes of binary data, not a whole number of ${i.datatype} elements (${width} bytes each)`);
    }
    return i.raw.byteLength / width;
  });
  checkInputs(request.inputs.map((i, k) => {
    const file = files[k];
    return file ? { name: file.name, datatype: file.datatype, shape: file.shape, length: file.data.length } : { name: i.name, datatype: i.datatype, shape: i.shape, length: lengths[k] as number };
  }), signature);
  const tensors = request.inputs.map((i, k): Tensor => {
    const file = files[k];
    if (file) return file;
    if (!isDatatype(i.datatype)) throw new ServeError(ErrorCode.invalidDatatype, `input '${i.name}' has unknown datatype ${JSON.stringify(i.datatype)}`);
    // Raw bytes go into the message as they are: the encoding copies a tensor's bytes whatever its
    // type, and a typed view of them would be a copy of its own where they are misaligned (the binary
    // extension's inputs start after a JSON header of any length).
    if (i.raw) return { name: i.name, datatype: i.datatype, shape: i.shape, data: i.raw };
    return tensorFromJsonData(i.name, i.datatype, i.shape, i.data);
  });
  return encodeTensors(tensors, request.id ? { id: request.id } : {});
}

/** The one element of a raw BYTES tensor: [u32 LE length][bytes], nothing after. */
function oneBytesElement(name: string, raw: Uint8Array): Uint8Array {
  const length = raw.byteLength >= 4 ? new DataView(raw.buffer, raw.byteOffset, raw.byteLength).getUint32(0, true) : -1;
  if (length < 0 || 4 + length !== raw.byteLength) {
    throw new ServeError(ErrorCode.invalidData, `input '${name}' (BYTES) binary data must be one element: a 4-byte little-endian length, then that many bytes (got ${raw.byteLength} bytes${length >= 0 ? ` announcing ${length}` : ""})`);
  }
  if (length === 0) throw new ServeError(ErrorCode.invalidData, `input '${name}' (BYTES) is an empty file`);
  return raw.subarray(4);
}

/** Elements of flat or nested JSON tensor data. */
function countElements(data: unknown): number {
  if (!Array.isArray(data)) return 1;
  let n = 0;
  for (const d of data) n += Array.isArray(d) ? countElements(d) : 1;
  return n;
}

/** Whether a signature entry takes a file's bytes: UINT8 with one dynamic dimension. */
export function isFileInput(spec: TensorSpec): boolean {
  return spec.datatype === "UINT8" && spec.shape.length === 1 && spec.shape[0] === -1;
}

/** Base64 (standard or URL-safe alphabet, padding optional), once whitespace is removed. */
const BASE64 = /^[A-Za-z0-9+/_-]*={0,2}$/;

/**
 * An Open Inference Protocol BYTES input in JSON (`{"name": "image", "datatype": "BYTES", "shape": [1],
 * "data": ["<base64>"]}`) as the UINT8 [n] tensor of its bytes, for a signature entry that takes a file
 * ({@link isFileInput}). Line breaks in the base64 (as `base64` writes it) are ignored. Throws a
 * ServeError naming the problem: BYTES for an input that takes something else, a shape other than [1],
 * data that is not one base64 string, an empty file.
 */
export function bytesInputToTensor(input: { name: string; shape: readonly number[]; data?: unknown }, signature: readonly TensorSpec[]): Tensor {
  return fileTensor(input, signature, () => {
    const data = Array.isArray(input.data) && input.data.length === 1 ? input.data[0] : input.data;
    if (typeof data !== "string") throw new ServeError(ErrorCode.invalidData, `input '${input.name}' (BYTES) must carry the file as one base64 string: "data": ["<base64>"]`);
    const text = data.replace(/\s+/g, "");
    if (!BASE64.test(text) || text.length % 4 === 1) throw new ServeError(ErrorCode.invalidData, `input '${input.name}' (BYTES) is not valid base64`);
    const bytes = Buffer.from(text, "base64");
    if (bytes.length === 0) throw new ServeError(ErrorCode.invalidData, `input '${input.name}' (BYTES) is empty: send the file's bytes in base64`);
    return new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.length);
  });
}

/** A BYTES input of one file (shape [1]) as the UINT8 [n] tensor of its bytes, for a signature entry that takes a file. */
function fileTensor(input: { name: string; shape: readonly number[] }, signature: readonly TensorSpec[], bytesOf: () => Uint8Array): Tensor {
  const spec = signature.find((s) => s.name === input.name);
  if (!spec) throw new ServeError(ErrorCode.unknownInput, `the model has no input named '${input.name}'; its inputs are: ${signature.map((s) => s.name).join(", ")}`);
  if (!isFileInput(spec)) {
    throw new ServeError(ErrorCode.invalidDatatype, `input '${input.name}' is BYTES, which is accepted only for an input that takes a file (UINT8 [-1]); this one expects ${spec.datatype} [${spec.shape.join(", ")}]`);
  }
  if (input.shape.length !== 1 || input.shape[0] !== 1) throw new ServeError(ErrorCode.invalidShape, `input '${input.name}' (BYTES) must have shape [1]: one file; got [${input.shape.join(", ")}]`);
  const bytes = bytesOf();
  return { name: input.name, datatype: "UINT8", shape: [bytes.length], data: bytes };
}

/**
 * The HTTP binary tensor extension (Triton's and KServe's clients): the body is a JSON request header
 * of `headerLength` bytes (the `Inference-Header-Content-Length` header), then the binary data of the
 * inputs whose parameters carry `binary_data_size`, in the order of `inputs`. Throws a ServeError
 * naming the problem when the sizes do not add up.
 */
export function parseOipBinaryBody(body: Uint8Array, headerLength: number): OipRequest {
  if (!Number.isInteger(headerLength) || headerLength < 0 || headerLength > body.byteLength) {
    throw new ServeError(ErrorCode.badRequest, `Inference-Header-Content-Length is ${headerLength}; it must be a whole number of bytes within the body's ${body.byteLength}`);
  }
  let header: unknown;
  try {
    header = JSON.parse(Buffer.from(body.buffer, body.byteOffset, headerLength).toString("utf8"));
  } catch {
    throw new ServeError(ErrorCode.malformedJson, `the first ${headerLength} bytes of the body (Inference-Header-Content-Length) are not a JSON inference request`);
  }
  const request = parseOipJson(header, true);
  let offset = headerLength;
  for (const input of request.inputs) {
    const size = input.parameters?.["binary_data_size"];
    if (size === undefined) continue;
    if (typeof size !== "number" || !Number.isInteger(size) || size < 0) throw new ServeError(ErrorCode.badRequest, `input '${input.name}': binary_data_size must be a whole number of bytes, not ${JSON.stringify(size)}`);
    if (input.data !== undefined) throw new ServeError(ErrorCode.badRequest, `input '${input.name}' has both "data" and binary_data_size; send one`);
    if (offset + size > body.byteLength) {
      throw new ServeError(ErrorCode.invalidDataLength, `input '${input.name}': binary_data_size ${size} runs past the end of the body (${body.byteLength - offset} bytes left after the header and earlier inputs)`);
    }
    input.raw = body.subarray(offset, offset + size);
    offset += size;
  }
  if (offset !== body.byteLength) {
    throw new ServeError(ErrorCode.invalidDataLength, `the body has ${body.byteLength - offset} bytes after the JSON header and the inputs' binary_data_size; they must add up to the body's length`);
  }
  return request;
}

/**
 * Whether an output goes back in binary: its own `binary_data` parameter in `outputs` if given, else
 * the request parameter `binary_data_output` (Triton's client sets it when it asks for no output by name).
 */
export function wantsBinaryOutput(request: Pick<OipRequest, "parameters" | "outputs">, name: string): boolean {
  const own = request.outputs?.find((o) => o.name === name)?.parameters?.["binary_data"];
  if (typeof own === "boolean") return own;
  return request.parameters["binary_data_output"] === true;
}

/** A tensor's elements as little-endian bytes (a view, not a copy). */
export function tensorBytes(data: Tensor["data"]): Uint8Array {
  return new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
}

/**
 * An answer in the binary tensor extension: the JSON header (`header` with `outputs` filled in; a
 * binary output carries `parameters.binary_data_size` and no `data`), then the binary outputs' bytes
 * in order. `headerLength` goes in the `Inference-Header-Content-Length` response header; when no
 * output is binary the body is plain JSON and `headerLength` is undefined.
 */
export function oipResponseBody(header: Record<string, unknown>, outputs: readonly Tensor[], binary: (name: string) => boolean): { body: Buffer; headerLength: number | undefined } {
  const { parts, headerLength } = oipResponseParts(header, outputs, binary);
  return { body: parts.length === 1 ? (parts[0] as Buffer) : Buffer.concat(parts), headerLength };
}

/**
 * {@link oipResponseBody} in pieces: the JSON header, then each binary output's bytes as a view of
 * the output (no copy), `byteLength` in all; to be written one after the other.
 */
export function oipResponseParts(header: Record<string, unknown>, outputs: readonly Tensor[], binary: (name: string) => boolean): { parts: Buffer[]; byteLength: number; headerLength: number | undefined } {
  const segments: Buffer[] = [];
  const described = outputs.map((o) => {
    if (!binary(o.name)) return { name: o.name, datatype: o.datatype, shape: o.shape, data: tensorDataToJson(o) };
    const bytes = tensorBytes(o.data);
    segments.push(Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength));
    return { name: o.name, datatype: o.datatype, shape: o.shape, parameters: { binary_data_size: o.data.byteLength } };
  });
  const json = Buffer.from(JSON.stringify({ ...header, outputs: described }));
  let byteLength = json.length;
  for (const seg of segments) byteLength += seg.length;
  return { parts: [json, ...segments], byteLength, headerLength: segments.length === 0 ? undefined : json.length };
}
