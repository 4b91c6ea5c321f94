/**
 * Acting on the model autoscaler's decisions: one rule, live and simulated (INFaaS §4.2, DESIGN §3
 * "Model-level autoscaling"). The model-autoscaler service (services/model-autoscaler) and the
 * simulator's INFaaS system (libs/sim systems/infaas.ts) both call {@link planModelActions} once per
 * tick with what every worker runs, and carry out the actions it returns.
 *
 * Each tick:
 * 1. **Load.** A worker's load of a model is its arrivals per second over the last `loadWindowMs` (5 s,
 *    the variant state machine's window, `DEFAULT_VARIANT_STATE_CONFIG.loadWindowMs`): Σ arrivals /
 *    Σ period length over the worker's reports received in the window (a variant missing from a report
 *    had no arrivals in it). Only a model's total matters to the autoscaler, so arrivals of a variant
 *    that no longer runs on the worker (just unloaded by a swap) still count toward its model.
 * 2. **Commands in flight.** A worker's view may lag the commands sent to it (a report is up to a period
 *    old): an add it does not show yet counts as loading (and its resources as taken), an unload as
 *    done, until the worker shows it, or until a report received `settleMs` after the command still
 *    does not (the command failed or was lost). In the simulator views are exact and nothing lags.
 * 3. **Swaps** (upgrades, downgrades, placements elsewhere): the new instances are added first and the
 *    model is held on the worker that asked while they load; the old instances (`remove`) are unloaded
 *    once the new ones are ready, all of them or, when none is loading any more, those that loaded.
 *    When none loaded, or after `swapTimeoutMs`, the swap is abandoned with its reason and the old
 *    instances stay (the autoscaler removes a surplus later, after T_v).
 * 3b. **Floors** (pipeline plans, `floors`): per variant, the instances the plans want across the
 *    workers (summed over plans). Those that neither run, load nor are on their way are placed one at a
 *    time with {@link chooseWorker} (no oversubscription), in rounds over the floors (one instance of
 *    each in turn, so that scarce room is shared between a pipeline's stages), first among the workers
 *    that do not run the variant yet (replicas spread), then among all; what no worker can take is
 *    escalated. The floor's
 *    instances, counted on the workers that run most of them, are protected from step 4's scale-downs
 *    (`minInstancesByVariant`), and their model is scaled horizontally only there. A floor lowered
 *    since the last tick (a Tuner scale-down) or lifted (its pipeline gone) unloads the instances it no
 *    longer wants, one at a time from the workers that run most of them, down to the new floor (those
 *    the autoscaler added on its own count too: it adds them back if the load needs them).
 * 3c. **Interference** (INFaaS §4.1, interference.ts): {@link planMigrations} moves each variant
 *    Interfered on a worker (its report's state) to free resources on the same worker, else to the
 *    least-loaded other worker with room: a swap that adds the new instances, holds the model on the
 *    worker, and unloads the *oldest* instances (the interfered ones) once the new ones are ready. Off
 *    with `interference: false`.
 * 4. **Decisions.** {@link modelAutoscale} per worker (in name order) for its models not held. Its
 *    candidates are the variants of the model of a kind that some live worker has or that a new worker
 *    can be asked for (`launchableKinds`); a variant of another kind than the worker's fits no instance
 *    on it (the kind counts as a resource that only workers of that kind have), so choosing it becomes a
 *    placement elsewhere.
 * 5. **Actions.** replicate → add here; upgrade/downgrade → add here + a swap; remove → unload;
 *    place-elsewhere → for each instance, {@link chooseWorker} among the other live workers of the
 *    variant's kind that have room for it (by `resources`, no oversubscription; with
 *    `packBelowUtilisation`, bin packing: the busiest one under it, placement.ts) + a swap that holds the
 *    model until they are ready and then unloads `remove`; the instances no worker can take → one
 *    escalation to the VM autoscaler.
 *
 * Shape (Ray Serve): `planModelActions(ctx) -> { actions, state }`. The autoscaler's state, the swaps,
 * the commands in flight and the arrival samples come in and go out in `state`. Actions are ordered:
 * first the swaps that end (unloads, abandons), then per worker each decision followed by the commands
 * it implies. Every action carries a reason.
 *
 * Caveats: an upgrade in place adds before it removes, so the worker needs room for both while the new
 * instances load, but the autoscaler counts what the replaced instances free (model-autoscaler.ts); such
 * an add fails on the worker, and the swap is abandoned once the worker has shown that. Escalations
 * repeat every tick while no worker can take the instances.
 */
