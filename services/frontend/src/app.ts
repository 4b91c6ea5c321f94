import { randomUUID } from "node:crypto";
import { createServer as createHttpServer, type Server as HttpServer } from "node:http";
import { createServer as createHttpsServer } from "node:https";
import Fastify, { type FastifyBaseLogger, type FastifyReply, type FastifyError } from "fastify";
import client from "prom-client";
import {
  ErrorCode,
  ServeError,
  checkName,
  headers,
  httpStatusOf,
  isErrorCode,
  subjects,
  type Clock,
  type ModelRecord,
} from "@sloserve/contracts";
import { errorFromReply, makeHeaders, type Bus, type Logger } from "@sloserve/bus";
import type { ApiKeyStore, Catalog, MetadataStore, QuotaStore } from "@sloserve/store";
import { registerAccessControl } from "./access.js";
import type { Authenticator } from "./auth.js";
import { registerKeyRoutes } from "./keys.js";
import { wireToJson, validationToWire } from "./infer.js";
import { registerDashboard } from "./dashboard.js";
import { describeModel } from "./listing.js";
import { registerPipelineRoutes } from "./pipelines.js";
import { registerOipHttpRoutes } from "./oip-http.js";
import { askBus, serverMetadata, serverReady, type QueryDeps } from "./query.js";
import { registerObservationRoutes } from "./observe.js";
import type { ProfileProgressView } from "./progress.js";
import type { InferenceStatistics } from "./statistics.js";
import { registerKeyQuotaRoutes, registerQuotaRoutes, removeKeyQuota, type FrontendQuotas } from "./quotas.js";
import multipart from "@fastify/multipart";

export interface FrontendOptions {
  /** Largest inference request body, bytes. @default 8 MiB */
  maxBodyBytes: number;
  /** Largest model upload, bytes. @default 512 MiB */
  maxModelBytes: number;
  /** Time a query may take when the caller gives none, ms. @default 30000 */
  defaultTimeoutMs: number;
  /** Serve HTTPS with this certificate chain and private key (PEM). @default plain HTTP */
  tls?: { cert: Buffer; key: Buffer } | undefined;
}

export interface FrontendDeps {
  bus: Bus;
  store: MetadataStore;
  catalog: Catalog;
  progress: ProfileProgressView;
  log: Logger;
  options: FrontendOptions;
  /** Where deadlines and timestamps come from (systemClock in the service). */
  clock: Clock;
  /** The query counts of this process (statistics.ts), shared with the gRPC service. */
  stats: InferenceStatistics;
  /** Access control (API keys; access.ts): absent, every route is open (AUTH=false). */
  auth?: { authenticator: Authenticator; keys: ApiKeyStore } | undefined;
  /** Apps' and API keys' quotas: this frontend's admission (shared with the gRPC service) and where they are stored (quotas.ts). */
  quotas: FrontendQuotas;
  quotaStore: QuotaStore;
  /** The registry `/metrics` serves (several frontend processes: one that sums theirs, processes.ts). @default a new one */
  registry?: client.Registry;
}

/** What a request's logger holds until pino's child is made ({@link childOnFirstUse}). */
interface LazyChild {
  parent: FastifyBaseLogger;
  bindings: Parameters<FastifyBaseLogger["child"]>[0];
  options: Parameters<FastifyBaseLogger["child"]>[1];
  child: object | undefined;
}

/** The key under which a request's logger answers with its {@link LazyChild}. */
const LAZY_STATE = Symbol("lazy child logger");

const childOf = (state: LazyChild): object => (state.child ??= state.parent.child(state.bindings, state.options));

/**
 * A logger method before the child is made, one per method name for every request: it finds its
 * request's logger through `this` (a pino method is called on its logger as well: pino's own use `this`).
 */
