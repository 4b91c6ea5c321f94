/**
 * Model-level autoscaling on one worker: INFaaS's greedy heuristic (papers/infaas.txt §4.2.1-4.2.2,
 * DESIGN §3 "Model-level autoscaling"), run every second per worker.
 *
 * For each model with instances on the worker:
 * - load L = Σ current QPS of its instances here; capacity = Σ profiled peak QPS of its loaded and
 *   loading instances; headroom = capacity / L.
 * - **Scale up** when headroom < slack (1.05, §5): the target is capacity ≥ L × slack. Compare
 *   *replicate* (k more instances of a running variant) with *upgrade* (n instances of a variant of the
 *   same model with a higher peak QPS whose latency meets the SLO, replacing the running ones) by the
 *   ILP objective Σ C·(δ + λ·T_load·max(δ, 0)), where δ is the change in instance count of each variant
 *   (the removed instances count with δ < 0), C its price per second and T_load its load latency in
 *   seconds. New instances must meet the SLO (the ILP's constraint 2), replicas included. The cheaper
 *   wins; a tie replicates (no new variant to load). While an instance of the model
 *   is loading, no further scale-up is decided (the capacity counts it already).
 * - **Scale down** when headroom ≥ slack and removing one instance, or *downgrading* to a cheaper variant
 *   (fewest instances that keep capacity ≥ L × slack), keeps the target: the option with the lowest
 *   (most negative) objective is executed only after the load has allowed it continuously for T_v = the
 *   load latency of the variant being removed (§4.2.2); until then a "hold" decision says how long.
 *   At least `minInstances` instances of a model stay on the worker, and at least
 *   `minInstancesByVariant[v]` of a variant (a pipeline plan's floor; such a model is not upgraded or
 *   downgraded: the plan chose its variant).
 * - **Resources**: when the chosen action needs more of a resource than the worker has free (cores,
 *   memory, accelerators), the part that does not fit becomes a "place-elsewhere" decision for the
 *   controller, which tries other workers and then asks the VM autoscaler (§4.2.1 last paragraph).
 *
 * Shape (Ray Serve style): `modelAutoscale(ctx) -> { decisions, state }`; the policy keeps nothing
 * between calls, its memory (when each model's scale-down became possible) comes in and goes out in
 * `state`. Every decision carries a human-readable reason. With `allowVertical: false` it is the
 * horizontal-only autoscaler of the SM+ baseline (INFaaS §6).
 *
 * Caveat: INFaaS measures load per worker, so a model served on several workers is scaled by each
 * worker for the load it sees; the controller must hand each worker its share.
 */
import { merge } from "../common/merge.js";
import { variantLatencyMs, type VariantProfile } from "../selection/selection.js";

export interface ModelAutoscalerConfig {
  /** Minimum headroom (capacity / load). @default 1.05 */
  slack: number;
  /** λ in 1/s: weight of loading latency in the cost (load unpredictability). @default 0.1 */
  lambdaPerS: number;
  /** Instances of a model kept on a worker that runs it. @default 1 */
  minInstances: number;
  /** Allow upgrade/downgrade to other variants (false: horizontal only, SM+). @default true */
  allowVertical: boolean;
}

export const DEFAULT_MODEL_AUTOSCALER_CONFIG: ModelAutoscalerConfig = { slack: 1.05, lambdaPerS: 0.1, minInstances: 1, allowVertical: true };

export interface RunningVariant {
  variant: VariantProfile;
  /** Loaded instances on this worker. */
  instances: number;
  /** Instances being loaded on this worker. */
  loading: number;
  /** Current QPS served by (arriving at) this variant's instances on this worker. */
  loadQps: number;
}

export interface ModelWorkerView {
  name: string;
  /** Free amount of each resource the worker has; a resource not listed is one the worker lacks. */
  free: Record<string, number>;
}

export interface ModelAutoscalerState {
  /** Per model: since when a scale-down has been possible. */
  downSinceMs: Record<string, number>;
}