import { modelAutoscale, type InstanceChange, type ModelAutoscalerConfig, type ModelAutoscalerState, type ModelScalingDecision, type RunningVariant } from "./model-autoscaler.js";
import { planMigrations, type InterferenceConfig, type InterferenceMemory, type MigrationDecision } from "../placement/interference.js";
import { copy, merge } from "../common/merge.js";
import { chooseWorker, type WorkerView } from "../placement/placement.js";
import type { VariantProfile } from "../selection/selection.js";
import { DEFAULT_VARIANT_STATE_CONFIG } from "../selection/variant-state.js";

export interface ModelActionsConfig {
  /** A swap whose new instances are not ready by then is abandoned (the old ones stay). @default 60_000 */
  swapTimeoutMs: number;
  /** A command a report received this long after it still does not show has failed. @default 3000 */
  settleMs: number;
  /** Window of the load. @default DEFAULT_VARIANT_STATE_CONFIG.loadWindowMs (5000) */
  loadWindowMs: number;
  /** Length of a report period with no earlier report to measure it from. @default 1000 */
  periodMs: number;
}

export const DEFAULT_MODEL_ACTIONS_CONFIG: ModelActionsConfig = {
  swapTimeoutMs: 60_000,
  settleMs: 3000,
  loadWindowMs: DEFAULT_VARIANT_STATE_CONFIG.loadWindowMs,
  periodMs: 1000,
};

/** A variant on one worker. */
export interface VariantRuns {
  /** Instances serving. */
  ready: number;
  /** Instances loading. */
  loading: number;
  /** Arrivals per second at this variant on this worker over the worker's last report period. */
  arrivalsQps: number;
  /** Its state there is Interfered (variant-state.ts): step 3c moves it. @default false */
  interfered?: boolean;
}

/** What a worker runs, as its latest report (live) or the machine (simulator) says. */
export interface WorkerRuns {
  name: string;
  /** Hardware kind: the variants it can run are those of this kind. */
  kind: string;
  /** When the worker took this view, on its clock (the simulator: now): a new `atMs` is a new report. */
  atMs: number;
  /** When it was received, on the deciding clock (the simulator: now). */
  seenAtMs: number;
  /** Busy fraction over the last period, 0..1 (for placement). */
  utilisation: number;
  /** Free amount of each resource it offers (threads, memoryBytes, accelerators, …; missing: lacks it). */
  free: Readonly<Record<string, number>>;
  variants: Readonly<Record<string, VariantRuns>>;
}

/** One report's arrivals (QPS by variant) over a period of `ms` ending at `atMs`, received at `seenAtMs`. */
export interface ArrivalSample {
  atMs: number;
  seenAtMs: number;
  ms: number;
  qps: Record<string, number>;
}

/** Instances added for a decision, whose model waits on `worker` until they are ready. */
export interface Swap {
  /** The worker that decided it: the model is held there, and `remove` is unloaded there. */
  worker: string;
  model: string;
  /** The variant added. */
  variant: string;
  /** Where, how many, and how many were ready there before. */
  added: Array<{ worker: string; count: number; baselineReady: number }>;
  remove: InstanceChange[];
  startedAtMs: number;
  /** What decided it, e.g. "upgrade to v ×1". */
  why: string;
  /** A move of Interfered instances (step 3c): `remove` unloads the oldest instances, those interfered. */
  migration?: boolean;
}

/** A command sent and not yet shown by its worker. `delta` > 0 adds, < 0 unloads. */
export interface CommandInFlight {
  worker: string;
  variant: string;
  delta: number;
  /** Instances (ready + loading) of the variant on the worker when it was sent. */
  baseline: number;
  atMs: number;
}

export interface ModelActionsState {
  /** The autoscaler's own state, per worker. */
  autoscaler: Record<string, ModelAutoscalerState>;
  swaps: Swap[];
  inFlight: CommandInFlight[];
  /** Per worker: its reports' arrivals within the load window. */
  arrivals: Record<string, ArrivalSample[]>;
  /** Per variant, the floor of the last tick (to see it lowered). */
  floors?: Record<string, number>;
  /** Step 3c's memory: when each move of an Interfered variant ended (interference.ts). */
  migrations?: InterferenceMemory;
}

