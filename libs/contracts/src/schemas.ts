import { z } from "zod";
import { DATATYPES } from "./tensors.js";

/**
 * Message schemas, validated with zod where messages enter a service (HTTP bodies, NATS requests,
 * events read from the bus). Types are inferred from the schemas so they cannot drift apart.
 */

const name = z.string().regex(/^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$/, "use 1-64 letters, digits, '_' or '-'");
const longName = z.string().regex(/^[A-Za-z0-9][A-Za-z0-9_-]{0,127}$/, "use 1-128 letters, digits, '_' or '-'");
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

/** Requirements of a model-less query (INFaaS): what the user needs, not which model. */
export const sloSchema = z.object({
  latency_ms: z.number().positive().max(3_600_000),
  min_accuracy: z.number().min(0).max(1).default(0),
  max_cost: z.number().positive().optional(),
});
export type Slo = z.infer<typeof sloSchema>;

/** Model-less query body (`POST /v1/apps/{app}/infer`, `infer.app.<app>`). */
export const appInferRequestSchema = inferRequestSchema.extend({ slo: sloSchema });

/** Published every second by each dispatcher on `metrics.arrivals.<app>`. */
export const arrivalsReportSchema = z.object({
  app: z.string(),
  dispatcher: z.string(),
  atMs: z.number(),
  windowMs: z.number(),
  arrivals: z.number().int().nonnegative(),
  /** Per model: queries routed to it and the tightest latency SLO among them. */
  models: z.record(z.string(), z.object({ queries: z.number().int().nonnegative(), minSloMs: z.number().nullable() })),
  /** Model-less queries refused as infeasible. */
  infeasible: z.number().int().nonnegative(),
  /** Queries sent to the function provider (serverless overflow), those of them it failed, and their cost in dollars; absent: none. */
  overflowed: z.number().int().nonnegative().optional(),
  overflowFailed: z.number().int().nonnegative().optional(),
  overflowCostDollars: z.number().nonnegative().optional(),
});
export type ArrivalsReport = z.infer<typeof arrivalsReportSchema>;

/** Published every unit by the forecaster on `forecast.<app>` (MArk §4.2). */
export const forecastMessageSchema = z.object({
  app: z.string(),
  atMs: z.number(),
  unitS: z.number().positive(),
  sampleS: z.number().positive(),
  method: z.string(),
  /** The last observed unit's max rate, queries/s. */
  observed: z.number().nonnegative(),
  /** Max rate per unit for the next `values.length` units, queries/s. */
  values: z.array(z.number()),
  historyUnits: z.number().int().nonnegative(),
});
export type ForecastMessage = z.infer<typeof forecastMessageSchema>;

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
  /** The validation set (binary tensor encoding: the inputs with N rows, plus `labels`), if any. */
  validationObject: z.string().nullable().default(null),
  validationCount: z.number().int().nonnegative().default(0),
  /** Sizes of each input's non-batch dimensions used when profiling. */
  profileShape: z.record(z.string(), z.array(z.number().int().positive())).default({}),
  /**
   * Scales of the profile shape's dynamic dimensions at which the profiler also measures (one input size
   * class each, libs/policy input-classes.ts); empty: one size only.
   */
  sizeClassScales: z.array(z.number().positive()).optional(),
});
export type ModelRecord = z.infer<typeof modelRecordSchema>;

export const hardwareSchema = z.enum(["cpu", "gpu", "inferentia"]);
export type Hardware = z.infer<typeof hardwareSchema>;

/** What the profiler measured for a variant (INFaaS §3: the variant's profile). */
export const variantProfileSchema = z.object({
  /** Time to fetch and load the model into the engine, ms. */
  loadLatencyMs: z.number().nonnegative(),
  /** Median latency of one batch, ms, by batch size (powers of two up to 64, while they fit). */
  latencyMs: z.record(z.string(), z.number().nonnegative()),
  /**
   * P99 of the same runs, ms, by batch size; each run takes the next rows of the validation set, so it
   * includes how the latency depends on the input. Absent from profiles that predate it.
   */
  latencyP99Ms: z.record(z.string(), z.number().nonnegative()).optional(),
  /** Queries per second at the variant's max batch: maxBatch / latency(maxBatch). */
  peakQps: z.number().nonnegative(),
  /** Memory the loaded model takes while running its largest batch (RSS growth), bytes. */
  memoryBytes: z.number().nonnegative(),
  /**
   * Device memory one instance takes on its GPU, bytes, where the profiler could measure it; absent:
   * `memoryBytes` stands for it (libs/policy accelerator-share.ts).
   */
  acceleratorMemoryBytes: z.number().nonnegative().optional(),
  /** Accuracy on the model's validation set (0..1), null without a validation set. */
  accuracy: z.number().min(0).max(1).nullable(),
  /** Input shape the latencies were measured with (batch dimension excluded). */
  sampleShape: z.record(z.string(), z.array(z.number().int())),
  /**
   * Models with dynamic non-batch input dimensions, profiled per input size class (libs/policy
   * input-classes.ts): each class's shapes, elements per query, and median and P99 latency by batch size.
   */
  inputClasses: z
    .array(
      z.object({
        name: z.string(),
        shapes: z.record(z.string(), z.array(z.number().int().positive())),
        elements: z.number().int().positive(),
        latencyMs: z.record(z.string(), z.number().nonnegative()),
        latencyP99Ms: z.record(z.string(), z.number().nonnegative()),
      }),
    )
    .optional(),
  worker: z.string(),
  profiledAtMs: z.number(),
});
export type VariantProfile = z.infer<typeof variantProfileSchema>;

