import {
  contentTypes,
  decodeTensors,
  describeZodError,
  encodeTensors,
  headers,
  pipelineRecordSchema,
  pipelineReportSchema,
  subjects,
  tensorRows,
  type Clock,
  type PipelineDecision,
  type PipelinePlanStatus,
  type PipelineRecord,
  type PipelineReport,
  type PipelineStagePlan,
  type Tensor,
} from "@sloserve/contracts";
import { errorFromReply, makeHeaders, type Bus, type Logger } from "@sloserve/bus";
import type { Catalog, MetadataStore } from "@sloserve/store";
import {
  createRng,
  initialTunerState,
  pipelineFloors,
  pipelineInputSignature,
  pipelineSloCheck,
  planDeployment,
  planningModel,
  planStatus,
  spreadArrivals,
  tunerStep,
  withReplicas,
  type ArrivalWindow,
  type Deployment,
  type PipelineControlConfig,
  type StageCounts,
  type TunerOptions,
  type TunerState,
} from "@sloserve/policy";
import { arrivalTimes, binCounts, gammaArrivals, traceArrivals, traceRates } from "@sloserve/policy";
import type { ModelAutoscalerController } from "./controller.js";

/**
 * The pipeline controller (InferLine §4-5 live; DESIGN §3 "Pipelines"): the stateful shell around
 * libs/policy's Planner (planner.ts, through pipeline-control.ts `planDeployment`) and Tuner
 * (tuner.ts `tunerStep`, the function the simulator's inferline scenarios call). Per registered
 * pipeline:
 *
 * - **At registration** (`registry.event.pipeline.registered.<name>`, and every pipeline in Redis at
 *   start): a sample run measures the scale factors — up to `sampleQueries` rows of a model stage's
 *   validation set sent as pipeline queries marked `x-profiling` (the dispatcher leaves them out of the
 *   pipeline's reports), counting the stages and items each answer visited —, then the Planner plans on
 *   a Gamma trace at the spec's `planning.rate_qps` (CV `planning.cv`; 1 qps without it).
 * - **Every `planPeriodMs`** (5 min): the Planner again, on the last `traceSeconds` of live arrivals
 *   (per-second counts from `metrics.pipeline.<name>`, made a trace with Gamma gaps of the spec's CV
 *   inside each second) once they hold `minLiveQueries`, with the live scale factors (the reports'
 *   visits and items per stage) once `minQueriesForShares` queries were counted.
 * - **Every tick** (1 s): the Tuner on the arrivals since the plan: the reports' per-second arrival
 *   counts (by the second each query arrived in, so a stalled stack does not bunch them), each second's
 *   count spread evenly over it — the resolution at which the plan's envelope is taken too. Scale-ups
 *   at once, scale-downs after its quiet period.
 *
 * A plan or a Tuner change becomes the pipeline's floors on the model autoscaler
 * (ModelAutoscalerController.setFloors → libs/policy model-actions step 3b): per stage, its variant
 * (hardware, threads, max batch) with its replica count, placed by `chooseWorker` through
 * `scale.model.<worker>` commands and never removed by the per-worker INFaaS autoscaler; instances
 * above a lowered floor are the autoscaler's to remove by its load rule. Every decision goes out on
 * `decision.pipeline.<name>` with its reason, and the current plan is kept in Redis for
 * `GET /v1/pipelines/{name}` (an infeasible SLO says which stage cannot fit). Time comes from the
 * injected clock; a failure is logged and the other pipelines go on.
 */

export interface PipelineControllerOptions {
  /** Re-plan from live arrivals this often, ms. @default 300_000 */
  planPeriodMs?: number;
  /** Length of the planning trace, s (declared: a Gamma trace this long; live: the last this many seconds). @default 300 */
  traceSeconds?: number;
  /** Pipeline queries of the sample run at registration (0: none). @default 100 */
  sampleQueries?: number;
  /** Planning rate of a spec without `planning.rate_qps`, qps. @default 1 */
  defaultRateQps?: number;
  /** A live trace replaces the declared one once it holds this many queries. @default 100 */
  minLiveQueries?: number;
  tuner?: TunerOptions;
  control?: Partial<PipelineControlConfig>;
  /** Seed of the planning traces and route draws. @default 1 */
  seed?: number;
}

const DEFAULTS = { planPeriodMs: 300_000, traceSeconds: 300, sampleQueries: 100, defaultRateQps: 1, minLiveQueries: 100, seed: 1 };

/** The Tuner looks back 60 s; windows are kept this much longer for the live planning trace's sake. */
const TUNER_LOOKBACK_MS = 65_000;

