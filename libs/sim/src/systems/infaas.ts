/**
 * INFaaS as a simulated system (papers/infaas.txt §3-5): the same pure policies the services run,
 * wired to the simulator.
 *
 * - **Dispatcher**: every query goes through {@link selectForApp}, the live dispatcher's decision
 *   (Algorithm 1, the load it asks for, the relief rule and the fallback when the load cannot be
 *   placed): the query goes to the chosen variant's queue, or is dropped with the reason. A load goes to
 *   the lowest-utilised machine of its kind with room (relief loads: none over 80% busy); when none has
 *   room, the VM autoscaler is asked for a machine (a deferred placement). A stream's decision that
 *   asked for no load is reused for its next queries while the selection index is unchanged
 *   (`SelectionIndex.revision`) and they ask the same (the same decision: selection is a function of
 *   those alone).
 * - **Monitor** (every `modelPeriodMs`, 1 s): per variant, the state machine of variant-state.ts
 *   (Active/Overloaded/Interfered/Loading/Inactive) feeds the selection index. Load is the variant's
 *   arrival rate over `monitorWindowMs` (5 s: a 1 s Poisson count at 4 QPS exceeds a 5 QPS peak 37% of
 *   the time); observed latency is the mean observed/profiled batch time ratio of the last second (a
 *   stand-in for the p50).
 * - **Model autoscaler** (every 1 s, after the monitor): {@link planModelActions}, the rule the
 *   model-autoscaler service runs (the autoscaler per machine, swaps that load the new variant first and
 *   unload the old instances once the new ones are ready, placement elsewhere, escalation to the VM
 *   autoscaler). Each machine's load of a model is its share of the model's arrivals (by ready
 *   capacity) over the last period; the rule averages it over its window. Queries still waiting on an
 *   unloaded variant are routed again.
 * - **VM autoscaler** (every 2 s): {@link planMachines}, the machine plan the vm-autoscaler service
 *   runs (INFaaS's rules; MArk's predictive plan and SLO monitor only with `forecasts` and
 *   `sloMonitor`, as the live-replay scenario runs it); a machine lost with `sim.killMachine` stops
 *   heartbeating and is replaced with the variants it ran. Every machine is the autoscaler's own (it
 *   may terminate any) unless `unmanagedWorkers` says the initial ones are not (a stack's own workers).
 * - **Scaling policy** (`scalingPolicy`, the vm-autoscaler's SCALING_POLICY; libs/policy
 *   scaling-policy.ts): which of the plan's rules run (`combined`, the default: all of them; `infaas`,
 *   `mark`, `static`), put into the plan's config as the service puts it; `infaas` and `static` use no
 *   overflow (the dispatcher's OVERFLOW=off), whatever `overflow` says. The forecasts and SLO samples
 *   are fed as the scenario says; the plan reads only what its rules use. (Not the `static` mode below:
 *   that one runs no VM autoscaler at all.)
 * - **Overflow** (with `overflow`): per query routed to a variant, the live dispatcher's decision
 *   (libs/policy `overflowInputFor` + `decideOverflow`, from the variant's ready replicas slowed down
 *   by what the last second's batches took, `observedOverflowCapacity`, or its loading ones with their
 *   load latency when none is ready) sends it to the function pool instead.
 *
 * - **Interference** (`migrateInterfered`, on by default as live): the model autoscaler's step 3c (libs/policy
 *   interference.ts) moves a variant Interfered on a machine. The monitor judges a variant over all its
 *   machines; a machine counts as interfering with it when the variant is Interfered and one of its
 *   replicas there expects batches slower than profiled by more than the state machine's margin (its
 *   run-time estimate, libs/policy `RunTimeEstimate`), so a fresh replica elsewhere is not moved again;
 *   the VM autoscaler's "Interfered on every worker" rule sees machines the same way.
 * - **Bin packing** (`packBelowUtilisation`, 80% by default as live): the dispatcher's loads and the
 *   model autoscaler's placements elsewhere go to the busiest machine with room under it (libs/policy
 *   `chooseWorker`'s `packBelow`), else spread; with null, loads go to the least utilised machine with room.
 *   Room, for the model autoscaler and for the dispatcher when it packs, is the free resources of the
 *   machine's latest report (libs/policy `workerFreeResources`; for the dispatcher, a machine that has
 *   not reported yet offers what it has free); the dispatcher that spreads tries the machines in turn.
 *
 * Every setting defaults to the live services' default; a scenario that runs the paper's rule instead
 * (`withInfaasPaperRules`) names the difference in its report ({@link liveSettingsDifferences}).
 *
 * Modes: "infaas" (all of it), "horizontal" (SM+: one fixed variant, replicas only), "static"
 * (Clipper+: pre-loaded instances, no scaling).
 */
import {
  DEFAULT_VARIANT_STATE_CONFIG,
  SelectionIndex, type InactiveRule,
  initialVariantState,
  interferenceLimitMs,
  emptyModelActionsState,
  nextState,
  planModelActions,
  observeWindow,
  selectForApp,
  loadFitsMemory,
  emptyMachinePlanState,
  planMachines,
  type ModelAction,
  type ModelActionsState,
  type ModelActionsContext,
  type ModelAutoscalerConfig,
  type LoadPlacement,
  type LoadRequest,
  type PendingPlacement,
  type QueryRequirements,
  type VariantProfile,
  type VariantStateConfig,
  type VariantStateMemory,
  type MachineKind,
  type MachinePlanState,
  type VmAutoscalerConfig,
  type VariantRuns,
  type WorkerRuns,
  type WorkerView,
  chooseWorker,
  type AppDispatchDecision,
  type AppForecast,
  type MachinePlanConfig,
  type MachinePlanContext,
  type MachineDecision,
  type OverflowCapacity,
  decideOverflow,
  drainBacklog,
  serviceRateOf,
  type BacklogEstimate,
  observedOverflowCapacity,
  overflowInputFor,
  profiledLatencyAt,
  DEFAULT_VM_AUTOSCALER_CONFIG,
  LIVE_READING_TICKS,
  PACK_BELOW_UTILISATION,
  FleetObservation,
  reportUtilization,
  workerRunsFromReport,
  workerFreeResources,
  WORKER_STALE_MS,
  type ObservedVariant,
  type ProviderMachine,
  DEFAULT_SCALING_POLICY,
  machinePlanRulesOf,
  scalingRulesOf,
  type ScalingPolicy,
} from "@sloserve/policy";
import type { ArrivalsReport, Hardware, ScaleVmRequest, VariantState, WorkerReport } from "@sloserve/contracts";
import { drop, type Simulator } from "../engine.js";
import type { FunctionPool, Machine, MachineOptions, Query, Queue, Replica } from "../entities.js";
import { replicaOptionsFor } from "../hardware.js";
import { simulatedWorkerReport, type ReplicaReadings } from "../worker-report.js";

