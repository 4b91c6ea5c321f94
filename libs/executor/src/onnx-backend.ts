import { OnnxRunner } from "@sloserve/runtime";
import { EngineThreadChoice, gpuSessionPlan, mayRunInline, type GpuOffer } from "@sloserve/policy";
import type { BackendFactory, ModelBackend } from "./backend.js";

/**
 * The nice value of a CPU variant's inference thread (and onnxruntime's threads for it): ahead of the
 * worker's own event loop and the other processes of its machine (the bus, the services), so that the
 * bytes moving around a compute-bound model do not slow its inference (bench/README.md, "the data
 * path": on the 2-core dev machine the inference thread of ocr-rec waited for a core 40% of the
 * time). Taking it needs CAP_SYS_NICE; without it the thread keeps the process's priority.
 */
export const INFERENCE_NICE = -10;

/**
 * onnxruntime-node with the given execution providers (["cpu"] or ["cuda", "cpu"]). With a `gpu` offer
 * (executor-gpu) each variant's providers come from its hardware settings (libs/policy
 * `gpuSessionPlan`: CUDA, or TensorRT at its precision), and a variant this worker cannot build is
 * refused with the plan's reason.
 */
export function onnxBackend(hardware: "cpu" | "gpu", executionProviders: string[], options: { gpu?: GpuOffer; inferenceNice?: number } = {}): BackendFactory {
  // A GPU variant's thread mostly waits for its device: it keeps the process's priority.
  const threadNice = hardware === "cpu" ? (options.inferenceNice ?? INFERENCE_NICE) : undefined;
  return {
    hardware,
    async load(bytes, { threads, variant, settings, model, maxBatch }): Promise<ModelBackend> {
      let providers: ReadonlyArray<string | { name: string; deviceId?: number }> = executionProviders;
      if (options.gpu) {
        const plan = gpuSessionPlan({ name: variant ?? model, settings }, options.gpu);
        if (!plan.ok) throw new Error(plan.reason);
        providers = plan.executionProviders;
      } else if (settings?.tensorrt) {
        throw new Error(`${variant ?? model} needs onnxruntime's TensorRT execution provider (${settings.tensorrt.precision}); this worker runs ${executionProviders.join(", ")} only`);
      }
      // In a worker thread: inference must not stall the worker's bus traffic (heartbeats, pulls, replies).
      // A small CPU variant's session moves to the main thread once its batches prove short (libs/policy
      // engine-thread.ts: two thread hops would cost more than the batch), and back if they grow long.
      const choice = maxBatch !== undefined && mayRunInline(hardware, bytes.byteLength, maxBatch) ? new EngineThreadChoice(maxBatch) : undefined;
      let runner: OnnxRunner | undefined;
      let moving = false;
      let moveFailed = false;
      const onRun = (rows: number, ms: number): void => {
        const where = choice?.observe(rows, ms);
        if (!runner || !where || where === runner.thread || moving || moveFailed) return;
        moving = true;
        runner.moveTo(where).then(
          () => (moving = false),
          // A session that cannot move (e.g. no thread can start) stays where it is, for good.
          () => (moveFailed = true),
        );
      };
      runner = await OnnxRunner.load(bytes, { intraOpThreads: threads, executionProviders: [...providers], thread: true, movable: choice !== undefined, onRun, ...(threadNice !== undefined ? { threadNice } : {}) });
      const refused = runner.priority?.error;
      return { runBatch: (queries) => runner.runBatch(queries), release: () => runner.release(), ...(refused ? { priorityRefused: `nice ${threadNice}: ${refused}` } : {}) };
    },
  };
}