interface Managed {
  record: PipelineRecord;
  /** Arrivals per second (its start, epoch ms), summed over the dispatchers' reports. */
  perSecond: Map<number, number>;
  /** Report windows with answered queries, from dispatchers whose reports carry no arrivals. */
  windows: ArrivalWindow[];
  /** Counted from reports since registration. */
  live: { queries: number; visits: Record<string, number>; items: Record<string, number> };
  sample: StageCounts | undefined;
  /** A sample run or a plan in progress: the tick leaves the pipeline alone. */
  busy: boolean;
  deployment: Deployment | undefined;
  plannedAtMs: number;
  tuner: TunerState | undefined;
  /** The stages as deployed now (the plan with the Tuner's replicas). */
  stages: Record<string, PipelineStagePlan>;
  status: PipelinePlanStatus | undefined;
  lastReason: string;
}

export class PipelineController {
  private readonly pipelines = new Map<string, Managed>();
  private readonly o: typeof DEFAULTS & PipelineControllerOptions;
  private planCount = 0;

  constructor(
    private readonly bus: Bus,
    private readonly store: MetadataStore,
    private readonly catalog: Catalog,
    private readonly models: ModelAutoscalerController,
    private readonly log: Logger,
    private readonly clock: Clock,
    options: PipelineControllerOptions = {},
  ) {
    this.o = { ...DEFAULTS, ...options };
  }

  /** Subscribes to pipeline registry events and reports. Malformed messages are logged and skipped. */
  subscribe(): Array<ReturnType<Bus["nc"]["subscribe"]>> {
    const { nc } = this.bus;
    return [
      nc.subscribe(subjects.pipelineEvents, {
        callback: (_err, msg) => {
          try {
            const [, , , kind, name] = msg.subject.split(".");
            if (kind === "registered") this.registered(pipelineRecordSchema.parse(msg.json()));
            else if (kind === "unregistered" && name) this.unregistered(name);
          } catch (err) {
            this.log.warn({ err, subject: msg.subject }, "ignoring a malformed pipeline event");
          }
        },
      }),
      nc.subscribe(subjects.pipelineMetricsAll, {
        callback: (_err, msg) => {
          try {
            const parsed = pipelineReportSchema.safeParse(msg.json());
            if (!parsed.success) throw new Error(describeZodError(parsed.error));
            this.applyReport(parsed.data);
          } catch (err) {
            this.log.warn({ err, subject: msg.subject }, "ignoring a malformed pipeline report");
          }
        },
      }),
    ];
  }

  /** Takes on every pipeline in Redis (a restart): each as if just registered. */
  async load(): Promise<void> {
    for (const r of await this.store.listPipelines()) this.registered(r);
  }

  /** The pipeline's current state, for tests and logs. */
  view(name: string): { status: PipelinePlanStatus | undefined; stages: Record<string, PipelineStagePlan>; busy: boolean } | undefined {
    const m = this.pipelines.get(name);
    return m && { status: m.status, stages: m.stages, busy: m.busy };
  }

  registered(record: PipelineRecord): void {
    const known = this.pipelines.get(record.spec.name);
    if (known && known.record.registeredAtMs === record.registeredAtMs) return;
    const m: Managed = {
      record, perSecond: new Map(), windows: [], live: { queries: 0, visits: {}, items: {} }, sample: undefined, busy: true, deployment: undefined,
      plannedAtMs: 0, tuner: undefined, stages: {}, status: undefined, lastReason: "",
    };
    this.pipelines.set(record.spec.name, m);
    this.models.setFloors(record.spec.name, []);
    void this.sampleThenPlan(m).catch((err: unknown) => this.log.error({ err, pipeline: record.spec.name }, "pipeline sample run or plan failed"));
  }

  unregistered(name: string): void {
    if (!this.pipelines.delete(name)) return;
    this.models.setFloors(name, []);
    const atMs = this.clock.now();
    void this.publish({ pipeline: name, source: "planner", decision: "removed", reason: "pipeline unregistered: its floors are lifted", stages: {}, previous: {}, atMs })
      .then(() => this.store.deletePipelinePlan(name))
      .catch((err: unknown) => this.log.error({ err, pipeline: name }, "could not retire the pipeline's plan"));
  }

