/**
 * The machine plan: one tick of the VM autoscaler (DESIGN §3 "VM-level autoscaling", "Predictive
 * provisioning", "Costs"), run every 2 s by services/vm-autoscaler and by the simulator's INFaaS system
 * (libs/sim systems/infaas.ts). It combines four rules and passes every termination through one set of
 * guards.
 *
 * (a) **INFaaS** (papers/infaas.txt §4.2.3, §7; {@link vmAutoscale}): add a worker of a kind when its
 *     utilisation is above 80% on every worker of the kind, when variants are Interfered on all of them,
 *     when more than 80% of them have Overloaded variants, or when a placement (a `scale.vm` request)
 *     fits on none; replace a worker whose heartbeat is lost — or that its provider reports lost
 *     (`lostReason`, at once) — with one of its kind that reloads the variants it ran; remove a worker
 *     with no Active variant under load for the cool-down when the rest of its kind covers 1.2 × the
 *     forecast. A lost worker is replaced once: `state.replaced` remembers it while the caller still
 *     lists it.
 * (b) **MArk predictive provisioning** (papers/mark.txt §4.2-4.3, Algorithm 1, {@link planProvisioning}),
 *     every `planPeriodMs` (1 min) when forecasts exist. Demand per hardware kind, in workers:
 *     - each app's forecast gives its max rate F_a(t) per unit (`forecast.<app>`: 60 per-minute maxima);
 *       the plan looks at t = now + the kind's boot time, then one unit further per step;
 *     - a worker of kind k offers app a the capacity C(a, k) = n × μ* of the app's variant of
 *       kind k with the most throughput per worker, where n is how many instances of it fit in what a
 *       new worker offers (`resources`: threads, memory, accelerators), the variant's profiled
 *       latency meets the app's SLO (the tightest seen), and μ* is its throughput with MArk's batching
 *       tuned for that SLO (`tunedBatching`; the profiled peak when no SLO is known). This is the variant the model autoscaler
 *       upgrades to under load and, since a worker's price is fixed, the cheapest per query when the
 *       worker is full (selection's criterion);
 *     - each app goes to the kind with the lowest price per query, pricePerHour(k) / C(a, k);
 *     - demand D_k(t) = Σ over k's apps of F_a(t) / C(a, k) workers; Algorithm 1 plans it with
 *       one candidate type per kind (capacity 1 worker × `targetUtilization`, 0.8 as INFaaS's threshold;
 *       launch overhead = boot time's price; the running workers first, at no overhead).
 *     Launches go out at once; destroys only after the cool-down (MArk: "destroying requests should be
 *     sent after a predefined cool-down period"): the plan never goes below the largest count of the
 *     plans of the last `cooldownMs` (MArk's plan history), it gives back no worker launched less than
 *     `cooldownMs` ago (the history holds only the plan's own launches: a worker that (a), (c), a
 *     replacement or a standby launched would otherwise go at the plan's next period, before it has
 *     booted or served — launched for nothing, and whether it goes one tick earlier or later then
 *     hangs on its boot racing the tick), and it gives none back for a kind where an app seen on its
 *     workers has no fresh forecast (the plan would not know its demand) or where (a) asks for more
 *     this tick. The running workers are offered to the plan in the order in which they should stay
 *     (not ours to terminate, inside the billing minimum or the cool-down, serving, booting, then idle),
 *     so destroys take idle ones.
 * (c) **MArk SLO monitor** (§4.1, §4.4; slo-monitor.ts): per app, the weighted fraction of recent
 *     queries answered after their SLO (or not at all: errors, deadline_exceeded) is compared with
 *     1 − SLmin (SLmin 98% by default, per app in `slMinByApp`) every `sloPeriodMs` (10 s); above it,
 *     one worker of the app's kind is launched, then the monitor waits 5 periods. Two additions of
 *     ours: it launches only while queries still miss (some missed since its last period; otherwise a
 *     "hold": the fraction remembers ~1000 queries, minutes at a low rate, and a worker launched after
 *     a transient serves none of its misses), and while they do the plan gives back no worker of the
 *     app's kind (as while (a) asks), so that what the monitor launched is not undone at the next tick.
 * (d) **Spot** (MArk §4.5): a worker with an interruption notice (`interruptAtMs`) leaves the rules
 *     and the plan (its capacity is going) and gets a standby at once: one on-demand worker of its kind
 *     (MArk resumes stopped burstable instances; providers without stopped instances launch one). It is
 *     drained (terminated gracefully) when a worker of its kind launched since the notice is up, or
 *     `spotDrainLeadMs` before the interruption at the latest.
 *     With a spot price series (`spotPrices`, spot-prices.ts), a spot kind's market and price are
 *     chosen at each tick by `chooseMarket` (the rule the simulator's MArk system uses): on-demand
 *     while its spot price is above on-demand, and the plan prices the kind at the price of now.
 *
 * A worker the provider reports lost before its first heartbeat failed to boot: it is not replaced,
 * and no worker of its kind is launched for `failedBootBackoffMs` (an executor that cannot start would
 * otherwise be relaunched every tick).
 *
 * **Combination**: per kind, the launches of a tick are the largest of what (a), (b) and (c) ask for
 * (they answer the same shortage; the reasons of each are kept), within `maxWorkers`; replacements and
 * standbys come on top (they restore capacity that is going). **Guards on every termination**
 * (idle, predictive): the worker is `managed` (launched by this autoscaler's provider: workers started
 * otherwise — by the stack, docker-compose, an operator — are never terminated, only replaced when
 * lost); it has run at least the billing minimum (EC2 bills 60 s anyway); at least the kind's
 * `minWorkers` stay; and for the plan's destroys, it was launched at least `cooldownMs` ago (b). A
 * termination a guard blocks becomes a "hold" with the guard's reason.
 *
 * **Switches** (`infaasAdd`, `infaasRemoveIdle`, `markPlan`, `markSloMonitor`; all on by default, the
 * scaling policies of scaling-policy.ts turn some off): a rule switched off makes no decision and no
 * hold, and its inputs are not read (the forecasts without `markPlan`, the SLO samples without
 * `markSloMonitor`); with `infaasAdd` off, INFaaS's "this kind needs capacity now" no longer keeps the
 * plan from giving workers back. Replacements of lost workers, failed-boot back-offs, spot notices and
 * the guards stay in every policy.
 *
 * Shape (Ray Serve): `planMachines(ctx) -> { decisions, state }`; the rules' memories (idle clocks,
 * plan history, SLO monitors, replaced and noticed workers) come in and go out in `state`. Every
 * decision carries a reason.
 *
 * Caveats: one instance type per kind (Algorithm 1's choice among types is then between running and
 * new workers only); accuracy requirements are ignored by the capacity estimate (queries that need a
 * slower variant get less than C(a, k), which the reactive rules cover); an app's demand is planned on
 * one kind even when several could serve it.
 */
