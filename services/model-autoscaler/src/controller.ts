import { randomUUID } from "node:crypto";
import { arrivalsReportSchema, describeZodError, subjects, workerReportSchema, type ArrivalsReport, type Clock, type ScaleCommand, type WorkerReport } from "@sloserve/contracts";
import type { Bus, Logger } from "@sloserve/bus";
import type { Catalog } from "@sloserve/store";
import {
  HoldFilter,
  SloWindow,
  planModelActions,
  toVariantProfile,
  workerRunsFromReport,
  WORKER_STALE_MS,
  PACK_BELOW_UTILISATION,
  type ModelAction,
  type ModelActionsConfig,
  type ModelActionsState,
  type ModelAutoscalerConfig,
  type VariantFloor,
  type VariantProfile,
  type WorkerRuns,
} from "@sloserve/policy";
import type { ModelAutoscalerMetrics } from "./metrics.js";

/**
 * The stateful shell around the model autoscaler (INFaaS §4.2): keeps each worker's latest report and
 * the tightest latency SLO per model of the last minute from the dispatchers' arrival reports (libs/policy
 * `SloWindow`). Every tick it turns the reports into what each worker runs (libs/policy
 * `workerRunsFromReport`, which the simulator's machines' reports go through too), calls libs/policy `planModelActions` (the rule the simulator
 * runs too: the autoscaler's decisions, swaps, commands in flight, placement elsewhere with bin
 * packing, escalation, and moves of the variants a report shows Interfered: INFaaS §4.1)
 * and carries out the actions it returns, in order: decisions on `decision.model.<worker>` with their
 * reasons (a hold only when its reason changes), commands on `scale.model.<worker>`, requests for
 * workers on `scale.vm`. Pipeline plans' replica counts (pipelines.ts, `setFloors`) go in as floors:
 * placed when missing, never removed. Time comes from the injected clock.
 */

export interface ModelAutoscalerControllerOptions {
  /** The autoscaler's own settings (slack, λ, …). */
  autoscaler?: Partial<ModelAutoscalerConfig>;
  /** How decisions are carried out (swap timeout, load window, …). */
  actions?: Partial<ModelActionsConfig>;
  /**
   * Hardware kinds a request on `scale.vm` can add a worker of: variants of a kind no live worker has
   * are candidates only then. @default [] (no VM autoscaler service runs yet)
   */
  launchableKinds?: readonly string[];
  /** Prometheus metrics (metrics.ts); none: not exported. */
  metrics?: ModelAutoscalerMetrics;
  /**
   * Bin packing of placements elsewhere (libs/policy placement.ts): the busiest worker with room under
   * this utilisation. @default PACK_BELOW_UTILISATION (0.8)
   */
  packBelowUtilisation?: number;
}

export class ModelAutoscalerController {
  private readonly reports = new Map<string, { report: WorkerReport; seenAtMs: number }>();
  private readonly slo = new SloWindow();
  private state: ModelActionsState | undefined;
  /** Holds are published when their reason changes, per worker and model. */
  private readonly holds = new HoldFilter();
  /** Pipeline plans' replicas per variant (pipelines.ts), by pipeline: floors under the autoscaler. */
  private readonly floors = new Map<string, readonly VariantFloor[]>();

  constructor(
    private readonly bus: Bus,
    private readonly catalog: Catalog,
    private readonly log: Logger,
    private readonly clock: Clock,
    private readonly options: ModelAutoscalerControllerOptions = {},
  ) {}

  /**
   * Subscribes to what the controller reads: registry events (into the catalog), worker reports and
   * the dispatchers' arrival reports. Malformed messages are logged and skipped.
   */
  subscribe(): Array<ReturnType<Bus["nc"]["subscribe"]>> {
    const { nc } = this.bus;
    const parse = (subject: string, data: () => unknown, apply: (body: unknown) => void): void => {
      try {
        apply(data());
      } catch (err) {
        this.log.warn({ err, subject }, "ignoring a malformed message");
      }
    };
    return [
      nc.subscribe(subjects.registryEvents, { callback: (_err, msg) => parse(msg.subject, () => msg.json(), (body) => void this.catalog.applyEvent(msg.subject, body)) }),
      nc.subscribe(subjects.workerMetricsAll, {
        callback: (_err, msg) =>
          parse(msg.subject, () => msg.json(), (body) => {
            const parsed = workerReportSchema.safeParse(body);
            if (!parsed.success) throw new Error(describeZodError(parsed.error));
            this.applyReport(parsed.data);
          }),
      }),
      nc.subscribe(subjects.arrivalsAll, {
        callback: (_err, msg) =>
          parse(msg.subject, () => msg.json(), (body) => {
            const parsed = arrivalsReportSchema.safeParse(body);
            if (!parsed.success) throw new Error(describeZodError(parsed.error));
            this.applyArrivals(parsed.data);
          }),
      }),
    ];
  }

