import { randomUUID } from "node:crypto";
import type { Msg, MsgHdrs } from "@nats-io/transport-node";
import type { Consumer, JsMsg } from "@nats-io/jetstream";
import {
  DEFAULT_QUERY_TIMEOUT_MS,
  ErrorCode,
  ServeError,
  bytesPerElement,
  checkInputs,
  contentTypes,
  decodeCoalesced,
  decodeWireMeta,
  describeZodError,
  headers,
  sloSchema,
  oipJsonToWire,
  streams,
  queueConsumer,
  subjects,
  type Clock,
  type CoalescedQuery,
  type ModelRecord,
  type ArrivalsReport,
  type ScaleCommand,
  type TensorSpec,
  type VariantRecord,
} from "@sloserve/contracts";
import { makeHeaders, replyError, type Bus, type Logger } from "@sloserve/bus";
import type { Catalog } from "@sloserve/store";
import {
  chooseWorker,
  footprintOf,
  PACK_BELOW_UTILISATION,
  isLoadPending,
  modelQueryCandidates,
  routeCandidate,
  routeModelQuery,
  queryElements,
  selectForApp,
  type FairShareAdmission,
  type LoadPlacement,
  type OverflowDecision,
  type LoadRequest,
  type QueryRequirements,
  type RouteCandidate,
  type VariantDispatchView,
  type VariantFootprint,
} from "@sloserve/policy";
import type { ClusterView } from "./cluster.js";
import type { SelectionView } from "./selection-view.js";
import type { ArrivalCounter } from "./arrivals.js";
import type { OverflowPath } from "./overflow.js";
import type { DispatcherMetrics } from "./metrics.js";
import type { DispatcherQuotas } from "./quotas.js";
import type { PublishGaveUp } from "./publish-retry.js";
import { AckedPublisher } from "./queue-publisher.js";
import { QueueCoalescer } from "./queue-coalescer.js";

/** How often a rescue looks again for queries an unloaded replica held (a little over the executors' 2 s ack wait, libs/executor ACK_WAIT_MS). */
const RESCUE_RECHECK_MS = 2_500;

/** Default time a query may take end to end when the caller gives no deadline (libs/contracts DEFAULT_QUERY_TIMEOUT_MS). */
export const DEFAULT_TIMEOUT_MS = DEFAULT_QUERY_TIMEOUT_MS;

/**
 * Converts a query's payload into the binary tensor encoding, checking it against the model's
 * input signature. Accepts binary ("wire") payloads and Open Inference Protocol JSON.
 */
export function normalisePayload(msg: Msg, signature: readonly TensorSpec[]): { payload: Uint8Array; json: boolean; body?: Record<string, unknown>; inputElements?: number } {
  const type = msg.headers?.get(headers.contentType);
  const data = msg.data; // a new view at each read of msg.data
  if (type === contentTypes.wire) {
    const { meta } = decodeWireMeta(data);
    checkInputs(meta.tensors.map((t) => ({ name: t.name, datatype: t.datatype, shape: t.shape, length: t.byteLength / bytesPerElement(t.datatype) })), signature);
    return { payload: data, json: false, inputElements: queryElements(meta.tensors.map((t) => t.shape)) };
  }
  let body: unknown;
  try {
    body = JSON.parse(new TextDecoder().decode(data));
  } catch {
    throw new ServeError(ErrorCode.malformedJson, "the request body is not valid JSON");
  }
  const { payload } = oipJsonToWire(body, signature);
  return { payload, json: true, body: body as Record<string, unknown>, inputElements: queryElements(decodeWireMeta(payload).meta.tensors.map((t) => t.shape)) };
}

export class Dispatcher {
  /** variant → when we asked for it to be loaded. */
  private readonly pendingLoads = new Map<string, number>();
  /** Queue publishes, coalesced per variant (queue-coalescer.ts), with their acknowledgements on one subscription (queue-publisher.ts); made at the first query. */
  private queue: QueueCoalescer | undefined;