import { tunedBatching } from "../batching/batch-tuning.js";
import { merge } from "../common/merge.js";
import { instancesThatFit } from "./model-autoscaler.js";
import { planProvisioning, type ProvisioningState } from "./provisioning.js";
import { variantLatencyMs, type VariantProfile } from "../selection/selection.js";
import { sloMonitorCycle, type AppSloSample, type SloMonitorState } from "./slo-monitor.js";
import { chooseMarket, type SpotPriceSeries } from "../costs/spot-prices.js";
import { vmAutoscale, type PendingPlacement, type VmAutoscalerConfig, type VmAutoscalerState, type VmScalingDecision, type VmWorkerView } from "./vm-autoscaler.js";

export interface MachinePlanConfig {
  /** The INFaaS rules' settings (vm-autoscaler.ts); `idleMs` defaults to `cooldownMs` here. @default {} */
  vm: Partial<VmAutoscalerConfig>;
  /**
   * Time before capacity is given back: an idle worker is removed after it (INFaaS rule), and the
   * predictive plan keeps the largest count of its plans of this long (MArk's cool-down: 6 plans at one
   * a minute). @default 300_000
   */
  cooldownMs: number;
  /** EC2 bills every instance for at least this long: none is terminated before. @default 60_000 */
  billingMinimumMs: number;
  /** Period of the predictive plan (MArk: every prediction unit, 1 min). @default 60_000 */
  planPeriodMs: number;
  /** Forecasts older than this are ignored. @default 180_000 */
  forecastMaxAgeMs: number;
  /** Fraction of a worker's capacity the predictive plan fills. @default 0.8 (INFaaS's threshold) */
  targetUtilization: number;
  /** Period of the SLO monitor (MArk's control cycle, as libs/sim mark-system runs it). @default 10_000 */
  sloPeriodMs: number;
  /** Periods the SLO monitor waits after a launch. @default 5 */
  sloCooldownCycles: number;
  /** Weight kept per query by the SLO monitor (memory ~1000 queries). @default 0.999 */
  sloDecay: number;
  /** SLmin: the fraction of queries that must meet their SLO (MArk §4.1). @default 0.98 */
  slMin: number;
  /** SLmin per app. @default {} */
  slMinByApp: Readonly<Record<string, number>>;
  /** A noticed spot worker is drained this long before its interruption at the latest. @default 30_000 */
  spotDrainLeadMs: number;
  /** After a worker of a kind is lost before its first heartbeat (it failed to boot), no launch of the kind for this long. @default 60_000 */
  failedBootBackoffMs: number;
  /**
   * (a) INFaaS's adds (utilisation, Interfered, Overloaded, placements no worker could take). Off: none
   * of them launches, holds or keeps the plan from giving workers back. @default true
   */
  infaasAdd: boolean;
  /** (a) The idle rule (and its holds). @default true */
  infaasRemoveIdle: boolean;
  /** (b) MArk's predictive plan. Off: the forecasts are not read at all (the idle rule measures against the current load). @default true */
  markPlan: boolean;
  /** (c) MArk's SLO monitor. Off: the SLO samples are not read (its state is kept as it came). @default true */
  markSloMonitor: boolean;
}

export const DEFAULT_MACHINE_PLAN_CONFIG: MachinePlanConfig = {
  vm: {},
  cooldownMs: 300_000,
  billingMinimumMs: 60_000,
  planPeriodMs: 60_000,
  forecastMaxAgeMs: 180_000,
  targetUtilization: 0.8,
  sloPeriodMs: 10_000,
  sloCooldownCycles: 5,
  sloDecay: 0.999,
  slMin: 0.98,
  slMinByApp: {},
  spotDrainLeadMs: 30_000,
  failedBootBackoffMs: 60_000,
  infaasAdd: true,
  infaasRemoveIdle: true,
  markPlan: true,
  markSloMonitor: true,
};

/** What the plan knows of a worker (the INFaaS view plus what the provider says). */
export interface MachineView extends VmWorkerView {
  /** Apps whose variants it runs (which apps a kind serves). @default [] */
  apps?: string[];
  /** Launched by this autoscaler's provider: the only workers it may terminate. @default false */
  managed?: boolean;
  /** When it was launched (billing starts then); unknown: never terminated. */
  launchedAtMs?: number;
  /** The provider reports it gone (crash, kill, lost allocation): replaced at once. */
  lostReason?: string;
  /** A spot interruption notice: the provider takes it back at this time. */
  interruptAtMs?: number;
}

