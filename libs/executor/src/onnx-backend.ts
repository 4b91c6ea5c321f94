import { OnnxRunner } from "@sloserve/runtime";
import type { BackendFactory, ModelBackend } from "./backend.js";

/** onnxruntime-node with the given execution providers (["cpu"] or ["cuda", "cpu"]). */
export function onnxBackend(hardware: "cpu" | "gpu", executionProviders: string[]): BackendFactory {
  return {
    hardware,
    async load(bytes, { threads }): Promise<ModelBackend> {
      const runner = await OnnxRunner.load(bytes, { intraOpThreads: threads, executionProviders });
      return { runBatch: (queries) => runner.runBatch(queries), release: () => runner.release() };
    },
  };
}
