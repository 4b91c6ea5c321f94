import { randomBytes } from "node:crypto";
import { hostname, totalmem } from "node:os";
import { z } from "zod";
import { compileOptions } from "@sloserve/contracts";
import { executorGpuSettings } from "@sloserve/settings";
import { connectBus, runService, systemClock } from "@sloserve/bus";
import { MetadataStore } from "@sloserve/store";
import { ExecutorMetrics, Worker, emulatedBackend, onnxBackend, readEmulationCalibration, readProfileCalibration, type BackendFactory } from "@sloserve/executor";
import { startServiceMetrics } from "@sloserve/metrics";
import { probeExecutionProvider } from "@sloserve/runtime";
import { tensorrtEnvironment, type GpuOffer } from "@sloserve/policy";

/**
 * executor-gpu: a worker that runs variants on onnxruntime's CUDA execution provider. It needs
 * onnxruntime-node's CUDA build (`ONNXRUNTIME_NODE_INSTALL=cuda12 npm rebuild onnxruntime-node`) and
 * an NVIDIA GPU; without them it refuses to start, saying why. Several variants share the GPU (by
 * memory footprint); each GPU variant counts as one of the worker's `WORKER_SLOTS`. TensorRT variants
 * (`settings.tensorrt`) run on onnxruntime's TensorRT provider at `TENSORRT_PRECISION`; where that
 * provider is missing (onnxruntime-node's CUDA build does not ship it) they are refused, saying why.
 * With BACKEND=emulated it needs neither: it serves its GPU variants by their latency distributions
 * (libs/executor emulated-backend.ts: answers are zeros, for fleet-scale runs of the control plane only).
 */
const envSchema = executorGpuSettings;

await runService("executor-gpu", process.env, async (log) => {
  const options = compileOptions(envSchema, process.env, "executor-gpu");
  let backend: BackendFactory;
  // (emulated: TensorRT variants are served as every other, by their latencies)
  let tensorrt: GpuOffer["tensorrt"] | undefined;
  if (options.BACKEND === "emulated") {
    log.warn({ backend: "emulated" }, "emulated engine: variants are served by their latency distributions and answer zeros (never for real queries)");
    backend = emulatedBackend("gpu", { fallback: options.EMULATED_LATENCY_MS, ...(options.EMULATED_CALIBRATION ? { calibration: readEmulationCalibration(options.EMULATED_CALIBRATION) } : {}) });
  } else {
    const probe = await probeExecutionProvider("cuda", { deviceId: options.GPU_DEVICE_ID });
    if (!probe.ok) {
      throw new Error(
        `executor-gpu needs an NVIDIA GPU and onnxruntime-node's CUDA build, and onnxruntime cannot use CUDA here: ${probe.error}. ` +
          "On a GPU machine install the CUDA build with `ONNXRUNTIME_NODE_INSTALL=cuda12 npm rebuild onnxruntime-node`; on a machine without a GPU run executor-cpu.",
      );
    }
    // TensorRT variants: the provider reads its precision from the environment when a session creates it.
    tensorrt = { unavailable: "TENSORRT_PRECISION=none" };
    if (options.TENSORRT_PRECISION !== "none") {
      Object.assign(process.env, tensorrtEnvironment(options.TENSORRT_PRECISION));
      const trt = await probeExecutionProvider("tensorrt", { deviceId: options.GPU_DEVICE_ID });
      tensorrt = trt.ok ? { precision: options.TENSORRT_PRECISION } : { unavailable: trt.error };
      if (!trt.ok) log.warn({ reason: trt.error }, "no TensorRT here: TensorRT variants will be refused, CUDA ones served");
    }
    backend = onnxBackend("gpu", ["cuda", "cpu"], { gpu: { deviceId: options.GPU_DEVICE_ID, tensorrt } });
  }
  const id = options.WORKER_ID ?? `gpu-${hostname().replace(/[^A-Za-z0-9_-]/g, "").slice(0, 20) || "host"}-${randomBytes(3).toString("hex")}`;
  const bus = await connectBus({ servers: options.NATS_URL, name: `executor-gpu ${id}`, log, replicas: options.JS_REPLICAS });
  const store = MetadataStore.connect(options.REDIS_URL);
  const metrics = await startServiceMetrics(options, log);
  const worker = new Worker(bus, store, backend, { id, threads: options.WORKER_SLOTS, memoryBytes: options.WORKER_MEMORY_MB * 1048576, metrics: new ExecutorMetrics(metrics.registry), ...(options.PROFILE_CALIBRATION ? { profileCalibration: readProfileCalibration(options.PROFILE_CALIBRATION) } : {}), accelerators: options.ACCELERATORS, ...(options.GPU_MEMORY_MB ? { acceleratorMemoryBytes: options.GPU_MEMORY_MB * 1048576 } : {}) }, log.child({ worker: id }), systemClock);
  await worker.start();
  return {
    info: { worker: id, backend: options.BACKEND, slots: options.WORKER_SLOTS, accelerators: options.ACCELERATORS, device: options.GPU_DEVICE_ID, ...(tensorrt ? { tensorrt } : {}), metricsPort: metrics.port },
    async stop() {
      await worker.stop();
      await metrics.close();
      await bus.close();
      await store.close();
    },
  };
});