  applyReport(r: PipelineReport): void {
    const m = this.pipelines.get(r.pipeline);
    if (!m) return;
    if (r.arrivals) {
      for (const [second, n] of Object.entries(r.arrivals)) m.perSecond.set(Number(second), (m.perSecond.get(Number(second)) ?? 0) + n);
    } else if (r.queries > 0) {
      m.windows.push({ endMs: r.atMs, ms: Math.max(1, r.windowMs), count: r.queries });
    }
    const keepMs = Math.max(this.o.traceSeconds * 1000, TUNER_LOOKBACK_MS) + 5000;
    while (m.windows.length > 0 && m.windows[0]!.endMs < r.atMs - keepMs) m.windows.shift();
    for (const second of m.perSecond.keys()) if (second < r.atMs - keepMs) m.perSecond.delete(second);
    m.live.queries += r.queries;
    for (const [s, n] of Object.entries(r.visits)) {
      m.live.visits[s] = (m.live.visits[s] ?? 0) + n;
      m.live.items[s] = (m.live.items[s] ?? 0) + (r.items?.[s] ?? n);
    }
  }

  /** One tick: plan what needs a plan, tune the others. A failure is logged; the other pipelines go on. */
  async tick(): Promise<void> {
    const nowMs = this.clock.now();
    for (const m of [...this.pipelines.values()]) {
      if (m.busy) continue;
      const name = m.record.spec.name;
      try {
        if (!m.deployment) await this.plan(m, nowMs, "retry");
        else if (nowMs - m.plannedAtMs >= this.o.planPeriodMs) await this.plan(m, nowMs, "period");
        else this.tune(m, nowMs);
      } catch (err) {
        this.log.error({ err, pipeline: name }, "pipeline controller tick failed");
      }
    }
  }

  private async sampleThenPlan(m: Managed): Promise<void> {
    try {
      m.sample = await this.sampleRun(m.record);
      if (this.pipelines.get(m.record.spec.name) !== m) return; // unregistered meanwhile
      await this.plan(m, this.clock.now(), "registration");
    } finally {
      m.busy = false;
    }
  }

  /** Rows of a model stage's validation set that carry every pipeline input, or undefined. */
  private async sampleInputs(record: PipelineRecord): Promise<{ tensors: Tensor[]; rows: number } | undefined> {
    const spec = record.spec;
    const signature = pipelineInputSignature(spec, { model: (n) => this.catalog.signature(n), app: (a) => this.catalog.appSignature(a) });
    for (const s of spec.stages) {
      if (s.model === undefined) continue;
      const model = this.catalog.models.get(s.model) ?? (await this.catalog.getModel(s.model));
      if (!model?.validationObject) continue;
      const blob = await this.bus.models.getBlob(model.validationObject);
      if (!blob) continue;
      const { tensors } = decodeTensors(blob);
      const chosen = signature.map((spec) => tensors.find((t) => t.name === spec.name && t.datatype === spec.datatype));
      if (chosen.some((t) => t === undefined)) continue;
      const rows = Math.min(...chosen.map((t) => t!.shape[0] ?? 0));
      if (rows > 0) return { tensors: chosen as Tensor[], rows };
    }
    return undefined;
  }

  /**
   * InferLine's profiler run for the scale factors (§4.1): sample queries through the live pipeline,
   * counting the stages each visited and the items that reached them. Undefined without a sample.
   */
  private async sampleRun(record: PipelineRecord): Promise<StageCounts | undefined> {
    const name = record.spec.name;
    if (this.o.sampleQueries <= 0) return undefined;
    const inputs = await this.sampleInputs(record);
    if (!inputs) {
      this.log.info({ pipeline: name }, "no validation set carries the pipeline's inputs: the spec's expected shares stand until live counts replace them");
      return undefined;
    }
    const counts = { queries: 0, visits: {} as Record<string, number>, items: {} as Record<string, number> };
    let errors = 0;
    let lastError = "";
    for (let i = 0; i < this.o.sampleQueries && this.pipelines.has(name); i++) {
      const row = i % inputs.rows;
      try {
        const reply = await this.bus.nc.request(subjects.inferPipeline(name), encodeTensors(inputs.tensors.map((t) => tensorRows(t, row, 1))), {
          timeout: 30_000,
          headers: makeHeaders({ [headers.contentType]: contentTypes.wire, [headers.profiling]: 1, [headers.requestId]: `sample-${name}-${i}` }),
        });
        const failure = errorFromReply(reply.headers, reply.data);
        if (failure) throw failure;
        const { meta } = decodeTensors<{ visits?: Record<string, number> }>(reply.data);
        counts.queries++;
        for (const [s, n] of Object.entries(meta.visits ?? {})) {
          if (n <= 0) continue;
          counts.visits[s] = (counts.visits[s] ?? 0) + 1;
          counts.items[s] = (counts.items[s] ?? 0) + n;
        }
      } catch (err) {
        errors++;
        lastError = (err as Error).message;
        if (errors > this.o.sampleQueries / 2) break;
      }
    }
    if (errors > 0) this.log.warn({ pipeline: name, errors, lastError }, "sample queries failed");
    this.log.info({ pipeline: name, queries: counts.queries, visits: counts.visits, items: counts.items }, "pipeline sample run: scale factors measured");
    return counts.queries > 0 ? counts : undefined;
  }

