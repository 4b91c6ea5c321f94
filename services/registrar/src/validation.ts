import {
  ErrorCode,
  ServeError,
  bytesPerElement,
  decodeWireMeta,
  type ModelRecord,
  type TensorSpec,
} from "@sloserve/contracts";

/**
 * Checks a validation set against the model's signature. The set is one binary tensor message
 * (libs/contracts wire encoding): one tensor per model input with N rows, and `labels` with N
 * integer class indices in [0, classes) where classes is the last dimension of the first output.
 * Returns N and the sizes of each input's non-batch dimensions (used for profiling).
 */
export function checkValidationSet(bytes: Uint8Array, inputs: readonly TensorSpec[]): { count: number; shapes: Record<string, number[]> } {
  const fail = (why: string): never => {
    throw new ServeError(ErrorCode.invalidValidationSet, `invalid validation set: ${why}`);
  };
  let meta;
  try {
    meta = decodeWireMeta(bytes).meta;
  } catch (err) {
    return fail((err as Error).message);
  }
  const labels = meta.tensors.find((t) => t.name === "labels");
  if (!labels) return fail("it has no 'labels' tensor");
  if (!["INT64", "INT32", "UINT8", "INT8", "UINT16", "INT16", "UINT32"].includes(labels.datatype)) fail(`'labels' must hold integers, not ${labels.datatype}`);
  if (labels.shape.length !== 1) fail(`'labels' must have shape [N], not [${labels.shape.join(", ")}]`);
  const count = labels.shape[0] ?? 0;
  if (count === 0) fail("it is empty (N = 0)");
  const shapes: Record<string, number[]> = {};
  for (const spec of inputs) {
    const t = meta.tensors.find((x) => x.name === spec.name);
    if (!t) return fail(`it has no tensor for the model's input '${spec.name}' (${spec.datatype} [${spec.shape.join(", ")}])`);
    if (t.datatype !== spec.datatype) fail(`input '${spec.name}' is ${t.datatype}; the model expects ${spec.datatype}`);
    const matches = t.shape.length === spec.shape.length && t.shape.every((d, i) => i === 0 || (spec.shape[i] ?? -1) < 0 || d === spec.shape[i]);
    if (!matches) fail(`input '${spec.name}' has shape [${t.shape.join(", ")}]; the model expects [${spec.shape.join(", ")}] (-1 = any size)`);
    if (t.shape[0] !== count) fail(`input '${spec.name}' has ${t.shape[0]} rows but there are ${count} labels`);
    const elements = t.shape.reduce((a, b) => a * b, 1);
    if (t.byteLength !== elements * bytesPerElement(t.datatype)) fail(`input '${spec.name}' holds ${t.byteLength} bytes; its shape needs ${elements * bytesPerElement(t.datatype)}`);
    shapes[spec.name] = t.shape.slice(1);
  }
  for (const t of meta.tensors) {
    if (t.name !== "labels" && !inputs.some((s) => s.name === t.name)) fail(`tensor '${t.name}' is not an input of the model`);
  }
  return { count, shapes };
}

/** Labels must be class indices the model can output: 0 ≤ label < classes. */
export function checkLabels(labels: ArrayLike<number | bigint>, outputs: ModelRecord["outputs"]): void {
  const classes = outputs[0]?.shape[(outputs[0]?.shape.length ?? 1) - 1] ?? -1;
  for (let i = 0; i < labels.length; i++) {
    const v = Number(labels[i]);
    if (!Number.isInteger(v) || v < 0 || (classes > 0 && v >= classes)) {
      throw new ServeError(
        ErrorCode.invalidValidationSet,
        `invalid validation set: label ${i} is ${v}, outside [0, ${classes > 0 ? classes - 1 : "∞"}] (the model's first output has ${classes > 0 ? classes : "a dynamic number of"} classes)`,
      );
    }
  }
}
