import { ErrorCode, ServeError, decodeTensors, type Clock, type ForecastMessage, type VariantRecord, type WorkerReport } from "@sloserve/contracts";
import { replyError, replyInference, toServeError, type Bus, type Logger } from "@sloserve/bus";
import type { Catalog } from "@sloserve/store";
import {
  PREWARM_DEFAULTS,
  decideOverflow,
  drainBacklog,
  isLoadPending,
  localFunctionRoom,
  overflowInputFor,
  prewarmForForecast,
  prewarmForLostCapacity,
  profiledLatencyAt,
  serviceRateOf,
  observedOverflowCapacity,
  variantOverflowCapacity,
  type BacklogEstimate,
  type OverflowCapacity,
  type LostLoad,
  type OverflowDecision,
  type PrewarmConfig,
  type PrewarmDecision,
} from "@sloserve/policy";
import type { FunctionProvider } from "@sloserve/providers";
import type { ClusterView } from "./cluster.js";
import type { ArrivalCounter } from "./arrivals.js";

/** Error codes a function provider gives that blame the query, not the function path: the caller gets them as they are. */
const PASSED_THROUGH: ReadonlySet<ErrorCode> = new Set<ErrorCode>([
  ErrorCode.badRequest,
  ErrorCode.malformedJson,
  ErrorCode.payloadTooLarge,
  ErrorCode.unknownInput,
  ErrorCode.missingInput,
  ErrorCode.invalidShape,
  ErrorCode.invalidDatatype,
  ErrorCode.invalidDataLength,
  ErrorCode.invalidData,
  ErrorCode.deadlineExceeded,
]);

/** One query the dispatcher sends to the function provider. */
export interface OverflowQuery {
  variant: VariantRecord;
  /** Inputs, binary tensor encoding. */
  payload: Uint8Array;
  /** Whether the caller wants Open Inference Protocol JSON back (else the binary encoding). */
  json: boolean;
  replyTo: string;
  requestId: string | undefined;
  receivedAtMs: number;
  /** The query's own deadline (x-deadline-ms, or the default), given to the function. */
  deadlineMs: number;
  /** Why it overflowed. */
  decision: OverflowDecision;
}

export interface OverflowTotals {
  /** Queries sent to the function provider. */
  overflowed: number;
  /** Of them, answered by a function. */
  served: number;
  /** Of them, failed (answered with an error). */
  failed: number;
  costDollars: number;
  coldStarts: number;
}

/**
 * The dispatcher's serverless overflow (MArk §4.1, §4.5; DESIGN §3 "Serverless overflow"): decides
 * per query with libs/policy `overflowInputFor` + `decideOverflow` from the dispatcher's live view,
 * sends the queries that would miss to the function provider (in main.ts: behind a circuit breaker,
 * with a fallback provider) and answers their callers itself, and pre-warms functions by libs/policy's
 * rule when capacity is lost or a surge is forecast. The shell keeps one piece of state per variant:
 * its backlog estimate (libs/policy `drainBacklog`).
 */
export class OverflowPath {
  private readonly backlog = new Map<string, BacklogEstimate>();
  readonly totals: OverflowTotals = { overflowed: 0, served: 0, failed: 0, costDollars: 0, coldStarts: 0 };
  /** Invocations running now. */
  private inFlight = 0;

  constructor(
    readonly provider: FunctionProvider,
    private readonly bus: Bus,
    private readonly cluster: ClusterView,
    private readonly catalog: Catalog,
    private readonly arrivals: ArrivalCounter,
    private readonly log: Logger,
    private readonly clock: Clock,
    private readonly prewarmConfig: PrewarmConfig = PREWARM_DEFAULTS,
    /**
     * The host the function containers run on, when they share its cores with its workers (the local
     * pool with the native engine): a query overflows only onto a core that no worker reporting this
     * host offers and no other invocation holds (libs/policy `localFunctionRoom`); else it stays on
     * the local path. @default none (functions bring their own cores: Lambda)
     */
    private readonly host?: { name: string; cores: number },
  ) {}

