import { randomUUID } from "node:crypto";
import type { z } from "zod";
import { AckPolicy, type ConsumerMessages } from "@nats-io/jetstream";
import {
  arrivalsReportSchema,
  describeZodError,
  forecastMessageSchema,
  scaleVmRequestSchema,
  streams,
  subjects,
  workerReportSchema,
  type ArrivalsReport,
  type Clock,
  type CostSummary,
  type ForecastMessage,
  type Hardware,
  type ScaleCommand,
  type ScaleVmRequest,
  type WorkerReport,
  workerCommandConsumer,
} from "@sloserve/contracts";
import type { Bus, Logger } from "@sloserve/bus";
import type { Catalog, MetadataStore } from "@sloserve/store";
import {
  DEFAULT_VM_AUTOSCALER_CONFIG,
  FleetObservation,
  HoldFilter,
  emptyMachinePlanState,
  fleetStateOf,
  hostRoom,
  planMachines,
  returnedWorkerDecision,
  toVariantProfile,
  type AppForecast,
  type HostShare,
  type MachineDecision,
  type MachineKind,
  type MachinePlanConfig,
  type MachinePlanState,
  type MachineView,
  type PendingPlacement,
  type SpotPriceSeries,
  type VariantProfile,
} from "@sloserve/policy";
import type { ProviderEvent, WorkerInstance, WorkerProvider } from "@sloserve/providers";
import { costSummary, type VmMetrics, type WorkerState } from "./costs.js";

/**
 * The stateful shell of the VM autoscaler (DESIGN §3 "VM-level autoscaling", "Predictive
 * provisioning", "Costs"). It keeps, in this one object: each worker's latest report (the heartbeat),
 * the `scale.vm` requests since the last tick, each app's latest forecast, the dispatchers' arrivals
 * (each app's tightest SLO and current load), the SLO outcomes since the last tick, the provider's
 * instances (a ledger kept after they end, for the costs), the provider's events (lost instances, spot
 * notices), the reloads owed to replacements, and the machine plan's state.
 *
 * Every tick (2 s) it builds the workers' views, calls libs/policy `planMachines` (the rule the
 * simulator's INFaaS system runs) and carries the decisions out, in order: decisions on
 * `decision.vm.<worker or kind>` with their reasons (a hold only when its reason changes), launches and
 * terminations through the WorkerProvider, results on `scale.result.vm.<worker or kind>`; then it sends
 * the reloads owed to replacements that now heartbeat (`scale.model.<worker>`, action "load", one per
 * variant the lost worker ran) and exports the costs. Time comes from the injected clock.
 *
 * What it reads of the workers is libs/policy `FleetObservation` (the simulator's INFaaS system reads
 * its machines through the same object): heartbeats, the utilisation over the tick, SLO outcomes, each
 * app's tightest SLO, load per kind, and which workers are booting, running, lost or have left. This
 * shell adds the I/O: the provider's instances and events, the instance records in Redis, and whether a
 * silent worker's command consumer is still on the SCALE stream (a clean stop deletes it; a crash
 * leaves it). Which workers it may terminate: only those its provider launched (`managed`); workers
 * started otherwise (the stack's, docker-compose's, an operator's) are only replaced when lost.
 */

export interface VmAutoscalerControllerOptions {
  /** What can be launched, per hardware kind (instance type, price, boot time, resources, limits). */
  kinds: Readonly<Record<string, MachineKind>>;
  /** Settings of the machine plan (cool-down, billing minimum, plan period, SLmin, …). */
  plan?: Partial<MachinePlanConfig>;
  /** Extra environment for the executors launched, per kind (e.g. WORKER_THREADS). */
  launchEnv?: Readonly<Record<string, Record<string, string>>>;
  /** Published holds with an unchanged reason are repeated after this long. @default 60_000 */
  holdRepeatMs?: number;
  metrics?: VmMetrics;
  /** Spot prices over time (SPOT_PRICES_FILE): the plan chooses each kind's market and price at each tick. @default none */
  spotPrices?: SpotPriceSeries;
  /**
   * The one host its workers share (PROVIDER=local with the native engines): each tick, each kind's
   * limit is lowered to the workers of it there now plus as many more as fit within the host's cores
   * and memory (libs/policy `hostRoom`), counting the workers that report this host (`host` in their
   * reports) and its own launches still booting. `kinds`: those whose workers run on the host's cores
   * (CPU). @default none (machines of their own)
   */
  host?: { name: string; cores: number; memoryBytes: number; kinds: readonly string[] };
}