export type InfaasMode = "infaas" | "horizontal" | "static";

export interface InfaasSystemOptions {
  mode: InfaasMode;
  /** How selection's step 2 admits Inactive variants (libs/policy selection.ts). @default DEFAULT_INACTIVE_RULE */
  inactiveRule?: InactiveRule;
  /** Variants the system may use (baselines: the one they are configured with). */
  variants: readonly VariantProfile[];
  /** Machines present from t = 0 (booted). */
  workers: readonly MachineOptions[];
  /** Machine to launch per kind when the VM autoscaler adds one. @default the first initial worker of the kind */
  templates?: Readonly<Record<string, MachineOptions>>;
  /** Machine kind that hosts a variant. @default variant.hardware */
  kindOf?: (v: VariantProfile) => string;
  /**
   * Instances loaded at t = 0: on the first worker of the variant's kind that fits, or on the initial
   * worker `worker` (an index into `workers`) when given.
   */
  preload?: ReadonlyArray<{ variant: string; count: number; worker?: number }>;
  /** Latency SLO per model, for the autoscaler's candidate variants. */
  sloMsByModel: Readonly<Record<string, number>>;
  /** Bill each running variant instance at its own price (INFaaS §6.2). @default false */
  billReplicas?: boolean;
  /** Executors shed queries that can no longer meet their deadline (DESIGN §3 batching). @default true */
  shedLate?: boolean;
  /** Wbatch for variants with batch > 1. @default 0 (a batch leaves at once when a replica is idle) */
  waitMs?: number;
  modelConfig?: Partial<ModelAutoscalerConfig>;
  vmConfig?: Partial<VmAutoscalerConfig>;
  stateConfig?: VariantStateConfig;
  /** @default 1000 */
  modelPeriodMs?: number;
  /** @default 2000 */
  vmPeriodMs?: number;
  /** Most log entries kept. @default 5000 */
  maxLog?: number;
  /** The machine plan's other settings (cool-down, billing minimum, plan period, SLO monitor…), as the vm-autoscaler's env sets them. @default {} */
  planConfig?: Partial<Omit<MachinePlanConfig, "vm">>;
  /** Per kind, what the plan is told beyond the template (its bootMs: the vm-autoscaler's BOOT_TIME_MS; min/max workers). */
  kinds?: Readonly<Record<string, Partial<MachineKind>>>;
  /** The forecasts the VM autoscaler has at each tick (`forecast.<app>`, latest per app). @default none */
  forecasts?: (nowMs: number) => readonly AppForecast[];
  /** Feed the plan's SLO monitor with the queries served or shed by the workers since the last tick (the workers' reports). @default false */
  sloMonitor?: boolean;
  /** The initial workers were not launched by the autoscaler (a stack's own): never terminated. @default false */
  unmanagedWorkers?: boolean;
  /**
   * When the workers report (ms, ascending; each report covers the time since the previous one), as
   * the live workers do once a second: the VM tick then reads each machine's mean of the reports since
   * the last tick, as the vm-autoscaler does (the latest one's when none came), instead of its exact
   * busy share since the last tick. After the last time given, every second. A burst of a second is
   * read differently at different report phases, which decides launches at the 80% threshold: the
   * live replay gives the times its stack's worker reported. @default none (the exact busy share)
   */
  reportTimesMs?: readonly number[];
  /**
   * The initial workers' utilisation as the VM autoscaler reads it at t = 0 (a live vm-autoscaler that
   * was running before the window reads the reports of the tick before it). Given, the VM tick runs at
   * 0 too, with this reading, as the live one does at the window's first second; a worker read over
   * two ticks (`readingTicks`) then has it as its first. @default none (the first VM tick at `vmPeriodMs`)
   */
  vmStartReading?: number;
  /**
   * A load no machine has room for is refused, as the live dispatcher does ("cannot place variant"),
   * instead of being deferred to a machine the VM autoscaler launches for it. @default false (deferred)
   */
  refuseUnplaceable?: boolean;
  /**
   * Move Interfered variants (libs/policy interference.ts), as the model-autoscaler service does.
   * @default true (the live default)
   */
  migrateInterfered?: boolean;
  /**
   * Bin packing of loads (libs/policy placement.ts `packBelow`): the busiest machine with room under
   * this utilisation; null: spread to the least utilised (INFaaS's rule).
   * @default PACK_BELOW_UTILISATION (0.8, the dispatcher's and the model autoscaler's)
   */
  packBelowUtilisation?: number | null;
  /**
   * Every message the VM autoscaler's observation reads (the machines' worker reports, the dispatcher's
   * arrivals reports) and each VM tick's decisions, in the order the simulator takes them: a trace, and
   * what a test replays into the live vm-autoscaler's shell. @default none
   */
  trace?: (e: InfaasTraceEvent) => void;
  /**
   * The boot time of each machine the VM autoscaler launches (or launches as a replacement), asked
   * once per launch with the machine's kind: e.g. a draw from measured boot times. The plan is still
   * told the kind's figure (`kinds`, else the template's `bootMs`), as the live vm-autoscaler is told
   * BOOT_TIME_MS. `together`: the launches booting when this one starts, itself and the others of
   * its tick included (processes starting together share the host). @default the template's `bootMs`
   */
  launchBootMs?: (kind: string, together: number) => number;
  /** Serverless overflow: the function pool and a callback per query sent to it (not used by the `infaas` and `static` scaling policies). @default none */
  overflow?: { pool: FunctionPool; onOverflow?: (q: Query, nowMs: number, variant: string) => void };
  /**
   * The scaling policy (libs/policy scaling-policy.ts; the vm-autoscaler's SCALING_POLICY): the plan's
   * rule switches (`planConfig` may still set one itself) and whether `overflow` is used.
   * @default "combined"
   */
  scalingPolicy?: ScalingPolicy;
}

