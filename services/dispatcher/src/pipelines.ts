import type { Msg, NatsConnection, Subscription } from "@nats-io/transport-node";
import {
  DISPATCHER_QUEUE,
  ErrorCode,
  ServeError,
  contentTypes,
  decodeTensors,
  describeZodError,
  encodeTensors,
  headers,
  pipelineNameSchema,
  pipelineRecordSchema,
  pipelineSpecSchema,
  registerPipelineRequestSchema,
  subjects,
  unregisterPipelineRequestSchema,
  type Clock,
  type PipelineRecord,
  type PipelineSpec,
  type Tensor,
} from "@sloserve/contracts";
import { errorFromReply, makeHeaders, replyError, replyInference, type Bus, type Logger } from "@sloserve/bus";
import type { Catalog, MetadataStore } from "@sloserve/store";
import {
  checkPipelineSpec,
  compilePipeline,
  pipelineInputSignature,
  pipelineSloCheck,
  planningModel,
  resolvePipelineParams,
  type CompiledPipeline,
  type PipelineEnvironment,
} from "@sloserve/policy";
import { DEFAULT_TIMEOUT_MS, normalisePayload } from "./dispatch.js";
import { runPipelineQuery, type AppRequirements, type ModelStageBackend, type StageAnswer, type StageCall } from "./pipeline-run.js";
import type { PipelineStats } from "./pipeline-stats.js";
import type { StepRegistry } from "./pipeline-steps.js";

/**
 * Pipelines in the dispatcher (InferLine §2-5, DESIGN §3 "Pipelines"): the pipeline registry
 * (`registry.request.pipeline.{register,unregister,list}`, specs in Redis, `registry.event.pipeline.*`)
 * and pipeline queries (`infer.pipeline.<name>`, dispatcher queue group). A query's stages run as
 * ordinary model (or model-less app) queries through the dispatchers' own routing, on the variants'
 * queues, in parallel where the DAG allows (pipeline-run.ts); each carries the pipeline's end-to-end
 * deadline and `x-late-ok`, so that a late pipeline query is still answered, and counted as a miss.
 * Counters go out every second on `metrics.pipeline.<name>` (pipeline-stats.ts).
 */

/** The registered pipelines: in memory, from Redis at start and on a miss, kept current by registry events. */
export class PipelineRegistry {
  private readonly records = new Map<string, PipelineRecord>();
  private readonly compiledByName = new Map<string, { at: number; compiled: CompiledPipeline }>();

  constructor(
    private readonly store: MetadataStore,
    private readonly catalog: Catalog,
    readonly steps: StepRegistry,
  ) {}

  async load(): Promise<void> {
    for (const r of await this.store.listPipelines()) this.put(r);
  }

  put(record: PipelineRecord): void {
    this.records.set(record.spec.name, record);
    this.compiledByName.delete(record.spec.name);
  }

  remove(name: string): void {
    this.records.delete(name);
    this.compiledByName.delete(name);
  }

  async get(name: string): Promise<PipelineRecord | undefined> {
    const known = this.records.get(name);
    if (known) return known;
    const record = await this.store.getPipeline(name);
    if (record) this.put(record);
    return record;
  }

  /** What exists, for checking specs: the catalog's models and apps, and the step registry. */
  environment(): PipelineEnvironment {
    return {
      model: (n) => this.catalog.signature(n),
      app: (a) => this.catalog.appSignature(a),
      step: (s) => this.steps.get(s),
      stepNames: () => this.steps.names(),
    };
  }

  /** Makes sure the catalog knows the models and apps a spec names (from Redis on a miss). */
  async ensureKnown(spec: PipelineSpec): Promise<void> {
    let reload = false;
    for (const s of spec.stages) {
      if (s.model !== undefined && !this.catalog.models.has(s.model)) await this.catalog.getModel(s.model);
      if (s.app !== undefined && this.catalog.modelsOfApp(s.app).length === 0) reload = true;
    }
    if (reload) await this.catalog.load();
  }

