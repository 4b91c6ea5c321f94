import { z } from "zod";
import { commonEnvSchema, compileOptions, subjects } from "@sloserve/contracts";
import { connectBus, runService, systemClock } from "@sloserve/bus";
import { Catalog, MetadataStore } from "@sloserve/store";
import { buildApp } from "./app.js";
import { startGrpcServer } from "./grpc.js";
import { ProfileProgressView } from "./progress.js";

/** frontend: the HTTP API (Open Inference Protocol + model registration), dashboard and metrics; the Open Inference Protocol over gRPC. */
const envSchema = commonEnvSchema.extend({
  HTTP_PORT: z.coerce.number().int().min(0).max(65535).default(8080),
  HTTP_HOST: z.string().default("0.0.0.0"),
  /** The Open Inference Protocol over gRPC (grpc.ts); 0: a free port. */
  GRPC_PORT: z.coerce.number().int().min(0).max(65535).default(8081),
  /** @default HTTP_HOST */
  GRPC_HOST: z.string().optional(),
  MAX_BODY_BYTES: z.coerce.number().int().positive().default(8 * 1024 * 1024),
  MAX_MODEL_BYTES: z.coerce.number().int().positive().default(512 * 1024 * 1024),
  DEFAULT_TIMEOUT_MS: z.coerce.number().int().positive().default(30_000),
});

await runService("frontend", process.env, async (log) => {
  const options = compileOptions(envSchema, process.env, "frontend");
  const bus = await connectBus({ servers: options.NATS_URL, name: "frontend", log, replicas: options.JS_REPLICAS });
  const store = MetadataStore.connect(options.REDIS_URL);
  const catalog = new Catalog(store);
  const progress = new ProfileProgressView();
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
    options: { maxBodyBytes: options.MAX_BODY_BYTES, maxModelBytes: options.MAX_MODEL_BYTES, defaultTimeoutMs: options.DEFAULT_TIMEOUT_MS },
  });
  const address = await app.listen({ port: options.HTTP_PORT, host: options.HTTP_HOST });
  const port = (app.server.address() as { port: number }).port;
  const grpcHost = options.GRPC_HOST ?? options.HTTP_HOST;
  const grpcServer = await startGrpcServer(
    { bus, store, catalog, clock: systemClock, defaultTimeoutMs: options.DEFAULT_TIMEOUT_MS, log, maxMessageBytes: options.MAX_BODY_BYTES },
    grpcHost,
    options.GRPC_PORT,
  );
  return {
    info: { url: address, port, grpcPort: grpcServer.port, grpcAddress: `${grpcHost}:${String(grpcServer.port)}` },
    async stop() {
      await grpcServer.stop();
      await app.close();
      sub.unsubscribe();
      await bus.close();
      await store.close();
    },
  };
});