export type ModelAction =
  /** A decision of the autoscaler (holds included), to publish or log. */
  | { kind: "decision"; worker: string; decision: ModelScalingDecision | MigrationDecision }
  | { kind: "add"; worker: string; model: string; variant: string; count: number; reason: string }
  /** `oldest`: unload the instances loaded first (a move of Interfered instances), not the newest. */
  | { kind: "unload"; worker: string; model: string; variant: string; count: number; reason: string; oldest?: true }
  /** Instances no worker could take: ask the VM autoscaler for a worker of `hardware`. */
  | { kind: "escalate"; worker: string; model: string; hardware: string; variant: string; count: number; reason: string }
  /** A swap given up: its old instances stay. */
  | { kind: "abandon"; worker: string; model: string; variant: string; count: number; reason: string };

export interface ModelActionsContext {
  nowMs: number;
  /** Every live worker. */
  workers: readonly WorkerRuns[];
  /** Every variant (profiled ones are candidates). */
  catalog: readonly VariantProfile[];
  /** Latency SLO of each model's queries (the tightest). */
  sloMsByModel: Readonly<Record<string, number>>;
  /** Kind of worker a variant runs on. @default v.hardware */
  kindOf?: (v: VariantProfile) => string;
  /**
   * Kinds of worker the VM autoscaler can add (the simulator: those it has a machine template for).
   * Variants of a kind no live worker has and none can be added are no candidates. @default []
   */
  launchableKinds?: readonly string[];
  autoscaler?: Partial<ModelAutoscalerConfig>;
  config?: Partial<ModelActionsConfig>;
  state?: ModelActionsState;
  /**
   * Instances of variants that must run across the workers: pipeline plans' replicas (the pipeline
   * controller, services/model-autoscaler pipelines.ts). Step 3b places the missing ones and step 4
   * keeps them. @default none
   */
  floors?: readonly VariantFloor[];
  /** Step 3c's settings, or false: Interfered variants are not moved. @default DEFAULT_INTERFERENCE_CONFIG */
  interference?: Partial<InterferenceConfig> | false;
  /**
   * Bin packing for placements elsewhere (placement.ts `packBelow`): the busiest worker with room under
   * this utilisation. @default undefined (spread: the lowest-utilised)
   */
  packBelowUtilisation?: number;
}

/** A pipeline plan's replica count for a variant: a floor under the autoscaler's scale-downs. */
export interface VariantFloor {
  variant: string;
  count: number;
  /** Who wants it, e.g. "pipeline-digits-cascade" (an escalation's `worker`). */
  owner: string;
  /** Why, e.g. "pipeline digits-cascade stage fast: planner, 2 replicas". */
  reason: string;
}

export interface ModelActionsResult {
  actions: ModelAction[];
  state: ModelActionsState;
}

export function emptyModelActionsState(): ModelActionsState {
  return { autoscaler: {}, swaps: [], inFlight: [], arrivals: {}, floors: {} };
}

/** Arrivals per second of each variant over the samples: Σ qps·ms / Σ ms. */
export function windowedArrivalsQps(samples: readonly ArrivalSample[]): Record<string, number> {
  let span = 0;
  const sum: Record<string, number> = {};
  // (for-in over own keys, in Object.entries' order, rather than its arrays: this runs per worker per tick)
  for (const s of samples) {
    span += s.ms;
    const qps = s.qps;
    for (const v in qps) if (Object.prototype.hasOwnProperty.call(qps, v)) sum[v] = (sum[v] ?? 0) + (qps[v] as number) * s.ms;
  }
  const out: Record<string, number> = {};
  for (const v in sum) if (Object.prototype.hasOwnProperty.call(sum, v)) out[v] = span > 0 ? (sum[v] as number) / span : 0;
  return out;
}

/** Prefix of the resource that stands for a hardware kind (see step 4 of the header). */
const KIND = "kind:";

interface View {
  w: WorkerRuns;
  free: Record<string, number>;
  runs: Map<string, { ready: number; loading: number }>;
}

const r2 = (x: number): number => Math.round(x * 100) / 100;

/** `{ ...free, [kind]: Infinity }` (without the spread's slow path, merge.ts: this runs per worker per tick). */
function withKind(free: Readonly<Record<string, number>>, kind: string): Record<string, number> {
  const out: Record<string, number> = copy(free);
  out[kind] = Infinity;
  return out;
}

/**
 * Step 4's view of a variant: `{ ...v, resources: { ...v.resources, [KIND + kind]: 1 } }`, reused from
 * one call to the next while the variant's own fields (and its resources') and its kind are unchanged:
 * the catalog is rebuilt every tick otherwise, and nothing keeps or compares these objects (nor
 * changes them).
 */