interface Restore {
  from: string;
  variants: string[];
  reason: string;
}

export class VmAutoscalerController {
  private readonly fleet: FleetObservation;
  /** The provider's instances by provider id: the ledger (kept after they end). */
  private readonly instances = new Map<string, WorkerInstance>();
  /** Provider ids the provider reported lost, with the reason. */
  private readonly lost = new Map<string, string>();
  /** Provider ids with a spot interruption notice, with when they are taken back. */
  private readonly notices = new Map<string, number>();
  /** Provider ids this autoscaler asked to terminate. */
  private readonly terminating = new Set<string>();
  private pending: PendingPlacement[] = [];
  private readonly forecasts = new Map<string, AppForecast>();
  /** Reloads owed to replacements, by the new worker's id. */
  private readonly restores = new Map<string, Restore>();
  /** The provider id of the replacement launched for a lost worker, by the lost worker's id. */
  private readonly replacements = new Map<string, string>();
  private state: MachinePlanState = emptyMachinePlanState();
  private readonly holds: HoldFilter;
  private commands: ConsumerMessages | undefined;
  private lastCost: CostSummary | undefined;

  constructor(
    private readonly bus: Bus,
    private readonly store: MetadataStore,
    private readonly catalog: Catalog,
    private readonly provider: WorkerProvider,
    private readonly log: Logger,
    private readonly clock: Clock,
    private readonly options: VmAutoscalerControllerOptions,
  ) {
    provider.onEvent((e) => this.applyProviderEvent(e));
    this.fleet = new FleetObservation({ heartbeatTimeoutMs: this.heartbeatTimeoutMs });
    // Numbers in a hold's reason move every tick: compared without them.
    this.holds = new HoldFilter({ ignoreNumbers: true, repeatMs: options.holdRepeatMs ?? 60_000 });
  }

  private get heartbeatTimeoutMs(): number {
    return this.options.plan?.vm?.heartbeatTimeoutMs ?? DEFAULT_VM_AUTOSCALER_CONFIG.heartbeatTimeoutMs;
  }

  /**
   * Subscribes to what the controller reads: registry events (into the catalog), worker reports,
   * forecasts and arrivals (core subscriptions), and takes `scale.vm` requests from the SCALE work
   * queue (durable consumer `vm-autoscaler`). Malformed messages are logged and skipped.
   */
  async start(): Promise<void> {
    const { nc } = this.bus;
    const parse = (subject: string, data: () => unknown, apply: (body: unknown) => void): void => {
      try {
        apply(data());
      } catch (err) {
        this.log.warn({ err, subject }, "ignoring a malformed message");
      }
    };
    const checked = <S extends z.ZodType>(schema: S, apply: (x: z.infer<S>) => void) => (body: unknown): void => {
      const parsed = schema.safeParse(body);
      if (!parsed.success) throw new Error(describeZodError(parsed.error));
      apply(parsed.data);
    };
    this.subs = [
      nc.subscribe(subjects.registryEvents, { callback: (_err, msg) => parse(msg.subject, () => msg.json(), (body) => void this.catalog.applyEvent(msg.subject, body)) }),
      nc.subscribe(subjects.workerMetricsAll, { callback: (_err, msg) => parse(msg.subject, () => msg.json(), checked(workerReportSchema, (r) => this.applyReport(r))) }),
      nc.subscribe(subjects.forecastAll, { callback: (_err, msg) => parse(msg.subject, () => msg.json(), checked(forecastMessageSchema, (f) => this.applyForecast(f))) }),
      nc.subscribe(subjects.arrivalsAll, { callback: (_err, msg) => parse(msg.subject, () => msg.json(), checked(arrivalsReportSchema, (a) => this.applyArrivals(a))) }),
    ];
    const durable = "vm-autoscaler";
    await this.bus.jsm.consumers
      .add(streams.scale.name, { durable_name: durable, filter_subject: subjects.scaleVm, ack_policy: AckPolicy.Explicit, ack_wait: 30 * 1e9 })
      .catch((err: Error) => {
        if (!/already in use|exists/i.test(err.message)) throw err;
      });
    const consumer = await this.bus.js.consumers.get(streams.scale.name, durable);
    this.commands = await consumer.consume({ max_messages: 64 });
    const messages = this.commands;
    void (async () => {
      for await (const msg of messages) {
        const parsed = scaleVmRequestSchema.safeParse(parseJson(msg.data));
        if (!parsed.success) {
          this.log.warn({ subject: msg.subject, problem: describeZodError(parsed.error) }, "ignoring a malformed scale.vm request");
          msg.term();
          continue;
        }
        this.applyScaleVm(parsed.data);
        msg.ack();
      }
    })().catch((err: unknown) => this.log.error({ err }, "the scale.vm consumer stopped"));
  }