export interface ModelAutoscalerContext {
  nowMs: number;
  worker: ModelWorkerView;
  running: readonly RunningVariant[];
  /** Every variant the worker may switch to (other models are ignored). */
  catalog: readonly VariantProfile[];
  /** Latency SLO of each model's queries (the tightest); variants slower than it are not candidates. */
  sloMsByModel: Readonly<Record<string, number>>;
  config?: Partial<ModelAutoscalerConfig>;
  state?: ModelAutoscalerState;
  /**
   * Per variant, instances that must stay on this worker: a pipeline plan's floor (model-actions
   * `floors`). They are never removed, and a model running such a variant scales horizontally only
   * (the plan chose its variant: hardware and batch size). @default none
   */
  minInstancesByVariant?: Readonly<Record<string, number>>;
}

export interface InstanceChange {
  variant: string;
  count: number;
}

export type ModelScalingDecision =
  | { action: "replicate"; worker: string; model: string; variant: string; count: number; cost: number; reason: string }
  | { action: "upgrade" | "downgrade"; worker: string; model: string; variant: string; count: number; remove: InstanceChange[]; cost: number; reason: string }
  | { action: "remove"; worker: string; model: string; variant: string; count: number; cost: number; reason: string }
  | { action: "place-elsewhere"; worker: string; model: string; variant: string; count: number; remove: InstanceChange[]; reason: string }
  | { action: "hold"; worker: string; model: string; reason: string };

export interface ModelAutoscalerResult {
  decisions: ModelScalingDecision[];
  state: ModelAutoscalerState;
}

/** ILP objective of changing a variant's instance count by δ: C·(δ + λ·T_load·max(δ, 0)). */
export function scalingCost(v: VariantProfile, delta: number, lambdaPerS: number): number {
  return v.pricePerS * (delta + lambdaPerS * (v.loadLatencyMs / 1000) * Math.max(delta, 0));
}

/** How many instances of v fit in the free resources (Infinity when v needs none). */
export function instancesThatFit(v: Pick<VariantProfile, "resources">, free: Readonly<Record<string, number>>): number {
  let n = Infinity;
  for (const [k, need] of Object.entries(v.resources ?? {})) {
    if (need <= 0) continue;
    const have = free[k];
    if (have === undefined) return 0;
    n = Math.min(n, Math.floor(have / need + 1e-9));
  }
  return n;
}

/**
 * What an executor checks when it is told to load instances (libs/executor `Worker.load`): that their
 * memory fits what the worker has free. Nothing else: the model autoscaler placed them counting what a
 * swap frees (an upgrade's new instances share the threads of those they replace until these are
 * unloaded). The simulator's INFaaS system loads the model autoscaler's commands by the same rule.
 */
export function loadFitsMemory(needBytes: number, freeBytes: number): boolean {
  return needBytes <= freeBytes;
}

const r2 = (x: number): number => Math.round(x * 100) / 100;
/** Costs may be tiny ($/s): three significant digits. */
const c3 = (x: number): number => Number(x.toPrecision(3));

interface Option {
  kind: "replicate" | "upgrade" | "remove" | "downgrade";
  variant: VariantProfile;
  count: number;
  remove: InstanceChange[];
  cost: number;
  /** T_v for a scale-down: load latency of the removed variant(s), ms. */
  waitMs: number;
  why: string;
  /** Profiles of the variants in `remove`, to give their resources back. */
  removed?: Map<string, VariantProfile>;
}

