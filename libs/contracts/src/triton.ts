import type { TensorSpec } from "./tensors.js";
import type { VariantState } from "./schemas.js";
import { servingStates } from "./schemas.js";

/**
 * Triton's extensions of the Open Inference Protocol that standard tools call (tritonclient's HTTP
 * and gRPC clients, perf_analyzer): model configuration, statistics and the repository index, in the
 * shapes of Triton's HTTP/REST extensions (docs/protocol/extension_model_configuration.md,
 * extension_statistics.md, extension_model_repository.md of triton-inference-server/server) and of
 * its gRPC messages (grpc_service.proto, model_config.proto of triton-inference-server/common: the
 * subset in libs/contracts/proto/open_inference_grpc.proto). Pure: the frontend reads the records and
 * counters, these functions say what they mean in Triton's terms.
 */

/** Triton's DataType enum names (model_config.proto), by Open Inference Protocol datatype. */
export const TRITON_DATA_TYPES = {
  BOOL: "TYPE_BOOL",
  UINT8: "TYPE_UINT8",
  UINT16: "TYPE_UINT16",
  UINT32: "TYPE_UINT32",
  UINT64: "TYPE_UINT64",
  INT8: "TYPE_INT8",
  INT16: "TYPE_INT16",
  INT32: "TYPE_INT32",
  INT64: "TYPE_INT64",
  FP16: "TYPE_FP16",
  FP32: "TYPE_FP32",
  FP64: "TYPE_FP64",
  BYTES: "TYPE_STRING",
  BF16: "TYPE_BF16",
} as const;
export type TritonDataType = (typeof TRITON_DATA_TYPES)[keyof typeof TRITON_DATA_TYPES] | "TYPE_INVALID";

/** A datatype as Triton's enum name; TYPE_INVALID for one it does not know. */
export function tritonDataType(datatype: string): TritonDataType {
  return (TRITON_DATA_TYPES as Record<string, TritonDataType>)[datatype] ?? "TYPE_INVALID";
}

/**
 * Whether a signature takes a batch: every input and output has a variable first dimension (the
 * rows of a batch). The registrar generates batching variants only for such models.
 */
export function isBatchable(signature: { inputs: readonly TensorSpec[]; outputs: readonly TensorSpec[] }): boolean {
  return [...signature.inputs, ...signature.outputs].every((s) => s.shape.length > 0 && s.shape[0] === -1);
}

/** The subset of Triton's ModelConfig sloserve reports (field names as in model_config.proto). */
export interface TritonModelConfig {
  name: string;
  platform: string;
  backend: string;
  max_batch_size: number;
  input: Array<{ name: string; data_type: TritonDataType; format: "FORMAT_NONE"; dims: number[] }>;
  output: Array<{ name: string; data_type: TritonDataType; dims: number[] }>;
}

/**
 * A model's configuration as Triton reports it, from its record and its variants' batch sizes.
 * `max_batch_size` is the largest batch any variant runs at once (0 for a model that does not batch,
 * or has no variant); when it is above 0, `dims` leave out the batch dimension, as Triton's do (a
 * client then prepends its batch size). Caveat: the frontend takes queries larger than that (the
 * dispatcher queues them for a variant that runs them whole), so the figure is the executors' batch,
 * not a limit on a query.
 */
export function tritonModelConfig(name: string, signature: { platform: string; inputs: readonly TensorSpec[]; outputs: readonly TensorSpec[] }, variantMaxBatches: readonly number[]): TritonModelConfig {
  const largest = variantMaxBatches.reduce((a, b) => Math.max(a, b), 0);
  const maxBatch = isBatchable(signature) ? largest : 0;
  const dims = (shape: readonly number[]): number[] => (maxBatch > 0 ? shape.slice(1) : [...shape]);
  return {
    name,
    platform: signature.platform,
    backend: "onnxruntime",
    max_batch_size: maxBatch,
    input: signature.inputs.map((i) => ({ name: i.name, data_type: tritonDataType(i.datatype), format: "FORMAT_NONE", dims: dims(i.shape) })),
    output: signature.outputs.map((o) => ({ name: o.name, data_type: tritonDataType(o.datatype), dims: dims(o.shape) })),
  };
}

/** One entry of Triton's repository index (RepositoryIndexResponse.ModelIndex; the HTTP index's array items). */
export interface RepositoryIndexEntry {
  name: string;
  version: string;
  state: "READY" | "LOADING" | "UNAVAILABLE";
  reason: string;
}

/**
 * The repository index: each model with its state from its instances' states, READY when one serves
 * (the rule of the ready routes), LOADING when one is loading, else UNAVAILABLE (a model loads on its
 * first query). With `readyOnly` (Triton's `ready` request field), the READY ones only.
 */
export function repositoryIndex(models: ReadonlyArray<{ name: string }>, instances: ReadonlyArray<{ model: string; state: VariantState }>, version: string, readyOnly = false): RepositoryIndexEntry[] {
  const statesOf = new Map<string, VariantState[]>();
  for (const i of instances) {
    const list = statesOf.get(i.model);
    if (list) list.push(i.state);
    else statesOf.set(i.model, [i.state]);
  }
  const entries = models.map((m): RepositoryIndexEntry => {
    const states = statesOf.get(m.name) ?? [];
    const state = states.some((s) => servingStates.has(s)) ? "READY" : states.includes("loading") ? "LOADING" : "UNAVAILABLE";
    return { name: m.name, version, state, reason: state === "UNAVAILABLE" ? "no instance loaded (loads on the first query)" : "" };
  });
  return readyOnly ? entries.filter((e) => e.state === "READY") : entries;
}

/** Triton's StatisticDuration: how many times, and their cumulative nanoseconds. */
export interface StatisticDuration {
  count: number;
  ns: number;
}

/** Triton's ModelStatistics (grpc_service.proto; the HTTP statistics extension's `model_stats` items). */
export interface TritonModelStatistics {
  name: string;
  version: string;
  /** The last successful query's time, ms since the epoch; 0 if none. */
  last_inference: number;
  inference_count: number;
  execution_count: number;
  inference_stats: {
    success: StatisticDuration;
    fail: StatisticDuration;
    queue: StatisticDuration;
    compute_input: StatisticDuration;
    compute_infer: StatisticDuration;
    compute_output: StatisticDuration;
  };
  batch_stats: never[];
}

/** What a frontend counted for one model: the fields of {@link TritonModelStatistics}, flat. */
export interface InferenceCounts {
  successCount: number;
  successNs: number;
  failCount: number;
  failNs: number;
  queueNs: number;
  computeInputNs: number;
  computeInferNs: number;
  computeOutputNs: number;
  inferenceCount: number;
  lastInferenceMs: number;
}

/**
 * A model's counts as Triton's statistics. Every successful query is one execution as the frontend
 * sees it (the executors' batches are not counted here), and each of the four phases is counted once
 * per successful query.
 */
export function tritonModelStatistics(name: string, version: string, c: InferenceCounts): TritonModelStatistics {
  const phase = (ns: number): StatisticDuration => ({ count: c.successCount, ns });
  return {
    name,
    version,
    last_inference: c.lastInferenceMs,
    inference_count: c.inferenceCount,
    execution_count: c.successCount,
    inference_stats: {
      success: { count: c.successCount, ns: c.successNs },
      fail: { count: c.failCount, ns: c.failNs },
      queue: phase(c.queueNs),
      compute_input: phase(c.computeInputNs),
      compute_infer: phase(c.computeInferNs),
      compute_output: phase(c.computeOutputNs),
    },
    batch_stats: [],
  };
}