export type InfaasTraceEvent =
  | { type: "worker-report"; atMs: number; report: WorkerReport }
  | { type: "arrivals"; atMs: number; report: ArrivalsReport }
  | { type: "scale-vm"; atMs: number; request: ScaleVmRequest }
  | { type: "vm-tick"; atMs: number; decisions: readonly MachineDecision[] }
  | { type: "model-tick"; atMs: number; actions: readonly ModelAction[] };

export interface DecisionLogEntry {
  tMs: number;
  source: "dispatcher" | "model-autoscaler" | "vm-autoscaler" | "monitor";
  action: string;
  reason: string;
}

export interface InfaasSystem {
  readonly log: DecisionLogEntry[];
  queueOf(variant: string): Queue;
  /** Per-variant state (from the monitor). */
  stateOf(variant: string): VariantStateMemory;
  /** Seconds each variant spent with at least one ready instance. */
  readonly activeSeconds: Map<string, number>;
}

/** Where a system's settings differ from the live services' defaults (docs/CONFIGURATION.md), in words, for its report. */
export function liveSettingsDifferences(opts: InfaasSystemOptions): string[] {
  const out: string[] = [];
  const policy = opts.scalingPolicy ?? DEFAULT_SCALING_POLICY;
  if (policy !== DEFAULT_SCALING_POLICY) out.push(`the scaling policy is ${policy} (live: SCALING_POLICY=${DEFAULT_SCALING_POLICY})`);
  const ticks = opts.vmConfig?.readingTicks ?? LIVE_READING_TICKS;
  if (ticks !== LIVE_READING_TICKS) out.push(`the VM autoscaler reads ${ticks} tick${ticks === 1 ? " (INFaaS's rule)" : "s"} (live: ${LIVE_READING_TICKS}, READING_TICKS)`);
  if (opts.packBelowUtilisation === null) out.push(`loads go to the least utilised machine (live: packed on the busiest under ${Math.round(PACK_BELOW_UTILISATION * 100)}%)`);
  else if (opts.packBelowUtilisation !== undefined && opts.packBelowUtilisation !== PACK_BELOW_UTILISATION) out.push(`loads packed under ${Math.round(opts.packBelowUtilisation * 100)}% (live: ${Math.round(PACK_BELOW_UTILISATION * 100)}%)`);
  if (opts.migrateInterfered === false) out.push("Interfered variants are not moved (live: moved, INFaaS §4.1)");
  out.push(`Wbatch is fixed at ${opts.waitMs ?? 0} ms (live: tuned to the tightest SLO, BATCH_TUNING)`);
  return out;
}

/** The report note of a system's settings that differ from the live defaults. */
export function liveSettingsNote(opts: InfaasSystemOptions, who = "The simulated INFaaS system"): string {
  return `${who} runs the live services' defaults (docs/CONFIGURATION.md) but: ${liveSettingsDifferences(opts).join("; ")}.`;
}

/**
 * INFaaS's own rules where the live defaults differ, for the scenarios of its figures: the one-tick VM
 * reading, loads spread, no moves of Interfered variants (what `opts` sets itself is kept).
 */
export function withInfaasPaperRules(opts: InfaasSystemOptions): InfaasSystemOptions {
  return { ...opts, packBelowUtilisation: opts.packBelowUtilisation === undefined ? null : opts.packBelowUtilisation, migrateInterfered: opts.migrateInterfered ?? false, vmConfig: { readingTicks: 1, ...(opts.vmConfig ?? {}) } };
}