/**
 * Hardware-specific settings of a variant (INFaaS §3.2), recorded where the machine cannot build them
 * and applied by the executor of that hardware: onnxruntime's TensorRT execution provider at a
 * precision (executor-gpu), the NeuronCores a Neuron model is compiled for (executor-inferentia).
 */
export const hardwareSettingsSchema = z.object({
  tensorrt: z.object({ precision: z.enum(["fp32", "fp16", "int8"]) }).optional(),
  neuronCores: z.number().int().min(1).max(16).optional(),
});
export type HardwareSettings = z.infer<typeof hardwareSettingsSchema>;

/** A variant: one way of running a model (hardware, max batch, quantisation, threads). */
export const variantRecordSchema = z.object({
  name: longName,
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
  /** Hardware-specific settings (TensorRT precision, NeuronCores); absent: the hardware's defaults. */
  settings: hardwareSettingsSchema.optional(),
  accuracy: z.number().min(0).max(1).nullable(),
  profiled: z.boolean(),
  profile: variantProfileSchema.nullable().default(null),
});
export type VariantRecord = z.infer<typeof variantRecordSchema>;

export const variantStateSchema = z.enum(["inactive", "loading", "active", "overloaded", "interfered", "unloading", "failed"]);
export type VariantState = z.infer<typeof variantStateSchema>;
/** The states in which an instance takes queries (Overloaded and Interfered ones still serve: INFaaS §4.1). */
export const servingStates: ReadonlySet<VariantState> = new Set<VariantState>(["active", "overloaded", "interfered"]);

/** Published on `state.<variant>.<worker>` at every transition. */
export const stateEventSchema = z.object({
  variant: longName,
  model: name,
  worker: longName,
  hardware: hardwareSchema,
  state: variantStateSchema,
  previous: variantStateSchema,
  reason: z.string(),
  atMs: z.number(),
});
export type StateEvent = z.infer<typeof stateEventSchema>;

/** Per-variant figures in a worker's one-second report. */
export const variantMetricsSchema = z.object({
  variant: longName,
  state: variantStateSchema,
  /** Loaded instances of the variant on the worker. */
  instances: z.number().int().nonnegative().default(1),
  /** Instances of the variant being loaded on the worker (their resources count as used); absent: 0. */
  loading: z.number().int().nonnegative().optional(),
  /** Queries answered after their latency SLO (model-less queries carry one). */
  sloMisses: z.number().int().nonnegative().default(0),
  /** Median time of one batch run and median batch size over the window. */
  batchP50Ms: z.number().nonnegative().default(0),
  batchSizeP50: z.number().nonnegative().default(0),
  arrivals: z.number().int().nonnegative(),
  served: z.number().int().nonnegative(),
  errors: z.number().int().nonnegative(),
  batches: z.number().int().nonnegative(),
  queueLength: z.number().int().nonnegative(),
  latencyP50Ms: z.number().nonnegative(),
  latencyP99Ms: z.number().nonnegative(),
  utilisation: z.number().min(0),
  /**
   * What `utilisation` would have been had every batch of the window run in its profiled time (Σ
   * profiled batch time at each batch's size / window): utilisation / this is how much slower than
   * profiled the variant ran, the evidence of the interference rule; absent: older reports.
   */
  profiledUtilisation: z.number().min(0).optional(),
});
export type VariantMetrics = z.infer<typeof variantMetricsSchema>;