/** What the autoscaler can launch for a hardware kind. */
export interface MachineKind {
  /** Instance type that stands for the kind's machines, e.g. "c5.xlarge". */
  instanceType: string;
  pricePerHour: number;
  /** Launch in the spot market. @default false */
  spot?: boolean;
  /** Launch to first heartbeat, ms. */
  bootMs: number;
  /** What a new worker offers its variants, e.g. { threads: 4, memoryBytes: 8e9 } (missing: lacks it). */
  resources: Readonly<Record<string, number>>;
  /** @default the INFaaS config's minWorkersPerKind */
  minWorkers?: number;
  /** @default the INFaaS config's maxWorkersPerKind */
  maxWorkers?: number;
  /** Why `maxWorkers` is what it is, when the caller set it for a reason of its own (the host's cores: host-room.ts); said with every hold at the limit. @default none */
  maxWorkersWhy?: string;
}

/** An app's forecast (the forecaster's `forecast.<app>`): values[i] covers [atMs + i·stepMs, atMs + (i+1)·stepMs). */
export interface AppForecast {
  app: string;
  atMs: number;
  stepMs: number;
  /** Max rate per step, queries/s. */
  values: readonly number[];
}

/** Queries of an app answered (or failed) since the last tick, and how many of them missed the SLO (slo-monitor.ts). */
export type { AppSloSample } from "./slo-monitor.js";

export interface MachinePlanState {
  vm: VmAutoscalerState;
  /** MArk plan history per kind. */
  provisioning: Record<string, ProvisioningState>;
  lastPlanAtMs: number | null;
  slo: Record<string, SloMonitorState>;
  lastSloAtMs: number | null;
  /** Per app: queries that missed their SLO since the monitor's last cycle (whether the misses go on). @default {} */
  sloMissedSinceCycle?: Record<string, number>;
  /** Lost workers already replaced, with when. */
  replaced: Record<string, number>;
  /** Noticed spot workers whose standby was launched, with when. */
  noticed: Record<string, number>;
  /** Per kind: when a worker of it last failed to boot. */
  failedBootAtMs: Record<string, number>;
}

/**
 * A worker thought lost reports again (paused or cut off, not dead): the replacement launched for it
 * is one worker too many and is terminated at once (trigger `returned`), unless the returned worker is
 * itself on its way out (terminated when it was replaced) or the replacement already is. Pure.
 */
export function returnedWorkerDecision(returned: { worker: string; leaving: boolean }, replacement: { workerId: string; kind: string; leaving: boolean } | undefined): MachineDecision | undefined {
  if (!replacement || returned.leaving || replacement.leaving) return undefined;
  return { action: "terminate", worker: replacement.workerId, kind: replacement.kind, trigger: "returned", reason: `${returned.worker}, which it replaced, reports again` };
}

export function emptyMachinePlanState(): MachinePlanState {
  return { vm: { idleSinceMs: {} }, provisioning: {}, lastPlanAtMs: null, slo: {}, lastSloAtMs: null, replaced: {}, noticed: {}, failedBootAtMs: {} };
}

export interface MachinePlanContext {
  nowMs: number;
  /** Every worker: up, booting, lost (not yet replaced), noticed. */
  workers: readonly MachineView[];
  /** What can be launched, per kind; a kind without an entry gets holds instead of launches. */
  kinds: Readonly<Record<string, MachineKind>>;
  /** Placements no running worker could take (`scale.vm` requests, deferred loads). */
  pending?: readonly PendingPlacement[];
  /** Latest forecast per app. */
  forecasts?: readonly AppForecast[];
  /** SLO outcomes since the last tick. */
  slo?: readonly AppSloSample[];
  /** Variants (profiled ones count) for the capacity a worker offers an app. @default [] */
  catalog?: readonly VariantProfile[];
  /** Tightest latency SLO seen per app (variants slower than it do not count). @default none */
  sloMsByApp?: Readonly<Record<string, number>>;
  /** Current load (QPS) per kind: the idle rule's yardstick where no forecast covers the kind. */
  loadQpsByKind?: Readonly<Record<string, number>>;
  /** Kind of worker a variant runs on. @default v.hardware */
  kindOf?: (v: VariantProfile) => string;
  config?: Partial<MachinePlanConfig>;
  state?: MachinePlanState;
  /**
   * Spot prices over time (spot-prices.ts). When given, each kind's market and price are those
   * `chooseMarket` gives its instance type at `nowMs` (spot only for kinds with `spot`; on-demand while
   * spot costs more than on-demand); without it, `kinds` are taken as they are. @default none
   */
  spotPrices?: SpotPriceSeries;
}

export type MachineTrigger = "infaas" | "predictive" | "slo" | "spot-standby";

export type MachineDecision =
  /** Launch `count` workers of `kind`; `worker` names the noticed spot worker a standby stands in for. */
  | { action: "launch"; kind: string; count: number; market: "on-demand" | "spot"; trigger: MachineTrigger; worker?: string; reason: string }
  /** Launch one worker of `kind` for a lost one and reload `restore` on it once it is up. */
  | { action: "replace"; worker: string; kind: string; market: "on-demand" | "spot"; restore: string[]; reason: string }
  /** Terminate (drain) a worker (`returned`: the replacement of a lost worker that reports again, {@link returnedWorkerDecision}). */
  | { action: "terminate"; worker: string; kind: string; trigger: "idle" | "predictive" | "spot-notice" | "returned"; reason: string }
  /** Nothing done, and why (a launch at a limit, a termination a guard blocks). */
  | { action: "hold"; kind: string; worker?: string; reason: string }
  /** The predictive plan of a kind: `workers` wanted at now + boot. */
  | { action: "plan"; kind: string; workers: number; reason: string };