export function installInfaas(sim: Simulator, opts: InfaasSystemOptions): InfaasSystem {
  const packBelowUtilisation = opts.packBelowUtilisation === undefined ? PACK_BELOW_UTILISATION : (opts.packBelowUtilisation ?? undefined);
  const migrateInterfered = opts.migrateInterfered ?? true;
  const scalingPolicy = opts.scalingPolicy ?? DEFAULT_SCALING_POLICY;
  /** The function pool, where the scaling policy overflows (the live dispatcher's OVERFLOW). */
  const overflow = scalingRulesOf(scalingPolicy).overflow ? opts.overflow : undefined;
  const kindOf = opts.kindOf ?? ((v: VariantProfile) => String(v.hardware));
  const stateCfg = opts.stateConfig ?? DEFAULT_VARIANT_STATE_CONFIG;
  const maxLog = opts.maxLog ?? 5000;
  const log: DecisionLogEntry[] = [];
  const note = (source: DecisionLogEntry["source"], action: string, reason: string): void => {
    if (log.length < maxLog) log.push({ tMs: sim.nowMs, source, action, reason });
  };

  const profiles = new Map<string, VariantProfile>();
  const queues = new Map<string, Queue>();
  const states = new Map<string, VariantStateMemory>();
  const activeSeconds = new Map<string, number>();
  for (const v of opts.variants) {
    profiles.set(v.name, v);
    queues.set(v.name, sim.addQueue({ name: v.name, maxBatch: v.batchSize, waitMs: opts.waitMs ?? 0, shedLate: opts.shedLate ?? true }));
    states.set(v.name, initialVariantState(0));
  }
  const index = new SelectionIndex(opts.variants, opts.inactiveRule ? { inactiveRule: opts.inactiveRule } : {});
  const machines: Machine[] = opts.workers.map((w) => sim.launchMachine({ ...w, bootMs: 0 }));
  const unmanaged = new Set<Machine>(opts.unmanagedWorkers ? machines : []);
  const templates: Record<string, MachineOptions> = { ...(opts.templates ?? {}) };
  for (const w of opts.workers) templates[w.kind] ??= w;

  const queueOf = (name: string): Queue => {
    const q = queues.get(name);
    if (!q) throw new Error(`unknown variant "${name}"`);
    return q;
  };
  const profileOf = (name: string): VariantProfile => {
    const v = profiles.get(name);
    if (!v) throw new Error(`unknown variant "${name}"`);
    return v;
  };
  const live = (): Machine[] => machines.filter((m) => m.state === "running" || m.state === "booting");
  const load = (v: VariantProfile, m: Machine, preloaded = false): Replica | null =>
    sim.addReplica(queueOf(v.name), m, replicaOptionsFor(v, { pricePerS: opts.billReplicas ? v.pricePerS : 0, ...(preloaded ? { loadMs: 0 } : {}) }));
  /**
   * A load the model autoscaler commands on a worker. On a CPU worker, as the executor loads it
   * (libs/policy `loadFitsMemory`: memory checked, the threads of a swap's old instances shared until
   * they go); an accelerator worker's instances take their devices as placed (accelerator-share.ts).
   */
  const loadOnCommand = (v: VariantProfile, m: Machine): Replica | null => {
    const price = { pricePerS: opts.billReplicas ? v.pricePerS : 0 };
    if (m.kind !== "cpu") return sim.addReplica(queueOf(v.name), m, replicaOptionsFor(v, price));
    const uses = v.resources ?? {};
    if (!loadFitsMemory(uses["memoryBytes"] ?? 0, m.free("memoryBytes"))) return null;
    return sim.addReplica(queueOf(v.name), m, replicaOptionsFor(v, { ...price, mayExceed: Object.keys(uses) }));
  };
  const placeAnywhere = (v: VariantProfile, prefer?: string, maxUtilisation = Infinity): Replica | null => {
    const kind = kindOf(v);
    const packBelow = packBelowUtilisation;
    if (packBelow !== undefined) {
      // The live dispatcher's rule (libs/policy chooseWorker) with bin packing.
      const views: WorkerView[] = live()
        .filter((m) => m.kind === kind)
        .map((m) => ({ worker: m.name, hardware: m.kind, utilisation: utilization(m), threads: 0, threadsUsed: 0, variants: [], seenAtMs: sim.nowMs, free: freeResources(m), instances: m.replicas.size }));
      const maxU = Number.isFinite(maxUtilisation) ? { maxUtilisation } : {};
      const choice = chooseWorker(views, { variant: v.name, hardware: kind, threads: 0, resources: v.resources ?? {}, allowOversubscription: false, packBelow, ...maxU }, sim.nowMs);
      const m = choice.worker === undefined ? undefined : machines.find((mm) => mm.name === choice.worker);
      return m ? load(v, m) : null;
    }
    const candidates = live().filter((m) => m.kind === kind && utilization(m) <= maxUtilisation);
    candidates.sort((a, b) => (a.name === prefer ? -1 : b.name === prefer ? 1 : utilization(a) - utilization(b)));
    for (const m of candidates) {
      const r = load(v, m);
      if (r) return r;
    }
    return null;
  };

  for (const p of opts.preload ?? []) {
    const v = profileOf(p.variant);
    for (let i = 0; i < p.count; i++) {
      const m = p.worker !== undefined ? machines[p.worker] : machines.find((mm) => mm.kind === kindOf(v) && mm.fits(v.resources ?? {}));
      if (!m || m.kind !== kindOf(v) || !load(v, m, true)) {
        throw new Error(p.worker === undefined ? `preload: no ${kindOf(v)} worker has room for ${v.name}` : `preload: initial worker ${p.worker} is not a ${kindOf(v)} worker with room for ${v.name}`);
      }
    }
  }

  // Pre-loaded variants are Active from the start (the monitor confirms it at its first tick).
  for (const name of new Set((opts.preload ?? []).map((p) => p.variant))) {
    const q = queueOf(name);
    states.set(name, { state: "active", sinceMs: 0, slowCount: 0 });
    const workers = [...new Set(q.replicas.map((r) => r.machine?.name ?? ""))].map((worker) => ({ worker, qps: 0 }));
    index.setRuntime(name, { state: "active", instances: q.replicas.length, qps: 0, workers });
  }

  // ------------------------------------------------------------------ observation
  // The machines report as live workers do (libs/sim worker-report.ts, every second, or at the times
  // given), and every reader reads them through the services' own code: the VM autoscaler's
  // FleetObservation (machine views, liveness, utilisation over the tick, SLO samples, tightest SLO,
  // load per kind), the dispatcher's placement and the model autoscaler through each machine's latest
  // report (libs/policy reportUtilization; free resources, workerFreeResources).
  const observed = new Map<string, ObservedVariant>();
  for (const v of opts.variants) {
    const uses = v.resources ?? {};
    observed.set(v.name, { app: v.app, threads: uses["threads"] ?? 1, profile: { peakQps: v.peakQps } });
  }
  const fleet = new FleetObservation({ heartbeatTimeoutMs: opts.vmConfig?.heartbeatTimeoutMs ?? DEFAULT_VM_AUTOSCALER_CONFIG.heartbeatTimeoutMs });
  const readings: ReplicaReadings = new WeakMap();
  const lastReportMs = new Map<Machine, number>();
  /** A machine's utilisation as its latest report says (the dispatcher's and the model autoscaler's reading). */
  function utilization(m: Machine): number {
    const held = fleet.held(m.name);
    return held ? reportUtilization(held.report, observed) : 0;
  }
  /**
   * A machine's free resources as the dispatcher's placement reads them: from its latest report
   * (libs/policy `workerFreeResources`, as the model autoscaler reads them); a machine that has not
   * reported yet (booting, or up since the last report) offers what it has free now.
   */
  function freeResources(m: Machine): Record<string, number> {
    const held = fleet.held(m.name);
    if (held) return workerFreeResources(held.report);
    const free: Record<string, number> = {};
    for (const k of Object.keys(m.resources)) free[k] = m.free(k);
    return free;
  }
  /** A variant's arrivals over a period, shared among its machines by ready replicas (by loading ones while none is ready). */
  const arrivalsOf = (variant: string, m: Machine, fromMs: number, toMs: number): number => {
    const q = queueOf(variant);
    let mineReady = 0;
    let allReady = 0;
    let mineLoading = 0;
    let allLoading = 0;
    for (const r of q.replicas) {
      if (r.state === "ready") {
        allReady++;
        if (r.machine === m) mineReady++;
      } else if (r.state === "loading") {
        allLoading++;
        if (r.machine === m) mineLoading++;
      }
    }
    const share = allReady > 0 ? mineReady / allReady : allLoading > 0 ? mineLoading / allLoading : 0;
    // (a report's period need not fall on the counter's seconds: the calibrated report times do not)
    return share === 0 ? 0 : q.arrivals.sumOver(fromMs, toMs, sim.nowMs) * share;
  };
  const reportInput = {
    stateOf: (variant: string, m: Machine): VariantState => {
      // (asked for a variant with ready instances on the machine: one the monitor has not seen ready yet is
      // Active, as an executor marks an instance whose load completed)
      const monitored = states.get(variant)?.state ?? "active";
      const st = monitored === "loading" || monitored === "inactive" ? "active" : monitored;
      // (with moves on, a variant is Interfered on the machines where it runs slow: see the header)
      return st === "interfered" && migrateInterfered && !interferedOn(m, variant) ? "active" : st;
    },
    arrivalsOf,
  };
  /** Every running machine reports; the first report of a machine up at 0 is a heartbeat (or the given start reading). */
  let lastReportAtMs = -Infinity;
  const report = (nowMs: number): void => {
    // (once per time: the VM tick may have taken the report due at its own time first)
    if (nowMs === lastReportAtMs) return;
    lastReportAtMs = nowMs;
    for (const m of machines) {
      if (m.state !== "running" || m.failed) continue;
      const from = lastReportMs.get(m);
      lastReportMs.set(m, nowMs);
      const r = simulatedWorkerReport(m, nowMs, from ?? Math.min(nowMs, m.readyMs), readings, reportInput);
      fleet.observeReport(r, nowMs, observed, from === undefined && nowMs === 0 ? opts.vmStartReading : undefined);
      opts.trace?.({ type: "worker-report", atMs: nowMs, report: r });
    }
  };
  /** Per app, the tightest SLO of the queries that arrived in the current second (the dispatcher's arrivals report). */
  const sloNow = new Map<string, { minMs: number; queries: number }>();
  const sloByStream: Array<{ app: string; e: { minMs: number; queries: number } } | undefined> = [];
  const reportArrivals = (nowMs: number): void => {
    for (const [app, e] of sloNow) {
      if (e.queries === 0) continue;
      const a: ArrivalsReport = { app, dispatcher: "sim", atMs: nowMs, windowMs: 1000, arrivals: e.queries, models: { [app]: { queries: e.queries, minSloMs: e.minMs } }, infeasible: 0 };
      fleet.observeArrivals(a);
      opts.trace?.({ type: "arrivals", atMs: nowMs, report: a });
      e.minMs = Infinity;
      e.queries = 0;
    }
  };

  // ------------------------------------------------------------------ dispatcher
  const pendingPlacements: PendingPlacement[] = [];
  /** A placement no machine has room for, to the VM autoscaler (live: a `scale.vm` request). */
  const askForMachine = (p: PendingPlacement, reason: string): void => {
    pendingPlacements.push(p);
    opts.trace?.({ type: "scale-vm", atMs: sim.nowMs, request: { action: "add", hardware: p.kind as Hardware, variant: p.variant, count: p.count, reason, atMs: sim.nowMs } });
  };
  /** Variants with a placement request outstanding (one request per variant until the VM tick). */
  const pendingVariants = new Set<string>();
  // One requirements object, refilled per query (select keeps no reference to it).
  const req: QueryRequirements = { latencyMs: 0, minAccuracy: 0 };
  // The actor for the loads selectForApp asks for (only "infaas" loads from the dispatcher): the
  // suggested machine or the least utilised one with room, under the relief cap; else a machine from
  // the VM autoscaler will load it (deferred).
  const placeLoad = (v: VariantProfile, load: LoadRequest): LoadPlacement => {
    if (opts.mode !== "infaas") return { outcome: "deferred", reason: `the ${opts.mode} dispatcher loads nothing` };
    const r = placeAnywhere(v, load.suggestedWorker, load.maxUtilisation);
    if (r) {
      note("dispatcher", `load ${v.name} on ${r.machine?.name ?? "?"}`, load.reason);
      index.setRuntime(v.name, { state: "loading", instances: 0, qps: 0, workers: [{ worker: r.machine?.name ?? "", qps: 0 }] });
      return { outcome: "placed", reason: `on ${r.machine?.name ?? "?"}` };
    }
    if (opts.refuseUnplaceable) return { outcome: "refused", reason: `no ${kindOf(v)} worker has room for ${v.name}` };
    if (!pendingVariants.has(v.name)) {
      pendingVariants.add(v.name);
      askForMachine({ kind: kindOf(v), variant: v.name, count: 1 }, load.reason);
      note("dispatcher", `no room for ${v.name}`, `${load.reason}; asking the VM autoscaler`);
    }
    return { outcome: "deferred", reason: `no ${kindOf(v)} machine has room; asked the VM autoscaler for one` };
  };
  const overflowCapacity = (v: VariantProfile, instances: number): OverflowCapacity => ({ instances, peakQpsPerInstance: v.peakQps, wbatchMs: opts.waitMs ?? 0, batchLatencyMs: profiledLatencyAt(v.latencyMs, v.batchSize) });
  /** As the dispatcher sees its serving instances: the profile slowed down by the last second's batches (libs/policy observedOverflowCapacity). */
  const servingCapacity = (v: VariantProfile, queue: Queue, instances: number): OverflowCapacity => {
    const sec = Math.floor(sim.nowMs / 1000) * 1000;
    const batches = queue.batchesDone.sum(sec - 1000, sec);
    const observed = batches > 0 ? { batches, batchP50Ms: queue.p50Ms.sum(sec - 1000, sec) / batches, batchSizeP50: queue.served.sum(sec - 1000, sec) / batches } : undefined;
    const record = { maxBatch: v.batchSize, batchWaitMs: opts.waitMs ?? 0, profile: { peakQps: v.peakQps, latencyMs: v.latencyMs as Readonly<Record<string, number>>, loadLatencyMs: v.loadLatencyMs } };
    return observedOverflowCapacity(record, instances, observed) ?? overflowCapacity(v, instances);
  };
  /** Per variant, the dispatcher's backlog estimate (the overflow rule's queue ahead). */
  const backlogs = new Map<string, BacklogEstimate>();
  /** Per stream, its last dispatch decision that asked for no load, and what it was made for. */
  const lastByStream: Array<{ revision: number; app: string; sloMs: number; minAccuracy: number; maxCostPerQuery: number; d: AppDispatchDecision } | undefined> = [];
  /** Per stream, the queue of the variant its last query was routed to. */
  const queueByStream: Array<{ variant: VariantProfile; queue: Queue } | undefined> = [];
  sim.setRouter((q, from, cause) => {
    if (cause === "served") return null;
    if (cause === "late") return drop("deadline: cannot finish within the SLO");
    if (cause === "arrival") {
      // (the stream's entry, updated in place: this runs per query, and only the second's report reads it)
      let c = sloByStream[q.stream];
      if (c === undefined || c.app !== q.app) {
        let e = sloNow.get(q.app);
        if (e === undefined) sloNow.set(q.app, (e = { minMs: Infinity, queries: 0 }));
        sloByStream[q.stream] = c = { app: q.app, e };
      }
      c.e.queries++;
      if (q.sloMs < c.e.minMs) c.e.minMs = q.sloMs;
    }
    // The live dispatcher's decision (libs/policy selectForApp), with this simulator's placement: the
    // stream's last one while the index has not changed and the query asks the same (a decision that
    // asked for no load is a function of those alone: see SelectionIndex.revision), else anew.
    let d: AppDispatchDecision;
    const last = lastByStream[q.stream];
    if (last !== undefined && last.revision === index.revision && last.app === q.app && last.sloMs === q.sloMs && last.minAccuracy === q.minAccuracy && last.maxCostPerQuery === q.maxCostPerQuery) {
      d = last.d;
    } else {
      req.latencyMs = q.sloMs;
      req.minAccuracy = q.minAccuracy;
      if (Number.isFinite(q.maxCostPerQuery)) req.maxCostPerQuery = q.maxCostPerQuery;
      else if (req.maxCostPerQuery !== undefined) delete req.maxCostPerQuery; // (a delete per query is slow)
      d = selectForApp(index, q.app, req, sim.nowMs, placeLoad);
      if (d.kind === "route" && d.load === undefined) {
        lastByStream[q.stream] = { revision: index.revision, app: q.app, sloMs: q.sloMs, minAccuracy: q.minAccuracy, maxCostPerQuery: q.maxCostPerQuery, d };
      }
    }
    if (d.kind !== "route") return drop(d.reason);
    // The variant's queue: the stream's last one when selection chose the same variant (it mostly
    // does: no map look-up per query), else by name.
    let cache = queueByStream[q.stream];
    if (cache === undefined || cache.variant !== d.variant) queueByStream[q.stream] = cache = { variant: d.variant, queue: queueOf(d.variant.name) };
    const queue = cache.queue;
    if (overflow && cause === "arrival") {
      // The live dispatcher's decision, from what serves the variant now (or what is loading).
      const ready = queue.replicas.filter((r) => r.state === "ready").length;
      const loading = queue.replicas.filter((r) => r.state === "loading").length;
      const serving = ready > 0 ? [servingCapacity(d.variant, queue, ready)] : [];
      // Queue ahead, as the live dispatcher reads it (services/dispatcher overflow.ts): the larger of the
      // queries its workers report holding (none here: a replica takes queries only as it starts a
      // batch) and its own backlog estimate, what it queued drained at μ* (libs/policy drainBacklog).
      const backlog = drainBacklog(backlogs.get(d.variant.name), sim.nowMs, serviceRateOf(serving));
      const o = decideOverflow(
        overflowInputFor({
          serving,
          ...(loading > 0 ? { starting: { capacity: [overflowCapacity(d.variant, loading)], inMs: d.variant.loadLatencyMs } } : {}),
          queueAhead: backlog.queries,
          nowMs: sim.nowMs,
          deadlineMs: q.arrivalMs + q.sloMs,
        }),
      );
      if (o.action === "overflow") {
        backlogs.set(d.variant.name, backlog);
        overflow.onOverflow?.(q, sim.nowMs, d.variant.name);
        return overflow.pool;
      }
      backlog.queries++;
      backlogs.set(d.variant.name, backlog);
    }
    return queue;
  });

  // ------------------------------------------------------------------ monitor + model autoscaler
  /** The model autoscaler's and its actions' memory (swaps, commands, arrivals): libs/policy model-actions. */
  let actionState: ModelActionsState = emptyModelActionsState();
  const removeInstances = (m: Machine, variant: string, count: number, oldest = false): void => {
    const mine = [...m.replicas].filter((r) => r.label === variant && r.state !== "draining" && r.state !== "removed");
    // (a move of Interfered instances unloads the oldest: those interfered, not the new ones)
    if (oldest) mine.sort((a, b) => a.id - b.id);
    else mine.sort((a, b) => (a.state === "loading" ? -1 : 0) - (b.state === "loading" ? -1 : 0) || a.inFlight - b.inFlight);
    for (const r of mine.slice(0, count)) sim.removeReplica(r);
    const q = queueOf(variant);
    if (q.replicas.every((r) => r.state === "draining" || r.state === "removed")) {
      // Gone: the dispatcher hears it at once (live: the worker's "unloading" state event).
      index.setRuntime(variant, { state: "inactive", instances: 0, qps: 0, workers: [] });
      if (q.length > 0) {
        const n = sim.rerouteQueued(q);
        note("monitor", `reroute ${n} queued queries`, `${variant} has no instance left`);
      }
    }
  };

  const monitorTick = (nowMs: number): void => {
    // The reports due now come first (the model autoscaler reads them).
    if (reportDue(nowMs)) report(nowMs);
    // States → selection index.
    const sec = Math.floor(nowMs / 1000) * 1000;
    const loadWindowMs = stateCfg.loadWindowMs ?? DEFAULT_VARIANT_STATE_CONFIG.loadWindowMs;
    for (const [name, v] of profiles) {
      const q = queueOf(name);
      let readyN = 0;
      let loadingN = 0;
      for (const r of q.replicas) {
        if (r.state === "ready") readyN++;
        else if (r.state === "loading") loadingN++;
      }
      // The executor's observation, from the same figures (libs/policy observeWindow): arrivals over
      // the load window; batches and their observed and profiled times over the last second.
      const prev = states.get(name) ?? initialVariantState(nowMs);
      const obs = observeWindow(
        {
          instances: readyN,
          loading: loadingN,
          qps: q.rateQps(nowMs, loadWindowMs),
          peakQpsPerInstance: v.peakQps,
          batches: q.batchesDone.sum(sec - 1000, sec),
          observedBatchMs: q.observedMs.sum(sec - 1000, sec),
          profiledBatchMs: q.profiledMs.sum(sec - 1000, sec),
        },
        stateCfg,
      );
      const step = nextState(prev, obs, nowMs, stateCfg);
      states.set(name, step.memory);
      if (step.changed) note("monitor", `${name}: ${prev.state} → ${step.memory.state}`, step.reason);
      if (readyN > 0) activeSeconds.set(name, (activeSeconds.get(name) ?? 0) + (opts.modelPeriodMs ?? 1000) / 1000);
      // Per machine (in the order of the replicas), its share of the arrivals: a list, not a map, for
      // the few machines of a variant.
      const workers: Array<{ worker: string; qps: number }> = [];
      const rate = obs.qps;
      for (const r of q.replicas) {
        if (!r.machine || r.state === "draining") continue;
        const add = readyN > 0 && r.state === "ready" ? rate / readyN : 0;
        const worker = r.machine.name;
        let e: { worker: string; qps: number } | undefined;
        for (const x of workers) if (x.worker === worker) e = x;
        if (e === undefined) workers.push({ worker, qps: 0 + add });
        else e.qps += add;
      }
      index.setRuntime(name, { state: step.memory.state, instances: readyN, qps: rate, workers });
    }
    index.setWorkers(live().map((m) => ({ worker: m.name, hardware: m.kind, utilization: utilization(m) })));
    if (opts.mode === "static") return;

    modelTick(nowMs);
  };

  /**
   * What each machine runs, for the model autoscaler: its latest report, read as the service reads it
   * (libs/policy `workerRunsFromReport`: ready and loading instances, arrivals, Interfered, utilisation,
   * and free resources, `workerFreeResources` of what the report says the machine has and holds), for
   * the machines that report (a booting machine is not seen yet).
   */
  const machineRuns = (nowMs: number): WorkerRuns[] => {
    const out: WorkerRuns[] = [];
    for (const m of machines) {
      // (a machine that stopped reporting is seen until its report is stale, as the service sees it)
      const held = fleet.held(m.name);
      if (!held || nowMs - held.seenAtMs > WORKER_STALE_MS) continue;
      out.push(workerRunsFromReport(held.report, held.seenAtMs, observed));
    }
    return out;
  };

  /** Whether a replica of the variant on the machine runs slower than profiled beyond the state machine's margin (see the header). */
  const interferedOn = (m: Machine, variant: string): boolean => {
    const v = profileOf(variant);
    for (const r of m.replicas) {
      if (r.label !== variant || r.state !== "ready") continue;
      const profiled = r.latencyMs(v.batchSize);
      if (r.runTime.slowdown * profiled > interferenceLimitMs(profiled, stateCfg)) return true;
    }
    return false;
  };

  // The rules' settings, the same every tick (built once: see libs/policy merge.ts for what a spread costs).
  const autoscalerConfig: Partial<ModelAutoscalerConfig> = { ...(opts.modelConfig ?? {}), ...(opts.mode === "horizontal" ? { allowVertical: false } : {}) };
  const launchableKinds = Object.keys(templates);
  const modelTick = (nowMs: number): void => {
    // (the optional inputs set after the literal, as for planMachines below)
    const input: ModelActionsContext = { nowMs, workers: machineRuns(nowMs), catalog: opts.variants, sloMsByModel: opts.sloMsByModel, kindOf, launchableKinds, autoscaler: autoscalerConfig, state: actionState };
    if (!migrateInterfered) input.interference = false;
    if (packBelowUtilisation !== undefined) input.packBelowUtilisation = packBelowUtilisation;
    const res = planModelActions(input);
    actionState = res.state;
    opts.trace?.({ type: "model-tick", atMs: nowMs, actions: res.actions });
    for (const a of res.actions) carryOut(a);
  };

  const machineNamed = (name: string): Machine | undefined => machines.find((mm) => mm.name === name);
  const carryOut = (a: ModelAction): void => {
    switch (a.kind) {
      case "decision": {
        const d = a.decision;
        if (d.action !== "hold") note("model-autoscaler", `${d.action} ${d.variant} ×${d.count} on ${a.worker}${d.action === "migrate" ? ` to ${d.to}` : ""}`, d.reason);
        break;
      }
      case "add": {
        // (placed counting what its swaps free: loaded as the executor loads, see loadOnCommand)
        // (a command to a machine that died is lost, as one to a dead worker)
        const m = machineNamed(a.worker);
        if (m && !m.failed) for (let i = 0; i < a.count; i++) loadOnCommand(profileOf(a.variant), m);
        break;
      }
      case "unload": {
        const m = machineNamed(a.worker);
        if (m && !m.failed) removeInstances(m, a.variant, a.count, a.oldest === true);
        break;
      }
      case "escalate":
        askForMachine({ kind: a.hardware, variant: a.variant, count: a.count }, a.reason);
        note("model-autoscaler", `escalate ${a.variant} ×${a.count} on ${a.worker}`, a.reason);
        break;
      case "abandon":
        note("model-autoscaler", `abandon ${a.variant} ×${a.count} on ${a.worker}`, a.reason);
        break;
    }
  };

  // ------------------------------------------------------------------ VM autoscaler
  let vmState: MachinePlanState = emptyMachinePlanState();
  const kinds: Record<string, MachineKind> = {};
  for (const [k, t] of Object.entries(templates)) kinds[k] = { instanceType: t.type, pricePerHour: t.pricePerS * 3600, bootMs: t.bootMs ?? 0, resources: t.resources ?? {}, ...(opts.kinds?.[k] ?? {}) };
  // The policy's rule switches first (as the vm-autoscaler sets them from SCALING_POLICY); planConfig may set one itself.
  const planConfig: Partial<MachinePlanConfig> = { ...machinePlanRulesOf(scalingPolicy), ...(opts.planConfig ?? {}), vm: opts.vmConfig ?? {} };
  /** The machines the autoscaler launched, as its provider lists them (a machine lost silently still runs, for the provider). */
  const providerMachines = (): ProviderMachine[] => {
    const out: ProviderMachine[] = [];
    for (const m of machines) {
      if (unmanaged.has(m)) continue;
      out.push({ id: m.name, workerId: m.name, kind: m.kind, launchedAtMs: m.billedFromMs, state: m.failed ? "running" : m.state });
    }
    return out;
  };
  /** A machine as the template says, with its boot time for this launch when drawn (`launchBootMs`), `together` launches booting. */
  const launchFrom = (tpl: MachineOptions, together: number): Machine => sim.launchMachine(opts.launchBootMs ? { ...tpl, bootMs: opts.launchBootMs(tpl.kind, together) } : tpl);
  const reportTimes = new Set(opts.reportTimesMs ?? []);
  const lastReportTime = opts.reportTimesMs?.[opts.reportTimesMs.length - 1] ?? 0;
  /** Whether the machines report at `nowMs` (the schedule below). */
  const reportDue = (nowMs: number): boolean => (nowMs <= lastReportTime && opts.reportTimesMs ? reportTimes.has(nowMs) : (nowMs - lastReportTime) % 1000 === 0);
  const vmTick = (nowMs: number): void => {
    // The reports due now come first (a tick and a report at the same time: the live tick reads it).
    if (reportDue(nowMs)) report(nowMs);
    // Machines terminated for good (not lost: their heartbeat stops, and the plan replaces them) are
    // read no more: forget them, so that each tick scans the fleet, not its history.
    let kept = 0;
    for (const m of machines) {
      if (m.state !== "terminated" || m.failed) machines[kept++] = m;
      else lastReportMs.delete(m);
    }
    machines.length = kept;
    if (opts.mode === "static") return;
    // The views, as the vm-autoscaler builds them: a lost machine stops reporting at the moment it died.
    const { views } = fleet.machines(nowMs, { instances: providerMachines() }, observed);
    const loadQpsByKind = fleet.loadQpsByKind();
    const sloMsByApp = fleet.tightestSloByApp(nowMs);
    const slo = fleet.takeSloSamples();
    const pending = pendingPlacements.splice(0);
    pendingVariants.clear();
    // (the optional inputs set after the literal: a literal with spreads between its properties is slow)
    const input: MachinePlanContext = { nowMs, workers: views, kinds, pending, loadQpsByKind, catalog: opts.variants, sloMsByApp, kindOf, config: planConfig, state: vmState };
    if (opts.forecasts) input.forecasts = opts.forecasts(nowMs);
    if (opts.sloMonitor) input.slo = slo;
    const res = planMachines(input);
    vmState = res.state;
    opts.trace?.({ type: "vm-tick", atMs: nowMs, decisions: res.decisions });
    // Launches booting together: those still booting and all of this tick's (the live provider starts them at once).
    let launching = 0;
    for (const d of res.decisions) launching += d.action === "launch" ? d.count : d.action === "replace" ? 1 : 0;
    let together = launching;
    if (launching > 0) for (const m of machines) if (m.state === "booting" && !unmanaged.has(m)) together++;
    for (const d of res.decisions) {
      if (d.action === "hold" || d.action === "plan") continue;
      note("vm-autoscaler", `${d.action === "launch" ? "add" : d.action === "terminate" ? "remove" : d.action} ${d.kind}`, d.reason);
      if (d.action === "launch") {
        const tpl = templates[d.kind];
        if (!tpl) continue;
        for (let n = 0; n < d.count; n++) {
          const nm = launchFrom(tpl, together);
          machines.push(nm);
          if (n === 0) for (const p of pending.filter((pp) => pp.kind === d.kind)) for (let i = 0; i < p.count; i++) load(profileOf(p.variant), nm);
        }
      } else if (d.action === "replace") {
        const old = machines.find((mm) => mm.name === d.worker);
        const tpl = templates[d.kind];
        if (!old || !tpl) continue;
        const nm = launchFrom(tpl, together);
        machines.push(nm);
        fleet.forget(old.name);
        for (const v of d.restore) load(profileOf(v), nm);
      } else {
        const m = machines.find((mm) => mm.name === d.worker);
        if (!m) continue;
        const labels = [...m.replicas].map((r) => r.label);
        fleet.forget(m.name);
        sim.terminateMachine(m);
        for (const l of new Set(labels)) {
          const q = queueOf(l);
          if (q.replicas.every((r) => r.state === "draining") && q.length > 0) sim.rerouteQueued(q);
        }
      }
    }
  };

  // (registered before the ticks, after the machines' boot at 0: at a time they share, the reports come
  // first). A report at 0 only stands for the reading before the window when one is given.
  if (opts.vmStartReading !== undefined) sim.at(0, report);
  if (opts.reportTimesMs) {
    const times = opts.reportTimesMs;
    for (const t of times) sim.at(t, report);
    sim.every(1000, report, (times[times.length - 1] ?? 0) + 1000);
  } else sim.every(1000, report);
  sim.every(1000, reportArrivals);
  sim.every(opts.modelPeriodMs ?? 1000, monitorTick);
  sim.every(opts.vmPeriodMs ?? 2000, vmTick, opts.vmStartReading !== undefined ? 0 : undefined);

  return {
    log,
    queueOf,
    stateOf: (v) => states.get(v) ?? initialVariantState(0),
    activeSeconds,
  };
}
