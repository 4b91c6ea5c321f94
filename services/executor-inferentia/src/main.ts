import { randomBytes } from "node:crypto";
import { hostname } from "node:os";
import { compileOptions } from "@sloserve/contracts";
import { connectBus, runService, systemClock } from "@sloserve/bus";
import { MetadataStore } from "@sloserve/store";
import { ExecutorMetrics, Worker, emulatedBackend, readEmulationCalibration, readProfileCalibration, type BackendFactory } from "@sloserve/executor";
import { startServiceMetrics } from "@sloserve/metrics";
import { OipClient } from "./oip-client.js";
import { neuronBackend } from "./neuron-backend.js";
import { envSchema } from "./options.js";

/**
 * executor-inferentia: the worker of an AWS Inferentia host (inf1/inf2). The NeuronCores are driven by
 * the Neuron-backed inference server on the same host (Triton with the Neuron backend, or any server
 * speaking the Open Inference Protocol over gRPC); this worker takes the variants' batches from their
 * JetStream queues like every executor (libs/executor: batching, shedding, profiling, states) and hands
 * each batch to that server (neuron-backend.ts). While the server is unreachable its variants are
 * Failed and take no queries; they serve again when it is back. With BACKEND=emulated there is no
 * server: it serves its Inferentia variants by their latency distributions (libs/executor
 * emulated-backend.ts: answers are zeros, for fleet-scale runs of the control plane only).
 */
await runService("executor-inferentia", process.env, async (log) => {
  const options = compileOptions(envSchema, process.env, "executor-inferentia");
  const id = options.WORKER_ID ?? `inferentia-${hostname().replace(/[^A-Za-z0-9_-]/g, "").slice(0, 20) || "host"}-${randomBytes(3).toString("hex")}`;
  let client: OipClient | undefined;
  let backend: BackendFactory;
  if (options.BACKEND === "emulated") {
    log.warn({ backend: "emulated" }, "emulated engine: variants are served by their latency distributions and answer zeros (never for real queries)");
    backend = emulatedBackend("inferentia", { fallback: options.EMULATED_LATENCY_MS, ...(options.EMULATED_CALIBRATION ? { calibration: readEmulationCalibration(options.EMULATED_CALIBRATION) } : {}) });
  } else {
    const server = new OipClient(options.NEURON_SERVER, { label: `the Neuron server at ${options.NEURON_SERVER}` });
    client = server;
    // The server may start after this worker (or restart at any time): loads fail, and variants are
    // Failed, until it answers; so not answering now is no reason to refuse to start.
    await server.serverReady(options.NEURON_PROBE_TIMEOUT_MS).then(
      (ready) => (ready ? log.info({ server: options.NEURON_SERVER }, "Neuron server ready") : log.warn({ server: options.NEURON_SERVER }, "Neuron server not ready yet")),
      (err: unknown) => log.warn({ server: options.NEURON_SERVER, err }, "Neuron server not reachable yet: loads fail until it is"),
    );
    backend = neuronBackend({ client: server, models: options.NEURON_MODELS, neuronCores: options.ACCELERATORS, version: options.NEURON_MODEL_VERSION, timeoutMs: options.NEURON_TIMEOUT_MS, probeTimeoutMs: options.NEURON_PROBE_TIMEOUT_MS });
  }
  const bus = await connectBus({ servers: options.NATS_URL, name: `executor-inferentia ${id}`, log, replicas: options.JS_REPLICAS });
  const store = MetadataStore.connect(options.REDIS_URL);
  const metrics = await startServiceMetrics(options, log);
  const worker = new Worker(bus, store, backend, { id, threads: options.WORKER_SLOTS, memoryBytes: options.WORKER_MEMORY_MB * 1048576, metrics: new ExecutorMetrics(metrics.registry), ...(options.PROFILE_CALIBRATION ? { profileCalibration: readProfileCalibration(options.PROFILE_CALIBRATION) } : {}), accelerators: options.ACCELERATORS }, log.child({ worker: id }), systemClock);
  await worker.start();
  return {
    info: { worker: id, backend: options.BACKEND, ...(client ? { server: options.NEURON_SERVER } : {}), slots: options.WORKER_SLOTS, accelerators: options.ACCELERATORS, metricsPort: metrics.port },
    async stop() {
      await worker.stop();
      client?.close();
      await metrics.close();
      await bus.close();
      await store.close();
    },
  };
});