export function modelAutoscale(ctx: ModelAutoscalerContext): ModelAutoscalerResult {
  const cfg: ModelAutoscalerConfig = merge(DEFAULT_MODEL_AUTOSCALER_CONFIG, ctx.config);
  const prev = ctx.state?.downSinceMs ?? {};
  const downSinceMs: Record<string, number> = {};
  const decisions: ModelScalingDecision[] = [];
  const free = { ...ctx.worker.free };
  const byModel = new Map<string, RunningVariant[]>();
  for (const r of ctx.running) {
    if (r.instances + r.loading <= 0) continue;
    const list = byModel.get(r.variant.model) ?? [];
    list.push(r);
    byModel.set(r.variant.model, list);
  }
  const w = ctx.worker.name;
  for (const [model, running] of [...byModel.entries()].sort(([a], [b]) => (a < b ? -1 : 1))) {
    const slo = ctx.sloMsByModel[model] ?? Infinity;
    // (one pass, each sum in the order a reduce would take)
    let load = 0;
    let capacity = 0;
    let instances = 0;
    let loading = false;
    for (const r of running) {
      load = load + r.loadQps;
      capacity = capacity + (r.instances + r.loading) * r.variant.peakQps;
      instances = instances + r.instances + r.loading;
      if (r.loading > 0) loading = true;
    }
    const required = load * cfg.slack;
    const headroom = load > 0 ? capacity / load : Infinity;
    if (capacity < required && loading) {
      decisions.push({ action: "hold", worker: w, model, reason: `headroom ${r2(headroom)} < slack ${cfg.slack}, but an instance is loading (capacity ${r2(capacity)} QPS counts it)` });
      continue;
    }
    // No scale-down while an instance is loading: the capacity counts it already, and removing a
    // serving instance for one that may fail to load is a gamble.
    if (loading) continue;
    const runningNames = new Set(running.map((r) => r.variant.name));
    const floorOf = (r: RunningVariant): number => ctx.minInstancesByVariant?.[r.variant.name] ?? 0;
    const pinned = running.some((r) => floorOf(r) > 0);
    const candidates = cfg.allowVertical && !pinned
      ? ctx.catalog.filter((v) => v.model === model && v.profiled && !runningNames.has(v.name) && variantLatencyMs(v) <= slo)
      : [];
    const removeAll: InstanceChange[] = running.map((r) => ({ variant: r.variant.name, count: r.instances + r.loading }));
    const runningCost = running.reduce((s, r) => s + scalingCost(r.variant, -(r.instances + r.loading), cfg.lambdaPerS), 0);

    if (capacity < required) {
      const options: Option[] = [];
      for (const r of running) {
        // Constraint (2): new instances must meet the SLO, replicas included.
        if (variantLatencyMs(r.variant) > slo) continue;
        const k = Math.ceil((required - capacity) / r.variant.peakQps - 1e-9);
        options.push({ kind: "replicate", variant: r.variant, count: k, remove: [], cost: scalingCost(r.variant, k, cfg.lambdaPerS), waitMs: 0, why: `replicate ${r.variant.name} ×${k}` });
      }
      const fastest = Math.max(...running.map((r) => r.variant.peakQps));
      for (const u of candidates) {
        if (u.peakQps <= fastest) continue;
        const n = Math.max(1, Math.ceil(required / u.peakQps - 1e-9));
        options.push({ kind: "upgrade", variant: u, count: n, remove: removeAll, removed: new Map(running.map((r) => [r.variant.name, r.variant])), cost: scalingCost(u, n, cfg.lambdaPerS) + runningCost, waitMs: 0, why: `upgrade to ${u.name} ×${n}` });
      }
      const best = pick(options);
      if (!best) {
        decisions.push({ action: "hold", worker: w, model, reason: `headroom ${r2(headroom)} < slack ${cfg.slack}, but no variant of ${model} meets the ${slo} ms SLO` });
        continue;
      }
      const alternatives = options.filter((o) => o !== best).map((o) => `${o.why} costs ${c3(o.cost)}`).join("; ");
      const why = `headroom ${r2(headroom)} < slack ${cfg.slack} (load ${r2(load)} QPS, capacity ${r2(capacity)} QPS); ${best.why} costs ${c3(best.cost)}${alternatives ? ` (vs ${alternatives})` : ""}`;
      emitScaleUp(decisions, w, model, best, free, why);
      continue;
    }

    // Scale down: remove one instance, or downgrade (nothing is loading here).
    const options: Option[] = [];
    for (const r of running) {
      if (r.instances <= 0 || instances - 1 < cfg.minInstances || r.instances - 1 < floorOf(r)) continue;
      if (capacity - r.variant.peakQps < required) continue;
      options.push({ kind: "remove", variant: r.variant, count: 1, remove: [{ variant: r.variant.name, count: 1 }], cost: scalingCost(r.variant, -1, cfg.lambdaPerS), waitMs: r.variant.loadLatencyMs, why: `remove one ${r.variant.name}` });
    }
    for (const u of candidates) {
      const n = Math.max(cfg.minInstances, Math.ceil(required / u.peakQps - 1e-9));
      const cost = scalingCost(u, n, cfg.lambdaPerS) + runningCost;
      if (!(cost < 0) || n * u.pricePerS >= running.reduce((s, r) => s + (r.instances + r.loading) * r.variant.pricePerS, 0)) continue;
      if (instancesThatFit(u, free) < n) continue;
      const waitMs = Math.max(...running.map((r) => r.variant.loadLatencyMs));
      options.push({ kind: "downgrade", variant: u, count: n, remove: removeAll, cost, waitMs, why: `downgrade to ${u.name} ×${n}` });
    }
    const best = pick(options);
    if (!best) continue;
    const since = prev[model] ?? ctx.nowMs;
    const waited = ctx.nowMs - since;
    const why = `load ${r2(load)} QPS fits ${best.why} (capacity ${r2(capacity)} QPS, target ${r2(required)} QPS); cost ${c3(best.cost)}`;
    if (waited + 1e-9 < best.waitMs) {
      downSinceMs[model] = since;
      decisions.push({ action: "hold", worker: w, model, reason: `${why}; allowed for ${r2(waited / 1000)} s of T_v = ${r2(best.waitMs / 1000)} s` });
      continue;
    }
    if (best.kind === "remove") {
      decisions.push({ action: "remove", worker: w, model, variant: best.variant.name, count: 1, cost: best.cost, reason: `${why}; allowed for T_v = ${r2(best.waitMs / 1000)} s` });
    } else {
      consume(free, best.variant, best.count);
      decisions.push({ action: "downgrade", worker: w, model, variant: best.variant.name, count: best.count, remove: best.remove, cost: best.cost, reason: `${why}; allowed for T_v = ${r2(best.waitMs / 1000)} s` });
    }
  }
  return { decisions, state: { downSinceMs } };
}