  private subs: Array<ReturnType<Bus["nc"]["subscribe"]>> = [];

  async stop(): Promise<void> {
    for (const s of this.subs) s.unsubscribe();
    await this.commands?.close().catch((err: unknown) => this.log.warn({ err }, "closing the scale.vm consumer failed"));
  }

  applyReport(report: WorkerReport): void {
    if (this.fleet.observeReport(report, this.clock.now(), this.catalog.variants) !== "back") return;
    this.log.info({ worker: report.worker }, "a worker thought gone reports again");
    // It was paused or cut off, not dead: the replacement launched for it is one worker too many
    // (unless it is one of ours, terminated when it was replaced: then it is on its way out).
    const replacement = this.instances.get(this.replacements.get(report.worker) ?? "");
    this.replacements.delete(report.worker);
    const returned = [...this.instances.values()].find((i) => i.workerId === report.worker);
    const leaving = (i: WorkerInstance | undefined): boolean => i !== undefined && (i.state === "terminated" || this.terminating.has(i.id));
    const decision = returnedWorkerDecision({ worker: report.worker, leaving: leaving(returned) }, replacement && { workerId: replacement.workerId, kind: replacement.kind, leaving: leaving(replacement) });
    if (decision && replacement) {
      this.restores.delete(replacement.workerId);
      void this.act(decision, this.clock.now(), []).catch((err: unknown) =>
        this.log.error({ err, worker: replacement.workerId }, "terminating a surplus replacement failed"),
      );
    }
  }

  /** A `scale.vm` request (a placement that fits on no running worker): the next tick plans it. */
  applyScaleVm(r: ScaleVmRequest): void {
    this.pending.push({ kind: r.hardware, variant: r.variant, count: r.count });
    this.log.debug({ request: r }, "scale.vm request");
  }

  applyForecast(f: ForecastMessage): void {
    this.forecasts.set(f.app, { app: f.app, atMs: f.atMs, stepMs: f.unitS * 1000, values: f.values });
  }

  applyArrivals(a: ArrivalsReport): void {
    this.fleet.observeArrivals(a);
  }

  applyProviderEvent(e: ProviderEvent): void {
    if (e.type === "lost") this.lost.set(e.id, e.reason);
    else this.notices.set(e.id, e.terminateAtMs);
  }

  /** The latest cost summary (after a tick). */
  get costs(): CostSummary | undefined {
    return this.lastCost;
  }