  /**
   * InferLine Algorithm 1's check (libs/policy `pipelineSloCheck`, the planner's first step) on the
   * catalog's profiles: `infeasible` naming the stage that cannot fit when even the longest path at
   * batch 1 on the fastest variants exceeds the SLO. Passes while a model stage is not profiled yet (the
   * pipeline controller then reports it in the pipeline's plan once it is).
   */
  checkSlo(spec: PipelineSpec): void {
    const check = pipelineSloCheck(spec, planningModel(spec, (m) => this.catalog.variantsByModel.get(m) ?? []));
    if (check && !check.feasible) throw new ServeError(ErrorCode.infeasible, check.reason, { path: check.path, service_time_ms: check.serviceTimeMs });
  }

  /** The record compiled for running; throws `unknown_model` / `unknown_app` when a stage's model or app is gone. */
  compiled(record: PipelineRecord): CompiledPipeline {
    const cached = this.compiledByName.get(record.spec.name);
    if (cached && cached.at === record.registeredAtMs) return cached.compiled;
    const env = this.environment();
    for (const s of record.spec.stages) {
      if (s.model !== undefined && !env.model(s.model)) throw new ServeError(ErrorCode.unknownModel, `pipeline ${record.spec.name}: stage ${s.name}: no model named '${s.model}' (unregistered since?)`);
      if (s.app !== undefined && !env.app(s.app)) throw new ServeError(ErrorCode.unknownApp, `pipeline ${record.spec.name}: stage ${s.name}: no app named '${s.app}' (unregistered since?)`);
    }
    const compiled = compilePipeline(record.spec, (n) => this.steps.get(n), env);
    this.compiledByName.set(record.spec.name, { at: record.registeredAtMs, compiled });
    return compiled;
  }
}

/** Checks a spec as a user sent it: shape (zod), then meaning (libs/policy `checkPipelineSpec`). */
export async function checkSpec(raw: unknown, registry: PipelineRegistry): Promise<PipelineSpec> {
  if (!raw || typeof raw !== "object" || Array.isArray(raw)) throw new ServeError(ErrorCode.invalidPipeline, "a pipeline spec is a JSON object");
  const name = (raw as { name?: unknown }).name;
  if (!pipelineNameSchema.safeParse(name).success) {
    throw new ServeError(ErrorCode.invalidName, `invalid pipeline name ${JSON.stringify(name)}: use 1-64 letters, digits, '_' or '-', starting with a letter or digit`);
  }
  const parsed = pipelineSpecSchema.safeParse(raw);
  if (!parsed.success) throw new ServeError(ErrorCode.invalidPipeline, `invalid pipeline ${String(name)}: ${describeZodError(parsed.error)}`, { problems: parsed.error.issues.map((i) => `${i.path.join(".") || "(spec)"}: ${i.message}`) });
  await registry.ensureKnown(parsed.data);
  const problems = checkPipelineSpec(parsed.data, registry.environment());
  if (problems.length > 0) throw new ServeError(ErrorCode.invalidPipeline, `invalid pipeline ${parsed.data.name}: ${problems.join("; ")}`, { problems });
  return parsed.data;
}

/** Model and app stages as queries on the bus, through the dispatchers' routing. */
export class BusStageBackend implements ModelStageBackend {
  constructor(
    /** The bus's request: sent again when a connection on the query path drops (libs/bus resend.ts). */
    private readonly bus: Pick<Bus, "request">,
    private readonly clock: Clock,
  ) {}

  model(model: string, inputs: Tensor[], call: StageCall): Promise<StageAnswer> {
    return this.ask(subjects.inferModel(model), inputs, call, {});
  }

  app(app: string, r: AppRequirements, inputs: Tensor[], call: StageCall): Promise<StageAnswer> {
    return this.ask(subjects.inferApp(app), inputs, call, { [headers.sloLatencyMs]: r.latencyMs, [headers.sloMinAccuracy]: r.minAccuracy, [headers.sloMaxCost]: r.maxCost });
  }