  /**
   * Local or overflow for a query on `variant` held to `deadlineMs` (libs/policy decides). Undefined
   * when the variant has no profile (no estimate: the query is served locally). Capacity: the
   * variant's serving instances (state events, instance counts from the 1 s worker reports), per
   * worker slowed down by what its latest report observed (`observedOverflowCapacity`); with none, the
   * instances loading or a load this dispatcher asked for, up after the profiled load latency.
   * Queue ahead: the larger of the workers' reported queues (≤ 1 s old) and this dispatcher's backlog
   * estimate (its own enqueues drained at μ*).
   */
  decide(variant: VariantRecord, nowMs: number, deadlineMs: number, loadAskedAtMs: number | undefined): OverflowDecision | undefined {
    const profiled = variantOverflowCapacity(variant, 1);
    if (!profiled) return undefined;
    const serving = this.serving(variant);
    const backlog = this.drained(variant.name, serviceRateOf(serving), nowMs);
    const loading = Math.max(this.cluster.count(variant.name, "loading"), isLoadPending(loadAskedAtMs, nowMs) ? 1 : 0);
    const input = overflowInputFor({
      serving,
      ...(loading > 0 ? { starting: { capacity: [{ ...profiled, instances: loading }], inMs: variant.profile?.loadLatencyMs ?? 0 } } : {}),
      queueAhead: Math.max(this.cluster.load.get(variant.name)?.queueLength ?? 0, backlog.queries),
      nowMs,
      deadlineMs,
    });
    const decision = decideOverflow(input);
    if (decision.action !== "overflow" || !this.host) return decision;
    const threads: number[] = [];
    for (const { report } of this.cluster.workers.values()) if (report.host === this.host.name) threads.push(report.threads);
    const room = localFunctionRoom({ cores: this.host.cores, workerThreads: threads, inFlight: this.inFlight });
    return room.allowed ? decision : { action: "local", estimatedMs: decision.estimatedMs, reason: `${decision.reason}; kept local: a function would take ${room.reason}` };
  }

  /** A query (with a deadline or not) went to the variant's local queue: one more ahead of the next. */
  queued(variant: VariantRecord, nowMs: number): void {
    if (!variant.profile) return;
    const b = this.drained(variant.name, serviceRateOf(this.serving(variant)), nowMs);
    b.queries++;
  }

  /** The variant's serving instances, one group per worker, as they run now (libs/policy `observedOverflowCapacity`). */
  private serving(variant: VariantRecord): OverflowCapacity[] {
    const out: OverflowCapacity[] = [];
    for (const s of this.cluster.servingOn(variant.name)) {
      const c = observedOverflowCapacity(variant, s.instances, s.metrics);
      if (c) out.push(c);
    }
    return out;
  }

  /** The variant's backlog estimate brought to now (libs/policy `drainBacklog`), as stored. */
  private drained(variant: string, serviceRateQps: number, nowMs: number): BacklogEstimate {
    const b = drainBacklog(this.backlog.get(variant), nowMs, serviceRateQps);
    this.backlog.set(variant, b);
    return b;
  }

  /**
   * Runs the query on the function provider and answers the caller: the outputs in the encoding it
   * asked for, `served_by.hardware = "function"`, the invocation's cost; or, when the function path
   * fails (its breakers open, every provider down), `overflow_unavailable` (503) saying why: the query
   * is not put on a queue it is known to miss in. Errors that blame the query (its inputs, its
   * deadline) reach the caller as they are. Never throws.
   */
  async serve(q: OverflowQuery): Promise<void> {
    this.totals.overflowed++;
    this.inFlight++;
    const app = q.variant.app;
    try {
      const result = await this.provider.invoke({ variant: q.variant.name, object: q.variant.object, payload: q.payload, deadlineMs: q.deadlineMs, ...(q.requestId ? { requestId: q.requestId } : {}) });
      const finished = this.clock.now();
      const decoded = decodeTensors<{ id?: string; served_by?: Record<string, unknown> }>(result.payload);
      const id = typeof decoded.meta.id === "string" ? decoded.meta.id : q.requestId;
      const extra = {
        model_name: q.variant.model,
        model_version: "1",
        id,
        served_by: {
          model: q.variant.model,
          variant: q.variant.name,
          hardware: "function",
          accuracy: q.variant.accuracy,
          worker: this.provider.name,
          batch_size: 1,
          cold_start: result.coldStart,
          memory_mb: result.memoryMb,
          billed_ms: result.billedMs,
        },
        timing_ms: { queue: 0, batch_wait: 0, inference: Math.round(result.durationMs * 1000) / 1000, total: finished - q.receivedAtMs },
        cost_dollars: result.costDollars,
      };
      replyInference(this.bus.nc, q.replyTo, decoded.tensors, extra, { json: q.json, requestId: q.requestId });
      this.totals.served++;
      this.totals.costDollars += result.costDollars;
      if (result.coldStart) this.totals.coldStarts++;
      this.arrivals.countOverflow(app, { ok: true, costDollars: result.costDollars });
      if (this.log.isLevelEnabled("debug")) this.log.debug({ requestId: q.requestId, variant: q.variant.name, reason: q.decision.reason, coldStart: result.coldStart, durationMs: result.durationMs, costDollars: result.costDollars }, "query overflowed");
    } catch (err) {
      this.totals.failed++;
      this.arrivals.countOverflow(app, { ok: false, costDollars: 0 });
      const cause = toServeError(err);
      const answer = PASSED_THROUGH.has(cause.code)
        ? cause
        : new ServeError(
            ErrorCode.overflowUnavailable,
            `query for ${q.variant.name} would miss its deadline on the local path (${q.decision.reason}) and the function path failed: ${cause.message}`,
          );
      this.log.warn({ err, requestId: q.requestId, variant: q.variant.name, code: answer.code }, "overflow failed");
      replyError(this.bus.nc, q.replyTo, answer, q.requestId);
    } finally {
      this.inFlight--;
    }
  }