  /**
   * The arrivals as windows ending after `fromMs`, up to `nowMs`: the seconds the reports counted (a
   * second only once it has ended), and the answered-query windows of dispatchers without arrival counts.
   */
  private arrivalWindows(m: Managed, fromMs: number, nowMs: number): ArrivalWindow[] {
    const out: ArrivalWindow[] = [];
    for (const [second, count] of m.perSecond) if (second + 1000 > fromMs && second + 1000 <= nowMs && count > 0) out.push({ endMs: second + 1000, ms: 1000, count });
    for (const w of m.windows) if (w.endMs > fromMs) out.push(w);
    return out.sort((a, b) => a.endMs - b.endMs);
  }

  /** The planning trace: live when there is enough of it (and a plan to replace), else the declared Gamma trace. */
  private planningTrace(m: Managed, nowMs: number, why: string): { arrivalsMs: Float64Array; trace: NonNullable<PipelinePlanStatus["trace"]> } {
    const spec = m.record.spec;
    const cv = spec.planning?.cv ?? 1;
    const seed = this.o.seed * 7919 + this.planCount++;
    const fromMs = nowMs - this.o.traceSeconds * 1000;
    const recent = this.arrivalWindows(m, Math.max(fromMs, m.plannedAtMs), nowMs);
    const liveQueries = recent.reduce((s, w) => s + w.count, 0);
    if (why === "period" && liveQueries >= this.o.minLiveQueries) {
      const seconds = Math.max(1, Math.ceil((nowMs - Math.max(fromMs, Math.min(...recent.map((w) => w.endMs - w.ms)))) / 1000));
      const start = nowMs - seconds * 1000;
      const counts = binCounts(spreadArrivals(recent).map((t) => t - start), 1000, seconds * 1000);
      const arrivalsMs = Float64Array.from(arrivalTimes(traceArrivals(traceRates(counts, { binMs: 1000 }), cv), createRng(seed)));
      return { arrivalsMs, trace: { source: "live", qps: liveQueries / seconds, cv, seconds } };
    }
    const qps = spec.planning?.rate_qps ?? this.o.defaultRateQps;
    const arrivalsMs = Float64Array.from(arrivalTimes(gammaArrivals(qps, cv, this.o.traceSeconds), createRng(seed)));
    return { arrivalsMs, trace: { source: "declared", qps, cv, seconds: this.o.traceSeconds } };
  }