  constructor(
    private readonly bus: Bus,
    private readonly catalog: Catalog,
    private readonly cluster: ClusterView,
    private readonly selection: SelectionView,
    private readonly arrivals: ArrivalCounter,
    private readonly log: Logger,
    private readonly clock: Clock,
    /** Serverless overflow (OVERFLOW); undefined: off, every query is queued. */
    private readonly overflow?: OverflowPath,
    /** Prometheus metrics (METRICS_PORT); undefined: not exported. */
    private readonly metrics?: DispatcherMetrics,
    /** Whether small queries pending for a variant share a queue message (QUEUE_COALESCE). */
    private readonly coalesce = true,
    /** Apps' quotas for NATS callers' queries (quotas.ts); undefined: not enforced here. */
    private readonly quotas?: DispatcherQuotas,
    /** Weighted fair admission between apps on a congested worker pool (FAIR_SHARE); undefined: off. */
    private readonly fair?: FairShareAdmission,
  ) {}

  /**
   * Weighted fair admission (libs/policy access/fair-share.ts decides): every query routed to a
   * variant, a frontend's and a NATS caller's alike, is charged its variant's cost on the pool of the
   * variant's hardware; an app over its fair share of a congested pool is refused
   * `fair_share_exceeded` (429) before it is counted as an arrival or queued. Weights: the apps'
   * quota rates as this dispatcher knows them.
   */
  private fairShare(app: string, variant: VariantRecord, nowMs: number): void {
    if (!this.fair) return;
    const d = this.fair.admit(
      {
        pool: variant.hardware,
        app,
        quotaQps: this.quotas?.admission.quotaOf(app)?.rate_qps,
        costS: this.cluster.queryCostS(variant.name, variant.profile?.peakQps),
        capacity: this.cluster.poolThreads(variant.hardware),
      },
      nowMs,
    );
    if (d.admitted) return;
    this.metrics?.quotaRefused(app, "fair_share");
    throw d.error;
  }

  /**
   * Charges a NATS caller's query to its app's quota before it is read or counted as an arrival
   * (quotas.ts); throws `quota_exceeded` when over. A query a frontend admitted (`….admitted`) or one
   * without an inbox (refused later as not a request) is not charged.
   */
  private charge(msg: Msg, app: string, nowMs: number, charged: boolean): void {
    if (!charged || !this.quotas?.hasQuota(app) || !msg.reply) return;
    const given = Number(msg.headers?.get(headers.deadline));
    this.quotas.charge(app, msg.reply, nowMs, given > 0 ? given : nowMs + DEFAULT_TIMEOUT_MS);
  }

  /**
   * Once a second: forgets workers whose heartbeat is lost (and pre-warms functions for the load they
   * carried, when overflow is on), gives back the quota slots of queries whose answer was never seen,
   * and returns the arrival reports to publish.
   */
  tick(nowMs: number): ArrivalsReport[] {
    this.quotas?.sweep(nowMs);
    const lost = this.cluster.prune(nowMs);
    for (const r of lost) this.log.warn({ worker: r.worker, variants: r.variants.map((v) => v.variant) }, "worker heartbeat lost");
    if (lost.length > 0 && this.overflow) void this.overflow.capacityLost(lost);
    const reports = this.arrivals.take(nowMs);
    if (this.metrics) for (const r of reports) this.metrics.report(r);
    return reports;
  }

  /** What this dispatcher sees of a variant (libs/policy/dispatch decides with it). */
  private view(v: Pick<VariantRecord, "name" | "hardware">, nowMs: number): VariantDispatchView {
    const load = this.cluster.load.get(v.name);
    const { active, overloaded, interfered, loading } = this.cluster.counts(v.name);
    return {
      active,
      overloaded,
      interfered,
      loading,
      arrivalsPerS: load?.arrivalsPerS ?? 0,
      queueLength: load?.queueLength ?? 0,
      loadAskedAtMs: this.pendingLoads.get(v.name),
      hardwareAvailable: this.cluster.hasLiveWorker(v.hardware, nowMs),
    };
  }