  private async ask(subject: string, inputs: Tensor[], call: StageCall, extra: Record<string, string | number | undefined>): Promise<StageAnswer> {
    const now = this.clock.now();
    const timeout = Math.max(1, call.giveUpAtMs - now);
    let reply: Msg;
    try {
      reply = await this.bus.request(subject, encodeTensors(inputs), {
        timeout,
        headers: makeHeaders({
          [headers.contentType]: contentTypes.wire,
          [headers.requestId]: call.requestId,
          // The pipeline's end-to-end deadline: every stage's queue sees the whole query's budget.
          [headers.deadline]: call.deadlineMs,
          [headers.lateOk]: 1,
          [headers.receivedAt]: now,
          ...extra,
        }),
      });
    } catch (err) {
      const e = err as Error;
      if (/timeout/i.test(e.name + e.message)) throw new ServeError(ErrorCode.deadlineExceeded, `no answer within ${timeout} ms`);
      if (/no ?responders/i.test(e.name + e.message)) throw new ServeError(ErrorCode.unavailable, "no dispatcher is running");
      throw err;
    }
    const failure = errorFromReply(reply.headers, reply.data);
    if (failure) throw failure;
    if (reply.headers?.get(headers.contentType) === contentTypes.json) throw new ServeError(ErrorCode.internal, `${subject} answered in JSON; the pipeline asked for binary tensors`);
    const { meta, tensors } = decodeTensors<{ served_by?: Record<string, unknown>; cost_dollars?: number }>(reply.data);
    return { outputs: tensors, servedBy: meta.served_by, costDollars: typeof meta.cost_dollars === "number" ? meta.cost_dollars : 0 };
  }
}

export interface PipelineServiceOptions {
  /** How often counters go out on `metrics.pipeline.<name>`, ms; 0: only when `tick` is called. @default 1000 */
  reportEveryMs?: number;
  /**
   * Whether it subscribes to the queries (`infer.pipeline.*`, queue group) itself; false: the caller
   * hands them to {@link PipelineService.handle} (the dispatcher does, with its other query subjects,
   * so that a silent peer's are taken over: takeover.ts). @default true
   */
  subscribeQueries?: boolean;
}

/** Fields of a pipeline answer (and of the binary encoding's meta): an object output of one of these names comes under `values`. */
const ANSWER_FIELDS = new Set(["pipeline", "id", "visited", "visits", "output_stages", "served_by", "timing_ms", "cost_dollars", "slo_ms", "missed_slo", "s_m", "values", "outputs", "tensors", "model_name", "model_version", "error", "code"]);

/** Keys of a JSON query's `parameters` that are the query's own, not pipeline parameters. */
const QUERY_KEYS = new Set(["timeout_ms"]);

export class PipelineService {
  private timer: NodeJS.Timeout | undefined;
  private subs: Subscription[] = [];

  constructor(
    private readonly bus: Bus,
    private readonly store: MetadataStore,
    readonly registry: PipelineRegistry,
    private readonly stats: PipelineStats,
    private readonly backend: ModelStageBackend,
    private readonly log: Logger,
    private readonly clock: Clock,
  ) {}

  /** Subscribes (events first, then requests and queries) and starts the report timer. */
  start(options: PipelineServiceOptions = {}): Subscription[] {
    const nc = this.bus.nc;
    this.subs = [
      nc.subscribe(subjects.pipelineEvents, { callback: (_err, msg) => this.applyEvent(msg) }),
      nc.subscribe(subjects.registerPipeline, { queue: DISPATCHER_QUEUE, callback: (_err, msg) => this.respond(msg, () => this.register(msg)) }),
      nc.subscribe(subjects.unregisterPipeline, { queue: DISPATCHER_QUEUE, callback: (_err, msg) => this.respond(msg, () => this.unregister(msg)) }),
      nc.subscribe(subjects.listPipelines, { queue: DISPATCHER_QUEUE, callback: (_err, msg) => this.respond(msg, async () => ({ pipelines: await this.store.listPipelines() })) }),
      ...(options.subscribeQueries === false ? [] : [nc.subscribe(subjects.inferPipelineAll, { queue: DISPATCHER_QUEUE, callback: (_err, msg) => this.handle(msg) })]),
    ];
    const every = options.reportEveryMs ?? 1000;
    if (every > 0) this.timer = setInterval(() => this.tick(this.clock.now()), every);
    return this.subs;
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    for (const s of this.subs) s.unsubscribe();
    this.subs = [];
  }

  /** Publishes the window's counters of every pipeline this dispatcher ran. */
  tick(nowMs: number): void {
    for (const report of this.stats.take(nowMs)) this.bus.nc.publish(subjects.pipelineMetrics(report.pipeline), JSON.stringify(report));
  }