export interface MachinePlanResult {
  decisions: MachineDecision[];
  state: MachinePlanState;
}

/**
 * The capacity one new worker of `kind` offers `app` (step (b)): n × the throughput of the app's profiled
 * variant of that kind with the most throughput per worker, n = instances that fit in `resources`
 * (1 when the variant declares no resources), among those whose profiled latency meets `sloMs`. With an
 * SLO, a variant's throughput is MArk's μ* under it (batch-tuning.ts `tunedBatching`: the largest batch
 * whose Wbatch + T(b) fits the SLO and still beats running one at a time — MArk §4.3's C_i, the rate the
 * executors' tuned batching sustains); without one, its profiled peak (max batch / T(max batch)).
 */
export function workerCapacityForApp(
  catalog: readonly VariantProfile[],
  app: string,
  kind: string,
  resources: Readonly<Record<string, number>>,
  sloMs?: number,
  kindOf: (v: VariantProfile) => string = (v) => String(v.hardware),
): { variant: string; instances: number; qps: number } | undefined {
  let best: { variant: string; instances: number; qps: number } | undefined;
  for (const v of catalog) {
    if (v.app !== app || !v.profiled || v.peakQps <= 0 || kindOf(v) !== kind) continue;
    if (sloMs !== undefined && variantLatencyMs(v) > sloMs) continue;
    const fit = instancesThatFit(v, resources);
    const n = Number.isFinite(fit) ? fit : 1;
    if (n <= 0) continue;
    const perInstance = sloMs === undefined ? v.peakQps : tunedBatching({ latencyMs: v.latencyMs, maxBatch: v.batchSize, ...(v.concurrency ? { concurrency: v.concurrency } : {}) }, sloMs).throughputQps;
    if (perInstance <= 0) continue;
    if (!best || n * perInstance > best.qps) best = { variant: v.name, instances: n, qps: n * perInstance };
  }
  return best;
}

/** An app's forecast rate at `tMs` (the step that holds it; past the end, the last one). */
export function forecastAt(f: AppForecast, tMs: number): number {
  if (f.values.length === 0) return 0;
  const i = Math.min(f.values.length - 1, Math.max(0, Math.floor((tMs - f.atMs) / f.stepMs)));
  return Math.max(0, f.values[i] ?? 0);
}

const r1 = (x: number): number => Math.round(x * 10) / 10;
const r2 = (x: number): number => Math.round(x * 100) / 100;
const byName = (a: { name: string }, b: { name: string }): number => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0);