function pick(options: Option[]): Option | undefined {
  let best: Option | undefined;
  for (const o of options) {
    if (!best || o.cost < best.cost - 1e-12) best = o;
    else if (Math.abs(o.cost - best.cost) <= 1e-12 && rank(o) < rank(best)) best = o;
    // Removing one of two equally priced instances: keep the one with more capacity.
    else if (Math.abs(o.cost - best.cost) <= 1e-12 && o.kind === "remove" && best.kind === "remove" && o.variant.peakQps < best.variant.peakQps) best = o;
  }
  return best;
}

/** Tie-break: replicate before upgrade (no new variant), remove before downgrade. */
function rank(o: Option): number {
  return o.kind === "replicate" || o.kind === "remove" ? 0 : 1;
}

function consume(free: Record<string, number>, v: VariantProfile, n: number): void {
  for (const [k, need] of Object.entries(v.resources ?? {})) if (free[k] !== undefined) free[k] -= need * n;
}

function emitScaleUp(decisions: ModelScalingDecision[], w: string, model: string, best: Option, free: Record<string, number>, why: string): void {
  const fit = Math.min(best.count, instancesThatFit(best.variant, free));
  if (best.kind === "replicate") {
    if (fit > 0) {
      consume(free, best.variant, fit);
      decisions.push({ action: "replicate", worker: w, model, variant: best.variant.name, count: fit, cost: best.cost, reason: why });
    }
    if (fit < best.count) {
      decisions.push({ action: "place-elsewhere", worker: w, model, variant: best.variant.name, count: best.count - fit, remove: [], reason: `${why}; only ${fit} fit on ${w}` });
    }
    return;
  }
  // An upgrade replaces the running instances: what they hold is free for the new ones.
  const freed = { ...free };
  for (const r of best.remove) {
    const v = best.removed?.get(r.variant);
    if (v) for (const [k, need] of Object.entries(v.resources ?? {})) if (freed[k] !== undefined) freed[k] += need * r.count;
  }
  const fitAfter = Math.min(best.count, instancesThatFit(best.variant, freed));
  if (fitAfter >= best.count) {
    Object.assign(free, freed);
    consume(free, best.variant, best.count);
    decisions.push({ action: "upgrade", worker: w, model, variant: best.variant.name, count: best.count, remove: best.remove, cost: best.cost, reason: why });
  } else {
    decisions.push({ action: "place-elsewhere", worker: w, model, variant: best.variant.name, count: best.count, remove: best.remove, reason: `${why}; ${w} lacks the resources (${fitAfter} of ${best.count} fit, counting what the replaced instances free)` });
  }
}
