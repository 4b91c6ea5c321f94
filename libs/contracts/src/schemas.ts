import { z } from "zod";
import { DATATYPES } from "./tensors.js";

/**
 * Message schemas, validated with zod where messages enter a service (HTTP bodies, NATS requests,
 * events read from the bus). Types are inferred from the schemas so they cannot drift apart.
 */

const name = z.string().regex(/^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$/, "use 1-64 letters, digits, '_' or '-'");
export const datatypeSchema = z.enum(DATATYPES);

export const tensorSpecSchema = z.object({
  name: z.string().min(1),
  datatype: datatypeSchema,
  shape: z.array(z.number().int().min(-1)),
});

/** Open Inference Protocol JSON inference request (`POST /v2/models/{model}/infer`). */
export const inferRequestSchema = z.object({
  id: z.string().max(256).optional(),
  parameters: z.record(z.string(), z.unknown()).optional(),
  inputs: z
    .array(
      z.object({
        name: z.string().min(1).max(256),
        datatype: z.string(),
        shape: z.array(z.number().int().nonnegative()).max(16),
        parameters: z.record(z.string(), z.unknown()).optional(),
        data: z.unknown(),
      }),
    )
    .min(1),
  outputs: z.array(z.object({ name: z.string(), parameters: z.record(z.string(), z.unknown()).optional() })).optional(),
});
export type InferRequestJson = z.infer<typeof inferRequestSchema>;

/** A registered model: what the registrar stores in Redis and announces on the bus. */
export const modelRecordSchema = z.object({
  name,
  app: name,
  task: z.string().default("unknown"),
  dataset: z.string().default("unknown"),
  platform: z.literal("onnxruntime_onnx"),
  inputs: z.array(tensorSpecSchema),
  outputs: z.array(tensorSpecSchema),
  object: z.string(),
  sizeBytes: z.number().int().nonnegative(),
  sha256: z.string(),
  registeredAtMs: z.number(),
});
export type ModelRecord = z.infer<typeof modelRecordSchema>;

export const hardwareSchema = z.enum(["cpu", "gpu", "inferentia"]);
export type Hardware = z.infer<typeof hardwareSchema>;

/** A variant: one way of running a model (hardware, max batch, quantisation, threads). */
export const variantRecordSchema = z.object({
  name,
  model: name,
  app: name,
  hardware: hardwareSchema,
  maxBatch: z.number().int().min(1).max(1024),
  /** Longest time the oldest query may wait for its batch to fill, ms (MArk's Wbatch). */
  batchWaitMs: z.number().min(0),
  quantization: z.enum(["fp32", "int8"]),
  threads: z.number().int().min(1),
  /** The ONNX binary this variant runs (object name in the model bucket). */
  object: z.string(),
  accuracy: z.number().min(0).max(1).nullable(),
  profiled: z.boolean(),
});
export type VariantRecord = z.infer<typeof variantRecordSchema>;

export const variantStateSchema = z.enum(["inactive", "loading", "active", "overloaded", "interfered", "unloading", "failed"]);
export type VariantState = z.infer<typeof variantStateSchema>;

/** Published on `state.<variant>.<worker>` at every transition. */
export const stateEventSchema = z.object({
  variant: name,
  model: name,
  worker: name,
  hardware: hardwareSchema,
  state: variantStateSchema,
  previous: variantStateSchema,
  reason: z.string(),
  atMs: z.number(),
});
export type StateEvent = z.infer<typeof stateEventSchema>;

/** Per-variant figures in a worker's one-second report. */
export const variantMetricsSchema = z.object({
  variant: name,
  state: variantStateSchema,
  arrivals: z.number().int().nonnegative(),
  served: z.number().int().nonnegative(),
  errors: z.number().int().nonnegative(),
  batches: z.number().int().nonnegative(),
  queueLength: z.number().int().nonnegative(),
  latencyP50Ms: z.number().nonnegative(),
  latencyP99Ms: z.number().nonnegative(),
  utilisation: z.number().min(0),
});
export type VariantMetrics = z.infer<typeof variantMetricsSchema>;

/** Published every second on `metrics.worker.<worker>`; doubles as the heartbeat. */
export const workerReportSchema = z.object({
  worker: name,
  hardware: hardwareSchema,
  atMs: z.number(),
  startedAtMs: z.number(),
  threads: z.number().int().min(1),
  threadsUsed: z.number().int().nonnegative(),
  memoryBytes: z.number().nonnegative(),
  rssBytes: z.number().nonnegative(),
  variants: z.array(variantMetricsSchema),
});
export type WorkerReport = z.infer<typeof workerReportSchema>;

/** A scaling command for one worker (`scale.model.<worker>`). */
export const scaleCommandSchema = z.object({
  id: z.string(),
  action: z.enum(["load", "unload"]),
  variant: name,
  reason: z.string(),
  atMs: z.number(),
});
export type ScaleCommand = z.infer<typeof scaleCommandSchema>;

export const scaleResultSchema = z.object({
  id: z.string(),
  worker: name,
  action: z.enum(["load", "unload"]),
  variant: name,
  ok: z.boolean(),
  error: z.string().optional(),
  durationMs: z.number(),
  atMs: z.number(),
});
export type ScaleResult = z.infer<typeof scaleResultSchema>;

/** Register request to the registrar: the binary is already in the object store under `upload`. */
export const registerRequestSchema = z.object({
  model: z.string(),
  app: z.string(),
  task: z.string().max(128).optional(),
  dataset: z.string().max(128).optional(),
  upload: z.string().min(1),
});
export type RegisterRequest = z.infer<typeof registerRequestSchema>;

/** Turns a zod error into one line naming each problem and where it is. */
export function describeZodError(error: z.ZodError): string {
  return error.issues
    .map((issue) => `${issue.path.length ? issue.path.join(".") : "(body)"}: ${issue.message}`)
    .join("; ");
}
