import { createHash, randomUUID } from "node:crypto";
import {
  ErrorCode,
  ServeError,
  checkName,
  decodeTensors,
  isBatchable,
  subjects,
  type Hardware,
  type ModelRecord,
  type ProfileJob,
  type RegisterRequest,
  type TensorSpec,
  type VariantRecord,
} from "@sloserve/contracts";
import type { Bus, Logger } from "@sloserve/bus";
import type { MetadataStore } from "@sloserve/store";
import { inspectModel } from "@sloserve/runtime";
import { generateVariants, profileGroups, type TensorRtPrecision } from "@sloserve/policy";
import { checkLabels, checkValidationSet } from "./validation.js";

/** Upper bound on a model binary. */
export const MAX_MODEL_BYTES = 512 * 1024 * 1024;

export interface Registered {
  model: ModelRecord;
  variants: VariantRecord[];
  profileJobs: number;
}

export interface RegistrarOptions {
  /** Hardware kinds to generate variants for. */
  hardware: Hardware[];
  /** Max batch sizes of the variants (powers of two by default). */
  batchSizes?: number[];
  /** CPU thread counts of the CPU variants. */
  cpuThreads?: number[];
  /** TensorRT precisions of the GPU variants beside the CUDA ones (libs/policy variant-generator). */
  tensorrtPrecisions?: TensorRtPrecision[];
  /** NeuronCore counts of the Inferentia variants. */
  neuronCores?: number[];
  /** Models with dynamic non-batch input dimensions: scales of them profiled as input size classes (libs/policy input-classes.ts). */
  sizeClassScales?: number[];
  /** Publish profiling jobs at registration. */
  profile: boolean;
  /** Rewrites a model to int8 weights; undefined when it cannot. */
  quantize?: (bytes: Uint8Array) => Promise<Uint8Array | undefined>;
  log: Logger;
}

/** Resolves the sizes of each input's non-batch dimensions for profiling, checking fixed ones. */
function resolveProfileShape(inputs: readonly TensorSpec[], given: Record<string, number[]>): Record<string, number[]> {
  const out: Record<string, number[]> = {};
  for (const spec of inputs) {
    const trailing = spec.shape.slice(1);
    const g = given[spec.name];
    if (g) {
      const ok = g.length === trailing.length && g.every((d, i) => (trailing[i] ?? -1) < 0 || d === trailing[i]);
      if (!ok) throw new ServeError(ErrorCode.badRequest, `profile shape of '${spec.name}' is [${g.join(", ")}]; the model's non-batch dimensions are [${trailing.join(", ")}]`);
      out[spec.name] = g;
    } else {
      out[spec.name] = trailing.map((d) => (d > 0 ? d : 1));
    }
  }
  return out;
}

const describe = (inputs: readonly TensorSpec[]): string => inputs.map((i) => `${i.name} ${i.datatype}[${i.shape.join(", ")}]`).join(", ");

/**
 * A model-less query names the app, not the model, so every model of an app must take the same
 * inputs: same names, datatypes and shapes (dynamic dimensions included).
 */
async function checkAppSignature(store: MetadataStore, app: string, inputs: readonly TensorSpec[]): Promise<void> {
  const [first] = await store.listAppModels(app);
  if (!first) return;
  const other = await store.getModel(first);
  if (!other) return;
  if (describe(other.inputs) !== describe(inputs)) {
    throw new ServeError(ErrorCode.badRequest, `the models of app '${app}' take ${describe(other.inputs)}; this model takes ${describe(inputs)}: register it under another app`);
  }
}

/**
 * Registers a model whose binary (and validation set) were uploaded to the object store: checks
 * names, loads the binary with onnxruntime (rejecting what it can't load), checks the validation
 * set against the signature, rewrites an int8 copy when it can, generates the variants, writes
 * everything to the repository and Redis, announces the model, and queues its profiling jobs.
 */
