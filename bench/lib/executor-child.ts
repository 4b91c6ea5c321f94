/**
 * One executor VariantInstance, without the worker around it, for `bench/executor-overhead.ts`.
 * Env: NATS_URL, MODEL_PATH, VARIANT, MODEL, MAX_BATCH, and ENGINE: "auto" (the backend as the worker
 * loads it: a session whose batches prove short moves onto the main thread, libs/policy
 * engine-thread.ts) or "thread" (loaded without the variant's max batch, as a profiling job is: the
 * session keeps its worker thread, as every session did before). Prints {"event":"ready"} on stdout.
 */
import { readFileSync } from "node:fs";
import { connectBus, createLogger, systemClock } from "@sloserve/bus";
import { VariantInstance, onnxBackend } from "@sloserve/executor";
import type { VariantRecord } from "@sloserve/contracts";

const env = (k: string): string => {
  const v = process.env[k];
  if (!v) throw new Error(`${k} is required`);
  return v;
};
const engine = env("ENGINE");
const log = createLogger("executor-bench", "warn");
const bus = await connectBus({ servers: env("NATS_URL"), name: `executor-bench-${engine}`, log });
const maxBatch = Number(env("MAX_BATCH"));
const record: VariantRecord = {
  name: env("VARIANT"), model: env("MODEL"), app: env("MODEL"), hardware: "cpu", maxBatch, batchWaitMs: 0,
  quantization: "fp32", threads: 1, object: "bench", accuracy: null, profiled: false, profile: null,
};
const backend = await onnxBackend("cpu", ["cpu"]).load(readFileSync(env("MODEL_PATH")), { threads: 1, model: record.model, quantization: "fp32", variant: record.name, ...(engine === "auto" ? { maxBatch } : {}) });
const instance = new VariantInstance(record, backend, bus, { id: `bench-${engine}`, hardware: "cpu" }, log, systemClock);
await instance.start();
console.log(JSON.stringify({ event: "ready", engine, variant: record.name }));
process.on("SIGTERM", () => {
  void instance.stop().finally(() => void bus.close().finally(() => process.exit(0)));
});
