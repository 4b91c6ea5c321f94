import {
  ErrorCode,
  ServeError,
  checkInputs,
  contentTypes,
  decodeTensors,
  describeZodError,
  encodeTensors,
  headers,
  inferRequestSchema,
  isDatatype,
  tensorDataToJson,
  tensorFromJsonData,
  type ModelRecord,
  type Tensor,
} from "@sloserve/contracts";

/**
 * Conversion between the Open Inference Protocol's JSON and the bus's binary tensors, done once at
 * the edge: the body is checked against the model's signature here, so bad input gets its 4xx
 * without touching the bus.
 */
export function jsonToWire(body: unknown, signature: ModelRecord["inputs"]): { payload: Uint8Array; id: string | undefined; timeoutMs: number | undefined } {
  const parsed = inferRequestSchema.safeParse(body);
  if (!parsed.success) throw new ServeError(ErrorCode.badRequest, `invalid inference request: ${describeZodError(parsed.error)}`);
  const request = parsed.data;
  const tensors: Tensor[] = [];
  for (const input of request.inputs) {
    if (!isDatatype(input.datatype)) {
      throw new ServeError(ErrorCode.invalidDatatype, `input '${input.name}' has unknown datatype ${JSON.stringify(input.datatype)}`);
    }
  }
  // Header checks first (name, datatype, shape), then data length and element values.
  const lengths = request.inputs.map((i) => countElements(i.data));
  checkInputs(request.inputs.map((i, k) => ({ name: i.name, datatype: i.datatype, shape: i.shape, length: lengths[k] as number })), signature);
  for (const input of request.inputs) tensors.push(tensorFromJsonData(input.name, input.datatype as never, input.shape, input.data));
  const timeout = request.parameters?.["timeout_ms"];
  return {
    payload: encodeTensors(tensors, request.id ? { id: request.id } : {}),
    id: request.id,
    timeoutMs: typeof timeout === "number" && timeout > 0 ? timeout : undefined,
  };
}

function countElements(data: unknown): number {
  if (!Array.isArray(data)) return 1;
  let n = 0;
  for (const d of data) n += Array.isArray(d) ? countElements(d) : 1;
  return n;
}

export interface ReplyMeta {
  model_name?: string;
  model_version?: string;
  id?: string;
  served_by?: Record<string, unknown>;
  timing_ms?: Record<string, number>;
}

/** The executor's binary reply as an Open Inference Protocol JSON response. */
export function wireToJson(data: Uint8Array, contentType: string | undefined, requestedOutputs?: readonly string[]): Record<string, unknown> {
  if (contentType === contentTypes.json) return JSON.parse(new TextDecoder().decode(data)) as Record<string, unknown>;
  const { meta, tensors } = decodeTensors<ReplyMeta>(data);
  const outputs = tensors
    .filter((t) => !requestedOutputs || requestedOutputs.includes(t.name))
    .map((t) => ({ name: t.name, datatype: t.datatype, shape: t.shape, data: tensorDataToJson(t) }));
  const { tensors: _t, ...rest } = meta;
  return { ...rest, outputs };
}

export const requestHeaders = headers;

/**
 * A validation set sent over HTTP, as the bus stores it: binary tensors pass through; JSON
 * `{"inputs": [Open Inference Protocol tensors with N rows], "labels": [N integers]}` is converted.
 * Its contents are checked against the model by the registrar.
 */
export function validationToWire(bytes: Buffer): Uint8Array {
  if (bytes[0] !== 0x7b /* '{' */) return new Uint8Array(bytes);
  let body: { inputs?: unknown; labels?: unknown };
  try {
    body = JSON.parse(bytes.toString("utf8"));
  } catch {
    throw new ServeError(ErrorCode.invalidValidationSet, "invalid validation set: not valid JSON");
  }
  const parsed = inferRequestSchema.shape.inputs.safeParse(body.inputs);
  if (!parsed.success) throw new ServeError(ErrorCode.invalidValidationSet, `invalid validation set: ${describeZodError(parsed.error)}`);
  if (!Array.isArray(body.labels) || !body.labels.every((l) => Number.isInteger(l))) {
    throw new ServeError(ErrorCode.invalidValidationSet, "invalid validation set: 'labels' must be a list of integers");
  }
  const tensors: Tensor[] = parsed.data.map((i) => {
    if (!isDatatype(i.datatype)) throw new ServeError(ErrorCode.invalidValidationSet, `invalid validation set: unknown datatype ${JSON.stringify(i.datatype)}`);
    return tensorFromJsonData(i.name, i.datatype, i.shape, i.data);
  });
  tensors.push({ name: "labels", datatype: "INT64", shape: [body.labels.length], data: BigInt64Array.from((body.labels as number[]).map((l) => BigInt(l))) });
  return encodeTensors(tensors);
}
