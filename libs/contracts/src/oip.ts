import { ErrorCode, ServeError } from "./errors.js";
import { describeZodError, inferRequestSchema } from "./schemas.js";
import { checkInputs, isDatatype, tensorFromJsonData, type TensorSpec } from "./tensors.js";
import { encodeTensors } from "./wire.js";

/**
 * An Open Inference Protocol JSON request body as the bus carries it: checked against the model's
 * input signature (names, datatypes and shapes first, then data length and element values) and
 * converted to the binary tensor encoding. Used by the frontend and by the dispatcher for JSON
 * queries from NATS callers.
 */
export function oipJsonToWire(body: unknown, signature: readonly TensorSpec[]): { payload: Uint8Array; id: string | undefined; timeoutMs: number | undefined } {
  const parsed = inferRequestSchema.safeParse(body);
  if (!parsed.success) throw new ServeError(ErrorCode.badRequest, `invalid inference request: ${describeZodError(parsed.error)}`);
  const request = parsed.data;
  for (const input of request.inputs) {
    if (!isDatatype(input.datatype)) {
      throw new ServeError(ErrorCode.invalidDatatype, `input '${input.name}' has unknown datatype ${JSON.stringify(input.datatype)}`);
    }
  }
  checkInputs(request.inputs.map((i) => ({ name: i.name, datatype: i.datatype, shape: i.shape, length: countElements(i.data) })), signature);
  const tensors = request.inputs.map((i) => tensorFromJsonData(i.name, i.datatype as never, i.shape, i.data));
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