  /**
   * Capacity lost (workers whose heartbeat disappeared, a spot notice): pre-warm for the load they
   * carried. Resolves with the decision once the pre-warm is done (a failed one is logged).
   */
  async capacityLost(reports: readonly WorkerReport[]): Promise<PrewarmDecision> {
    const lost: LostLoad[] = [];
    for (const r of reports) {
      for (const v of r.variants) {
        const latency = this.batchOneLatencyMs(this.catalog.variants.get(v.variant));
        if (latency !== undefined) lost.push({ variant: v.variant, arrivalsPerS: v.arrivals, functionLatencyMs: latency });
      }
    }
    const decision = prewarmForLostCapacity(lost, this.prewarmConfig);
    await this.prewarm(decision, { cause: "capacity lost", workers: reports.map((r) => r.worker) });
    return decision;
  }

  /**
   * A forecast (`forecast.<app>`): pre-warm when its first value is well above the current rate. Local
   * capacity: Σ peak QPS of the app's serving instances; the function's latency: the largest batch-1
   * latency among them, or with none serving, the smallest among the app's profiled variants (the
   * fastest a load could bring). Resolves once the pre-warm is done (a failed one is logged).
   */
  async forecast(message: ForecastMessage): Promise<PrewarmDecision | undefined> {
    const next = message.values[0];
    if (next === undefined) return undefined;
    let capacityQps = 0;
    let serving: { variant: string; latency: number } | undefined;
    let fastest: { variant: string; latency: number } | undefined;
    for (const model of this.catalog.modelsOfApp(message.app)) {
      for (const v of this.catalog.variantsByModel.get(model.name) ?? []) {
        const latency = this.batchOneLatencyMs(v);
        if (latency === undefined) continue;
        if (!fastest || latency < fastest.latency) fastest = { variant: v.name, latency };
        const instances = this.cluster.servingInstances(v.name);
        if (instances === 0) continue;
        capacityQps += instances * (v.profile?.peakQps ?? 0);
        if (!serving || latency > serving.latency) serving = { variant: v.name, latency };
      }
    }
    const chosen = serving ?? fastest;
    if (!chosen) {
      this.log.debug({ app: message.app }, "forecast: no profiled variant of the app, nothing to pre-warm for");
      return undefined;
    }
    const decision = prewarmForForecast({ nextQps: next, currentQps: message.observed, localCapacityQps: capacityQps, functionLatencyMs: chosen.latency, variant: chosen.variant }, this.prewarmConfig);
    await this.prewarm(decision, { cause: "forecast", app: message.app });
    return decision;
  }

  private batchOneLatencyMs(v: VariantRecord | undefined): number | undefined {
    const latency = v?.profile?.latencyMs;
    return latency && Object.keys(latency).length > 0 ? profiledLatencyAt(latency, 1) : undefined;
  }

  private async prewarm(decision: PrewarmDecision, context: Record<string, unknown>): Promise<void> {
    if (decision.containers <= 0) {
      this.log.debug({ ...context, reason: decision.reason }, "no pre-warm");
      return;
    }
    const object = decision.variant !== undefined ? this.catalog.variants.get(decision.variant)?.object : undefined;
    this.log.info({ ...context, decision: "prewarm", containers: decision.containers, variant: decision.variant, provider: this.provider.name, reason: decision.reason }, "pre-warming functions");
    try {
      await this.provider.prewarm(decision.containers, object !== undefined ? { object } : undefined);
    } catch (err) {
      this.log.warn({ err, ...context, containers: decision.containers, provider: this.provider.name }, "pre-warming functions failed");
    }
  }
}