const lazyMethods = new Map<PropertyKey, (this: Record<PropertyKey, unknown>, ...args: unknown[]) => unknown>();
function lazyMethod(key: PropertyKey): (this: Record<PropertyKey, unknown>, ...args: unknown[]) => unknown {
  let method = lazyMethods.get(key);
  if (method === undefined) {
    method = function (this: Record<PropertyKey, unknown>, ...args: unknown[]): unknown {
      const child = childOf(this[LAZY_STATE] as LazyChild);
      return (Reflect.get(child, key) as (...a: unknown[]) => unknown).apply(child, args);
    };
    lazyMethods.set(key, method);
  }
  return method;
}

/** Shared by every request's logger: a request costs its Proxy and its state, no closures (Fastify reads 7 methods of each to check it). */
const lazyChildHandler: ProxyHandler<LazyChild> = {
  get(state, key) {
    if (key === LAZY_STATE) return state;
    if (state.child === undefined && typeof Reflect.get(state.parent, key) === "function") return lazyMethod(key);
    const value: unknown = Reflect.get(childOf(state), key);
    return typeof value === "function" ? value.bind(state.child) : value;
  },
  set: (state, key, value) => Reflect.set(childOf(state), key, value),
  // `in` and the prototype answer as the logger's would (the parent's until the child is made).
  has: (state, key) => Reflect.has(state.child ?? state.parent, key),
  getPrototypeOf: (state) => Reflect.getPrototypeOf(state.child ?? state.parent),
};

/**
 * A request's logger (Fastify makes one per request, with its `reqId` bound) that becomes pino's child
 * logger when the request first uses it: a query logs nothing unless it fails, and pino's child, with
 * the redaction of secrets this logger has (libs/bus log.ts), ran the redaction over the bindings of
 * every request (bench/README.md, "HTTP frontend CPU"). Anything read from it (a method, a field)
 * is the child's, made then; its methods are known from the parent without making it, and are shared
 * by every request (session 9: a closure per method read, with Fastify's check of 7 methods, read
 * twice each, cost 2.4 µs per request, 3% of the frontend's CPU under HTTP load; bench/README.md, "HTTP frontend CPU, again").
 */
export function childOnFirstUse(parent: FastifyBaseLogger, bindings: Parameters<FastifyBaseLogger["child"]>[0], options: Parameters<FastifyBaseLogger["child"]>[1]): FastifyBaseLogger {
  return new Proxy<LazyChild>({ parent, bindings, options, child: undefined }, lazyChildHandler) as unknown as FastifyBaseLogger;
}

function sendError(reply: FastifyReply, err: ServeError): FastifyReply {
  // Over its quota or its fair share: when to try again (RFC 9110 Retry-After, whole seconds).
  const retryAfter = err.code === ErrorCode.quotaExceeded || err.code === ErrorCode.fairShareExceeded ? err.details?.["retry_after_s"] : undefined;
  if (typeof retryAfter === "number") reply.header("retry-after", String(retryAfter));
  return reply.code(httpStatusOf(err.code)).type("application/json").send(err.toJSON());
}

/** The limit a body too large went over: a model upload's (MAX_MODEL_BYTES) or any other request's (MAX_BODY_BYTES). */
interface BodyLimits {
  maxBodyBytes: number;
  maxModelBytes: number;
  upload: boolean;
}

/** Maps Fastify's own errors (bad JSON, body too large, wrong media type) and the multipart limits to our error codes. */
function fromFastifyError(err: FastifyError, limits: BodyLimits): ServeError {
  switch (err.code) {
    case "FST_ERR_CTP_INVALID_JSON_BODY":
    case "FST_ERR_CTP_EMPTY_JSON_BODY":
      return new ServeError(ErrorCode.malformedJson, `the request body is not valid JSON: ${err.message}`);
    case "FST_ERR_CTP_BODY_TOO_LARGE":
      return limits.upload
        ? new ServeError(ErrorCode.payloadTooLarge, `the model upload is larger than this frontend's limit of ${limits.maxModelBytes} bytes (MAX_MODEL_BYTES)`)
        : new ServeError(ErrorCode.payloadTooLarge, `the request body is larger than this frontend's limit of ${limits.maxBodyBytes} bytes (MAX_BODY_BYTES)`);
    case "FST_REQ_FILE_TOO_LARGE":
      return new ServeError(ErrorCode.payloadTooLarge, `an uploaded file is larger than this frontend's limit of ${limits.maxModelBytes} bytes (MAX_MODEL_BYTES)`);
    case "FST_PARTS_LIMIT":
    case "FST_FILES_LIMIT":
    case "FST_FIELDS_LIMIT":
      return new ServeError(ErrorCode.payloadTooLarge, `too many multipart parts (${err.message}): send the parts 'model' and 'validation' (files) and 'task', 'dataset', 'profile_shape'`);
    case "FST_ERR_CTP_INVALID_MEDIA_TYPE":
      return new ServeError(ErrorCode.badRequest, `unsupported content type: ${err.message}`);
    default:
      if (err.statusCode && err.statusCode >= 400 && err.statusCode < 500) return new ServeError(ErrorCode.badRequest, err.message);
      return new ServeError(ErrorCode.internal, err.message);
  }
}

