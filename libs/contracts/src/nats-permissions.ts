import { MODEL_BUCKET, streams, subjects } from "./subjects.js";

/**
 * What each NATS user may publish and subscribe to (least privilege): the one source of truth that
 * libs/stack turns into nats-server's `authorization { users: [...] }` for `npm start -- --auth`, and
 * into the checked-in deploy/nats-auth.conf (compose) and the block of deploy/nomad/nats.nomad.hcl
 * (`npm run nats:auth` writes both; test/deploy-files.test.ts checks they are the generator's output).
 *
 * Every list is built from `subjects` and `streams` here (a service's own events, commands and
 * queries), plus what the NATS client itself needs:
 * - `_INBOX.>` to subscribe to: every request's reply, JetStream API answers and publish acks, and the
 *   deliveries of the object store's push consumers come to the connection's inbox.
 * - `$JS.API.INFO` and, for the streams a service sets up at start (libs/bus `connectBus` creates or
 *   updates them, idempotently), `$JS.API.STREAM.{INFO,CREATE,UPDATE}.<stream>`; never DELETE, and
 *   PURGE only where objects are deleted (the registrar, on the model bucket).
 * - consumers, per stream: `$JS.API.CONSUMER.{CREATE,DURABLE.CREATE,INFO,DELETE}.<stream>.…`,
 *   pulls on `$JS.API.CONSUMER.MSG.NEXT.<stream>.…`, acknowledgements on `$JS.ACK.<stream>.>`.
 * - the model bucket (object store `models`: stream `OBJ_models`, subjects `$O.models.>`): reading is
 *   a message get of the object's metadata and an ordered push consumer of its chunks (with flow
 *   control replies on `$JS.FC.OBJ_models.>`); writing publishes `$O.models.>`.
 * Replies to the caller of a query go to its inbox (`x-reply-to`), so the services that answer
 * queries (dispatcher, executors) may publish to `_INBOX.>`; the registrar only answers the requests
 * it received (`allow_responses`).
 *
 * Caveats: consumer permissions are per stream, not per consumer name (a NATS permission token is a
 * whole token: `worker-*` is not a pattern), so an executor could pull from another variant's queue;
 * stream create/update is granted on the service streams to every service that sets them up.
 */

export const natsRoles = ["frontend", "dispatcher", "registrar", "model-autoscaler", "vm-autoscaler", "forecaster", "executor", "function", "client", "admin"] as const;
export type NatsRole = (typeof natsRoles)[number];

export interface NatsPermissions {
  publish: string[];
  subscribe: string[];
  /** May answer the requests it receives (nats-server `allow_responses`: one reply each). */
  allowResponses?: boolean;
}

/** What each role is for (comments in the generated config, docs/SECURITY.md). */
export const natsRoleDescriptions: Record<NatsRole, string> = {
  frontend: "HTTP/gRPC API: queries, registrations (uploads to the model bucket), the dashboard's feeds",
  dispatcher: "routes queries to variant queues, runs pipelines, loads variants, answers callers",
  registrar: "model registry: stores binaries, announces models, queues profiling jobs",
  "model-autoscaler": "scales variants on workers, asks for machines, plans pipelines",
  "vm-autoscaler": "machines: takes scale.vm requests, publishes costs and its decisions",
  forecaster: "forecasts arrivals",
  executor: "workers of every kind (executor-cpu, -gpu, -inferentia) and the spot watcher beside one",
  function: "the serverless overflow's local function workers: read model binaries",
  client: "your own services, npm run replay, bench: queries, registrations, and the metrics and decisions to watch",
  admin: "operators (the nats CLI): everything",
};

const INBOX = "_INBOX.>";
const JS = "$JS.API";
const OBJECT_STREAM = `OBJ_${MODEL_BUCKET}`;
const serviceStreams = [streams.queries.name, streams.metrics.name, streams.events.name, streams.scale.name, streams.profile.name, OBJECT_STREAM];

/** The JetStream API subjects of setting up the service streams and the model bucket at start. */
function setUp(names: readonly string[] = serviceStreams): string[] {
  return [`${JS}.INFO`, ...names.flatMap((s) => [`${JS}.STREAM.INFO.${s}`, `${JS}.STREAM.CREATE.${s}`, `${JS}.STREAM.UPDATE.${s}`])];
}

/** Creating, reading and deleting consumers of `stream`, pulling from them and acknowledging. */
function consumers(stream: string): string[] {
  return [
    `${JS}.CONSUMER.CREATE.${stream}`,
    `${JS}.CONSUMER.CREATE.${stream}.>`,
    `${JS}.CONSUMER.DURABLE.CREATE.${stream}.>`,
    `${JS}.CONSUMER.INFO.${stream}.>`,
    `${JS}.CONSUMER.DELETE.${stream}.>`,
    `${JS}.CONSUMER.MSG.NEXT.${stream}.>`,
    `$JS.ACK.${stream}.>`,
  ];
}

/** Reading objects of the model bucket. */
function readModels(): string[] {
  return [`${JS}.STREAM.INFO.${OBJECT_STREAM}`, `${JS}.STREAM.MSG.GET.${OBJECT_STREAM}`, `${JS}.DIRECT.GET.${OBJECT_STREAM}`, `${JS}.DIRECT.GET.${OBJECT_STREAM}.>`, ...consumers(OBJECT_STREAM), `$JS.FC.${OBJECT_STREAM}.>`];
}

