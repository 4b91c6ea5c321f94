import { createHash } from "node:crypto";
import {
  ErrorCode,
  ServeError,
  checkName,
  subjects,
  type ModelRecord,
  type RegisterRequest,
  type VariantRecord,
} from "@sloserve/contracts";
import type { Bus } from "@sloserve/bus";
import type { MetadataStore } from "@sloserve/store";
import { inspectModel } from "@sloserve/runtime";
import { defaultVariants } from "./variants.js";

/** Upper bound on a model binary. */
export const MAX_MODEL_BYTES = 512 * 1024 * 1024;

export interface Registered {
  model: ModelRecord;
  variants: VariantRecord[];
}

/**
 * Registers a model whose binary was uploaded to the object store: checks the names, loads the
 * binary with onnxruntime (rejecting what it can't load), stores it under the model's name, writes
 * the metadata and the model's variants to Redis, and announces it on the bus.
 */
export async function registerModel(bus: Bus, store: MetadataStore, request: RegisterRequest, nowMs: number): Promise<Registered> {
  const name = checkName("model", request.model);
  const app = checkName("app", request.app);
  try {
    const bytes = await bus.models.getBlob(request.upload);
    if (!bytes) throw new ServeError(ErrorCode.badRequest, `no upload named ${request.upload} in the model repository`);
    if (bytes.length === 0) throw new ServeError(ErrorCode.invalidModel, "the uploaded model is empty");
    if (bytes.length > MAX_MODEL_BYTES) throw new ServeError(ErrorCode.payloadTooLarge, `the model is ${bytes.length} bytes; the limit is ${MAX_MODEL_BYTES}`);
    if (await store.getModel(name)) throw new ServeError(ErrorCode.modelExists, `a model named '${name}' is already registered`);
    const signature = await inspectModel(bytes);
    const object = `model/${name}.onnx`;
    await bus.models.putBlob({ name: object }, bytes);
    const model: ModelRecord = {
      name,
      app,
      task: request.task ?? "unknown",
      dataset: request.dataset ?? "unknown",
      platform: "onnxruntime_onnx",
      inputs: signature.inputs,
      outputs: signature.outputs,
      object,
      sizeBytes: bytes.length,
      sha256: createHash("sha256").update(bytes).digest("hex"),
      registeredAtMs: nowMs,
    };
    const variants = defaultVariants(model);
    if (!(await store.createModel(model, variants))) {
      throw new ServeError(ErrorCode.modelExists, `a model named '${name}' is already registered`);
    }
    await bus.js.publish(subjects.modelRegistered(name), JSON.stringify({ model, variants }));
    return { model, variants };
  } finally {
    await bus.models.delete(request.upload).catch(() => undefined);
  }
}

export async function unregisterModel(bus: Bus, store: MetadataStore, modelName: string): Promise<ModelRecord> {
  const name = checkName("model", modelName);
  const model = await store.deleteModel(name);
  if (!model) throw new ServeError(ErrorCode.unknownModel, `no model named '${name}'`);
  await bus.js.publish(subjects.modelUnregistered(name), JSON.stringify({ model }));
  await bus.models.delete(model.object).catch(() => undefined);
  return model;
}
