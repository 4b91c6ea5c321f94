import type { Tensor } from "@sloserve/contracts";

/**
 * What an executor needs from an inference engine. executor-cpu uses onnxruntime's CPU provider,
 * executor-gpu the CUDA provider, executor-inferentia a remote Open Inference Protocol server.
 */
export interface ModelBackend {
  runBatch(queries: ReadonlyArray<readonly Tensor[]>): Promise<Tensor[][]>;
  release(): Promise<void>;
}

export interface BackendFactory {
  /** Hardware kind this factory serves: "cpu", "gpu" or "inferentia". */
  hardware: "cpu" | "gpu" | "inferentia";
  load(bytes: Uint8Array, options: { threads: number }): Promise<ModelBackend>;
}