/** Published every second on `metrics.worker.<worker>`; doubles as the heartbeat. */
export const workerReportSchema = z.object({
  worker: longName,
  hardware: hardwareSchema,
  atMs: z.number(),
  startedAtMs: z.number(),
  threads: z.number().int().min(1),
  threadsUsed: z.number().int().nonnegative(),
  /** Memory the worker offers to variants, and what its loaded instances take (from their profiles). */
  memoryBytes: z.number().nonnegative(),
  memoryUsedBytes: z.number().nonnegative().default(0),
  /**
   * Accelerators (GPUs, NeuronCores) the worker offers, and how many its loaded and loading instances
   * hold: an Inferentia instance the NeuronCores it is compiled for; GPU instances share GPUs by memory
   * (below) and hold none whole (libs/policy accelerator-share.ts); absent: 0 (older reports).
   */
  accelerators: z.number().int().nonnegative().optional(),
  acceleratorsUsed: z.number().int().nonnegative().optional(),
  /**
   * GPU workers: the memory of each of their GPUs, and the device memory their loaded and loading
   * instances take (libs/policy accelerator-share.ts); absent: the instance type's GPU memory, and 0.
   */
  acceleratorMemoryBytes: z.number().nonnegative().optional(),
  acceleratorMemoryUsedBytes: z.number().nonnegative().optional(),
  rssBytes: z.number().nonnegative(),
  /**
   * The machine whose cores a CPU worker runs on (its hostname): the local provider and the local
   * function pool count the threads of the workers on their own host (libs/policy host-room.ts);
   * absent: a machine of its own (emulated workers, accelerators, older reports).
   */
  host: z.string().max(253).optional(),
  variants: z.array(variantMetricsSchema),
  /**
   * The worker's last report: it is stopping cleanly, has unloaded its instances and takes no more
   * loads. Readers that place work (the dispatchers, the model autoscaler) forget it at once instead
   * of after its heartbeat's timeout; absent: false.
   */
  leaving: z.boolean().optional(),
});
export type WorkerReport = z.infer<typeof workerReportSchema>;

/** A scaling command for one worker (`scale.model.<worker>`). */
export const scaleCommandSchema = z.object({
  id: z.string(),
  /** load: ensure at least one instance; add: `count` more instances; unload: remove `count` (default all). */
  action: z.enum(["load", "add", "unload"]),
  variant: longName,
  count: z.number().int().positive().optional(),
  /** unload: remove the instances loaded first (a move of Interfered instances), not the newest. @default false */
  oldest: z.boolean().optional(),
  reason: z.string(),
  atMs: z.number(),
});
export type ScaleCommand = z.infer<typeof scaleCommandSchema>;

export const scaleResultSchema = z.object({
  id: z.string(),
  worker: longName,
  action: z.enum(["load", "add", "unload"]),
  variant: longName,
  ok: z.boolean(),
  error: z.string().optional(),
  durationMs: z.number(),
  atMs: z.number(),
});
export type ScaleResult = z.infer<typeof scaleResultSchema>;

/** A request to the VM autoscaler on `scale.vm` (the model autoscaler's escalation): a worker of `hardware`. */
export const scaleVmRequestSchema = z.object({
  action: z.literal("add"),
  hardware: hardwareSchema,
  /** The variant that fits on no running worker, and how many instances of it. */
  variant: longName,
  count: z.number().int().positive().default(1),
  reason: z.string(),
  atMs: z.number(),
});
export type ScaleVmRequest = z.infer<typeof scaleVmRequestSchema>;

/** The VM autoscaler's summary of machines and money on `metrics.cost` (every few seconds). */
export const costSummarySchema = z.object({
  atMs: z.number(),
  /** Dollars since the autoscaler started, all instances it launched (EC2 billing: per second, 60 s minimum). */
  totalDollars: z.number().nonnegative(),
  /** What the running instances cost per hour now. */
  dollarsPerHour: z.number().nonnegative(),
  byMarket: z.array(z.object({ provider: z.string(), market: z.enum(["on-demand", "spot"]), dollars: z.number().nonnegative(), dollarsPerHour: z.number().nonnegative(), running: z.number().int().nonnegative() })),
  /** Workers by hardware kind and state (booting, running, draining, lost), ours and the others. */
  workers: z.array(z.object({ kind: z.string(), state: z.string(), count: z.number().int().nonnegative() })),
  instances: z.array(
    z.object({
      id: z.string(),
      worker: z.string(),
      kind: z.string(),
      instanceType: z.string(),
      market: z.enum(["on-demand", "spot"]),
      state: z.string(),
      pricePerHour: z.number().nonnegative(),
      launchedAtMs: z.number(),
      endedAtMs: z.number().nullable(),
      dollars: z.number().nonnegative(),
    }),
  ),
});
export type CostSummary = z.infer<typeof costSummarySchema>;