  /** The candidates of a model-specific query (libs/policy `modelQueryCandidates`). */
  candidates(model: ModelRecord, nowMs: number): RouteCandidate[] {
    return modelQueryCandidates(this.catalog.variantsByModel.get(model.name) ?? [], (v) => this.view(v, nowMs), nowMs);
  }

  /**
   * Asks a worker of the variant's hardware to load it (not on the query's path), unless a load asked
   * for earlier is still pending: by bin packing (INFaaS §4.2.3), the busiest one with free threads under
   * PACK_BELOW_UTILISATION (80%) busy, else the lowest-utilised (libs/policy `chooseWorker`).
   * `constraints` restrict the workers (a relief load: none over `maxUtilisation` busy, no
   * oversubscription).
   */
  requestLoad(variant: VariantRecord, reason: string, nowMs: number, constraints: Pick<LoadRequest, "maxUtilisation" | "allowOversubscription"> = { maxUtilisation: undefined, allowOversubscription: true }): LoadPlacement {
    if (isLoadPending(this.pendingLoads.get(variant.name), nowMs)) return { outcome: "placed", reason: `a load of ${variant.name} is already pending` };
    const placement = chooseWorker(
      this.cluster.workerViews(this.footprint),
      {
        variant: variant.name,
        hardware: variant.hardware,
        threads: variant.threads,
        memoryBytes: variant.profile?.memoryBytes ?? 0,
        ...(constraints.maxUtilisation !== undefined ? { maxUtilisation: constraints.maxUtilisation } : {}),
        allowOversubscription: constraints.allowOversubscription,
        packBelow: PACK_BELOW_UTILISATION,
      },
      nowMs,
    );
    if (!placement.worker) {
      this.log.warn({ variant: variant.name, reason: placement.reason }, "cannot place variant");
      return { outcome: "refused", reason: placement.reason };
    }
    const worker = placement.worker;
    this.pendingLoads.set(variant.name, nowMs);
    this.metrics?.loadRequested(variant.hardware);
    const command: ScaleCommand = { id: randomUUID(), action: "load", variant: variant.name, reason: `${reason}; ${placement.reason}`, atMs: nowMs };
    this.log.info({ decision: "load", variant: variant.name, worker, reason: command.reason }, "scale decision");
    this.bus.js.publish(subjects.decision("dispatcher", worker), JSON.stringify({ action: "load", worker, model: variant.model, variant: variant.name, reason: command.reason, atMs: nowMs })).catch((err) => {
      // The decision is a record for observers; the command below is what loads the variant.
      this.log.warn({ err, variant: variant.name, worker }, "could not publish the load decision");
    });
    this.bus.js.publish(subjects.scaleModel(worker), JSON.stringify(command)).catch((err) => {
      this.pendingLoads.delete(variant.name);
      this.log.error({ err, variant: variant.name, worker }, "could not publish load command");
    });
    return { outcome: "placed", reason: `on ${worker}: ${placement.reason}` };
  }

  /** What one instance of a variant holds on a worker (the catalog's figures), for placement's view. */
  private readonly footprint = (name: string): VariantFootprint | undefined => {
    const v = this.catalog.variants.get(name);
    return v ? footprintOf(v) : undefined;
  };

  private readonly rescuing = new Set<string>();