  /** The Planner, and what follows from its answer: floors, a decision, the stored status. */
  private async plan(m: Managed, nowMs: number, why: "registration" | "period" | "retry"): Promise<void> {
    const spec = m.record.spec;
    const name = spec.name;
    const live: StageCounts = { queries: m.live.queries, visits: m.live.visits, items: m.live.items };
    const minShares = this.o.control?.minQueriesForShares ?? 100;
    const counts = live.queries >= minShares ? live : m.sample;
    const scaleFactorSource = live.queries >= minShares ? "live" : m.sample ? "sample" : "spec";
    const kinds = [...new Set(this.models.workerRuns().map((w) => w.kind))];
    // The sample run's counts are trusted whatever their number (its size is the operator's choice).
    const model = planningModel(spec, (mm) => this.catalog.variantsByModel.get(mm) ?? [], counts, {
      ...this.o.control, ...(kinds.length > 0 ? { kinds } : {}), ...(scaleFactorSource === "sample" ? { minQueriesForShares: 1 } : {}),
    });
    const config = { ...this.o.control, ...(kinds.length > 0 ? { kinds } : {}) };
    const check = pipelineSloCheck(spec, model);
    let d: Deployment;
    let trace: PipelinePlanStatus["trace"] = null;
    const started = performance.now();
    if (!check?.feasible) {
      // Not plannable (no profile yet) or infeasible (Algorithm 1's check): no trace needed to say why.
      d = planDeployment({ spec, model, arrivalsMs: new Float64Array(0), seed: this.o.seed, config });
    } else {
      const planning = this.planningTrace(m, nowMs, why);
      trace = planning.trace;
      const arrivalsMs = planning.arrivalsMs;
      // The Tuner sees arrivals per report second, spread evenly: take the plan's envelope at that resolution too.
      const seconds = Math.max(1, Math.ceil((arrivalsMs[arrivalsMs.length - 1] ?? 0) / 1000));
      const tunerViewMs = spreadArrivals(binCounts(arrivalsMs, 1000, seconds * 1000).map((count, i) => ({ endMs: (i + 1) * 1000, ms: 1000, count })));
      d = arrivalsMs.length > 1
        ? planDeployment({ spec, model, arrivalsMs, tunerViewMs, seed: this.o.seed, config })
        : { feasible: false, reason: `pipeline ${name}: the planning trace has fewer than two queries`, stages: {} };
    }
    const planMs = performance.now() - started;
    const status = planStatus(name, nowMs, d, model, trace, scaleFactorSource);
    if (d.feasible && d.tunerPlan) {
      const previous = Object.fromEntries(Object.entries(m.stages).map(([s, p]) => [s, p.replicas]));
      m.deployment = d;
      m.plannedAtMs = nowMs;
      m.tuner = initialTunerState(d.tunerPlan, nowMs);
      m.stages = d.stages;
      m.status = status;
      m.lastReason = d.reason;
      this.models.setFloors(name, pipelineFloors(name, d.stages, why === "period" ? "periodic plan" : "plan"));
      this.log.info({ pipeline: name, why, stages: d.stages, estimatedP99Ms: d.plan?.p99Ms, estimatorCalls: d.plan?.estimatorCalls, planMs: Math.round(planMs), trace, scaleFactorSource }, "pipeline planned");
      await this.publish({ pipeline: name, source: "planner", decision: "plan", reason: `${why}: ${d.reason}; scale factors from ${scaleFactorSource} (${Object.entries(model.scaleFactor).map(([s, v]) => `${s} ${v.toFixed(3)}`).join(", ")})${trace ? `; ${trace.source} trace ${trace.qps.toFixed(1)} qps CV ${trace.cv} over ${trace.seconds} s` : ""}`, stages: d.stages, previous, atMs: nowMs });
      await this.store.putPipelinePlan(status);
      return;
    }
    // No plan: a periodic re-plan keeps the deployment it has; otherwise the status says why.
    if (m.deployment) m.plannedAtMs = nowMs;
    else m.status = status;
    if (d.reason === m.lastReason) return; // say it once
    m.lastReason = d.reason;
    const decision = model.problems.length > 0 ? "waiting" : "infeasible";
    (decision === "infeasible" ? this.log.warn.bind(this.log) : this.log.info.bind(this.log))({ pipeline: name, why, reason: d.reason }, `pipeline ${decision}`);
    await this.publish({ pipeline: name, source: "planner", decision, reason: m.deployment ? `${d.reason}; keeping the current deployment` : d.reason, stages: m.stages, previous: {}, atMs: nowMs });
    if (!m.deployment) await this.store.putPipelinePlan(status);
  }

  /** The Tuner on the arrivals since the plan; a change becomes floors and a decision. */
  private tune(m: Managed, nowMs: number): void {
    const d0 = m.deployment;
    if (!d0?.tunerPlan || !m.tuner) return;
    const name = m.record.spec.name;
    const recent = this.arrivalWindows(m, Math.max(nowMs - TUNER_LOOKBACK_MS, m.plannedAtMs), nowMs);
    const d = tunerStep({ nowMs, recentArrivalsMs: spreadArrivals(recent), plan: d0.tunerPlan, state: m.tuner }, this.o.tuner);
    m.tuner = d.state;
    if (!d.changed) return;
    const previous = Object.fromEntries(Object.entries(m.stages).map(([s, p]) => [s, p.replicas]));
    m.stages = withReplicas(d0.stages, d.state.replicas);
    const up = Object.entries(m.stages).some(([s, p]) => p.replicas > (previous[s] ?? 0));
    this.models.setFloors(name, pipelineFloors(name, m.stages, up ? "tuner scale-up" : "tuner scale-down"));
    if (m.status) m.status = { ...m.status, stages: m.stages, reason: `tuner: ${d.reason}`, atMs: nowMs };
    this.log.info({ pipeline: name, reason: d.reason, replicas: d.state.replicas }, up ? "pipeline tuner scale-up" : "pipeline tuner scale-down");
    const status = m.status;
    void this.publish({ pipeline: name, source: "tuner", decision: up ? "scale-up" : "scale-down", reason: d.reason, stages: m.stages, previous, atMs: nowMs })
      .then(() => (status ? this.store.putPipelinePlan(status) : undefined))
      .catch((err: unknown) => this.log.error({ err, pipeline: name }, "could not publish the tuner's decision"));
  }

  private async publish(d: PipelineDecision): Promise<void> {
    await this.bus.js.publish(subjects.decision("pipeline", d.pipeline), JSON.stringify(d));
  }
}