export async function buildApp(deps: FrontendDeps) {
  const { bus, store, catalog, progress, log, options, clock } = deps;
  const { tls } = options;
  const app = Fastify({
    loggerInstance: log,
    disableRequestLogging: true,
    childLoggerFactory: childOnFirstUse,
    bodyLimit: options.maxBodyBytes,
    // HTTPS when given a certificate: Fastify takes the https.Server as it takes the http one (listen, request events).
    // A server factory skips Fastify's own settings: keep its 72 s keep-alive (Node's default is 5 s, and
    // clients that reuse an idle connection after 5 s get "socket hang up").
    serverFactory: (handler) => {
      const server = tls ? (createHttpsServer({ cert: tls.cert, key: tls.key }, handler) as unknown as HttpServer) : createHttpServer(handler);
      server.keepAliveTimeout = 72_000;
      return server;
    },
    genReqId: (req) => {
      const given = req.headers[headers.requestId];
      return typeof given === "string" && /^[\w.:-]{1,128}$/.test(given) ? given : randomUUID();
    },
  });

  // Before any route: every route needs an access rule, and with auth on each request is checked against it.
  registerAccessControl(app, deps.auth ? { auth: deps.auth.authenticator, catalog, store } : undefined);

  const registry = deps.registry ?? new client.Registry();
  client.collectDefaultMetrics({ register: registry });
  const httpDuration = new client.Histogram({
    name: "sloserve_http_request_duration_seconds",
    help: "HTTP request duration by route and status",
    labelNames: ["route", "status"],
    buckets: [0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10],
    registers: [registry],
  });
  registry.registerMetric(deps.quotas.refused);
  // A callback hook, not an async one: no promise to settle per request.
  app.addHook("onResponse", (req, reply, done) => {
    httpDuration.observe({ route: req.routeOptions.url ?? "unknown", status: String(reply.statusCode) }, reply.elapsedTime / 1000);
    if (log.isLevelEnabled("debug")) req.log.debug({ requestId: req.id, method: req.method, url: req.url, status: reply.statusCode, ms: reply.elapsedTime }, "request done");
    done();
  });

  app.addContentTypeParser("application/octet-stream", { parseAs: "buffer", bodyLimit: options.maxModelBytes }, (_req, body, done) => done(null, body));

  app.setErrorHandler((err: FastifyError | ServeError, req, reply) => {
    // A model sent as the body has its own limit (its content type parser's).
    const upload = req.routeOptions.url === "/v1/apps/:app/models/:model" && /^application\/octet-stream/i.test(req.headers["content-type"] ?? "");
    const serveError = err instanceof ServeError ? err : fromFastifyError(err as FastifyError, { maxBodyBytes: options.maxBodyBytes, maxModelBytes: options.maxModelBytes, upload });
    if (serveError.code === ErrorCode.internal) req.log.error({ err, requestId: req.id }, "request failed");
    else req.log.debug({ requestId: req.id, code: serveError.code, message: serveError.message }, "request refused");
    return sendError(reply, serveError);
  });
  app.setNotFoundHandler((req, reply) => sendError(reply, new ServeError(ErrorCode.badRequest, `no route ${req.method} ${req.url}`)));

  const modelOr404 = async (name: string): Promise<ModelRecord> => {
    checkName("model", name);
    const model = await catalog.getModel(name);
    if (!model) throw new ServeError(ErrorCode.unknownModel, `no model named '${name}'`);
    return model;
  };

  // ---- Open Inference Protocol: health and metadata ----
  app.get("/v2/health/live", async () => ({ live: true }));
  app.get("/v2/health/ready", async (_req, reply) => {
    const state = await serverReady({ bus, store });
    return reply.code(state.ready ? 200 : 503).send(state);
  });
  app.get("/v2", async () => serverMetadata);

  // ---- Open Inference Protocol: model metadata, readiness and inference over HTTP, and Triton's model
  // configuration, statistics and repository index (oip-http.ts); the protocol-neutral path it shares
  // with the gRPC service is query.ts ----
  const queryDeps: QueryDeps = { bus, store, catalog, clock, defaultTimeoutMs: options.defaultTimeoutMs, stats: deps.stats, quotas: deps.quotas };
  registerOipHttpRoutes(app, queryDeps, { maxBodyBytes: options.maxBodyBytes });

  /** Sends a query on the bus and turns the answer (or its error) into the HTTP reply (pipelines). */
  const ask = async (subject: string, payload: Uint8Array, requestId: string, timeoutMs: number | undefined, extra: Record<string, string | number | undefined>) => {
    const reply = await askBus(queryDeps, subject, payload, requestId, timeoutMs, extra);
    return wireToJson(reply.data, reply.contentType);
  };

  // ---- Pipelines (register, list, delete, query): pipelines.ts ----
  await registerPipelineRoutes(app, { bus, store, catalog, log }, ask);

  // Registration: the ONNX binary as the body (application/octet-stream), or multipart/form-data
  // with parts `model` (file), `validation` (file: binary tensors or JSON), `task`, `dataset`,
  // `profile_shape` (JSON, e.g. {"x": [3, 48, 320]}). Multipart is this route's only: the plugin adds an
  // async onRequest hook (a 'close' listener per request) and an async onResponse hook to every route
  // of the scope it is registered in, which every query paid for (bench/README.md, "HTTP frontend CPU, again").
  await app.register(async (uploads) => {
    await uploads.register(multipart, { limits: { fileSize: options.maxModelBytes, files: 2, fields: 8 } });
    uploads.post<{ Params: { app: string; model: string }; Querystring: { task?: string; dataset?: string; profile_shape?: string } }>("/v1/apps/:app/models/:model", async (req, reply) => {
      checkName("app", req.params.app);
      checkName("model", req.params.model);
      const form: { model?: Buffer; validation?: Buffer; task?: string; dataset?: string; profile_shape?: string } = { ...req.query };
      if (req.isMultipart()) {
        for await (const part of req.parts()) {
          if (part.type === "file") {
            if (part.fieldname !== "model" && part.fieldname !== "validation") throw new ServeError(ErrorCode.badRequest, `unexpected file part '${part.fieldname}'; send 'model' and optionally 'validation'`);
            form[part.fieldname] = await part.toBuffer();
          } else if (["task", "dataset", "profile_shape"].includes(part.fieldname)) {
            (form as Record<string, unknown>)[part.fieldname] = String(part.value);
          }
        }
      } else if (Buffer.isBuffer(req.body)) {
        form.model = req.body;
      }
      if (!form.model) throw new ServeError(ErrorCode.badRequest, "send the ONNX model as the body (Content-Type: application/octet-stream) or as the multipart part 'model'");
      let profileShape: unknown;
      if (form.profile_shape) {
        try {
          profileShape = JSON.parse(form.profile_shape);
        } catch {
          throw new ServeError(ErrorCode.badRequest, "profile_shape must be JSON, e.g. {\"x\": [3, 48, 320]}");
        }
      }
      const upload = `upload/${randomUUID()}`;
      await bus.models.putBlob({ name: upload }, new Uint8Array(form.model));
      let validationUpload: string | undefined;
      if (form.validation) {
        validationUpload = `upload/${randomUUID()}`;
        await bus.models.putBlob({ name: validationUpload }, validationToWire(form.validation));
      }
      const answer = await bus.nc.request(
        subjects.registerModel,
        JSON.stringify({ model: req.params.model, app: req.params.app, task: form.task, dataset: form.dataset, upload, validationUpload, profileShape }),
        { timeout: 120_000, headers: makeHeaders({ [headers.requestId]: req.id }) },
      );
      const failure = errorFromReply(answer.headers, answer.data);
      if (failure) throw failure;
      const result = answer.json<{ model: ModelRecord; variants: never[]; profileJobs: number }>();
      catalog.applyRegistered(result.model, result.variants);
      return reply.code(201).send({ ...describeModel(result.model, result.variants), profile_jobs: result.profileJobs });
    });
  });

  app.get<{ Params: { app: string } }>("/v1/apps/:app/models", async (req) => {
    checkName("app", req.params.app);
    const names = await store.listAppModels(req.params.app);
    if (names.length === 0) throw new ServeError(ErrorCode.unknownApp, `no app named '${req.params.app}' (it has no models)`);
    const models = await Promise.all(names.map(async (n) => ({ m: await store.getModel(n), v: await store.listVariants(n) })));
    return { app: req.params.app, models: models.filter((x) => x.m).map((x) => describeModel(x.m as ModelRecord, x.v)) };
  });

  // Apps' quotas (quotas.ts).
  registerQuotaRoutes(app, { bus, store, quotaStore: deps.quotaStore, quotas: deps.quotas, clock });

  app.get<{ Params: { model: string } }>("/v1/models/:model/profile", async (req) => {
    const model = await modelOr404(req.params.model);
    const variants = await store.listVariants(model.name);
    const workers = await store.listWorkers();
    const byHardware: Record<string, { variants: number; profiled: number; workers: number }> = {};
    for (const v of variants) {
      const h = (byHardware[v.hardware] ??= { variants: 0, profiled: 0, workers: workers.filter((w) => w.hardware === v.hardware).length });
      h.variants++;
      if (v.profiled) h.profiled++;
    }
    const jobs = progress.jobs(model.name);
    return {
      model: model.name,
      variants: variants.length,
      profiled: variants.filter((v) => v.profiled).length,
      by_hardware: byHardware,
      jobs: jobs.map((j) => ({ job: j.job, hardware: j.hardware, phase: j.phase, step: j.step, steps: j.steps, message: j.message, worker: j.worker, at_ms: j.atMs })),
    };
  });

  app.delete<{ Params: { model: string } }>("/v1/models/:model", async (req) => {
    checkName("model", req.params.model);
    const answer = await bus.nc.request(subjects.unregisterModel, JSON.stringify({ model: req.params.model }), { timeout: 30_000 });
    const failure = errorFromReply(answer.headers, answer.data);
    if (failure) throw failure;
    catalog.applyUnregistered(req.params.model);
    return answer.json();
  });

  // ---- Status, dashboard, metrics ----
  // Recent scaling decisions and the latest cost summary, from the bus (observe.ts).
  await registerObservationRoutes(app, { bus, clock });
  app.get("/v1/status", async () => {
    const [models, variants, instances, workers] = await Promise.all([store.listModels(), store.listVariants(), store.listInstances(), store.listWorkers()]);
    return { atMs: clock.now(), models, variants, instances, workers };
  });
  await registerDashboard(app, { bus, catalog, clock, log });
  const quotaDeps = { bus, quotaStore: deps.quotaStore, quotas: deps.quotas, clock };
  registerKeyRoutes(app, { auth: deps.auth, clock, removeQuota: (id) => removeKeyQuota(quotaDeps, id) });
  // API keys' quotas (quotas.ts).
  registerKeyQuotaRoutes(app, { ...quotaDeps, keys: deps.auth?.keys });
  app.get("/", async (_req, reply) => reply.redirect("/dashboard"));
  app.get("/metrics", async (_req, reply) => reply.type(registry.contentType).send(await registry.metrics()));

  return app;
}

export { isErrorCode };