  /**
   * A variant's last instance went away while queries may still sit in its JetStream queue (they were
   * enqueued between the unload decision and the unload): take them out and route them again, so that
   * an accepted query is answered or refused, never left to time out. Runs on the state event that
   * makes the variant inactive everywhere. Each query is routed with the time read when it is
   * (the re-checks below span up to ~10 s).
   */
  async rescue(variantName: string): Promise<number> {
    const variant = this.catalog.variants.get(variantName);
    if (!variant || this.rescuing.has(variantName)) return 0;
    this.rescuing.add(variantName);
    let moved = 0;
    try {
      let consumer: Consumer;
      try {
        consumer = await this.bus.js.consumers.get(streams.queries.name, queueConsumer(variantName));
      } catch (err) {
        // No replica ever pulled from this variant's queue: nothing can be waiting in it.
        if ((err as Error).name !== "ConsumerNotFoundError") throw err;
        this.log.debug({ variant: variantName }, "no queue consumer for the unloaded variant: nothing to rescue");
        return 0;
      }
      // Queries a cut-off pull had in flight come back after the ack wait: look a few more times.
      for (let round = 0; round < 4; round++) {
        let stop = false;
        for (;;) {
          if ((this.cluster.instances.get(variantName)?.size ?? 0) > 0) return moved; // loaded again meanwhile
          const batch = await consumer.fetch({ max_messages: 256, expires: 1000 });
          let n = 0;
          for await (const m of batch) {
            n++;
            if (await this.reroute(m, variant, this.clock.now())) moved++;
            else stop = true;
            if (stop) break;
          }
          if (n === 0 || stop) break;
        }
        if (stop) break;
        const info = await consumer.info();
        if (info.num_ack_pending === 0 && info.num_pending === 0) break;
        await new Promise((r) => setTimeout(r, RESCUE_RECHECK_MS));
      }
      if (moved) this.log.info({ variant: variantName, moved }, "rescued queries from an unloaded variant's queue");
    } catch (err) {
      this.log.warn({ err, variant: variantName }, "rescue of an unloaded variant's queue failed");
    } finally {
      this.rescuing.delete(variantName);
    }
    return moved;
  }

  /**
   * Routes one queued message again; false when it should stay (its variant is the best and will
   * load). A message of several coalesced queries (queue-coalescer.ts) is routed query by query; if
   * one should stay, the whole message stays (those moved already are answered twice: at least once).
   */
  private async reroute(m: JsMsg, from: VariantRecord, nowMs: number): Promise<boolean> {
    const h = m.headers;
    if (!(Number(h?.get(headers.queries)) > 1)) {
      // A message id of its own (the headers carry the first publish's): the stream's duplicate window would drop it.
      const moved = await this.rerouteQuery(h, m.data, from, nowMs, (target) => `${m.seq}>${target}`);
      if (moved) m.ack();
      else m.nak();
      return moved;
    }
    let queries: CoalescedQuery[];
    try {
      queries = decodeCoalesced(m.data);
    } catch (err) {
      this.log.error({ err, variant: from.name, seq: m.seq }, "a coalesced queue message could not be read: dropped");
      m.ack();
      return true;
    }
    let moved = true;
    for (const [i, q] of queries.entries()) {
      if (!(await this.rerouteQuery(makeHeaders(q.headers), q.payload, from, nowMs, (target) => `${m.seq}.${i}>${target}`))) moved = false;
    }
    if (moved) m.ack();
    else m.nak();
    return moved;
  }

  /** Routes one query of a queued message again: true when it was moved (or answered with an error), false when it should stay. */
  private async rerouteQuery(h: MsgHdrs | undefined, data: Uint8Array, from: VariantRecord, nowMs: number, msgID: (target: string) => string): Promise<boolean> {
    const replyTo = h?.get(headers.replyTo) || undefined;
    const requestId = h?.get(headers.requestId) || undefined;
    try {
      const sloMs = Number(h?.get(headers.sloLatencyMs));
      let target: VariantRecord | undefined;
      if (sloMs > 0) {
        const maxCost = Number(h?.get(headers.sloMaxCost));
        target = this.chooseForApp(from.app, { latencyMs: sloMs, minAccuracy: Number(h?.get(headers.sloMinAccuracy)) || 0, maxCostPerQuery: maxCost > 0 ? maxCost : undefined }, nowMs);
      } else {
        const model = this.catalog.models.get(from.model);
        const decision = model ? routeModelQuery(this.candidates(model, nowMs)) : { kind: "none" as const, reason: "the model is gone" };
        if (decision.kind === "none") throw new ServeError(ErrorCode.noCapacity, `the variant serving this query was unloaded and nothing else can serve it: ${decision.reason}`);
        target = this.catalog.variants.get(decision.variant);
        if (target && decision.kind === "load") this.requestLoad(target, `queries left in the queue of unloaded ${from.name}`, nowMs);
      }
      if (!target || target.name === from.name) {
        if (target) this.requestLoad(target, `queries left in its queue`, nowMs);
        return false;
      }
      await this.bus.js.publish(subjects.queue(target.name), data, { headers: h, msgID: msgID(target.name) });
      return true;
    } catch (err) {
      replyError(this.bus.nc, replyTo, err, requestId);
      return true;
    }
  }