/** Putting objects into the model bucket (a put of an existing name also reads it). */
function writeModels(): string[] {
  return [...readModels(), `$O.${MODEL_BUCKET}.>`];
}

const every = "*";
const queries = [subjects.inferApp(every), subjects.inferModel(every), subjects.inferVariant(every), subjects.inferPipeline(every)];
const registryRequests = "registry.request.>";
/** Queries a frontend admitted under their app's quota: published by frontends only, so that no other caller skips its quota. */
const admittedQueries = [subjects.inferAppAdmittedAll, subjects.inferModelAdmittedAll];
/** Quota changes and the admitting processes' demand reports (libs/policy access/quota.ts). */
const quotaSubjects = [subjects.quotaChangedAll, subjects.quotaDemandAll];

function unique(list: string[]): string[] {
  return [...new Set(list)];
}

const table: Record<NatsRole, NatsPermissions> = {
  frontend: {
    publish: [...setUp(), ...queries, ...admittedQueries, registryRequests, ...writeModels(), ...consumers(streams.events.name), `${JS}.STREAM.MSG.GET.${streams.metrics.name}`, ...quotaSubjects],
    subscribe: [INBOX, subjects.registryEvents, subjects.arrivalsAll, subjects.workerMetricsAll, subjects.costSummary, subjects.forecastAll, subjects.decisionsAll, subjects.busReconnected, subjects.dispatcherPresenceAll, ...quotaSubjects],
  },
  dispatcher: {
    publish: [
      ...setUp(),
      INBOX,
      ...queries,
      "q.>",
      subjects.scaleModel(every),
      subjects.decision("dispatcher", every),
      subjects.arrivals(every),
      subjects.pipelineMetrics(every),
      subjects.dispatcherPresence(every),
      subjects.quotaDemandAll,
      subjects.pipelineRegistered(every),
      subjects.pipelineUnregistered(every),
      ...consumers(streams.queries.name),
      ...readModels(),
    ],
    subscribe: [
      INBOX,
      ...queries,
      ...admittedQueries,
      subjects.registerPipeline,
      subjects.unregisterPipeline,
      subjects.listPipelines,
      subjects.registryEvents,
      subjects.stateAll,
      subjects.workerMetricsAll,
      subjects.forecastAll,
      subjects.spotNoticeAll,
      subjects.busReconnected,
      subjects.dispatcherPresenceAll,
      ...quotaSubjects,
    ],
  },
  registrar: {
    publish: [
      ...setUp(),
      subjects.modelRegistered(every),
      subjects.modelUnregistered(every),
      subjects.batchingTuned(every),
      subjects.profileJob(every),
      ...writeModels(),
      `${JS}.STREAM.PURGE.${OBJECT_STREAM}`,
    ],
    subscribe: [INBOX, subjects.registerModel, subjects.unregisterModel, subjects.arrivalsAll, subjects.modelProfiled(every)],
    allowResponses: true,
  },
  "model-autoscaler": {
    publish: [...setUp(), subjects.scaleModel(every), subjects.scaleVm, subjects.decision("model", every), subjects.decision("pipeline", every), subjects.inferPipeline(every), ...readModels()],
    subscribe: [INBOX, subjects.registryEvents, subjects.workerMetricsAll, subjects.arrivalsAll, subjects.pipelineMetricsAll],
  },
  "vm-autoscaler": {
    publish: [...setUp(), subjects.scaleModel(every), subjects.decision("vm", every), subjects.vmResult(every), subjects.costSummary, ...consumers(streams.scale.name)],
    subscribe: [INBOX, subjects.registryEvents, subjects.workerMetricsAll, subjects.forecastAll, subjects.arrivalsAll, subjects.spotNoticeAll],
  },
  forecaster: {
    publish: [...setUp(), subjects.forecast(every)],
    subscribe: [INBOX, subjects.arrivalsAll],
  },
  executor: {
    publish: [
      ...setUp(),
      INBOX,
      subjects.state(every, every),
      subjects.scaleResult(every),
      subjects.workerMetrics(every),
      subjects.profileProgress(every),
      subjects.modelProfiled(every),
      subjects.spotNotice(every),
      ...consumers(streams.queries.name),
      ...consumers(streams.scale.name),
      ...consumers(streams.profile.name),
      ...readModels(),
    ],
    subscribe: [INBOX, subjects.batchingTunedAll, subjects.modelProfiled(every)],
  },
  function: {
    publish: [`${JS}.INFO`, ...readModels()],
    subscribe: [INBOX],
  },
  client: {
    publish: [`${JS}.INFO`, ...queries, registryRequests, ...writeModels()],
    subscribe: [INBOX, subjects.registryEvents, "metrics.>", subjects.forecastAll, subjects.decisionsAll],
  },
  admin: { publish: [">"], subscribe: [">"] },
};

/** The permissions of a role (fresh arrays, duplicates removed). */
export function natsPermissions(role: NatsRole): NatsPermissions {
  const p = table[role];
  // Every connection announces its reconnections (libs/bus resend.ts): the callers of queries
  // (frontend, dispatcher) send again what it may have lost.
  return { publish: unique([...p.publish, subjects.busReconnected]), subscribe: unique(p.subscribe), ...(p.allowResponses ? { allowResponses: true } : {}) };
}

/** The NATS user a service process connects as (`services/<name>`): executors of every kind share one. */
export function natsRoleOfService(service: string): NatsRole | undefined {
  if (service.startsWith("executor-")) return "executor";
  return (natsRoles as readonly string[]).includes(service) ? (service as NatsRole) : undefined;
}
