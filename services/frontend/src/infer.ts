import {
  ErrorCode,
  ServeError,
  contentTypes,
  oipJsonToWire,
  decodeTensors,
  describeZodError,
  encodeTensors,
  headers,
  inferRequestSchema,
  isDatatype,
  tensorDataToJson,
  tensorFromJsonData,
  type Tensor,
} from "@sloserve/contracts";

/** The JSON → binary conversion at the edge (libs/contracts oip.ts): bad input gets its 4xx here. */
export const jsonToWire = oipJsonToWire;

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