  /**
   * The error of a query whose variant no worker can load: `unavailable` when workers hold it but
   * report it Failed (their engine cannot serve: executor-inferentia's server is gone), else `no_capacity`.
   */
  private loadRefused(variant: VariantRecord, reason: string): ServeError {
    const failed = this.cluster.count(variant.name, "failed");
    if (failed === 0) return new ServeError(ErrorCode.noCapacity, `no ${variant.hardware} worker can load ${variant.name}: ${reason}`);
    return new ServeError(
      ErrorCode.unavailable,
      `${variant.name} cannot serve now: ${failed === 1 ? "the worker that holds it reports it" : `the ${failed} workers that hold it report it`} failed (its engine cannot serve), and no other ${variant.hardware} worker can load it: ${reason}`,
    );
  }

  /** A load finished or failed: forget that we asked. */
  settled(variant: string): void {
    this.pendingLoads.delete(variant);
  }

  async handleModelQuery(msg: Msg, modelName: string, charged = true): Promise<void> {
    const model = this.catalog.models.get(modelName) ?? (await this.catalog.getModel(modelName));
    if (!model) throw new ServeError(ErrorCode.unknownModel, `no model named '${modelName}'`);
    const now = this.clock.now();
    this.charge(msg, model.app, now, charged);
    const { payload, json } = normalisePayload(msg, model.inputs);
    const decision = routeModelQuery(this.candidates(model, now));
    if (decision.kind === "none") throw new ServeError(ErrorCode.noCapacity, `model '${modelName}' cannot be served now: ${decision.reason}`);
    const variant = this.catalog.variants.get(decision.variant) as VariantRecord;
    if (decision.kind === "load") {
      const load = this.requestLoad(variant, `query for ${modelName}`, now);
      if (load.outcome !== "placed") throw this.loadRefused(variant, load.reason);
    }
    this.fairShare(model.app, variant, now);
    this.arrivals.count(model.app, model.name, undefined);
    await this.enqueue(msg, variant, payload, json, now);
  }

  /**
   * A model-less query (INFaaS Algorithm 1): the caller names the app and its requirements; the
   * selection index picks the variant. Requirements come from the JSON body's `slo` or, for binary
   * queries, from the x-slo-* headers.
   */
  async handleAppQuery(msg: Msg, app: string, charged = true): Promise<void> {
    const models = this.catalog.modelsOfApp(app);
    const first = models[0];
    if (!first) throw new ServeError(ErrorCode.unknownApp, `no app named '${app}' (it has no models)`);
    const now = this.clock.now();
    this.charge(msg, app, now, charged);
    const { payload, json, body, inputElements } = normalisePayload(msg, first.inputs);
    const slo = json ? body?.["slo"] : {
      latency_ms: Number(msg.headers?.get(headers.sloLatencyMs)),
      min_accuracy: msg.headers?.get(headers.sloMinAccuracy) ? Number(msg.headers.get(headers.sloMinAccuracy)) : undefined,
      max_cost: msg.headers?.get(headers.sloMaxCost) ? Number(msg.headers.get(headers.sloMaxCost)) : undefined,
    };
    const parsed = sloSchema.safeParse(slo);
    if (!parsed.success) throw new ServeError(ErrorCode.badRequest, `a model-less query needs its requirements: slo.${describeZodError(parsed.error)}`);
    // The input's size picks the size class of variants profiled per class (libs/policy input-classes.ts).
    const req = { latencyMs: parsed.data.latency_ms, minAccuracy: parsed.data.min_accuracy, maxCostPerQuery: parsed.data.max_cost, ...(inputElements !== undefined ? { inputElements } : {}) };
    const variant = this.chooseForApp(app, req, now);
    this.fairShare(app, variant, now);
    this.arrivals.count(app, variant.model, req.latencyMs);
    await this.enqueue(msg, variant, payload, json, now, req);
  }

