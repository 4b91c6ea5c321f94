import { randomBytes } from "node:crypto";
import { hostname, availableParallelism, totalmem } from "node:os";
import { z } from "zod";
import { commonEnvSchema, compileOptions } from "@sloserve/contracts";
import { connectBus, runService, systemClock } from "@sloserve/bus";
import { MetadataStore } from "@sloserve/store";
import { ExecutorMetrics, Worker, onnxBackend } from "@sloserve/executor";
import { startServiceMetrics } from "@sloserve/metrics";

/** executor-cpu: a worker that runs variants on onnxruntime's CPU execution provider. */
const envSchema = commonEnvSchema.extend({
  /** Worker id; a fresh one per process by default. */
  WORKER_ID: z.string().regex(/^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$/).optional(),
  /** Threads this worker offers to its variants. @default the machine's cores */
  WORKER_THREADS: z.coerce.number().int().min(1).default(availableParallelism()),
  /** Memory offered to variant instances, MiB. @default 80% of the machine's memory */
  WORKER_MEMORY_MB: z.coerce.number().int().min(64).default(Math.floor((totalmem() * 0.8) / 1048576)),
});

await runService("executor-cpu", process.env, async (log) => {
  const options = compileOptions(envSchema, process.env, "executor-cpu");
  const id = options.WORKER_ID ?? `cpu-${hostname().replace(/[^A-Za-z0-9_-]/g, "").slice(0, 20) || "host"}-${randomBytes(3).toString("hex")}`;
  const bus = await connectBus({ servers: options.NATS_URL, name: `executor-cpu ${id}`, log, replicas: options.JS_REPLICAS });
  const store = MetadataStore.connect(options.REDIS_URL);
  const metrics = await startServiceMetrics(options, log);
  const worker = new Worker(bus, store, onnxBackend("cpu", ["cpu"]), { id, threads: options.WORKER_THREADS, memoryBytes: options.WORKER_MEMORY_MB * 1048576, metrics: new ExecutorMetrics(metrics.registry) }, log.child({ worker: id }), systemClock);
  await worker.start();
  return {
    info: { worker: id, threads: options.WORKER_THREADS, memoryMb: options.WORKER_MEMORY_MB, metricsPort: metrics.port },
    async stop() {
      await worker.stop();
      await metrics.close();
      await bus.close();
      await store.close();
    },
  };
});