  /** One tick: refresh the provider's instances, decide, act, reload, account. Failures are logged and the rest goes on. */
  async tick(): Promise<MachineDecision[]> {
    const nowMs = this.clock.now();
    try {
      for (const i of await this.provider.list()) this.instances.set(i.id, i);
    } catch (err) {
      this.log.error({ err, provider: this.provider.name }, "listing the provider's instances failed; using the last list");
    }
    let records = new Map<string, string[]>();
    try {
      records = recordsByWorker(await this.store.listInstances());
    } catch (err) {
      this.log.error({ err }, "reading instance records from Redis failed; lost workers restore what their last report showed");
    }
    const instances = [...this.instances.values()];
    const left = await this.leftCleanly(this.fleet.silentUnmanaged(nowMs, { instances, records }));
    const restoring = new Map([...this.restores].map(([w, r]) => [w, r.variants]));
    const seen = this.fleet.machines(nowMs, { instances, lost: this.lost, notices: this.notices, terminating: this.terminating, records, restoring, left }, this.catalog.variants);
    for (const name of seen.left) this.log.info({ worker: name }, "worker left (stopped cleanly)");
    const workers = seen.views;
    const { decisions, state } = planMachines({
      nowMs,
      workers,
      kinds: this.kindsWithinHost(workers, nowMs),
      pending: this.pending.splice(0),
      forecasts: [...this.forecasts.values()],
      slo: this.fleet.takeSloSamples(),
      catalog: this.profiles(),
      sloMsByApp: this.fleet.tightestSloByApp(nowMs),
      loadQpsByKind: this.fleet.loadQpsByKind(),
      config: this.options.plan ?? {},
      state: this.state,
      ...(this.options.spotPrices ? { spotPrices: this.options.spotPrices } : {}),
    });
    this.state = state;
    for (const d of decisions) {
      try {
        await this.act(d, nowMs, workers);
      } catch (err) {
        this.log.error({ err, decision: d.action, kind: d.kind, worker: "worker" in d ? d.worker : undefined }, "VM autoscaler action failed");
      }
    }
    await this.reload(nowMs);
    this.account(nowMs, workers);
    return decisions;
  }

  /** The kinds, with each one's limit lowered to what the shared host still has room for (`options.host`); as given without one. */
  private kindsWithinHost(workers: readonly MachineView[], nowMs: number): Readonly<Record<string, MachineKind>> {
    const host = this.options.host;
    if (!host) return this.options.kinds;
    const shares: HostShare[] = [];
    const present = new Map<string, number>();
    for (const w of workers) {
      if (fleetStateOf(w, nowMs, this.heartbeatTimeoutMs) === "lost") continue;
      present.set(w.kind, (present.get(w.kind) ?? 0) + 1);
      const report = this.fleet.held(w.name)?.report;
      if (report) {
        if (report.host === host.name) shares.push({ threads: report.threads, memoryBytes: report.memoryBytes });
      } else if (w.managed) {
        // Launched here, not reporting yet: what its kind offers.
        const offer = this.options.kinds[w.kind]?.resources;
        shares.push({ threads: offer?.threads ?? 1, memoryBytes: offer?.memoryBytes ?? 0 });
      }
    }
    const out: Record<string, MachineKind> = {};
    for (const [kind, k] of Object.entries(this.options.kinds)) {
      if (!host.kinds.includes(kind)) {
        out[kind] = k;
        continue;
      }
      const { room, reason } = hostRoom({ cores: host.cores, memoryBytes: host.memoryBytes, workers: shares, next: { threads: k.resources.threads ?? 1, memoryBytes: k.resources.memoryBytes ?? 0 } });
      const limit = (present.get(kind) ?? 0) + room;
      out[kind] = limit < (k.maxWorkers ?? Infinity) ? { ...k, maxWorkers: limit, maxWorkersWhy: reason } : k;
    }
    return out;
  }

  /**
   * Of the silent workers this autoscaler did not launch and Redis lists nothing on (libs/policy
   * `FleetObservation.silentUnmanaged`), those whose command consumer is gone from the SCALE stream: a
   * clean stop removes it, a crash leaves it for 2 min. When JetStream cannot say, the worker counts as lost.
   */
  private async leftCleanly(candidates: readonly string[]): Promise<Set<string>> {
    const out = new Set<string>();
    for (const name of candidates) {
      try {
        await this.bus.jsm.consumers.info(streams.scale.name, workerCommandConsumer(name));
      } catch (err) {
        if (/not found/i.test((err as Error).message)) out.add(name);
        else this.log.warn({ err, worker: name }, "could not tell whether a silent worker stopped cleanly; counting it as lost");
      }
    }
    return out;
  }

