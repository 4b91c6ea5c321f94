/**
 * Every NATS subject and JetStream stream the services use, in one place (DESIGN.md §2).
 * Names that appear inside a subject (models, variants, workers, apps) are single subject tokens:
 * see `names.ts` for the rule that guarantees it.
 */

export const subjects = {
  /** Model-less query for an app (request/reply, dispatcher queue group). */
  inferApp: (app: string) => `infer.app.${app}`,
  /** Model-specific query (request/reply, dispatcher queue group). */
  inferModel: (model: string) => `infer.model.${model}`,
  /** Variant-specific query (request/reply, dispatcher queue group). */
  inferVariant: (variant: string) => `infer.variant.${variant}`,
  /** Pipeline query (request/reply, dispatcher queue group): runs the pipeline's DAG of stages. */
  inferPipeline: (pipeline: string) => `infer.pipeline.${pipeline}`,
  /** Every pipeline's queries (the dispatchers' subscription). */
  inferPipelineAll: "infer.pipeline.*",
  inferAll: "infer.>",
  /**
   * A query on `infer.app.<app>` or `infer.model.<model>` that a frontend has admitted under its app's
   * quota (libs/policy access/quota.ts): the dispatcher routes it without charging the quota again. Only
   * frontends may publish these (nats-permissions.ts), so a NATS caller cannot skip its app's quota.
   */
  admitted: (inferSubject: string) => `${inferSubject}.admitted`,
  inferAppAdmittedAll: "infer.app.*.admitted",
  inferModelAdmittedAll: "infer.model.*.admitted",
  /** JetStream work queue of one variant; every replica pulls from the same durable consumer. */
  queue: (variant: string) => `q.${variant}`,
  /** Per-second worker metrics and heartbeat. */
  workerMetrics: (worker: string) => `metrics.worker.${worker}`,
  workerMetricsAll: "metrics.worker.*",
  /** Variant state transitions on a worker. */
  state: (variant: string, worker: string) => `state.${variant}.${worker}`,
  stateAll: "state.>",
  /** Scaling commands addressed to one worker (work queue; the worker answers with a result event). */
  scaleModel: (worker: string) => `scale.model.${worker}`,
  scaleResult: (worker: string) => `scale.result.${worker}`,
  /** Registry: requests to the registrar, and the events it publishes. */
  registerModel: "registry.request.register",
  unregisterModel: "registry.request.unregister",
  modelRegistered: (model: string) => `registry.event.registered.${model}`,
  modelUnregistered: (model: string) => `registry.event.unregistered.${model}`,
  registryEvents: "registry.event.>",
  /** Pipeline registry: requests (dispatcher queue group) and events (payload: the pipeline record, or its name). */
  registerPipeline: "registry.request.pipeline.register",
  unregisterPipeline: "registry.request.pipeline.unregister",
  listPipelines: "registry.request.pipeline.list",
  pipelineRegistered: (pipeline: string) => `registry.event.pipeline.registered.${pipeline}`,
  pipelineUnregistered: (pipeline: string) => `registry.event.pipeline.unregistered.${pipeline}`,
  pipelineEvents: "registry.event.pipeline.>",
  /** Per-second pipeline counters from each dispatcher (queries, SLO misses, p99, s_m): tuner and dashboard. */
  pipelineMetrics: (pipeline: string) => `metrics.pipeline.${pipeline}`,
  pipelineMetricsAll: "metrics.pipeline.*",
  /** Variants of a model were profiled (payload: the updated variant records). */
  modelProfiled: (model: string) => `registry.event.profiled.${model}`,
  /** The Wbatch of some of a model's variants was re-tuned to its queries' tightest SLO (payload: batchingTunedEventSchema). */
  batchingTuned: (model: string) => `registry.event.tuned.${model}`,
  batchingTunedAll: "registry.event.tuned.*",
  /** Profiling progress of a model. */
  profileProgress: (model: string) => `registry.event.profile.${model}`,
  /** Profiling jobs for the workers of one hardware kind (work queue: one worker takes each job). */
  profileJob: (hardware: string) => `profile.job.${hardware}`,
  /** Requests to the VM autoscaler (add a worker of a hardware kind). */
  scaleVm: "scale.vm",
  /** What the VM autoscaler did (launched, terminated, reloaded), per worker, or per kind for launches. */
  vmResult: (workerOrKind: string) => `scale.result.vm.${workerOrKind}`,
  /** The VM autoscaler's periodic cost and fleet summary (dashboard). */
  costSummary: "metrics.cost",
  /** Every scaling decision, with its reason (model autoscaler, VM autoscaler, dispatcher loads). */
  decision: (source: string, worker: string) => `decision.${source}.${worker}`,
  decisionsAll: "decision.>",
  /** Forecasts of an app's arrival rate (60 per-minute maxima), from the forecaster. */
  forecast: (app: string) => `forecast.${app}`,
  forecastAll: "forecast.*",
  /** Per-second query arrivals of an app, by model, from each dispatcher (input of the autoscalers and forecaster). */
  arrivals: (app: string) => `metrics.arrivals.${app}`,
  arrivalsAll: "metrics.arrivals.*",
  /** A spot instance's interruption notice, from the spot watcher beside its executor (libs/providers). */
  spotNotice: (worker: string) => `events.spot.${worker}`,
  spotNoticeAll: "events.spot.*",
  /**
   * A service's NATS connection came back after a disconnection (core NATS, payload libs/bus
   * ReconnectEvent): callers send again the requests that connection may have lost (libs/bus resend.ts).
   */
  busReconnected: "events.bus.reconnected",
  /**
   * A dispatcher's heartbeat, every second (core NATS, payload libs/bus DispatcherPresence): a caller
   * sends again what it still waits for when one goes silent or leaves (libs/bus resend.ts).
   */
  dispatcherPresence: (dispatcher: string) => `presence.dispatcher.${dispatcher}`,
  dispatcherPresenceAll: "presence.dispatcher.*",
  /** An app's quota was set or removed (core NATS, payload quotaChangeSchema): every frontend and dispatcher applies it at once. */
  quotaChanged: (app: string) => `quota.changed.${app}`,
  /** An API key's quota was set or removed (core NATS, payload keyQuotaChangeSchema): `quota.changed.key:<id>`, applied by every frontend; dispatchers ignore it. */
  keyQuotaChanged: (keyId: string) => `quota.changed.key:${keyId}`,
  quotaChangedAll: "quota.changed.*",
  /**
   * Each admitting process's demand per app, every 500 ms (core NATS, payload quotaDemandReportSchema):
   * the processes share each app's quota out by it (libs/policy access/quota.ts).
   */
  quotaDemand: (process: string) => `quota.demand.${process}`,
  quotaDemandAll: "quota.demand.*",
} as const;

