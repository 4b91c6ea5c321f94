import { ErrorCode, ServeError } from "./errors.js";
import { describeZodError, inferRequestSchema } from "./schemas.js";
import { checkInputs, isDatatype, tensorFromJsonData, type Tensor, type TensorSpec } from "./tensors.js";
import { encodeTensors } from "./wire.js";

/**
 * An Open Inference Protocol JSON request body as the bus carries it: checked against the model's
 * input signature (names, datatypes and shapes first, then data length and element values) and
 * converted to the binary tensor encoding. Used by the frontend and by the dispatcher for JSON
 * queries from NATS callers.
 *
 * Files (an image for the OCR pipeline) travel as UINT8 [n] tensors of their bytes; in JSON an input
 * whose signature is UINT8 [-1] may also come as a BYTES tensor of one base64 string
 * ({@link isFileInput}, {@link bytesInputToTensor}).
 */
export function oipJsonToWire(body: unknown, signature: readonly TensorSpec[]): { payload: Uint8Array; id: string | undefined; timeoutMs: number | undefined } {
  const parsed = inferRequestSchema.safeParse(body);
  if (!parsed.success) throw new ServeError(ErrorCode.badRequest, `invalid inference request: ${describeZodError(parsed.error)}`);
  const request = parsed.data;
  const files = request.inputs.map((i) => (i.datatype === "BYTES" ? bytesInputToTensor(i, signature) : undefined));
  for (const input of request.inputs) {
    if (input.datatype !== "BYTES" && !isDatatype(input.datatype)) {
      throw new ServeError(ErrorCode.invalidDatatype, `input '${input.name}' has unknown datatype ${JSON.stringify(input.datatype)}`);
    }
  }
  checkInputs(request.inputs.map((i, k) => {
    const file = files[k];
    return file ? { name: file.name, datatype: file.datatype, shape: file.shape, length: file.data.length } : { name: i.name, datatype: i.datatype, shape: i.shape, length: countElements(i.data) };
  }), signature);
  const tensors = request.inputs.map((i, k) => files[k] ?? tensorFromJsonData(i.name, i.datatype as never, i.shape, i.data));
  const timeout = request.parameters?.["timeout_ms"];
  return {
    payload: encodeTensors(tensors, request.id ? { id: request.id } : {}),
    id: request.id,
    timeoutMs: typeof timeout === "number" && timeout > 0 ? timeout : undefined,
  };
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
export function bytesInputToTensor(input: { name: string; shape: readonly number[]; data: unknown }, signature: readonly TensorSpec[]): Tensor {
  const spec = signature.find((s) => s.name === input.name);
  if (!spec) throw new ServeError(ErrorCode.unknownInput, `the model has no input named '${input.name}'; its inputs are: ${signature.map((s) => s.name).join(", ")}`);
  if (!isFileInput(spec)) {
    throw new ServeError(ErrorCode.invalidDatatype, `input '${input.name}' is BYTES, which is accepted only for an input that takes a file (UINT8 [-1]); this one expects ${spec.datatype} [${spec.shape.join(", ")}]`);
  }
  if (input.shape.length !== 1 || input.shape[0] !== 1) throw new ServeError(ErrorCode.invalidShape, `input '${input.name}' (BYTES) must have shape [1]: one file; got [${input.shape.join(", ")}]`);
  const data = Array.isArray(input.data) && input.data.length === 1 ? input.data[0] : input.data;
  if (typeof data !== "string") throw new ServeError(ErrorCode.invalidData, `input '${input.name}' (BYTES) must carry the file as one base64 string: "data": ["<base64>"]`);
  const text = data.replace(/\s+/g, "");
  if (!BASE64.test(text) || text.length % 4 === 1) throw new ServeError(ErrorCode.invalidData, `input '${input.name}' (BYTES) is not valid base64`);
  const bytes = Buffer.from(text, "base64");
  if (bytes.length === 0) throw new ServeError(ErrorCode.invalidData, `input '${input.name}' (BYTES) is empty: send the file's bytes in base64`);
  return { name: input.name, datatype: "UINT8", shape: [bytes.length], data: new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.length) };
}