  private profiles(): VariantProfile[] {
    const out: VariantProfile[] = [];
    for (const v of this.catalog.variants.values()) {
      const p = toVariantProfile(v);
      if (p) out.push(p);
    }
    return out;
  }

  private async act(d: MachineDecision, nowMs: number, workers: readonly MachineView[]): Promise<void> {
    await this.publishDecision(d, nowMs);
    switch (d.action) {
      case "hold":
      case "plan":
        return;
      case "launch": {
        for (let i = 0; i < d.count; i++) await this.launch(d.kind, d.market, `${d.trigger}: ${d.reason}`, nowMs);
        return;
      }
      case "replace": {
        const instance = await this.launch(d.kind, d.market, `replace ${d.worker}: ${d.reason}`, nowMs);
        if (instance) {
          this.replacements.set(d.worker, instance.id);
          this.restores.set(instance.workerId, { from: d.worker, variants: d.restore, reason: d.reason });
          this.restores.delete(d.worker);
        }
        await this.forget(d.worker, workers);
        return;
      }
      case "terminate": {
        const instance = [...this.instances.values()].find((i) => i.workerId === d.worker);
        if (!instance) throw new Error(`no instance of this provider runs worker ${d.worker}`);
        this.terminating.add(instance.id);
        const started = this.clock.now();
        // Draining takes a while: the tick does not wait for it.
        void this.provider
          .terminate(instance.id, d.reason)
          .then(() => this.publishResult(d.worker, { action: "terminate", worker: d.worker, instance: instance.id, kind: d.kind, ok: true, durationMs: this.clock.now() - started, reason: d.reason }))
          .catch((err: unknown) => {
            this.terminating.delete(instance.id);
            this.log.error({ err, worker: d.worker, instance: instance.id }, "terminating a worker failed");
            return this.publishResult(d.worker, { action: "terminate", worker: d.worker, instance: instance.id, kind: d.kind, ok: false, error: (err as Error).message, durationMs: this.clock.now() - started, reason: d.reason });
          });
        return;
      }
    }
  }

  /** Launches one worker; failures are published as results and logged (the next tick decides again). */
  private async launch(kind: string, market: "on-demand" | "spot", reason: string, nowMs: number): Promise<WorkerInstance | undefined> {
    const spec = this.options.kinds[kind];
    if (!spec) throw new Error(`no instance type configured for ${kind} workers`);
    try {
      const env = this.options.launchEnv?.[kind];
      const instance = await this.provider.launch({ kind: kind as Hardware, instanceType: spec.instanceType, market, reason: reason.slice(0, 250), ...(env ? { env: { ...env } } : {}) });
      this.instances.set(instance.id, instance);
      this.log.info({ worker: instance.workerId, instance: instance.id, kind, instanceType: instance.instanceType, market, reason }, "launched a worker");
      await this.publishResult(instance.workerId, { action: "launch", worker: instance.workerId, instance: instance.id, kind, market, instanceType: instance.instanceType, pricePerHour: instance.pricePerHour, ok: true, reason });
      return instance;
    } catch (err) {
      this.log.error({ err, kind, market, reason }, "launching a worker failed");
      await this.publishResult(kind, { action: "launch", kind, market, ok: false, error: (err as Error).message, reason, atMs: nowMs });
      return undefined;
    }
  }

  /**
   * A replaced worker is forgotten: its report, its records in Redis (it holds no instance any more),
   * and, when it is one of ours that still runs (a hung executor), the machine itself.
   */
  private async forget(worker: string, workers: readonly MachineView[]): Promise<void> {
    this.fleet.forget(worker);
    const instance = [...this.instances.values()].find((i) => i.workerId === worker);
    if (instance) {
      this.lost.delete(instance.id);
      this.notices.delete(instance.id);
      if (instance.state !== "terminated") {
        this.terminating.add(instance.id);
        void this.provider.terminate(instance.id, "lost: replaced").catch((err: unknown) => this.log.error({ err, worker, instance: instance.id }, "terminating a lost worker failed"));
      }
    }
    if (workers.some((w) => w.name === worker)) {
      await this.store.removeWorker(worker).catch((err: unknown) => this.log.warn({ err, worker }, "removing a lost worker's records from Redis failed"));
    }
  }