  /**
   * INFaaS Algorithm 1 and the load it asks for: libs/policy `selectForApp` decides (the simulator
   * runs the same function); this places the load it asks for and turns its outcome into the variant
   * or the error the caller gets.
   */
  private chooseForApp(app: string, req: QueryRequirements, nowMs: number): VariantRecord {
    const decision = selectForApp(this.selection.index, app, req, nowMs, (v, load) => {
      const record = this.catalog.variants.get(v.name);
      if (!record) return { outcome: "refused", reason: `${v.name} is not in the catalog` };
      return this.requestLoad(record, load.reason, load.nowMs, load);
    });
    if (decision.kind === "no-capacity") throw new ServeError(ErrorCode.noCapacity, decision.reason);
    if (decision.kind === "infeasible") {
      this.arrivals.countInfeasible(app);
      const c = decision.closest;
      throw new ServeError(
        ErrorCode.infeasible,
        c
          ? `no variant of app '${app}' meets the requirements (${decision.reason}); the closest is ${c.variant}: accuracy ${c.accuracy}, latency ${c.latency_ms} ms, $${c.cost_per_query.toPrecision(3)} per query`
          : `no variant of app '${app}' meets the requirements: ${decision.reason}`,
        { closest: c, requested: { latency_ms: req.latencyMs, min_accuracy: req.minAccuracy, max_cost: req.maxCostPerQuery } },
      );
    }
    const variant = this.catalog.variants.get(decision.variant.name);
    if (!variant) throw new ServeError(ErrorCode.internal, `selected variant ${decision.variant.name} is not in the catalog`);
    return variant;
  }

  async handleVariantQuery(msg: Msg, variantName: string): Promise<void> {
    // From memory when known (no await on the query path), else from Redis.
    const variant = this.catalog.variants.get(variantName) ?? (await this.catalog.getVariant(variantName));
    if (!variant) throw new ServeError(ErrorCode.unknownVariant, `no variant named '${variantName}'`);
    const model = (this.catalog.models.get(variant.model) ?? (await this.catalog.getModel(variant.model))) as ModelRecord;
    const now = this.clock.now();
    this.charge(msg, model.app, now, true);
    const { payload, json } = normalisePayload(msg, model.inputs);
    const c = routeCandidate(variant, this.view(variant, now), now);
    if (c.activeInstances === 0 && c.loadingInstances === 0) {
      const load = this.requestLoad(variant, `query for variant ${variantName}`, now);
      if (load.outcome !== "placed") throw this.loadRefused(variant, load.reason);
    }
    this.fairShare(model.app, variant, now);
    this.arrivals.count(model.app, model.name, undefined);
    await this.enqueue(msg, variant, payload, json, now);
  }

