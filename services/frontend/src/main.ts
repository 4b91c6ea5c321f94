import { readFileSync } from "node:fs";
import { z } from "zod";
import { compileOptions, subjects } from "@sloserve/contracts";
import { frontendSettings } from "@sloserve/settings";
import { connectBus, runService, systemClock } from "@sloserve/bus";
import { ApiKeyStore, Catalog, MetadataStore } from "@sloserve/store";
import { Authenticator } from "./auth.js";
import { buildApp } from "./app.js";
import { startGrpcServer } from "./grpc.js";
import { ProfileProgressView } from "./progress.js";
import { InferenceStatistics } from "./statistics.js";

/** frontend: the HTTP API (Open Inference Protocol + model registration), dashboard and metrics; the Open Inference Protocol over gRPC. */
const envSchema = frontendSettings;

await runService("frontend", process.env, async (log) => {
  const options = compileOptions(envSchema, process.env, "frontend");
  // coalesceWrites: the queries of the HTTP requests read in one poll go to NATS in one socket write (libs/bus outbound.ts).
  const bus = await connectBus({ servers: options.NATS_URL, name: "frontend", log, replicas: options.JS_REPLICAS, resendOnReconnect: true, coalesceWrites: true });
  const store = MetadataStore.connect(options.REDIS_URL);
  const catalog = new Catalog(store);
  const progress = new ProfileProgressView();
  // Queries served, counted in this process for Triton's statistics extension (HTTP and gRPC alike).
  const stats = new InferenceStatistics();
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
  const app = await buildApp({
    bus,
    store,
    catalog,
    progress,
    log,
    clock: systemClock,
    stats,
    options: { maxBodyBytes: options.MAX_BODY_BYTES, maxModelBytes: options.MAX_MODEL_BYTES, defaultTimeoutMs: options.DEFAULT_TIMEOUT_MS, tls },
    auth,
  });
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
      log,
      maxMessageBytes: options.MAX_BODY_BYTES,
      access: auth ? { auth: auth.authenticator, catalog, store } : undefined,
      tls,
    },
    grpcHost,
    options.GRPC_PORT,
  );
  return {
    // Fastify names the scheme from its own https option; the server comes from app.ts' factory here.
    info: { url: tls ? address.replace(/^http:/, "https:") : address, port, grpcPort: grpcServer.port, grpcAddress: `${grpcHost}:${String(grpcServer.port)}`, auth: options.AUTH, tls: tls !== undefined },
    async stop() {
      await grpcServer.stop();
      await app.close();
      sub.unsubscribe();
      await bus.close();
      await store.close();
    },
  };
});