  applyReport(report: WorkerReport): void {
    const prev = this.reports.get(report.worker);
    if (prev && prev.report.atMs > report.atMs) return;
    // A leaving worker (a clean stop) takes no more instances: forgotten now, not after its timeout.
    if (report.leaving) {
      this.reports.delete(report.worker);
      return;
    }
    this.reports.set(report.worker, { report, seenAtMs: this.clock.now() });
  }

  applyArrivals(report: ArrivalsReport): void {
    this.options.metrics?.arrivals.observe(report);
    for (const [model, m] of Object.entries(report.models)) if (m.minSloMs !== null) this.slo.observe(model, m.minSloMs, report.atMs);
  }

  /**
   * Sets (or, with none, clears) a pipeline's floors: the instances of each variant its plan or its
   * Tuner wants. The next tick places what is missing and keeps them (libs/policy model-actions step 3b).
   */
  setFloors(pipeline: string, floors: readonly VariantFloor[]): void {
    if (floors.length === 0) this.floors.delete(pipeline);
    else this.floors.set(pipeline, floors);
  }

  /** Every pipeline's floors. */
  currentFloors(): VariantFloor[] {
    return [...this.floors.values()].flat();
  }

  /** The latest report of each worker heard from (stale ones are dropped at each tick). */
  latestReports(): WorkerReport[] {
    return [...this.reports.values()].map((r) => r.report);
  }

  /** What each worker runs now, from the latest reports (the pipeline controller reads replicas from it). */
  workerRuns(): WorkerRuns[] {
    return [...this.reports.values()].map(({ report, seenAtMs }) => workerRunsFromReport(report, seenAtMs, this.catalog.variants));
  }

  /**
   * One tick: decide for every live worker, then carry the actions out. A failed action is logged and
   * the others still run (its command counts as in flight until the worker's reports show it did not happen).
   */
  async tick(): Promise<ModelAction[]> {
    const nowMs = this.clock.now();
    for (const [id, { seenAtMs }] of this.reports) if (nowMs - seenAtMs > WORKER_STALE_MS) this.reports.delete(id);
    const catalog: VariantProfile[] = [];
    for (const v of this.catalog.variants.values()) {
      const p = toVariantProfile(v);
      if (p) catalog.push(p); // unprofiled: nothing to reason with
    }
    const { actions, state } = planModelActions({
      nowMs,
      workers: this.workerRuns(),
      catalog,
      sloMsByModel: this.slo.read(nowMs),
      launchableKinds: this.options.launchableKinds ?? [],
      autoscaler: this.options.autoscaler ?? {},
      config: this.options.actions ?? {},
      state: this.state,
      floors: this.currentFloors(),
      packBelowUtilisation: this.options.packBelowUtilisation ?? PACK_BELOW_UTILISATION,
    });
    this.state = state;
    for (const a of actions) {
      try {
        await this.act(a, nowMs);
      } catch (err) {
        this.log.error({ err, action: a.kind, worker: a.worker, ...(a.kind === "decision" ? { decision: a.decision.action, model: a.decision.model } : { model: a.model, variant: a.variant, count: a.count }) }, "model autoscaler action failed");
      }
    }
    return actions;
  }

  private async act(a: ModelAction, nowMs: number): Promise<void> {
    switch (a.kind) {
      case "decision": {
        const d = a.decision;
        const key = `${d.worker}|${d.model}`;
        if (d.action === "hold") {
          if (!this.holds.publish(key, d.reason, nowMs)) return;
        } else this.holds.clear(key);
        await this.bus.js.publish(subjects.decision("model", d.worker), JSON.stringify({ ...d, atMs: nowMs }));
        this.options.metrics?.decision(d.action);
        if (d.action !== "hold") this.log.info({ decision: d.action, worker: d.worker, model: d.model, variant: d.variant, count: d.count, reason: d.reason }, "model scaling decision");
        return;
      }
      case "add":
      case "unload": {
        const command: ScaleCommand = { id: randomUUID(), action: a.kind, variant: a.variant, count: a.count, reason: a.reason, atMs: nowMs, ...(a.kind === "unload" && a.oldest ? { oldest: true } : {}) };
        await this.bus.js.publish(subjects.scaleModel(a.worker), JSON.stringify(command));
        return;
      }
      case "escalate": {
        const request = { action: "add", hardware: a.hardware, variant: a.variant, count: a.count, reason: a.reason, atMs: nowMs };
        await this.bus.js.publish(subjects.scaleVm, JSON.stringify(request));
        await this.bus.js.publish(subjects.decision("model", a.worker), JSON.stringify({ ...request, action: "escalate", worker: a.worker, model: a.model }));
        this.options.metrics?.decision("escalate");
        this.log.info({ ...request, worker: a.worker, model: a.model }, "asked the VM autoscaler for a worker");
        return;
      }
      case "abandon": {
        const event = { action: "abandon", worker: a.worker, model: a.model, variant: a.variant, count: a.count, reason: a.reason, atMs: nowMs };
        await this.bus.js.publish(subjects.decision("model", a.worker), JSON.stringify(event));
        this.options.metrics?.decision("abandon");
        this.log.warn(event, "swap abandoned");
        return;
      }
    }
  }
}
