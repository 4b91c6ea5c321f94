import { readFileSync } from "node:fs";
import { z } from "zod";
import { commonEnvSchema, compileOptions, subjects } from "@sloserve/contracts";
import { connectBus, runService, systemClock } from "@sloserve/bus";
import { ApiKeyStore, Catalog, MetadataStore } from "@sloserve/store";
import { Authenticator } from "./auth.js";
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
  /** Access control: API keys on every route and gRPC method but health, metrics and the dashboard page (docs/SECURITY.md). @default false */
  AUTH: z.enum(["true", "false"]).default("false").transform((v) => v === "true"),
  /** The bootstrap admin key (any string of 32 characters or more, e.g. `openssl rand -hex 32`); required with AUTH=true. */
  SLOSERVE_ADMIN_KEY: z.string().min(32, "SLOSERVE_ADMIN_KEY must be at least 32 characters (e.g. openssl rand -hex 32)").optional(),
  /** How long a checked key is trusted before Redis is read again (a key revoked through another frontend), ms. @default 5000 */
  AUTH_CACHE_MS: z.coerce.number().int().min(0).default(5000),
  /** HTTPS and gRPC over TLS: PEM certificate chain and private key files (both or neither). @default plain */
  TLS_CERT_FILE: z.string().min(1).optional(),
  TLS_KEY_FILE: z.string().min(1).optional(),
}).superRefine((o, ctx) => {
  if (o.AUTH && !o.SLOSERVE_ADMIN_KEY) ctx.addIssue({ code: "custom", path: ["SLOSERVE_ADMIN_KEY"], message: "AUTH=true needs SLOSERVE_ADMIN_KEY, the bootstrap admin key (e.g. openssl rand -hex 32)" });
  if ((o.TLS_CERT_FILE === undefined) !== (o.TLS_KEY_FILE === undefined)) ctx.addIssue({ code: "custom", path: ["TLS_CERT_FILE"], message: "give both TLS_CERT_FILE and TLS_KEY_FILE, or neither" });
});

await runService("frontend", process.env, async (log) => {
  const options = compileOptions(envSchema, process.env, "frontend");
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
  const app = await buildApp({
    bus,
    store,
    catalog,
    progress,
    log,
    clock: systemClock,
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
