import { OnnxRunner } from "@sloserve/runtime";
import type { BackendFactory, ModelBackend } from "./backend.js";

/** onnxruntime-node with the given execution providers (["cpu"] or ["cuda", "cpu"]). */
export function onnxBackend(hardware: "cpu" | "gpu", executionProviders: string[]): BackendFactory {
  return {
    hardware,
    async load(bytes, { threads }): Promise<ModelBackend> {
      // In a worker thread: inference must not stall the worker's bus traffic (heartbeats, pulls, replies).
      const runner = await OnnxRunner.load(bytes, { intraOpThreads: threads, executionProviders, thread: true });
      return { runBatch: (queries) => runner.runBatch(queries), release: () => runner.release() };
    },
  };
}