  /** Sends the reloads owed to replacements that heartbeat now: one "load" per variant of the lost worker. */
  private async reload(nowMs: number): Promise<void> {
    for (const [worker, r] of [...this.restores]) {
      if (!this.fleet.hasReported(worker)) continue;
      this.restores.delete(worker);
      for (const variant of r.variants) {
        if (!this.catalog.variants.has(variant)) {
          this.log.warn({ worker, variant, from: r.from }, "not reloading a variant that is no longer registered");
          continue;
        }
        const command: ScaleCommand = { id: randomUUID(), action: "load", variant, reason: `restore what ${r.from} ran: ${r.reason}`.slice(0, 500), atMs: nowMs };
        try {
          await this.bus.js.publish(subjects.scaleModel(worker), JSON.stringify(command));
          this.log.info({ worker, variant, from: r.from }, "reload sent to the replacement");
          await this.publishResult(worker, { action: "reload", worker, variant, from: r.from, ok: true, reason: command.reason });
        } catch (err) {
          this.log.error({ err, worker, variant, from: r.from }, "sending a reload failed");
        }
      }
    }
  }

  /** Costs of the provider's instances, the fleet by kind and state, to the metrics. */
  private account(nowMs: number, workers: readonly MachineView[]): void {
    const fleet: Array<{ kind: string; state: WorkerState }> = workers.map((w) => ({ kind: w.kind, state: fleetStateOf(w, nowMs, this.heartbeatTimeoutMs) }));
    for (const i of this.instances.values()) if (this.terminating.has(i.id) && i.state !== "terminated") fleet.push({ kind: i.kind, state: "draining" });
    this.lastCost = costSummary([...this.instances.values()], fleet, nowMs);
    this.options.metrics?.observe(this.lastCost);
  }

  /** Publishes the latest cost summary on `metrics.cost`. */
  async publishCosts(): Promise<void> {
    if (this.lastCost) await this.bus.js.publish(subjects.costSummary, JSON.stringify(this.lastCost));
  }

  private async publishDecision(d: MachineDecision, nowMs: number): Promise<void> {
    const key = `${d.kind}|${"worker" in d ? (d.worker ?? "") : ""}|${d.action}`;
    if (d.action === "hold" && !this.holds.publish(key, d.reason, nowMs)) return;
    this.options.metrics?.decision(d);
    const token = "worker" in d && d.worker ? d.worker : d.kind;
    await this.bus.js.publish(subjects.decision("vm", token), JSON.stringify({ ...d, atMs: nowMs }));
    if (d.action !== "hold") this.log.info({ ...d }, "VM scaling decision");
    else this.log.debug({ ...d }, "VM scaling hold");
  }

  private async publishResult(token: string, result: Record<string, unknown>): Promise<void> {
    await this.bus.js.publish(subjects.vmResult(token), JSON.stringify({ id: randomUUID(), atMs: this.clock.now(), ...result })).catch((err: unknown) => this.log.warn({ err, result }, "could not publish a VM autoscaler result"));
  }
}

/** Variants Redis lists per worker (instances loading or serving). */
function recordsByWorker(records: ReadonlyArray<{ worker: string; variant: string; state: string }>): Map<string, string[]> {
  const out = new Map<string, string[]>();
  for (const r of records) {
    if (r.state === "inactive" || r.state === "failed" || r.state === "unloading") continue;
    out.set(r.worker, [...(out.get(r.worker) ?? []), r.variant]);
  }
  return out;
}

function parseJson(data: Uint8Array): unknown {
  try {
    return JSON.parse(new TextDecoder().decode(data));
  } catch {
    return undefined;
  }
}