  private applyEvent(msg: Msg): void {
    try {
      const [, , , kind, name] = msg.subject.split(".");
      if (kind === "registered") this.registry.put(pipelineRecordSchema.parse(msg.json()));
      else if (kind === "unregistered" && name) {
        this.registry.remove(name);
        this.stats.forget(name);
      }
    } catch (err) {
      this.log.warn({ err, subject: msg.subject }, "ignoring malformed pipeline event");
    }
  }

  /** Answers a registry request with the work's result as JSON, or its error. */
  private respond(msg: Msg, work: () => Promise<unknown>): void {
    const requestId = msg.headers?.get(headers.requestId) || undefined;
    work().then(
      (result) => msg.respond(JSON.stringify(result)),
      (err: unknown) => {
        if (!(err instanceof ServeError) || err.code === ErrorCode.internal) this.log.error({ err, requestId, subject: msg.subject }, "pipeline registry request failed");
        else this.log.info({ requestId, code: err.code, message: err.message }, "pipeline registry request refused");
        replyError(this.bus.nc, msg.reply, err, requestId);
      },
    );
  }

  private body(msg: Msg): unknown {
    try {
      return msg.json();
    } catch {
      throw new ServeError(ErrorCode.malformedJson, "the request body is not valid JSON");
    }
  }

  async register(msg: Msg): Promise<PipelineRecord> {
    const parsed = registerPipelineRequestSchema.safeParse(this.body(msg));
    if (!parsed.success) throw new ServeError(ErrorCode.badRequest, `a register request is {"spec": {...}}: ${describeZodError(parsed.error)}`);
    const spec = await checkSpec(parsed.data.spec, this.registry);
    this.registry.checkSlo(spec);
    const record: PipelineRecord = { spec, registeredAtMs: this.clock.now() };
    if (!(await this.store.createPipeline(record))) throw new ServeError(ErrorCode.pipelineExists, `a pipeline named '${spec.name}' exists; delete it first`);
    this.registry.put(record);
    this.log.info({ pipeline: spec.name, stages: spec.stages.length, sloMs: spec.slo.p99_ms }, "pipeline registered");
    await this.bus.js.publish(subjects.pipelineRegistered(spec.name), JSON.stringify(record)).catch((err: unknown) => {
      // Registered (it is in Redis): other dispatchers find it there on their first query.
      this.log.warn({ err, pipeline: spec.name }, "could not announce the registered pipeline");
    });
    return record;
  }

  async unregister(msg: Msg): Promise<{ pipeline: string; deleted: true }> {
    const parsed = unregisterPipelineRequestSchema.safeParse(this.body(msg));
    if (!parsed.success) throw new ServeError(ErrorCode.badRequest, `an unregister request is {"pipeline": "<name>"}: ${describeZodError(parsed.error)}`);
    const name = parsed.data.pipeline;
    const removed = await this.store.deletePipeline(name);
    if (!removed) throw new ServeError(ErrorCode.unknownPipeline, `no pipeline named '${name}'`);
    this.registry.remove(name);
    this.stats.forget(name);
    this.log.info({ pipeline: name }, "pipeline unregistered");
    await this.bus.js.publish(subjects.pipelineUnregistered(name), JSON.stringify({ pipeline: name })).catch((err: unknown) => {
      // Gone from Redis; a dispatcher that cached it keeps answering for it until it hears of it.
      this.log.warn({ err, pipeline: name }, "could not announce the unregistered pipeline");
    });
    return { pipeline: name, deleted: true };
  }

  /** Entry point for `infer.pipeline.*`; never throws. */
  handle(msg: Msg): void {
    const requestId = msg.headers?.get(headers.requestId) || undefined;
    const name = msg.subject.split(".")[2] ?? "";
    this.query(msg, name, requestId).catch((err: unknown) => {
      if (!(err instanceof ServeError) || err.code === ErrorCode.internal) this.log.error({ err, requestId, pipeline: name }, "pipeline query failed");
      else this.log.debug({ requestId, pipeline: name, code: err.code, message: err.message }, "pipeline query refused");
      replyError(this.bus.nc, msg.reply, err, requestId);
    });
  }