export function planMachines(input: MachinePlanContext): MachinePlanResult {
  const ctx = input.spotPrices ? { ...input, kinds: kindsAtPrices(input.kinds, input.spotPrices, input.nowMs) } : input;
  const cfg: MachinePlanConfig = merge(DEFAULT_MACHINE_PLAN_CONFIG, ctx.config);
  const prev = ctx.state ?? emptyMachinePlanState();
  const nowMs = ctx.nowMs;
  const kindOf = ctx.kindOf ?? ((v: VariantProfile) => String(v.hardware));
  // `{ idleMs, ...cfg.vm, minWorkersByKind: {...}, maxWorkersByKind: {...} }`, without the spread's slow
  // path (merge.ts: a spread followed by more properties; this runs every VM tick): the same keys in
  // the same order, the same values.
  const vmCfg: Partial<VmAutoscalerConfig> = merge<Partial<VmAutoscalerConfig>>({ idleMs: cfg.cooldownMs }, cfg.vm);
  vmCfg.minWorkersByKind = merge(Object.fromEntries(Object.entries(ctx.kinds).flatMap(([k, s]) => (s.minWorkers === undefined ? [] : [[k, s.minWorkers]]))), cfg.vm.minWorkersByKind);
  vmCfg.maxWorkersByKind = merge(Object.fromEntries(Object.entries(ctx.kinds).flatMap(([k, s]) => (s.maxWorkers === undefined ? [] : [[k, s.maxWorkers]]))), cfg.vm.maxWorkersByKind);
  const whys = Object.entries(ctx.kinds).flatMap(([k, s]) => (s.maxWorkersWhy === undefined ? [] : [[k, s.maxWorkersWhy]]));
  if (whys.length > 0) vmCfg.maxWorkersWhyByKind = Object.fromEntries(whys);
  const minOf = (k: string): number => vmCfg.minWorkersByKind?.[k] ?? vmCfg.minWorkersPerKind ?? 0;
  const maxOf = (k: string): number => vmCfg.maxWorkersByKind?.[k] ?? vmCfg.maxWorkersPerKind ?? Infinity;
  const limitOf = (k: string): string => `the limit of ${maxOf(k)} ${k} worker(s)${ctx.kinds[k]?.maxWorkersWhy ? ` (${ctx.kinds[k].maxWorkersWhy})` : ""}`;
  const marketOf = (k: string): "on-demand" | "spot" => (ctx.kinds[k]?.spot ? "spot" : "on-demand");
  const decisions: MachineDecision[] = [];
  const names = new Set(ctx.workers.map((w) => w.name));

  // Memories of workers no longer listed are dropped.
  const replaced: Record<string, number> = {};
  for (const [w, at] of Object.entries(prev.replaced)) if (names.has(w)) replaced[w] = at;
  const noticed: Record<string, number> = {};
  for (const [w, at] of Object.entries(prev.noticed)) if (names.has(w)) noticed[w] = at;

  const live = ctx.workers.filter((w) => replaced[w.name] === undefined);
  const failedBootAtMs: Record<string, number> = {};
  for (const [k, at] of Object.entries(prev.failedBootAtMs)) if (nowMs - at < cfg.failedBootBackoffMs) failedBootAtMs[k] = at;

  // (a, first part) Workers the provider reports lost are replaced at once, without a heartbeat timeout.
  const providerLost = live.filter((w) => w.lostReason !== undefined);
  const lostDecisions: Array<{ index: number; d: MachineDecision }> = [];
  for (const w of providerLost) {
    if (noticed[w.name] !== undefined) {
      // A noticed spot worker taken back: the standby launched at the notice is its replacement.
      replaced[w.name] = nowMs;
      continue;
    }
    if (w.booting) {
      // It never sent a heartbeat: replacing it would likely fail the same way, so back off instead.
      replaced[w.name] = nowMs;
      failedBootAtMs[w.kind] = nowMs;
      decisions.push({ action: "hold", kind: w.kind, worker: w.name, reason: `${w.name} failed to boot (${w.lostReason ?? "no reason given"}): no ${w.kind} launch for ${cfg.failedBootBackoffMs / 1000} s` });
      continue;
    }
    if (!ctx.kinds[w.kind]) {
      decisions.push({ action: "hold", kind: w.kind, worker: w.name, reason: `${w.name} is lost (${w.lostReason ?? ""}) but no instance type is configured for ${w.kind} workers` });
      continue;
    }
    replaced[w.name] = nowMs;
    lostDecisions.push({ index: ctx.workers.indexOf(w), d: { action: "replace", worker: w.name, kind: w.kind, market: marketOf(w.kind), restore: [...w.variants], reason: `the provider reports it lost (${w.lostReason ?? "no reason given"}): replace it and restore ${w.variants.length} variant(s)` } });
  }

  // (d) Spot notices: a standby at once; drain when it is up or before the interruption.
  const interrupted = live.filter((w) => w.interruptAtMs !== undefined && w.lostReason === undefined);
  const spotDecisions: MachineDecision[] = [];
  for (const w of interrupted) {
    const inS = Math.round(((w.interruptAtMs ?? nowMs) - nowMs) / 1000);
    if (noticed[w.name] === undefined) {
      noticed[w.name] = nowMs;
      if (ctx.kinds[w.kind]) spotDecisions.push({ action: "launch", kind: w.kind, count: 1, market: "on-demand", trigger: "spot-standby", worker: w.name, reason: `spot interruption notice for ${w.name} (taken back in ${inS} s): an on-demand standby takes over its capacity` });
      else spotDecisions.push({ action: "hold", kind: w.kind, worker: w.name, reason: `spot interruption notice for ${w.name}, but no instance type is configured for ${w.kind} workers` });
    }
    const since = noticed[w.name] ?? nowMs;
    const standbyUp = ctx.workers.some((o) => o.kind === w.kind && o !== w && !o.booting && o.interruptAtMs === undefined && (o.launchedAtMs ?? -Infinity) >= since);
    const deadline = (w.interruptAtMs ?? nowMs) - cfg.spotDrainLeadMs;
    if (standbyUp || nowMs >= deadline) {
      const why = standbyUp ? "its standby is up" : `${cfg.spotDrainLeadMs / 1000} s before the interruption`;
      if (w.managed) spotDecisions.push({ action: "terminate", worker: w.name, kind: w.kind, trigger: "spot-notice", reason: `spot interruption in ${inS} s: drain it now (${why})` });
      else spotDecisions.push({ action: "hold", kind: w.kind, worker: w.name, reason: `spot interruption in ${inS} s, but ${w.name} was not launched by this autoscaler: it cannot drain it` });
    }
  }

  // The workers the rules and the plan see: not lost to the provider, not going away.
  const ruled = live.filter((w) => w.lostReason === undefined && w.interruptAtMs === undefined);
  const terminable = (w: MachineView): { ok: boolean; why: string } => {
    if (!w.managed || w.launchedAtMs === undefined) return { ok: false, why: `${w.name} was not launched by this autoscaler` };
    const ranMs = nowMs - w.launchedAtMs;
    if (ranMs < cfg.billingMinimumMs) return { ok: false, why: `${w.name} has run ${r1(ranMs / 1000)} s, inside the ${cfg.billingMinimumMs / 1000} s billing minimum` };
    return { ok: true, why: "" };
  };
  /** The plan's guard on top (b): no worker goes within the cool-down of its launch. */
  const planTerminable = (w: MachineView): { ok: boolean; why: string } => {
    const g = terminable(w);
    if (!g.ok || w.launchedAtMs === undefined) return g;
    const ranMs = nowMs - w.launchedAtMs;
    if (ranMs < cfg.cooldownMs) return { ok: false, why: `${w.name} was launched ${r1(ranMs / 1000)} s ago, inside the ${cfg.cooldownMs / 1000} s cool-down` };
    return g;
  };

  // (b) inputs: forecasts, capacities, the kind of each app.
  const forecasts = (cfg.markPlan ? (ctx.forecasts ?? []) : []).filter((f) => nowMs - f.atMs <= cfg.forecastMaxAgeMs && f.values.length > 0 && f.stepMs > 0);
  const appKind = new Map<string, { kind: string; capacityQps: number; variant: string }>();
  const catalog = ctx.catalog ?? [];
  const sloSamples = cfg.markSloMonitor ? (ctx.slo ?? []) : [];
  const apps = new Set<string>([...forecasts.map((f) => f.app), ...sloSamples.map((s) => s.app)]);
  for (const app of [...apps].sort()) {
    let best: { kind: string; capacityQps: number; variant: string; perQuery: number } | undefined;
    for (const [kind, spec] of Object.entries(ctx.kinds).sort(([a], [b]) => (a < b ? -1 : 1))) {
      const c = workerCapacityForApp(catalog, app, kind, spec.resources, ctx.sloMsByApp?.[app], kindOf);
      if (!c) continue;
      const perQuery = spec.pricePerHour / c.qps;
      if (!best || perQuery < best.perQuery) best = { kind, capacityQps: c.qps, variant: c.variant, perQuery };
    }
    if (best) appKind.set(app, best);
  }
  /** Apps seen on each kind's workers. */
  const appsOnKind = new Map<string, Set<string>>();
  for (const w of ruled) for (const a of w.apps ?? []) (appsOnKind.get(w.kind) ?? appsOnKind.set(w.kind, new Set()).get(w.kind))?.add(a);
  const forecastByApp = new Map(forecasts.map((f) => [f.app, f]));
  /** Kinds whose every app seen has a forecast (and at least one app is forecast there). */
  const forecastKinds = new Set<string>();
  for (const kind of Object.keys(ctx.kinds)) {
    const mine = [...appKind].filter(([a, k]) => k.kind === kind && forecastByApp.has(a));
    const seen = [...(appsOnKind.get(kind) ?? [])];
    if (mine.length > 0 && seen.every((a) => forecastByApp.has(a))) forecastKinds.add(kind);
  }
  const forecastQpsByKind: Record<string, number> = {};
  for (const [app, k] of appKind) {
    const f = forecastByApp.get(app);
    if (!f || !forecastKinds.has(k.kind)) continue;
    forecastQpsByKind[k.kind] = (forecastQpsByKind[k.kind] ?? 0) + forecastAt(f, nowMs + (ctx.kinds[k.kind]?.bootMs ?? 0));
  }

  // (a) INFaaS rules on the workers that are not going away; only terminable ones may be removed.
  // (`{ ...w, removable }` without the spread's slow path: merge.ts)
  const vmViews: VmWorkerView[] = ruled.map((w) => merge<VmWorkerView>(w, { removable: terminable(w).ok }));
  const vm = vmAutoscale({
    nowMs,
    workers: vmViews,
    ...(ctx.pending ? { pending: ctx.pending } : {}),
    forecastQpsByKind,
    ...(ctx.loadQpsByKind ? { loadQpsByKind: ctx.loadQpsByKind } : {}),
    config: vmCfg,
    state: prev.vm,
  });
  const infaasAdd = new Map<string, Extract<VmScalingDecision, { action: "add" }>>();
  const infaasHold = new Map<string, Extract<VmScalingDecision, { action: "hold" }>>();
  const removals: Array<Extract<VmScalingDecision, { action: "remove" }>> = [];
  for (const d of vm.decisions) {
    if (d.action === "replace") {
      if (!ctx.kinds[d.kind]) {
        decisions.push({ action: "hold", kind: d.kind, worker: d.worker, reason: `${d.reason}; but no instance type is configured for ${d.kind} workers` });
        continue;
      }
      replaced[d.worker] = nowMs;
      lostDecisions.push({ index: ctx.workers.findIndex((w) => w.name === d.worker), d: { action: "replace", worker: d.worker, kind: d.kind, market: marketOf(d.kind), restore: d.restore, reason: d.reason } });
    } else if (d.action === "add") {
      if (cfg.infaasAdd) infaasAdd.set(d.kind, d);
    } else if (d.action === "hold") {
      if (cfg.infaasAdd) infaasHold.set(d.kind, d); // vmAutoscale holds only adds
    } else if (cfg.infaasRemoveIdle) removals.push(d);
  }
  lostDecisions.sort((a, b) => a.index - b.index);
  decisions.push(...lostDecisions.map((x) => x.d), ...spotDecisions);
  const replacing = new Map<string, number>();
  for (const { d } of lostDecisions) replacing.set(d.kind, (replacing.get(d.kind) ?? 0) + 1);

  // (c) SLO monitor (slo-monitor.ts `sloMonitorCycle`): observe every tick, decide every sloPeriodMs,
  // act only while queries still miss. While they go on, the plan gives no worker of the app's kind
  // back (below), so that the launch can take effect.
  const sloState = { slo: prev.slo, missedSinceCycle: prev.sloMissedSinceCycle ?? {}, lastCycleAtMs: prev.lastSloAtMs };
  const cycle = cfg.markSloMonitor
    ? sloMonitorCycle(sloState, sloSamples, nowMs, { periodMs: cfg.sloPeriodMs, decay: cfg.sloDecay, cooldownCycles: cfg.sloCooldownCycles, slMinOf: (app) => cfg.slMinByApp[app] ?? cfg.slMin })
    : { state: sloState, short: [], acts: [] };
  const { slo, missedSinceCycle: sloMissed, lastCycleAtMs: lastSloAtMs } = cycle.state;
  const sloKindOf = (app: string): string | undefined => appKind.get(app)?.kind ?? mostCommonKind(ruled, app);
  /** Kinds of apps above 1 − SLmin whose queries still miss: the plan gives none of their workers back. */
  const sloShort = new Map<string, string>();
  for (const { app, reason } of cycle.short) {
    const kind = sloKindOf(app);
    if (kind !== undefined && !sloShort.has(kind)) sloShort.set(kind, reason);
  }
  const sloWants = new Map<string, string[]>();
  for (const { app, act, reason } of cycle.acts) {
    const kind = sloKindOf(app);
    if (act === "hold") decisions.push({ action: "hold", kind: kind ?? "?", reason });
    else if (kind === undefined) decisions.push({ action: "hold", kind: "?", reason: `${reason}; no kind of worker can serve it` });
    else sloWants.set(kind, [...(sloWants.get(kind) ?? []), reason]);
  }

  // (b) MArk's plan, every planPeriodMs while forecasts exist.
  const provisioning: Record<string, ProvisioningState> = { ...prev.provisioning };
  let lastPlanAtMs = prev.lastPlanAtMs;
  const planned = new Map<string, { launches: number; destroys: string[]; reason: string; workers: number }>();
  if (forecasts.length > 0 && (lastPlanAtMs === null || nowMs - lastPlanAtMs >= cfg.planPeriodMs)) {
    lastPlanAtMs = nowMs;
    for (const [kind, spec] of Object.entries(ctx.kinds).sort(([a], [b]) => (a < b ? -1 : 1))) {
      const mine = [...appKind].filter(([a, k]) => k.kind === kind && forecastByApp.has(a));
      if (mine.length === 0) continue; // no demand known: the kind is left to the other rules
      const stepMs = Math.min(...mine.map(([a]) => (forecastByApp.get(a) as AppForecast).stepMs), cfg.planPeriodMs);
      const steps = Math.max(1, ...mine.map(([a]) => {
        const f = forecastByApp.get(a) as AppForecast;
        return Math.ceil((f.atMs + f.values.length * f.stepMs - (nowMs + spec.bootMs)) / stepMs);
      }));
      const demand: number[] = [];
      for (let i = 0; i < steps; i++) {
        const t = nowMs + spec.bootMs + i * stepMs;
        demand.push(mine.reduce((s, [a, k]) => s + forecastAt(forecastByApp.get(a) as AppForecast, t) / k.capacityQps, 0));
      }
      const running = ruled
        .filter((w) => w.kind === kind)
        .map((w) => ({ w, rank: !w.managed || w.launchedAtMs === undefined ? 0 : !planTerminable(w).ok ? 1 : w.serving ? 2 : w.booting ? 3 : 4 }))
        .sort((a, b) => a.rank - b.rank || (b.w.launchedAtMs ?? 0) - (a.w.launchedAtMs ?? 0) || byName(a.w, b.w))
        .map(({ w }) => ({ id: w.name, type: kind }));
      const d = planProvisioning({
        forecastQps: demand,
        types: [{ name: kind, pricePerHour: spec.pricePerHour, capacityQps: 1, launchOverheadS: spec.bootMs / 1000 }],
        running,
        state: provisioning[kind] ?? { recentPlans: [] },
        stepS: stepMs / 1000,
        tau: 1,
        planHistory: Math.floor(cfg.cooldownMs / cfg.planPeriodMs) + 1,
        targetUtilization: cfg.targetUtilization,
      });
      provisioning[kind] = d.state;
      const apps = mine.map(([a, k]) => `${a} ${r1(forecastAt(forecastByApp.get(a) as AppForecast, nowMs + spec.bootMs))} qps / ${r1(k.capacityQps)} qps per worker (${k.variant})`).join(", ");
      const workers = d.plan[kind] ?? 0;
      const reason = `forecast at now + ${r1(spec.bootMs / 1000)} s: ${apps || "no app"} = ${r2(demand[0] ?? 0)} worker(s) at ${Math.round(cfg.targetUtilization * 100)}% → plan ${workers} ${kind} worker(s), ${running.length} running; ${d.reason}`;
      // Algorithm 1 says how many go; the least wanted go first. It takes running workers into the plan
      // in the order given (equal cost, no overhead), so those it chose are the first plan − launches.
      const chosen = Math.max(0, (d.plan[kind] ?? 0) - d.launches.length);
      const destroys = running.slice(chosen).map((r) => r.id).reverse().slice(0, d.destroys.length);
      planned.set(kind, { launches: d.launches.length, destroys, reason, workers });
      decisions.push({ action: "plan", kind, workers, reason });
    }
  }

  // Launches per kind: the largest ask of (a), (b), (c), within the limit.
  const kinds = new Set<string>([...ruled.map((w) => w.kind), ...infaasAdd.keys(), ...infaasHold.keys(), ...sloWants.keys(), ...planned.keys()]);
  const launchedKinds = new Set<string>();
  for (const kind of [...kinds].sort()) {
    const asks: Array<{ trigger: MachineTrigger; count: number; reason: string }> = [];
    const a = infaasAdd.get(kind);
    if (a) asks.push({ trigger: "infaas", count: a.count, reason: `INFaaS: ${a.reason}` });
    const s = sloWants.get(kind);
    if (s) asks.push({ trigger: "slo", count: 1, reason: `SLO monitor: ${s.join("; ")}` });
    const p = planned.get(kind);
    if (p && p.launches > 0) asks.push({ trigger: "predictive", count: p.launches, reason: `predictive plan: ${p.launches} more worker(s) for the forecast` });
    const hold = infaasHold.get(kind);
    if (asks.length === 0) {
      if (hold) decisions.push({ action: "hold", kind, reason: hold.reason });
      continue;
    }
    if (!ctx.kinds[kind]) {
      decisions.push({ action: "hold", kind, reason: `${asks.map((x) => x.reason).join("; ")}; but no instance type is configured for ${kind} workers` });
      continue;
    }
    const failedAt = failedBootAtMs[kind];
    if (failedAt !== undefined) {
      decisions.push({ action: "hold", kind, reason: `${asks.map((x) => x.reason).join("; ")}; but a ${kind} worker failed to boot ${r1((nowMs - failedAt) / 1000)} s ago (no launch for ${cfg.failedBootBackoffMs / 1000} s)` });
      continue;
    }
    const top = asks.reduce((m, x) => (x.count > m.count ? x : m));
    const present = ruled.filter((w) => w.kind === kind).length + (replacing.get(kind) ?? 0);
    const room = Math.max(0, maxOf(kind) - present);
    const count = Math.min(top.count, room);
    const reason = asks.map((x) => x.reason).join("; ") + (hold ? ` (INFaaS alone would hold: ${hold.reason})` : "");
    if (count <= 0) {
      decisions.push({ action: "hold", kind, reason: `${reason}; at ${limitOf(kind)}` });
      continue;
    }
    launchedKinds.add(kind);
    decisions.push({ action: "launch", kind, count, market: marketOf(kind), trigger: top.trigger, reason: count < top.count ? `${reason}; ${count} of ${top.count} within ${limitOf(kind)}` : reason });
  }

  // Terminations: INFaaS idle removals, then the plan's destroys, through the guards.
  const terminated = new Set<string>();
  for (const d of removals) {
    if (launchedKinds.has(d.kind)) continue; // another rule wants more of this kind now
    terminated.add(d.worker);
    decisions.push({ action: "terminate", worker: d.worker, kind: d.kind, trigger: "idle", reason: d.reason });
  }
  for (const [kind, p] of [...planned].sort(([x], [y]) => (x < y ? -1 : 1))) {
    if (p.destroys.length === 0) continue;
    const blocked = infaasAdd.has(kind) || infaasHold.has(kind) || launchedKinds.has(kind);
    if (blocked || sloShort.has(kind)) {
      decisions.push({ action: "hold", kind, reason: `the predictive plan would give back ${p.destroys.length} ${kind} worker(s), but ${blocked ? "the kind needs capacity now" : (sloShort.get(kind) ?? "")}` });
      continue;
    }
    if (!forecastKinds.has(kind)) {
      const missing = [...(appsOnKind.get(kind) ?? [])].filter((a) => !forecastByApp.has(a)).sort();
      decisions.push({ action: "hold", kind, reason: `the predictive plan would give back ${p.destroys.length} ${kind} worker(s), but app(s) ${missing.join(", ")} on them have no forecast yet` });
      continue;
    }
    let left = ruled.filter((w) => w.kind === kind && !terminated.has(w.name)).length;
    for (const id of p.destroys) {
      const w = ruled.find((x) => x.name === id);
      if (!w || terminated.has(id)) continue;
      const g = planTerminable(w);
      if (!g.ok) {
        if (w.managed) decisions.push({ action: "hold", kind, worker: id, reason: `the predictive plan gives ${id} back, but ${g.why}` });
        continue;
      }
      if (left - 1 < minOf(kind)) {
        decisions.push({ action: "hold", kind, worker: id, reason: `the predictive plan gives ${id} back, but ${minOf(kind)} ${kind} worker(s) must stay` });
        continue;
      }
      left--;
      terminated.add(id);
      decisions.push({ action: "terminate", worker: id, kind, trigger: "predictive", reason: `not in the predictive plan for ${cfg.cooldownMs / 1000} s: ${p.reason}` });
    }
  }
  // Idle workers the INFaaS rule would remove but for the billing minimum.
  const idleMs = vmCfg.idleMs ?? cfg.cooldownMs;
  for (const w of cfg.infaasRemoveIdle ? [...ruled].sort(byName) : []) {
    const since = vm.state.idleSinceMs[w.name];
    if (since === undefined || terminated.has(w.name) || !w.managed || nowMs - since < idleMs) continue;
    const g = terminable(w);
    if (!g.ok) decisions.push({ action: "hold", kind: w.kind, worker: w.name, reason: `idle for ${r1((nowMs - since) / 1000)} s (≥ ${idleMs / 1000} s), but ${g.why}` });
  }

  return { decisions, state: { vm: vm.state, provisioning, lastPlanAtMs, slo, lastSloAtMs, sloMissedSinceCycle: sloMissed, replaced, noticed, failedBootAtMs } };
}