export const streams = {
  /** Queries routed to variants: work-queue retention, memory storage. */
  queries: { name: "QUERIES", subjects: ["q.>"] },
  /** Worker metrics: limits retention, one hour. */
  metrics: { name: "METRICS", subjects: ["metrics.>"] },
  /** State transitions and registry events: limits retention. */
  events: { name: "EVENTS", subjects: ["state.>", "registry.event.>", "scale.result.>", "decision.>", "forecast.>", "events.spot.*"] },
  /** Scaling commands: work-queue retention. */
  scale: { name: "SCALE", subjects: ["scale.model.>", "scale.vm"] },
  /** Profiling jobs: work-queue retention; a job waits until a worker of its hardware takes it. */
  profile: { name: "PROFILE", subjects: ["profile.job.>"] },
} as const;

/** The durable pull consumer of a variant's queue, shared by all its replicas. */
export function queueConsumer(variant: string): string {
  return `v-${variant}`;
}

/**
 * A worker's durable consumer of its `scale.model.<worker>` commands. A clean stop deletes it; after a
 * crash it stays until its inactivity threshold (2 min): the VM autoscaler tells the two apart by it.
 */
export function workerCommandConsumer(worker: string): string {
  return `worker-${worker}`;
}

/** JetStream object store bucket holding model binaries. */
export const MODEL_BUCKET = "models";

/** Queue group that dispatchers share, so that each query reaches one dispatcher. */
export const DISPATCHER_QUEUE = "dispatchers";
export const REGISTRAR_QUEUE = "registrars";

/**
 * The deadline the dispatcher gives a query whose caller set none (no `x-deadline-ms`), ms after it
 * arrives: the executor sheds it, and the function pool gives up on it, only then. A model-less
 * query's SLO decides where it goes (overflow), not when it is given up.
 */
export const DEFAULT_QUERY_TIMEOUT_MS = 30_000;

/** Header names carried across NATS hops. */
export const headers = {
  requestId: "x-request-id",
  /** Where the executor sends the answer (the caller's inbox). */
  replyTo: "x-reply-to",
  /** Absolute deadline, epoch milliseconds. */
  deadline: "x-deadline-ms",
  /** Reply encoding the caller wants: "json" (Open Inference Protocol JSON) or "wire" (binary). */
  accept: "x-accept",
  contentType: "content-type",
  /** Set on error replies: one of ErrorCode. */
  error: "x-error-code",
  /** When the query entered the system (epoch ms), for timing breakdowns. */
  receivedAt: "x-received-ms",
  /** When the dispatcher enqueued the query (epoch ms). */
  enqueuedAt: "x-enqueued-ms",
  /** Model-less query requirements (INFaaS): latency SLO ms, minimum accuracy 0..1, max $ per query. */
  sloLatencyMs: "x-slo-latency-ms",
  sloMinAccuracy: "x-slo-min-accuracy",
  sloMaxCost: "x-slo-max-cost",
  /**
   * "1": run the query even when it can no longer meet x-deadline-ms (a pipeline stage: InferLine keeps
   * SLOs by re-scaling, not by rejecting; a late pipeline query is answered and counted as a miss).
   */
  lateOk: "x-late-ok",
  /** A pipeline query's parameter overrides, JSON (`{"threshold": 0.95}`). */
  pipelineParams: "x-pipeline-params",
  /**
   * "1": a profiling query (the pipeline controller's sample run, which measures the scale factors at
   * registration): answered like any other, left out of the pipeline's reports and measured s_m.
   */
  profiling: "x-profiling",
  /**
   * On a queue message (`q.<variant>`) that carries several queries coalesced by the dispatcher: how
   * many (libs/contracts coalesced.ts; docs/ARCHITECTURE.md "The query path"). Absent: one query.
   */
  queries: "x-queries",
} as const;

export const contentTypes = {
  json: "application/json",
  wire: "application/x-sloserve-tensors",
} as const;