export async function registerModel(bus: Bus, metadata: MetadataStore, request: RegisterRequest, nowMs: number, options: RegistrarOptions): Promise<Registered> {
  const name = checkName("model", request.model);
  const app = checkName("app", request.app);
  /** Objects this registration wrote: deleted again if it fails, so that no half-registered model is left. */
  const written: string[] = [];
  const store = async (object: string, bytes: Uint8Array): Promise<void> => {
    written.push(object);
    try {
      await bus.models.putBlob({ name: object }, bytes);
    } catch (err) {
      throw new ServeError(ErrorCode.unavailable, `the model repository (NATS object store) could not store ${object} (${bytes.length} bytes): ${(err as Error).message}`);
    }
  };
  try {
    const fetchUpload = (object: string): Promise<Uint8Array | null> =>
      bus.models.getBlob(object).catch((err: Error) => {
        throw new ServeError(ErrorCode.unavailable, `the model repository (NATS object store) could not read the upload ${object}: ${err.message}`);
      });
    const bytes = await fetchUpload(request.upload);
    if (!bytes) throw new ServeError(ErrorCode.badRequest, `no upload named ${request.upload} in the model repository`);
    if (bytes.length === 0) throw new ServeError(ErrorCode.invalidModel, "the uploaded model is empty");
    if (bytes.length > MAX_MODEL_BYTES) throw new ServeError(ErrorCode.payloadTooLarge, `the model is ${bytes.length} bytes; the limit is ${MAX_MODEL_BYTES}`);
    if (await metadata.getModel(name)) throw new ServeError(ErrorCode.modelExists, `a model named '${name}' is already registered`);
    const signature = await inspectModel(bytes);
    await checkAppSignature(metadata, app, signature.inputs);

    let validation: { bytes: Uint8Array; count: number; shapes: Record<string, number[]> } | undefined;
    if (request.validationUpload) {
      const vbytes = await fetchUpload(request.validationUpload);
      if (!vbytes) throw new ServeError(ErrorCode.badRequest, `no upload named ${request.validationUpload} in the model repository`);
      const checked = checkValidationSet(vbytes, signature.inputs);
      const labels = decodeTensors(vbytes).tensors.find((t) => t.name === "labels");
      checkLabels((labels?.data ?? []) as ArrayLike<number | bigint>, signature.outputs);
      validation = { bytes: vbytes, ...checked };
    }
    const profileShape = resolveProfileShape(signature.inputs, validation?.shapes ?? request.profileShape ?? {});

    const object = `model/${name}.onnx`;
    await store(object, bytes);
    let int8Object: string | undefined;
    const int8 = options.quantize ? await options.quantize(bytes).catch((err: Error) => {
      options.log.info({ model: name, reason: err.message }, "no int8 variant");
      return undefined;
    }) : undefined;
    if (int8) {
      // Only keep the rewrite if onnxruntime loads it with the same signature.
      const s = await inspectModel(int8).catch((err: unknown) => {
        options.log.info({ model: name, err }, "the int8 rewrite does not load in onnxruntime: no int8 variant");
        return undefined;
      });
      if (s && JSON.stringify(s) === JSON.stringify(signature)) {
        int8Object = `model/${name}.int8.onnx`;
        await store(int8Object, int8);
      }
    }
    const validationObject = validation ? `validation/${name}.bin` : null;
    if (validation && validationObject) await store(validationObject, validation.bytes);

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
      validationObject,
      validationCount: validation?.count ?? 0,
      profileShape,
      ...(options.sizeClassScales?.length ? { sizeClassScales: options.sizeClassScales } : {}),
    };
    const batchable = isBatchable(model);
    const variants: VariantRecord[] = generateVariants({ model: name, app, batchable, objects: { fp32: object, int8: int8Object } }, { hardware: options.hardware, ...(options.batchSizes ? { batchSizes: options.batchSizes } : {}), ...(options.cpuThreads ? { cpuThreads: options.cpuThreads } : {}), ...(options.tensorrtPrecisions ? { tensorrtPrecisions: options.tensorrtPrecisions } : {}), ...(options.neuronCores ? { neuronCores: options.neuronCores } : {}) });
    let created: boolean;
    try {
      created = await metadata.createModel(model, variants);
    } catch (err) {
      throw new ServeError(ErrorCode.unavailable, `the metadata store (Redis) could not record model '${name}': ${(err as Error).message}`);
    }
    if (!created) {
      // Another registration of the name won the race: its objects are the same names; keep them.
      written.length = 0;
      throw new ServeError(ErrorCode.modelExists, `a model named '${name}' is already registered`);
    }
    try {
      await bus.js.publish(subjects.modelRegistered(name), JSON.stringify({ model, variants }));
    } catch (err) {
      // Nobody heard of it: take the record back, so that the model is registered fully or not at all.
      await metadata.deleteModel(name).catch((e: unknown) => options.log.error({ err: e, model: name }, "could not take back the record of a model whose announcement failed"));
      throw new ServeError(ErrorCode.unavailable, `model '${name}' could not be announced on the bus: ${(err as Error).message}`);
    }
    written.length = 0; // registered: the objects are the model's now
    let profileJobs = 0;
    if (options.profile) {
      for (const group of profileGroups(variants)) {
        const job: ProfileJob = { id: randomUUID(), model: name, hardware: group.hardware, quantization: group.quantization, threads: group.threads, object: group.object, ...(group.settings ? { settings: group.settings } : {}), variants: group.variants, atMs: nowMs };
        await bus.js.publish(subjects.profileJob(group.hardware), JSON.stringify(job));
        profileJobs++;
      }
    }
    return { model, variants, profileJobs };
  } finally {
    for (const object of written.reverse()) {
      await bus.models.delete(object).catch((err: unknown) => options.log.warn({ err, object }, "could not delete an object of a failed registration"));
    }
    // The uploads are scratch copies: a failed delete leaves garbage in the bucket, not a wrong model.
    const leftover = (object: string) => (err: unknown): void => options.log.warn({ err, object }, "could not delete an uploaded object");
    await bus.models.delete(request.upload).catch(leftover(request.upload));
    if (request.validationUpload) await bus.models.delete(request.validationUpload).catch(leftover(request.validationUpload));
  }
}

export async function unregisterModel(bus: Bus, store: MetadataStore, modelName: string, log: Logger): Promise<ModelRecord> {
  const name = checkName("model", modelName);
  const variants = await store.listVariants(name);
  const model = await store.deleteModel(name);
  if (!model) throw new ServeError(ErrorCode.unknownModel, `no model named '${name}'`);
  await bus.js.publish(subjects.modelUnregistered(name), JSON.stringify({ model }));
  const objects = new Set([model.object, ...variants.map((v) => v.object), ...(model.validationObject ? [model.validationObject] : [])]);
  // The model is unregistered once its metadata is gone; an object left behind is logged, not fatal.
  for (const o of objects) await bus.models.delete(o).catch((err: unknown) => log.warn({ err, model: name, object: o }, "could not delete a model object"));
  return model;
}