  /**
   * Puts the query on the variant's JetStream queue; the executor answers the caller directly. With
   * overflow on, a query with a deadline (x-deadline-ms, or a model-less query's SLO counted from when
   * it was received) whose local completion estimate exceeds it goes to the function provider instead
   * (OverflowPath); a query without one is always queued.
   */
  private async enqueue(msg: Msg, variant: VariantRecord, payload: Uint8Array, json: boolean, nowMs: number, slo?: { latencyMs: number; minAccuracy: number; maxCostPerQuery: number | undefined }): Promise<void> {
    if (!msg.reply) throw new ServeError(ErrorCode.badRequest, "queries must be sent as requests (with a reply subject)");
    // Each header read once (a MsgHdrs look-up allocates: this is the query path).
    const h = msg.headers;
    const given = Number(h?.get(headers.deadline));
    const deadline = given > 0 ? given : nowMs + DEFAULT_TIMEOUT_MS;
    const accept = h?.get(headers.accept) || (json ? "json" : "wire");
    const receivedAt = Number(h?.get(headers.receivedAt)) || nowMs;
    const requestId = h?.get(headers.requestId) || undefined;
    let decision: OverflowDecision | undefined;
    if (this.overflow) {
      const held = Math.min(given > 0 ? given : Infinity, slo ? receivedAt + slo.latencyMs : Infinity);
      decision = Number.isFinite(held) ? this.overflow.decide(variant, nowMs, held, this.pendingLoads.get(variant.name)) : undefined;
      if (decision?.action === "overflow") {
        this.metrics?.routed(variant, "overflow");
        await this.overflow.serve({ variant, payload, json: accept === "json", replyTo: msg.reply, requestId, receivedAtMs: receivedAt, deadlineMs: deadline, decision });
        return;
      }
      this.overflow.queued(variant, nowMs);
    }
    try {
      // Tried again while the stream has no leader (a NATS node lost), until the deadline; the same
      // message id on every attempt keeps one copy. The caller's inbox makes it unique per query even
      // when a caller reuses a request id (publish-retry.ts).
      // Small queries pending for the same variant share a message (queue-coalescer.ts).
      this.queue ??= new QueueCoalescer(new AckedPublisher(this.bus.nc), this.clock, this.coalesce);
      const attempts = await this.queue.publish(subjects.queue(variant.name), variant.maxBatch, payload, {
        msgID: `${requestId ?? "-"}@${msg.reply}`,
        deadlineMs: deadline,
        onRetry: (err, attempt, delayMs) => this.log.debug({ requestId, variant: variant.name, attempt, delayMs, err: err.message }, "queue publish failed; trying again"),
        fields: {
          [headers.requestId]: requestId,
          [headers.replyTo]: msg.reply,
          [headers.deadline]: deadline,
          [headers.accept]: accept,
          [headers.receivedAt]: receivedAt,
          [headers.enqueuedAt]: this.clock.now(),
          [headers.sloLatencyMs]: slo?.latencyMs,
          [headers.sloMinAccuracy]: slo?.minAccuracy,
          [headers.sloMaxCost]: slo?.maxCostPerQuery,
          // A pipeline stage may run late (the executor does not shed it): passed through.
          [headers.lateOk]: h?.get(headers.lateOk) || undefined,
        },
      });
      if (attempts > 1) this.log.info({ requestId, variant: variant.name, attempts }, "query queued after retrying its publish");
    } catch (err) {
      const gaveUp = err as PublishGaveUp;
      if (gaveUp.outOfTime) throw new ServeError(ErrorCode.unavailable, `the queue of ${variant.name} took no query before the deadline: ${gaveUp.message}`);
      throw new ServeError(ErrorCode.noCapacity, `the queue of ${variant.name} refused the query: ${gaveUp.message}`);
    }
    this.metrics?.routed(variant, "queue");
    // One line per query at debug level (checked first: this is the query path).
    if (this.log.isLevelEnabled("debug")) this.log.debug({ requestId, variant: variant.name, slo, decidedAtMs: nowMs, overflow: decision?.reason }, "query routed");
  }

  /**
   * Entry point for `infer.app.*`, `infer.model.*` and `infer.variant.*` messages, and for the
   * `infer.app.*.admitted` and `infer.model.*.admitted` of queries a frontend admitted under their
   * app's quota (not charged again); never throws.
   */
  handle(msg: Msg): void {
    const [, kind, name, admitted] = msg.subject.split(".");
    const charged = admitted !== "admitted";
    const work = kind === "app" ? this.handleAppQuery(msg, name ?? "", charged) : kind === "model" ? this.handleModelQuery(msg, name ?? "", charged) : this.handleVariantQuery(msg, name ?? "");
    work.catch((err) => {
      const requestId = msg.headers?.get(headers.requestId) || undefined;
      if (!(err instanceof ServeError) || err.code === ErrorCode.internal) this.log.error({ err, requestId }, "dispatch failed");
      else this.log.debug({ requestId, code: err.code, message: err.message }, "query refused");
      this.metrics?.refusedQuery(kind ?? "", err instanceof ServeError ? err.code : ErrorCode.internal);
      replyError(this.bus.nc, msg.reply, err, requestId);
    });
  }
}
