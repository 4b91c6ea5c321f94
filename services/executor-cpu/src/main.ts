import { randomBytes } from "node:crypto";
import { hostname } from "node:os";
import { z } from "zod";
import { compileOptions } from "@sloserve/contracts";
import { cpuWorkerMemoryMb, executorCpuSettings } from "@sloserve/settings";
import { connectBus, runService, systemClock } from "@sloserve/bus";
import { MetadataStore } from "@sloserve/store";
import { ExecutorMetrics, Worker, emulatedBackend, onnxBackend, readEmulationCalibration, readProfileCalibration } from "@sloserve/executor";
import { startServiceMetrics } from "@sloserve/metrics";

/**
 * executor-cpu: a worker that runs variants on onnxruntime's CPU execution provider; with
 * BACKEND=emulated it serves them by their latency distributions instead (libs/executor
 * emulated-backend.ts: answers are zeros, for fleet-scale runs of the control plane only).
 */
const envSchema = executorCpuSettings;

await runService("executor-cpu", process.env, async (log) => {
  const options = compileOptions(envSchema, process.env, "executor-cpu");
  const id = options.WORKER_ID ?? `cpu-${hostname().replace(/[^A-Za-z0-9_-]/g, "").slice(0, 20) || "host"}-${randomBytes(3).toString("hex")}`;
  const bus = await connectBus({ servers: options.NATS_URL, name: `executor-cpu ${id}`, log, replicas: options.JS_REPLICAS });
  const store = MetadataStore.connect(options.REDIS_URL);
  const metrics = await startServiceMetrics(options, log);
  const emulated = options.BACKEND === "emulated";
  if (emulated) log.warn({ backend: "emulated" }, "emulated engine: variants are served by their latency distributions and answer zeros (never for real queries)");
  const backend = emulated
    ? emulatedBackend("cpu", { fallback: options.EMULATED_LATENCY_MS, ...(options.EMULATED_CALIBRATION ? { calibration: readEmulationCalibration(options.EMULATED_CALIBRATION) } : {}) })
    : onnxBackend("cpu", ["cpu"]);
  const memoryMb = options.WORKER_MEMORY_MB ?? cpuWorkerMemoryMb(options.WORKER_THREADS);
  // Its host, for the rules that keep one host's workers and local functions within its cores (an emulated worker stands for a machine of its own).
  const host = emulated ? {} : { host: hostname() };
  const worker = new Worker(bus, store, backend, { id, threads: options.WORKER_THREADS, memoryBytes: memoryMb * 1048576, ...host, metrics: new ExecutorMetrics(metrics.registry), ...(options.PROFILE_CALIBRATION ? { profileCalibration: readProfileCalibration(options.PROFILE_CALIBRATION) } : {}) }, log.child({ worker: id }), systemClock);
  await worker.start();
  return {
    info: { worker: id, backend: options.BACKEND, threads: options.WORKER_THREADS, memoryMb, metricsPort: metrics.port },
    async stop() {
      await worker.stop();
      await metrics.close();
      await bus.close();
      await store.close();
    },
  };
});