interface ScaledEntry {
  kind: string;
  /** The variant's own enumerable fields, then its resources', as [key, value, key, value, …]. */
  fields: unknown[];
  resources: unknown[];
  /** The variant and its resources were frozen: they cannot have changed, no field is compared. */
  frozen: boolean;
  scaled: VariantProfile;
}
const scaledCache = new WeakMap<VariantProfile, ScaledEntry>();
function fieldsOf(o: object | undefined): unknown[] {
  const out: unknown[] = [];
  if (o !== undefined) for (const k of Object.keys(o)) out.push(k, (o as Record<string, unknown>)[k]);
  return out;
}
function sameFields(o: object | undefined, fields: readonly unknown[]): boolean {
  if (o === undefined) return fields.length === 0;
  let i = 0;
  for (const k in o) {
    if (!Object.prototype.hasOwnProperty.call(o, k)) return false;
    if (i >= fields.length || fields[i] !== k || !Object.is(fields[i + 1], (o as Record<string, unknown>)[k])) return false;
    i += 2;
  }
  return i === fields.length && Object.getOwnPropertySymbols(o).length === 0;
}
/** Frozen, with data properties only (no getter whose value could still change). */
function frozenData(o: object): boolean {
  if (!Object.isFrozen(o)) return false;
  for (const d of Object.values(Object.getOwnPropertyDescriptors(o))) if (!("value" in d)) return false;
  return true;
}
function asScaledVariant(v: VariantProfile, kind: string): VariantProfile {
  const c = scaledCache.get(v);
  if (c !== undefined && c.kind === kind && (c.frozen || (sameFields(v, c.fields) && sameFields(v.resources, c.resources)))) return c.scaled;
  const scaled = { ...v, resources: { ...(v.resources ?? {}), [KIND + kind]: 1 } };
  const resources = v.resources;
  if (Object.getOwnPropertySymbols(v).length === 0 && (resources === undefined || Object.getOwnPropertySymbols(resources).length === 0)) {
    const frozen = frozenData(v) && (resources === undefined || frozenData(resources));
    scaledCache.set(v, { kind, fields: fieldsOf(v), resources: fieldsOf(resources), frozen, scaled });
  }
  return scaled;
}

/**
 * What planModelActions derives from the catalog each tick (profiles by name, the step-4 views of the
 * variants, the candidates of the kinds there are), kept from one call to the next while the catalog
 * holds the same variants, each unchanged (`asScaledVariant` checks), the same `kindOf` and the same
 * kinds: the simulator passes one catalog every tick.
 */
interface CatalogViews {
  profiles: Map<string, VariantProfile>;
  asScaled: Map<string, VariantProfile>;
  candidates: VariantProfile[];
}
interface CatalogMemo extends CatalogViews {
  kindOf: (v: VariantProfile) => string;
  variants: VariantProfile[];
  scaled: VariantProfile[];
  kinds: string[];
}
const hardwareKind = (v: VariantProfile): string => String(v.hardware);
const catalogMemo = new WeakMap<readonly VariantProfile[], CatalogMemo>();
function catalogViews(catalog: readonly VariantProfile[], kindOf: (v: VariantProfile) => string, workers: readonly WorkerRuns[], launchable: readonly string[]): CatalogViews {
  const kinds = [...new Set([...workers.map((w) => w.kind), ...launchable])].sort();
  const memo = catalogMemo.get(catalog);
  if (memo !== undefined && memo.kindOf === kindOf && memo.variants.length === catalog.length && memo.kinds.length === kinds.length && kinds.every((k, i) => memo.kinds[i] === k)) {
    let same = true;
    for (let i = 0; i < catalog.length && same; i++) {
      const v = catalog[i] as VariantProfile;
      same = memo.variants[i] === v && asScaledVariant(v, kindOf(v)) === memo.scaled[i];
    }
    if (same) return memo;
  }
  const profiles = new Map(catalog.map((v) => [v.name, v]));
  const scaled = catalog.map((v) => asScaledVariant(v, kindOf(v)));
  const asScaled = new Map(catalog.map((v, i) => [v.name, scaled[i] as VariantProfile]));
  const kindSet = new Set(kinds);
  const candidates = [...asScaled.values()].filter((v) => kindSet.has(kindOf(v)));
  catalogMemo.set(catalog, { kindOf, variants: [...catalog], scaled, kinds, profiles, asScaled, candidates });
  return { profiles, asScaled, candidates };
}