/** The kind of most of the workers that run an app, if any. */
function mostCommonKind(workers: readonly MachineView[], app: string): string | undefined {
  const n = new Map<string, number>();
  for (const w of workers) if ((w.apps ?? []).includes(app)) n.set(w.kind, (n.get(w.kind) ?? 0) + 1);
  let best: string | undefined;
  for (const [k, c] of [...n].sort(([a], [b]) => (a < b ? -1 : 1))) if (best === undefined || c > (n.get(best) ?? 0)) best = k;
  return best;
}

/**
 * Each kind at the prices of `nowMs`: `chooseMarket` for its instance type (spot allowed where the
 * kind has `spot`), its price and market replaced by the choice.
 */
export function kindsAtPrices(kinds: Readonly<Record<string, MachineKind>>, series: SpotPriceSeries, nowMs: number): Record<string, MachineKind> {
  const out: Record<string, MachineKind> = {};
  for (const [k, spec] of Object.entries(kinds)) {
    // A kind kept on-demand keeps its configured price; a spot kind's on-demand price is its type's.
    const c = chooseMarket({ type: spec.instanceType, spot: spec.spot ?? false, ...(spec.spot ? {} : { onDemandPerHour: spec.pricePerHour }) }, series, nowMs);
    out[k] = { ...spec, pricePerHour: c.pricePerHour, spot: c.market === "spot" };
  }
  return out;
}
