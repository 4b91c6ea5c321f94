import type { HardwareSettings, Tensor, TensorSpec, VariantProfile } from "@sloserve/contracts";

/**
 * What an executor needs from an inference engine. executor-cpu uses onnxruntime's CPU provider,
 * executor-gpu the CUDA provider, executor-inferentia a remote Open Inference Protocol server; any of
 * them the emulated engine with `BACKEND=emulated` (emulated-backend.ts).
 */
export interface ModelBackend {
  /**
   * Runs queries as a batch; `deadlineMs` (epoch ms) is when the latest of them must be answered, so
   * that an engine behind a network gives up then instead of hanging. An engine that cannot be reached
   * throws a `ServeError` with code `unavailable` (the whole batch fails with it; no retry one by one).
   */
  runBatch(queries: ReadonlyArray<readonly Tensor[]>, options?: { deadlineMs?: number }): Promise<Tensor[][]>;
  release(): Promise<void>;
  /**
   * For an engine behind a network: whether it can serve this model now, asked every report period.
   * A local engine has none (it is there while the process is).
   */
  health?(): Promise<BackendHealth>;
  /** Why the engine's thread runs without the priority it asked for (onnxBackend's `inferenceNice`); absent when it has it or asked none. */
  priorityRefused?: string;
  /**
   * An emulated engine (emulated-backend.ts): its outputs are zeros, its answers say
   * `"backend":"emulated"` in `served_by`, and the profiler records `accuracy` (its calibration's;
   * absent: the variant's earlier accuracy) instead of measuring it. `quantiles`: the median and P99,
   * ms, of the distribution a batch of `batch` rows draws its wait from; the profiler records them as
   * the profile's latencies (its timed runs would be a few draws of it: a noisy median) and times no
   * more than one run per batch size. Absent: the profiler times the batches as for any engine.
   */
  emulated?: { accuracy?: number; quantiles?: (batch: number) => { p50: number; p99: number } };
}

export type BackendHealth = { ok: true } | { ok: false; reason: string };

/** What the worker knows of the variant a backend is loaded for. */
export interface BackendLoadOptions {
  threads: number;
  /** The registered model's name. */
  model: string;
  quantization: "fp32" | "int8";
  /** The variant (its name, for messages; a profiling job names its first). */
  variant?: string;
  /** Its hardware-specific settings (TensorRT precision, NeuronCores), which the backend applies or refuses. */
  settings?: HardwareSettings;
  /**
   * The variant's max batch, when the backend serves one variant's queries (not a profiling job): a
   * CPU session whose batches prove short then runs on the executor's main thread (libs/policy
   * engine-thread.ts).
   */
  maxBatch?: number;
  /** The model's output signature (its registered record); an emulated engine answers zeros of it. */
  outputs?: readonly TensorSpec[];
  /** The variant's profile as the worker knows it at load (null: not profiled yet); an emulated engine draws its latencies from it. */
  profile?: VariantProfile | null;
}

export interface BackendFactory {
  /** Hardware kind this factory serves: "cpu", "gpu" or "inferentia". */
  hardware: "cpu" | "gpu" | "inferentia";
  /** Whether a load needs the model's output signature (`BackendLoadOptions.outputs`): the emulated engine's, which answers zeros of it; the worker reads the model's record only then. */
  needsOutputs?: boolean;
  load(bytes: Uint8Array, options: BackendLoadOptions): Promise<ModelBackend>;
}
