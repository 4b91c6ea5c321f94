import { OnnxRunner } from "@sloserve/runtime";
import { gpuSessionPlan, type GpuOffer } from "@sloserve/policy";
import type { BackendFactory, ModelBackend } from "./backend.js";

/**
 * onnxruntime-node with the given execution providers (["cpu"] or ["cuda", "cpu"]). With a `gpu` offer
 * (executor-gpu) each variant's providers come from its hardware settings (libs/policy
 * `gpuSessionPlan`: CUDA, or TensorRT at its precision), and a variant this worker cannot build is
 * refused with the plan's reason.
 */
export function onnxBackend(hardware: "cpu" | "gpu", executionProviders: string[], options: { gpu?: GpuOffer } = {}): BackendFactory {
  return {
    hardware,
    async load(bytes, { threads, variant, settings, model }): Promise<ModelBackend> {
      let providers: ReadonlyArray<string | { name: string; deviceId?: number }> = executionProviders;
      if (options.gpu) {
        const plan = gpuSessionPlan({ name: variant ?? model, settings }, options.gpu);
        if (!plan.ok) throw new Error(plan.reason);
        providers = plan.executionProviders;
      } else if (settings?.tensorrt) {
        throw new Error(`${variant ?? model} needs onnxruntime's TensorRT execution provider (${settings.tensorrt.precision}); this worker runs ${executionProviders.join(", ")} only`);
      }
      // In a worker thread: inference must not stall the worker's bus traffic (heartbeats, pulls, replies).
      const runner = await OnnxRunner.load(bytes, { intraOpThreads: threads, executionProviders: [...providers], thread: true });
      return { runBatch: (queries) => runner.runBatch(queries), release: () => runner.release() };
    },
  };
}