/** Register request to the registrar: the binary is already in the object store under `upload`. */
export const registerRequestSchema = z.object({
  model: z.string(),
  app: z.string(),
  task: z.string().max(128).optional(),
  dataset: z.string().max(128).optional(),
  upload: z.string().min(1),
  /** Object name of the uploaded validation set (binary tensor encoding), if any. */
  validationUpload: z.string().min(1).optional(),
  /**
   * Sizes for an input's dynamic non-batch dimensions when profiling, e.g. { x: [3, 48, 320] };
   * taken from the validation set when there is one.
   */
  profileShape: z.record(z.string(), z.array(z.number().int().positive())).optional(),
});
export type RegisterRequest = z.infer<typeof registerRequestSchema>;

/** Turns a zod error into one line naming each problem and where it is. */
export function describeZodError(error: z.ZodError): string {
  return error.issues
    .map((issue) => `${issue.path.length ? issue.path.join(".") : "(body)"}: ${issue.message}`)
    .join("; ");
}

/** A profiling job for one (model binary, hardware, threads) on `profile.job.<hardware>`. */
export const profileJobSchema = z.object({
  id: z.string(),
  model: name,
  hardware: hardwareSchema,
  quantization: z.enum(["fp32", "int8"]),
  threads: z.number().int().min(1),
  /** The binary to profile (the fp32 model or its int8 rewrite). */
  object: z.string(),
  /** The variants' hardware-specific settings (they share them). */
  settings: hardwareSettingsSchema.optional(),
  /** The variants that share this binary, hardware and thread count (they differ in max batch only). */
  variants: z.array(longName).min(1),
  atMs: z.number(),
});
export type ProfileJob = z.infer<typeof profileJobSchema>;

/**
 * Published on `registry.event.tuned.<model>` by the registrar when the Wbatch of some of a model's
 * variants changed (MArk §4.3 batching tuned to the model's tightest SLO: libs/policy batch-wait.ts).
 * `variants` are the updated records (as stored); catalogs apply them like profiled ones, and executors
 * running one of them take its new Wbatch without a reload.
 */
export const batchingTunedEventSchema = z.object({
  model: name,
  /** The tightest latency SLO of the model's queries the tuning used, ms. */
  sloMs: z.number().positive(),
  variants: z.array(variantRecordSchema),
  /** Per changed variant: the decision's reason. */
  reasons: z.record(z.string(), z.string()).default({}),
  atMs: z.number(),
});
export type BatchingTunedEvent = z.infer<typeof batchingTunedEventSchema>;

/**
 * Published on `registry.event.profiled.<model>` by the worker that profiled a model's variants: the
 * updated records (accuracy, profile) and the variants dropped (not runnable on the hardware). Catalogs
 * apply them; executors running one of them take its accuracy and profile without a reload.
 */
export const modelProfiledEventSchema = z.object({ model: z.string(), variants: z.array(variantRecordSchema), removed: z.array(z.string()).default([]) });
export type ModelProfiledEvent = z.infer<typeof modelProfiledEventSchema>;

/** Published on `registry.event.profile.<model>` as profiling goes. */
export const profileProgressSchema = z.object({
  model: name,
  job: z.string(),
  hardware: hardwareSchema,
  /** "started", "step" (one batch size measured), "done" or "failed". */
  phase: z.enum(["started", "step", "done", "failed"]),
  step: z.number().int().nonnegative(),
  steps: z.number().int().nonnegative(),
  message: z.string(),
  worker: longName,
  atMs: z.number(),
});
export type ProfileProgress = z.infer<typeof profileProgressSchema>;

/**
 * A spot instance will be taken back (`events.spot.<worker>`): published once by the spot watcher
 * running beside the executor when the instance metadata service shows an instance action (EC2 gives
 * two minutes' notice). The VM autoscaler drains and replaces the worker.
 */
export const spotNoticeSchema = z.object({
  worker: longName,
  /** The EC2 instance id, as the instance metadata service gives it. */
  instanceId: z.string().min(1),
  /** What EC2 will do: "terminate", "stop" or "hibernate". */
  action: z.enum(["terminate", "stop", "hibernate"]),
  /** When EC2 will act, epoch ms. */
  terminateAtMs: z.number(),
  /** When the watcher saw the notice, epoch ms. */
  atMs: z.number(),
});
export type SpotNotice = z.infer<typeof spotNoticeSchema>;