  private async query(msg: Msg, name: string, requestId: string | undefined): Promise<void> {
    if (!msg.reply) throw new ServeError(ErrorCode.badRequest, "queries must be sent as requests (with a reply subject)");
    const now = this.clock.now();
    const record = await this.registry.get(name);
    if (!record) throw new ServeError(ErrorCode.unknownPipeline, `no pipeline named '${name}'`);
    await this.registry.ensureKnown(record.spec);
    const compiled = this.registry.compiled(record);
    const signature = pipelineInputSignature(record.spec, this.registry.environment());
    const { payload, json, body } = normalisePayload(msg, signature);
    const { meta, tensors } = decodeTensors<{ id?: string }>(payload);
    const h = msg.headers;
    let overrides: Record<string, unknown> = {};
    let timeoutMs: number | undefined;
    if (json) {
      const p = (body?.["parameters"] ?? {}) as Record<string, unknown>;
      if (typeof p["timeout_ms"] === "number" && p["timeout_ms"] > 0) timeoutMs = p["timeout_ms"];
      overrides = Object.fromEntries(Object.entries(p).filter(([k]) => !QUERY_KEYS.has(k)));
    } else if (h?.get(headers.pipelineParams)) {
      try {
        overrides = JSON.parse(h.get(headers.pipelineParams)) as Record<string, unknown>;
      } catch {
        throw new ServeError(ErrorCode.badRequest, `header ${headers.pipelineParams} is not valid JSON`);
      }
      if (!overrides || typeof overrides !== "object" || Array.isArray(overrides)) throw new ServeError(ErrorCode.badRequest, `header ${headers.pipelineParams} must be a JSON object`);
    }
    let params;
    try {
      params = resolvePipelineParams(record.spec, overrides);
    } catch (err) {
      throw new ServeError(ErrorCode.badRequest, `pipeline ${name}: ${(err as Error).message}`);
    }
    const given = Number(h?.get(headers.deadline));
    const giveUpAtMs = given > 0 ? given : now + (timeoutMs ?? DEFAULT_TIMEOUT_MS);
    const receivedAtMs = Number(h?.get(headers.receivedAt)) || now;
    const sloMs = record.spec.slo.p99_ms;
    // The pipeline controller's sample run (scale factors at registration) is not the pipeline's traffic.
    const profiling = h?.get(headers.profiling) === "1";
    if (!profiling) this.stats.recordArrival(name, sloMs, receivedAtMs);
    let answer;
    try {
      answer = await runPipelineQuery({ compiled, inputs: tensors, params, receivedAtMs, giveUpAtMs, requestId }, this.backend, this.registry.steps, this.clock);
    } catch (err) {
      if (!profiling) this.stats.recordError(name, sloMs);
      throw err;
    }
    if (!profiling) this.stats.record(name, sloMs, { latencyMs: answer.latencyMs, missed: answer.missedSlo, visits: answer.visits });
    // Objects from steps (the OCR pipeline's text and lines) at the top of the answer; one whose name the
    // answer uses itself goes under `values`.
    const clashing = Object.entries(answer.values).filter(([k]) => ANSWER_FIELDS.has(k));
    const extra = {
      ...Object.fromEntries(Object.entries(answer.values).filter(([k]) => !ANSWER_FIELDS.has(k))),
      ...(clashing.length > 0 ? { values: Object.fromEntries(clashing) } : {}),
      pipeline: name,
      id: typeof meta.id === "string" ? meta.id : requestId,
      visited: Object.keys(answer.visits),
      visits: answer.visits,
      output_stages: answer.outputStages,
      served_by: answer.servedBy,
      timing_ms: answer.timingMs,
      cost_dollars: answer.costDollars,
      slo_ms: sloMs,
      missed_slo: answer.missedSlo,
      s_m: this.stats.shares(name),
    };
    const accept = h?.get(headers.accept) || (json ? "json" : "wire");
    replyInference(this.bus.nc, msg.reply, answer.outputs, extra, { json: accept === "json", requestId });
    if (answer.missedSlo) this.log.debug({ requestId, pipeline: name, latencyMs: answer.latencyMs, sloMs }, "pipeline query missed its SLO");
  }
}
