import cluster from "node:cluster";
import { readFileSync } from "node:fs";
import client from "prom-client";
import { compileOptions, subjects, type InferenceCounts } from "@sloserve/contracts";
import { frontendSettings, type FrontendSettings } from "@sloserve/settings";
import { connectBus, runService, systemClock, type Logger } from "@sloserve/bus";
import { ApiKeyStore, Catalog, MetadataStore } from "@sloserve/store";
import { Authenticator } from "./auth.js";
import { buildApp } from "./app.js";
import { startGrpcServer } from "./grpc.js";
import { PROCESS_READY_EVENT, ProcessPeer, SummedRegistry, countProcess, startPrimary, type MetricsPart } from "./processes.js";
import { ProfileProgressView } from "./progress.js";
import { InferenceStatistics } from "./statistics.js";
import { startFrontendQuotas } from "./quotas.js";

/**
 * frontend: the HTTP API (Open Inference Protocol + model registration), dashboard and metrics; the Open
 * Inference Protocol over gRPC. With FRONTEND_PROCESSES > 1 this process is the primary of that many
 * frontend processes on the same ports (processes.ts), each of which runs `startFrontend`.
 */
const envSchema = frontendSettings;

await runService(
  "frontend",
  process.env,
  async (log) => {
    const options = compileOptions(envSchema, process.env, "frontend");
    if (cluster.isPrimary && options.FRONTEND_PROCESSES > 1) return startPrimary(options.FRONTEND_PROCESSES, log);
    return startFrontend(options, log);
  },
  cluster.isWorker ? { readyEvent: PROCESS_READY_EVENT } : {},
);

async function startFrontend(options: FrontendSettings, log: Logger): Promise<{ info: Record<string, unknown>; stop(): Promise<void> }> {
  // One of several processes: /metrics and Triton's statistics sum every process's (processes.ts).
  const peer = cluster.isWorker ? new ProcessPeer<{ metrics: MetricsPart; stats: Record<string, InferenceCounts> }>() : undefined;
  const registry = peer ? new SummedRegistry(() => peer.gather("metrics")) : new client.Registry();
  countProcess(registry);
  // Queries served, counted in this process for Triton's statistics extension (HTTP and gRPC alike).
  const stats = new InferenceStatistics(peer ? () => peer.gather("stats") : undefined);
  peer?.provide("metrics", () => registry.getMetricsAsJSON());
  peer?.provide("stats", () => stats.snapshot());
  // coalesceWrites: the queries of the HTTP requests read in one poll go to NATS in one socket write (libs/bus outbound.ts).
  const bus = await connectBus({ servers: options.NATS_URL, name: "frontend", log, replicas: options.JS_REPLICAS, resendOnReconnect: true, coalesceWrites: true });
  const store = MetadataStore.connect(options.REDIS_URL);
  const catalog = new Catalog(store);
  const progress = new ProfileProgressView();
  const tls = options.TLS_CERT_FILE && options.TLS_KEY_FILE ? { cert: readFileSync(options.TLS_CERT_FILE), key: readFileSync(options.TLS_KEY_FILE) } : undefined;
  const keys = new ApiKeyStore(store.redis);
  const auth = options.AUTH ? { authenticator: new Authenticator(keys, systemClock, { adminKey: options.SLOSERVE_ADMIN_KEY, cacheMs: options.AUTH_CACHE_MS }), keys } : undefined;
  const sub = bus.nc.subscribe(subjects.registryEvents, {
    callback: (_err, msg) => {
      try {
        if (!catalog.applyEvent(msg.subject, msg.json())) progress.apply(msg.subject, msg.json());
      } catch (err) {
        log.warn({ err }, "ignoring malformed registry event");
      }
    },
  });
  await catalog.load();
  // Apps' quotas and, with access control on, API keys': this process's share, kept current on the bus (quotas.ts).
  const { quotas, quotaStore, sync: quotaSync } = await startFrontendQuotas(bus, store, systemClock, log, { keys: options.AUTH });
  const app = await buildApp({
    bus,
    store,
    catalog,
    progress,
    log,
    clock: systemClock,
    stats,
    registry,
    options: { maxBodyBytes: options.MAX_BODY_BYTES, maxModelBytes: options.MAX_MODEL_BYTES, defaultTimeoutMs: options.DEFAULT_TIMEOUT_MS, tls },
    auth,
    quotas,
    quotaStore,
  });
  // With several processes, the HTTP server listens first and the gRPC server second in every one of
  // them: Node's cluster shares a port of 0 between the processes' listen calls of the same rank.
  const address = await app.listen({ port: options.HTTP_PORT, host: options.HTTP_HOST });
  const port = (app.server.address() as { port: number }).port;
  const grpcHost = options.GRPC_HOST ?? options.HTTP_HOST;
  const grpcServer = await startGrpcServer(
    {
      bus,
      store,
      catalog,
      clock: systemClock,
      defaultTimeoutMs: options.DEFAULT_TIMEOUT_MS,
      stats,
      quotas,
      log,
      maxMessageBytes: options.MAX_BODY_BYTES,
      access: auth ? { auth: auth.authenticator, catalog, store } : undefined,
      tls,
    },
    grpcHost,
    options.GRPC_PORT,
  );
  // Fastify names the scheme from its own https option; the server comes from app.ts' factory here.
  const info = { url: tls ? address.replace(/^http:/, "https:") : address, port, grpcPort: grpcServer.port, grpcAddress: `${grpcHost}:${String(grpcServer.port)}`, auth: options.AUTH, tls: tls !== undefined };
  peer?.ready(info);
  return {
    info: peer ? { ...info, process: Number(process.env.FRONTEND_PROCESS) } : info,
    async stop() {
      await grpcServer.stop();
      await app.close();
      quotaSync.stop();
      sub.unsubscribe();
      await bus.close();
      await store.close();
      peer?.close();
    },
  };
}