export function planModelActions(ctx: ModelActionsContext): ModelActionsResult {
  const cfg: ModelActionsConfig = merge(DEFAULT_MODEL_ACTIONS_CONFIG, ctx.config);
  const prev = ctx.state ?? emptyModelActionsState();
  const nowMs = ctx.nowMs;
  const kindOf = ctx.kindOf ?? hardwareKind;
  // The autoscaler sees each variant needing one unit of its kind (workers offer unlimited units of theirs).
  const workers = [...ctx.workers].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  const { profiles, asScaled, candidates } = catalogViews(ctx.catalog, kindOf, workers, ctx.launchableKinds ?? []);
  const views = new Map<string, View>();
  for (const w of workers) {
    const runs = new Map<string, { ready: number; loading: number }>();
    for (const [v, r] of Object.entries(w.variants)) runs.set(v, { ready: Math.max(0, r.ready), loading: Math.max(0, r.loading) });
    views.set(w.name, { w, free: { ...w.free }, runs });
  }
  const actions: ModelAction[] = [];
  const runsOf = (view: View, variant: string): { ready: number; loading: number } => {
    let r = view.runs.get(variant);
    if (!r) view.runs.set(variant, (r = { ready: 0, loading: 0 }));
    return r;
  };
  const take = (view: View, variant: string, n: number): void => {
    runsOf(view, variant).loading += n;
    for (const [k, need] of Object.entries(profiles.get(variant)?.resources ?? {})) if (view.free[k] !== undefined) view.free[k] -= need * n;
  };
  const inFlight: CommandInFlight[] = [];
  const command = (view: View, kind: "add" | "unload", model: string, variant: string, count: number, reason: string, oldest = false): void => {
    const r = runsOf(view, variant);
    inFlight.push({ worker: view.w.name, variant, delta: kind === "add" ? count : -count, baseline: r.ready + r.loading, atMs: nowMs });
    if (kind === "add") take(view, variant, count);
    else r.ready = Math.max(0, r.ready - count);
    if (kind === "unload" && oldest) actions.push({ kind, worker: view.w.name, model, variant, count, reason, oldest: true });
    else actions.push({ kind, worker: view.w.name, model, variant, count, reason });
  };

  // 1. Arrival samples, one per new report.
  const arrivals: Record<string, ArrivalSample[]> = {};
  for (const w of workers) {
    const before = prev.arrivals[w.name] ?? [];
    const last = before[before.length - 1];
    // (those of the window, in order, then the new one if it is in the window: one array per worker)
    const samples: ArrivalSample[] = [];
    for (const s of before) if (s.seenAtMs > nowMs - cfg.loadWindowMs) samples.push(s);
    if (!last || w.atMs > last.atMs) {
      const qps: Record<string, number> = {};
      for (const [v, r] of Object.entries(w.variants)) if (r.arrivalsQps > 0) qps[v] = r.arrivalsQps;
      const sample = { atMs: w.atMs, seenAtMs: w.seenAtMs, ms: last ? Math.min(w.atMs - last.atMs, cfg.loadWindowMs) : cfg.periodMs, qps };
      if (sample.seenAtMs > nowMs - cfg.loadWindowMs) samples.push(sample);
    }
    arrivals[w.name] = samples;
  }

  // 2. Commands in flight: drop those the worker shows (or had the time to show), count the others.
  for (const e of prev.inFlight) {
    const view = views.get(e.worker);
    if (!view) continue;
    const r = runsOf(view, e.variant);
    const total = r.ready + r.loading;
    const target = e.baseline + e.delta;
    const shown = e.delta > 0 ? total >= target : total <= target;
    if (shown || view.w.seenAtMs - e.atMs >= cfg.settleMs) continue;
    inFlight.push(e);
    if (e.delta > 0) take(view, e.variant, target - total);
    else r.ready = Math.max(0, Math.min(r.ready, target - r.loading));
  }

  // 3. Swaps: finish those whose new instances are ready, abandon the failed and the late.
  const swaps: Swap[] = [];
  for (const s of prev.swaps) {
    const origin = views.get(s.worker);
    if (!origin) continue; // the worker is gone, and the old instances with it
    let wanted = 0;
    let ready = 0;
    let loading = 0;
    for (const a of s.added) {
      wanted += a.count;
      const target = views.get(a.worker);
      if (!target) continue;
      const r = runsOf(target, s.variant);
      const up = Math.min(a.count, Math.max(0, r.ready - a.baselineReady));
      ready += up;
      loading += Math.min(a.count - up, r.loading);
    }
    const where = s.added.map((a) => a.worker).join(", ");
    if (ready >= wanted || (loading === 0 && ready > 0)) {
      for (const rm of s.remove) {
        const r = runsOf(origin, rm.variant);
        const n = Math.min(rm.count, r.ready + r.loading);
        if (n > 0) command(origin, "unload", s.model, rm.variant, n, `${s.why}: ${ready} of ${wanted} new ${s.variant} ready on ${where}, unloading the ${rm.variant} ×${n} they replace`, s.migration === true);
      }
    } else if (loading === 0) {
      actions.push({ kind: "abandon", worker: s.worker, model: s.model, variant: s.variant, count: wanted, reason: `${s.why}: none of the ${wanted} new ${s.variant} loaded on ${where}; keeping what ${s.worker} runs` });
    } else if (nowMs - s.startedAtMs > cfg.swapTimeoutMs) {
      actions.push({ kind: "abandon", worker: s.worker, model: s.model, variant: s.variant, count: wanted, reason: `${s.why}: ${ready} of ${wanted} new ${s.variant} ready on ${where} after ${r2((nowMs - s.startedAtMs) / 1000)} s (limit ${r2(cfg.swapTimeoutMs / 1000)} s); keeping what ${s.worker} runs` });
    } else swaps.push(s);
  }

  // 3b. Floors: place the instances that pipeline plans want and that neither run, load nor are on
  // their way (workers without the variant first, then any with room), and protect the floor's
  // instances from the autoscaler's scale-downs, on the workers that run most of them.
  const protectedOn = new Map<string, Record<string, number>>();
  const floors = new Map<string, VariantFloor>();
  for (const f of ctx.floors ?? []) {
    const known = floors.get(f.variant);
    floors.set(f.variant, known ? { ...known, count: known.count + f.count, reason: `${known.reason}; ${f.reason}` } : { ...f });
  }
  const floorCounts: Record<string, number> = {};
  const instancesOf = (variant: string): number => [...views.values()].reduce((n, view) => n + (view.runs.get(variant)?.ready ?? 0) + (view.runs.get(variant)?.loading ?? 0), 0);
  // A floor lowered (a Tuner scale-down) or lifted (a pipeline gone): the instances it no longer wants
  // go, from the workers that run most of them, down to the new floor.
  for (const [variant, before] of Object.entries(prev.floors ?? {}).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) {
    const now = floors.get(variant)?.count ?? 0;
    const v = profiles.get(variant);
    if (!v || now >= before) continue;
    let surplus = Math.min(before - now, instancesOf(variant) - now);
    const why = floors.get(variant)?.reason ?? `no pipeline plan wants ${variant} any more`;
    while (surplus > 0) {
      const from = [...views.values()]
        .filter((view) => (view.runs.get(variant)?.ready ?? 0) > 0)
        .sort((a, b) => (b.runs.get(variant)?.ready ?? 0) - (a.runs.get(variant)?.ready ?? 0) || (a.w.name < b.w.name ? -1 : 1))[0];
      if (!from) break;
      command(from, "unload", v.model, variant, 1, `${why}: the floor went from ${before} to ${now}`);
      surplus--;
    }
  }
  // Placement in rounds, one instance per floor in turn: scarce room is shared between the stages.
  const wanted = [...floors.values()]
    .sort((a, b) => (a.variant < b.variant ? -1 : a.variant > b.variant ? 1 : 0))
    .flatMap((f) => {
      const v = profiles.get(f.variant);
      return v && f.count > 0 ? [{ f, v, missing: f.count - instancesOf(v.name), refusal: "" }] : [];
    });
  for (const x of wanted) floorCounts[x.f.variant] = x.f.count;
  for (let placed = true; placed; ) {
    placed = false;
    for (const x of wanted) {
      if (x.missing <= 0 || x.refusal) continue;
      const { f, v } = x;
      const others = (spread: boolean): WorkerView[] => [...views.values()].map((o) => ({
        worker: o.w.name, hardware: o.w.kind, utilisation: o.w.utilisation, threads: 0, threadsUsed: 0, seenAtMs: o.w.seenAtMs, free: o.free,
        variants: spread ? [...o.runs].filter(([, r]) => r.ready + r.loading > 0).map(([name]) => name) : [],
      }));
      const request = { variant: v.name, hardware: kindOf(v), threads: 0, resources: v.resources ?? {}, allowOversubscription: false };
      let choice = chooseWorker(others(true), request, nowMs);
      if (choice.worker === undefined) choice = chooseWorker(others(false), request, nowMs);
      const target = choice.worker === undefined ? undefined : views.get(choice.worker);
      if (!target) {
        x.refusal = choice.reason;
        continue;
      }
      command(target, "add", v.model, v.name, 1, `${f.reason}: ${instancesOf(v.name)} of ${f.count} ${v.name} running; placed on ${target.w.name}: ${choice.reason}`);
      x.missing--;
      placed = true;
    }
  }
  for (const { f, v, missing, refusal } of wanted) {
    if (missing > 0) {
      actions.push({ kind: "escalate", worker: f.owner, model: v.model, hardware: kindOf(v), variant: v.name, count: missing, reason: `${f.reason}: ${instancesOf(v.name)} of ${f.count} ${v.name} running and no worker can take ${missing} more (${refusal})` });
    }
    let left = f.count;
    const holders = [...views.values()]
      .map((view) => ({ view, n: (view.runs.get(v.name)?.ready ?? 0) + (view.runs.get(v.name)?.loading ?? 0) }))
      .filter((x) => x.n > 0)
      .sort((a, b) => b.n - a.n || (a.view.w.name < b.view.w.name ? -1 : 1));
    for (const { view, n } of holders) {
      if (left <= 0) break;
      const keep = Math.min(n, left);
      left -= keep;
      const mine = protectedOn.get(view.w.name) ?? {};
      mine[v.name] = keep;
      protectedOn.set(view.w.name, mine);
    }
  }

  // 3c. Interference: move Interfered variants (interference.ts), each as a swap.
  let migrations: InterferenceMemory = prev.migrations ?? {};
  if (ctx.interference !== false) {
    const inProgress = new Set(swaps.filter((s) => s.migration).map((s) => `${s.worker}|${s.variant}`));
    const heldBy = new Set(swaps.filter((s) => !s.migration).map((s) => `${s.worker}|${s.model}`));
    const res = planMigrations({
      nowMs,
      workers: [...views.values()].map((view) => {
        const ready: Record<string, number> = {};
        for (const [v, r] of view.runs) ready[v] = r.ready;
        return { name: view.w.name, kind: view.w.kind, seenAtMs: view.w.seenAtMs, utilisation: view.w.utilisation, free: view.free, ready, interfered: Object.keys(view.w.variants).filter((v) => view.w.variants[v]?.interfered === true) };
      }),
      profileOf: (v) => profiles.get(v),
      kindOf,
      inProgress,
      held: (worker, model) => heldBy.has(`${worker}|${model}`),
      memory: migrations,
      config: ctx.interference ?? {},
    });
    migrations = res.memory;
    for (const d of res.decisions) {
      actions.push({ kind: "decision", worker: d.worker, decision: d });
      const target = d.action === "migrate" ? views.get(d.to) : undefined;
      if (d.action !== "migrate" || !target) continue;
      const baselineReady = runsOf(target, d.variant).ready;
      command(target, "add", d.model, d.variant, d.count, d.reason);
      swaps.push({ worker: d.worker, model: d.model, variant: d.variant, added: [{ worker: d.to, count: d.count, baselineReady }], remove: [{ variant: d.variant, count: d.count }], startedAtMs: nowMs, why: `move Interfered ${d.variant} ×${d.count} ${d.local ? `within ${d.worker}` : `from ${d.worker} to ${d.to}`}`, migration: true });
    }
  }

  // 4-5. The autoscaler per worker, and what its decisions imply.
  const autoscalerState: Record<string, ModelAutoscalerState> = {};
  for (const w of workers) {
    const view = views.get(w.name) as View;
    const held = new Map<string, Swap>();
    for (const s of swaps) if (s.worker === w.name && !held.has(s.model)) held.set(s.model, s);
    for (const [model, s] of held) {
      const where = s.added.map((a) => `${a.worker} ×${a.count}`).join(", ");
      const rm = s.remove.map((r) => `${r.variant} ×${r.count}`).join(", ");
      actions.push({ kind: "decision", worker: w.name, decision: { action: "hold", worker: w.name, model, reason: `${s.why}: waiting for the new ${s.variant} (${where}) to be ready${rm ? ` before unloading ${rm}` : ""}` } });
    }
    // A worker that runs nothing the autoscaler may scale: its answer is known (no decision, no memory).
    let scalable = false;
    for (const [name, r] of view.runs) {
      const p = asScaled.get(name);
      if (p && !held.has(p.model) && r.ready + r.loading > 0) {
        scalable = true;
        break;
      }
    }
    if (!scalable) {
      autoscalerState[w.name] = { downSinceMs: {} };
      continue;
    }
    const load = windowedArrivalsQps(arrivals[w.name] ?? []);
    const modelLoad = new Map<string, number>();
    for (const [v, qps] of Object.entries(load)) {
      const p = profiles.get(v);
      if (p) modelLoad.set(p.model, (modelLoad.get(p.model) ?? 0) + qps);
    }
    const running: RunningVariant[] = [];
    // (the names sorted as strings, as `<` orders them: keys are unique, so no tie; no entry arrays)
    for (const name of [...view.runs.keys()].sort()) {
      const r = view.runs.get(name) as { ready: number; loading: number };
      const p = asScaled.get(name);
      if (!p || held.has(p.model) || r.ready + r.loading <= 0) continue;
      running.push({ variant: p, instances: r.ready, loading: r.loading, loadQps: load[name] ?? 0 });
    }
    // Arrivals of the model's variants that no longer run here go to its first running variant.
    for (const [model, total] of modelLoad) {
      const mine = running.filter((r) => r.variant.model === model);
      const first = mine[0];
      if (first) first.loadQps += Math.max(0, total - mine.reduce((s, r) => s + r.loadQps, 0));
    }
    const result = modelAutoscale({
      nowMs,
      worker: { name: w.name, free: withKind(view.free, KIND + w.kind) },
      running,
      catalog: candidates,
      sloMsByModel: ctx.sloMsByModel,
      config: ctx.autoscaler ?? {},
      state: prev.autoscaler[w.name],
      ...(protectedOn.has(w.name) ? { minInstancesByVariant: protectedOn.get(w.name) } : {}),
    });
    autoscalerState[w.name] = result.state;
    for (const d of result.decisions) {
      actions.push({ kind: "decision", worker: w.name, decision: d });
      switch (d.action) {
        case "hold":
          break;
        case "replicate":
          command(view, "add", d.model, d.variant, d.count, d.reason);
          break;
        case "remove":
          command(view, "unload", d.model, d.variant, d.count, d.reason);
          break;
        case "upgrade":
        case "downgrade": {
          const baselineReady = runsOf(view, d.variant).ready;
          command(view, "add", d.model, d.variant, d.count, d.reason);
          swaps.push({ worker: w.name, model: d.model, variant: d.variant, added: [{ worker: w.name, count: d.count, baselineReady }], remove: d.remove, startedAtMs: nowMs, why: `${d.action} to ${d.variant} ×${d.count}` });
          break;
        }
        case "place-elsewhere": {
          const v = profiles.get(d.variant);
          if (!v) break;
          const placed: Array<{ view: View; count: number; baselineReady: number; why: string }> = [];
          let left = d.count;
          let refusal = "";
          for (; left > 0; left--) {
            const others: WorkerView[] = [...views.values()]
              .filter((o) => o.w.name !== w.name)
              .map((o) => ({ worker: o.w.name, hardware: o.w.kind, utilisation: o.w.utilisation, threads: 0, threadsUsed: 0, variants: [], seenAtMs: o.w.seenAtMs, free: o.free, instances: [...o.runs.values()].reduce((n, r) => n + r.ready + r.loading, 0) }));
            const pack = ctx.packBelowUtilisation !== undefined ? { packBelow: ctx.packBelowUtilisation } : {};
            const choice = chooseWorker(others, { variant: v.name, hardware: kindOf(v), threads: 0, resources: v.resources ?? {}, allowOversubscription: false, ...pack }, nowMs);
            const target = choice.worker === undefined ? undefined : views.get(choice.worker);
            if (!target) {
              refusal = choice.reason;
              break;
            }
            let p = placed.find((x) => x.view === target);
            if (!p) placed.push((p = { view: target, count: 0, baselineReady: runsOf(target, v.name).ready, why: choice.reason }));
            p.count++;
            take(target, v.name, 1);
          }
          for (const p of placed) {
            // `take` counted them already: record the command with the instances before it.
            const r = runsOf(p.view, v.name);
            inFlight.push({ worker: p.view.w.name, variant: v.name, delta: p.count, baseline: r.ready + r.loading - p.count, atMs: nowMs });
            actions.push({ kind: "add", worker: p.view.w.name, model: d.model, variant: v.name, count: p.count, reason: `${d.reason}; placed on ${p.view.w.name}: ${p.why}` });
          }
          if (placed.length > 0) {
            swaps.push({ worker: w.name, model: d.model, variant: v.name, added: placed.map((p) => ({ worker: p.view.w.name, count: p.count, baselineReady: p.baselineReady })), remove: d.remove, startedAtMs: nowMs, why: `place ${v.name} ×${d.count - left} elsewhere` });
          }
          if (left > 0) {
            actions.push({ kind: "escalate", worker: w.name, model: d.model, hardware: kindOf(v), variant: v.name, count: left, reason: `${d.reason}; no other worker can take ${left} (${refusal})` });
          }
          break;
        }
      }
    }
  }
  return { actions, state: { autoscaler: autoscalerState, swaps, inFlight, arrivals, floors: floorCounts, migrations } };
}
