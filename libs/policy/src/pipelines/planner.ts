/**
 * The InferLine Planner (InferLine §4.3): the low-frequency, cost-minimising configuration of a
 * pipeline (hardware, max batch size and replicas per model) under an end-to-end P99 latency SLO on a
 * sample arrival trace, with the Estimator (estimator.ts) as the feasibility oracle.
 *
 * Algorithm 1 (Initialize): every model at batch 1 on its lowest-latency hardware with one replica;
 * infeasible when the service time (the longest path's batch-1 latency) exceeds the SLO
 * ({@link serviceTimeCheck}, whose reason names the model that cannot fit); otherwise add a replica to
 * the throughput bottleneck until the Estimator's P99 meets the SLO.
 *
 * Algorithm 2 (MinimizeCost): repeat — for each model try IncreaseBatch (×2, up to the largest profiled
 * batch; or the next size the profile's `batchSizes` lists, live, where only some sizes exist as
 * variants), RemoveReplica and DowngradeHW; keep the cheapest feasible candidate (first found among
 * equals, as in the paper's `new.cost < best.cost`; IncreaseBatch leaves the cost unchanged, so it is
 * taken only when nothing cheaper is feasible) — until no candidate is feasible. DowngradeHW moves the
 * model to the next cheaper hardware, freezes the other models, re-runs the initialisation for that
 * model alone and then a local cost minimisation (IncreaseBatch / RemoveReplica, and our compound of
 * the two, on that model); it is
 * a candidate only if the result is cheaper than the current configuration.
 *
 * Moves beyond the paper's (ours: the single-step greedy search stops in a trap — a cost-neutral
 * IncreaseBatch on one model uses up latency budget, after which raising another model's batch one step
 * with the same replicas is infeasible although a larger step with fewer replicas would be cheaper):
 * - IncreaseBatch + RemoveReplica × k: any larger batch with k ≥ 1 fewer replicas (every k down to the
 *   stability bound at that batch);
 * - Rebalance: +1 replica of one model and −1 of a model whose replica costs more;
 * - DecreaseBatch where it frees latency budget: one model's batch one size down (same replicas), paired
 *   with a RemoveReplica or an IncreaseBatch + RemoveReplica × k on another model.
 * Every one of them is strictly cheaper, so the search still terminates (IncreaseBatch alone is the only
 * cost-neutral move and only ever raises a batch); the cheapest feasible candidate wins as before.
 * The cost-neutral IncreaseBatch steps taken after the last cost reduction are kept (as in the paper):
 * they spend latency slack but raise each replica's throughput, which the Tuner's capacity model
 * counts on (undoing them made inferline-rate-change's Tuner scale 30% dearer).
 *
 * Hold-out check (ours, against over-fitting the sample): with `holdoutShare` > 0 and enough queries in
 * both parts ({@link MIN_HOLDOUT_QUERIES}), the last share of the sample trace is held back, the search
 * runs on the rest, and at most {@link DEFAULT_HOLDOUT_MISS_SHARE} of the held-back queries may miss the
 * SLO; if more do, replicas are added to the bottleneck (as Algorithm 1 does) until both parts pass. The search edges
 * up to P99 = SLO on the queries it sees, so a plan that only just fits them misses more than 1% on a
 * fresh trace about half the time; the held-back queries are such a fresh trace. Caveat: a short
 * sample of a bursty load can be calmer than the live load, held-back part included (a 60 s sample at
 * CV 4 was: the inferline-planner scenario plans on a sample as long as its live trace).
 *
 * Shortcuts that do not change the result (documented because they are ours, not the paper's):
 * - a candidate that leaves any model below its stability bound is rejected without the Estimator;
 * - replica searches start at the stability bound ⌈λ·s_m / μ_m⌉ (a model loaded at ρ ≥ 1 has a queue
 *   that grows for the whole trace, which fails any SLO on a trace of useful length) instead of 1;
 * - candidates are checked in increasing cost and a DowngradeHW whose cheapest possible cost (the
 *   stability bound on the new hardware) is not below the best found so far is skipped;
 * - the Estimator stops as soon as more than 1% of queries have missed (the P99 is then known);
 * - feasibility results are cached per configuration.
 * Caveat: P99 on a finite sample trace is itself noisy; the Planner guarantees the SLO for the sample,
 * which is why InferLine adds the Tuner.
 */
import { estimate } from "./estimator.js";
import {
  configCostPerHour, configurableBatches, findProfile, latencyFn, maxProfiledBatch, scaleFactors, serviceTimeMs, topologicalOrder,
  type HardwareProfile, type ModelConfig, type Pipeline, type PipelineConfig, type ProfileSet,
} from "./pipeline.js";

export interface PlannerInput {
  pipeline: Pipeline;
  profiles: ProfileSet;
  sloMs: number;
  /** The sample (planning) trace: arrival times, ms, non-decreasing. */
  arrivalsMs: Float64Array | readonly number[];
  /** Conditional-edge outcomes per query (estimator.sampleRoutes); needed with conditional edges. */
  routes?: Uint32Array;
  /** Largest replica count per model the Planner will consider. @default 256 */
  maxReplicas?: number;
  /**
   * Share of the sample trace (its last queries) held back to check the plan (see the module comment);
   * 0 plans on the whole trace, as the paper does. @default {@link DEFAULT_HOLDOUT_SHARE}
   */
  holdoutShare?: number;
  /** Share of the held-back queries allowed over the SLO. @default {@link DEFAULT_HOLDOUT_MISS_SHARE} */
  holdoutMissShare?: number;
}

/** The planner's default hold-out share: a quarter of the sample trace. */
export const DEFAULT_HOLDOUT_SHARE = 0.25;
/**
 * The held-back queries may miss the SLO at half the rate the SLO allows (0.5% for a P99): a margin for
 * the difference between two traces of the same rate and burstiness (at CV 4, a plan at P99 = SLO on
 * one 60 s trace missed 1.2-1.9% on another; inferline-planner scenario).
 */
export const DEFAULT_HOLDOUT_MISS_SHARE = 0.005;
/** Fewer held-back queries than this (or fewer left to plan on) and the whole trace plans: a P99 of a few hundred queries is its largest few. */
export const MIN_HOLDOUT_QUERIES = 500;

/** A sample trace (or part of one): arrival times and their routes. */
interface Sample {
  id: string;
  arrivalsMs: ArrayLike<number>;
  routes?: Uint32Array;
}

export interface PlanResult {
  feasible: boolean;
  config?: PipelineConfig;
  costPerHour: number;
  /** P99 of the planning trace under the final configuration, ms. */
  p99Ms: number;
  /** P99 of the held-back part of the sample under the final configuration, ms (absent without a hold-out). */
  holdoutP99Ms?: number;
  /** Human-readable steps taken, in order. */
  steps: string[];
  estimatorCalls: number;
  reason: string;
}

interface Ctx {
  input: PlannerInput;
  /** The queries the search plans on (the whole sample, or all but the held-back part). */
  fit: Sample;
  holdout?: Sample;
  order: string[];
  scale: Record<string, number>;
  /** Mean arrival rate of the planning trace, queries per ms. */
  lambdaPerMs: number;
  cache: Map<string, Outcome>;
  holdoutMissShare: number;
  calls: number;
  maxReplicas: number;
}

interface Outcome {
  /** P99, ms (Infinity once known to exceed the SLO on the fitting part). */
  p99Ms: number;
  /** Share of the sample's queries over the SLO. */
  missShare: number;
}

/** How a configuration does on a sample (the fitting part by default). Cached. */
function outcomeOf(ctx: Ctx, config: PipelineConfig, sample: Sample = ctx.fit): Outcome {
  const key = sample.id + ctx.order.map((m) => {
    const c = config[m]!;
    return `${c.hardware}/${c.maxBatch}/${c.replicas}`;
  }).join("|");
  const hit = ctx.cache.get(key);
  if (hit !== undefined) return hit;
  ctx.calls++;
  const { sloMs } = ctx.input;
  // The fitting part only asks whether P99 ≤ SLO, so the Estimator may stop once 1% have missed.
  const r = estimate({
    pipeline: ctx.input.pipeline, profiles: ctx.input.profiles, config,
    arrivalsMs: sample.arrivalsMs, ...(sample.routes ? { routes: sample.routes } : {}),
    ...(sample === ctx.fit ? { stopWhenP99AboveMs: sloMs } : {}),
  });
  let missed = 0;
  for (const l of r.latenciesMs) if (!(l <= sloMs)) missed++;
  const out = { p99Ms: r.p99Ms, missShare: r.latenciesMs.length > 0 ? missed / r.latenciesMs.length : 0 };
  ctx.cache.set(key, out);
  return out;
}

function p99Of(ctx: Ctx, config: PipelineConfig, sample: Sample = ctx.fit): number {
  return outcomeOf(ctx, config, sample).p99Ms;
}

/** Every model at or above its stability bound (a model at ρ ≥ 1 fails any SLO on a trace of useful length). */
function stable(ctx: Ctx, config: PipelineConfig): boolean {
  for (const m of ctx.order) {
    const c = config[m]!;
    if (c.replicas < stabilityBound(ctx, m, findProfile(ctx.input.profiles, m, c.hardware), c.maxBatch)) return false;
  }
  return true;
}

/** The fitting part: P99 within the SLO (InferLine); the held-back part: at most its miss budget over the SLO. */
function feasible(ctx: Ctx, config: PipelineConfig, sample: Sample = ctx.fit): boolean {
  return sample === ctx.fit ? p99Of(ctx, config, sample) <= ctx.input.sloMs : outcomeOf(ctx, config, sample).missShare <= ctx.holdoutMissShare;
}

/** Lowest-latency hardware at batch 1 (ties: cheaper). */
export function bestHardware(profiles: ProfileSet, model: string): HardwareProfile {
  const hw = profiles[model];
  if (!hw || hw.length === 0) throw new Error(`no profile for model ${model}`);
  return [...hw].sort((a, b) => latencyFn(a)(1) - latencyFn(b)(1) || a.pricePerHour - b.pricePerHour)[0]!;
}

/** Single-replica throughput at a batch size, queries per ms. */
function muPerMs(h: HardwareProfile, batch: number): number {
  return batch / latencyFn(h)(batch);
}

/** ⌈λ·s_m / μ⌉: fewer replicas leave the model overloaded. */
function stabilityBound(ctx: Ctx, model: string, h: HardwareProfile, batch: number): number {
  return Math.max(1, Math.ceil((ctx.lambdaPerMs * (ctx.scale[model] ?? 1)) / muPerMs(h, batch) - 1e-9));
}

function withModel(config: PipelineConfig, model: string, c: ModelConfig): PipelineConfig {
  return { ...config, [model]: c };
}

function describe(model: string, c: ModelConfig): string {
  return `${model} = ${c.replicas}×${c.hardware} b${c.maxBatch}`;
}

/** Adds replicas to `models`' bottleneck until feasible (on every sample given); undefined when the cap is reached. */
function addReplicasUntilFeasible(ctx: Ctx, config: PipelineConfig, models: readonly string[], steps?: string[], samples: readonly Sample[] = [ctx.fit]): PipelineConfig | undefined {
  let cur = config;
  const { profiles } = ctx.input;
  while (!samples.every((s) => feasible(ctx, cur, s))) {
    let worst: string | undefined;
    let worstLoad = -Infinity;
    for (const m of models) {
      const c = cur[m]!;
      const load = (ctx.lambdaPerMs * (ctx.scale[m] ?? 1)) / (c.replicas * muPerMs(findProfile(profiles, m, c.hardware), c.maxBatch));
      if (c.replicas < ctx.maxReplicas && load > worstLoad) {
        worstLoad = load;
        worst = m;
      }
    }
    if (worst === undefined) return undefined;
    const c = cur[worst]!;
    cur = withModel(cur, worst, { ...c, replicas: c.replicas + 1 });
    steps?.push(`bottleneck ${worst} (utilisation ${worstLoad.toFixed(2)}): ${c.replicas + 1} replicas`);
  }
  return cur;
}

/** The smallest batch size a (model, hardware) can be configured with (1 unless its sizes say otherwise). */
function smallestBatch(h: HardwareProfile): number {
  return configurableBatches(h)[0] ?? 1;
}

/**
 * IncreaseBatch's next size: ×2 up to the largest profiled batch (InferLine), or, when the profile lists
 * the sizes that can be configured (`batchSizes`: the variants that exist), the next of them.
 */
function nextBatch(h: HardwareProfile, b: number): number {
  if (h.batchSizes) return configurableBatches(h).find((x) => x > b) ?? b;
  return Math.min(maxProfiledBatch(h), b * 2);
}

export interface ServiceTimeCheck {
  feasible: boolean;
  /** The longest path's service time, each model at batch 1 on its lowest-latency hardware, ms. */
  serviceTimeMs: number;
  /** That path, from a root. */
  path: string[];
  /** Each model's own latency there, ms, and the hardware. */
  latencyMs: Record<string, number>;
  hardware: Record<string, string>;
  reason: string;
}

/**
 * InferLine Algorithm 1's feasibility check (line 6), the planner's first step: with every model at
 * batch 1 on its lowest-latency hardware, the longest path's service time must fit in the SLO;
 * otherwise no configuration can (a query alone runs at batch 1 whatever the max batch, so this is a
 * lower bound on its latency). The reason names the path and the model
 * that cannot fit: one whose latency alone exceeds the SLO, else the slowest on the path. Registration
 * (the dispatcher) and the planner call this one rule.
 */
export function serviceTimeCheck(p: Pipeline, profiles: ProfileSet, sloMs: number, label: (model: string) => string = (m) => `model ${m}`): ServiceTimeCheck {
  const latency: Record<string, number> = {};
  const hardware: Record<string, string> = {};
  const finish: Record<string, number> = {};
  const via: Record<string, string | undefined> = {};
  for (const m of topologicalOrder(p)) {
    const h = bestHardware(profiles, m);
    latency[m] = latencyFn(h)(1);
    hardware[m] = h.hardware;
    let start = 0;
    let parent: string | undefined;
    for (const e of p.edges) {
      if (e.to === m && (finish[e.from] ?? 0) > start) {
        start = finish[e.from] ?? 0;
        parent = e.from;
      }
    }
    finish[m] = start + latency[m];
    via[m] = parent;
  }
  let last = p.models[0] ?? "";
  for (const m of p.models) if ((finish[m] ?? 0) > (finish[last] ?? 0)) last = m;
  const path: string[] = [];
  for (let m: string | undefined = last; m !== undefined; m = via[m]) path.unshift(m);
  const st = finish[last] ?? 0;
  const ms = (x: number): string => `${x.toFixed(1)} ms`;
  const at = (m: string): string => `${ms(latency[m] ?? 0)} on ${hardware[m]}`;
  const route = path.join(" → ");
  if (st <= sloMs) return { feasible: true, serviceTimeMs: st, path, latencyMs: latency, hardware, reason: `service time ${ms(st)} (${route}) fits the SLO of ${sloMs} ms` };
  const alone = p.models.filter((m) => (latency[m] ?? 0) > sloMs).sort((a, b) => (latency[b] ?? 0) - (latency[a] ?? 0))[0];
  const slowest = [...path].sort((a, b) => (latency[b] ?? 0) - (latency[a] ?? 0))[0] ?? last;
  const who = alone !== undefined
    ? `${label(alone)} cannot fit: it alone takes ${at(alone)}, its fastest hardware at batch 1`
    : `the slowest on it is ${label(slowest)} (${at(slowest)}); the path takes ${path.map((m) => `${m} ${ms(latency[m] ?? 0)}`).join(" + ")}`;
  return {
    feasible: false, serviceTimeMs: st, path, latencyMs: latency, hardware,
    reason: `service time ${ms(st)} at batch 1 on the fastest hardware exceeds the SLO of ${sloMs} ms on the path ${route}: ${who}`,
  };
}

/** InferLine Algorithm 1. */
export function initializePlan(input: PlannerInput): PlanResult {
  const ctx = makeCtx(input);
  return initWith(ctx);
}

function makeCtx(input: PlannerInput): Ctx {
  const all = input.arrivalsMs as ArrayLike<number>;
  const share = input.holdoutShare ?? DEFAULT_HOLDOUT_SHARE;
  if (!(share >= 0 && share < 1)) throw new RangeError(`holdoutShare must be in [0, 1), got ${share}`);
  const held = Math.floor(all.length * share);
  const split = held >= MIN_HOLDOUT_QUERIES && all.length - held >= MIN_HOLDOUT_QUERIES;
  const nFit = split ? all.length - held : all.length;
  const times = all instanceof Float64Array ? all : Float64Array.from(all);
  const part = (from: number, to: number, id: string): Sample => ({
    id,
    arrivalsMs: times.subarray(from, to),
    ...(input.routes ? { routes: input.routes.subarray(from, to) } : {}),
  });
  const fit = part(0, nFit, "fit:");
  const n = nFit;
  const first = n > 0 ? all[0]! : 0;
  const last = n > 0 ? all[n - 1]! : 0;
  const spanMs = Math.max(1, last - first);
  return {
    input,
    fit,
    ...(split ? { holdout: part(nFit, all.length, "holdout:") } : {}),
    order: topologicalOrder(input.pipeline),
    scale: scaleFactors(input.pipeline),
    lambdaPerMs: n > 1 ? (n - 1) / spanMs : 0,
    cache: new Map(),
    holdoutMissShare: input.holdoutMissShare ?? DEFAULT_HOLDOUT_MISS_SHARE,
    calls: 0,
    maxReplicas: input.maxReplicas ?? 256,
  };
}

function initWith(ctx: Ctx): PlanResult {
  const { pipeline, profiles, sloMs } = ctx.input;
  const steps: string[] = [];
  const check = serviceTimeCheck(pipeline, profiles, sloMs);
  if (!check.feasible) return { feasible: false, costPerHour: NaN, p99Ms: NaN, steps, estimatorCalls: 0, reason: check.reason };
  let config: Record<string, ModelConfig> = {};
  for (const m of ctx.order) {
    const h = bestHardware(profiles, m);
    const b = smallestBatch(h);
    config[m] = { hardware: h.hardware, maxBatch: b, replicas: stabilityBound(ctx, m, h, b) };
  }
  steps.push(`initialise: ${ctx.order.map((m) => describe(m, config[m]!)).join(", ")}`);
  const init = addReplicasUntilFeasible(ctx, config, ctx.order, steps);
  if (!init) {
    return {
      feasible: false, costPerHour: NaN, p99Ms: NaN, steps, estimatorCalls: ctx.calls,
      reason: `no feasible configuration within ${ctx.maxReplicas} replicas per model`,
    };
  }
  config = { ...init };
  return {
    feasible: true, config, costPerHour: configCostPerHour(profiles, config), p99Ms: p99Of(ctx, config), steps,
    estimatorCalls: ctx.calls, reason: "initial feasible configuration",
  };
}

interface Candidate {
  config: PipelineConfig;
  cost: number;
  what: string;
}

/** IncreaseBatch and RemoveReplica candidates for one model. */
function simpleCandidates(ctx: Ctx, config: PipelineConfig, m: string): Candidate[] {
  const { profiles } = ctx.input;
  const c = config[m]!;
  const h = findProfile(profiles, m, c.hardware);
  const out: Candidate[] = [];
  const cost = configCostPerHour(profiles, config);
  const maxB = maxProfiledBatch(h);
  if (c.maxBatch < maxB) {
    const nc = { ...c, maxBatch: nextBatch(h, c.maxBatch) };
    out.push({ config: withModel(config, m, nc), cost, what: `IncreaseBatch ${describe(m, nc)}` });
  }
  if (c.replicas > 1) {
    const nc = { ...c, replicas: c.replicas - 1 };
    out.push({ config: withModel(config, m, nc), cost: cost - h.pricePerHour, what: `RemoveReplica ${describe(m, nc)}` });
  }
  return out;
}

/** The configurable batch sizes above `b` that IncreaseBatch reaches by repeated steps. */
function largerBatches(h: HardwareProfile, b: number): number[] {
  const out: number[] = [];
  for (let x = nextBatch(h, b); x > b && x > (out[out.length - 1] ?? b); x = nextBatch(h, x)) out.push(x);
  return out;
}

/** IncreaseBatch + RemoveReplica × k on one model: every larger batch, every k ≥ 1 down to the stability bound there. */
function compoundCandidates(ctx: Ctx, config: PipelineConfig, m: string, label = ""): Candidate[] {
  const { profiles } = ctx.input;
  const c = config[m]!;
  const h = findProfile(profiles, m, c.hardware);
  const cost = configCostPerHour(profiles, config);
  const out: Candidate[] = [];
  for (const b of largerBatches(h, c.maxBatch)) {
    for (let r = c.replicas - 1; r >= stabilityBound(ctx, m, h, b); r--) {
      const nc = { ...c, maxBatch: b, replicas: r };
      out.push({ config: withModel(config, m, nc), cost: cost - (c.replicas - r) * h.pricePerHour, what: `${label}IncreaseBatch + RemoveReplica × ${c.replicas - r} ${describe(m, nc)}` });
    }
  }
  return out;
}

/** Rebalance: +1 replica of model `a`, −1 of a model `b` whose replica costs more. */
function rebalanceCandidates(ctx: Ctx, config: PipelineConfig): Candidate[] {
  const { profiles } = ctx.input;
  const cost = configCostPerHour(profiles, config);
  const out: Candidate[] = [];
  for (const a of ctx.order) {
    const ca = config[a]!;
    const pa = findProfile(profiles, a, ca.hardware).pricePerHour;
    if (ca.replicas >= ctx.maxReplicas) continue;
    for (const b of ctx.order) {
      const cb = config[b]!;
      const pb = findProfile(profiles, b, cb.hardware).pricePerHour;
      if (b === a || cb.replicas <= 1 || pb <= pa) continue;
      const na = { ...ca, replicas: ca.replicas + 1 };
      const nb = { ...cb, replicas: cb.replicas - 1 };
      out.push({ config: withModel(withModel(config, a, na), b, nb), cost: cost + pa - pb, what: `Rebalance ${describe(a, na)}, ${describe(b, nb)}` });
    }
  }
  return out;
}

/** The configurable batch size below `b`, if any. */
function previousBatch(h: HardwareProfile, b: number): number | undefined {
  return configurableBatches(h).filter((x) => x < b).pop();
}

/**
 * DecreaseBatch on one model (its latency falls, freeing budget for the others), paired with a
 * RemoveReplica or an IncreaseBatch + RemoveReplica × k on another model: only strictly cheaper pairs.
 */
function decreaseBatchCandidates(ctx: Ctx, config: PipelineConfig): Candidate[] {
  const { profiles } = ctx.input;
  const out: Candidate[] = [];
  for (const m of ctx.order) {
    const c = config[m]!;
    const h = findProfile(profiles, m, c.hardware);
    const b = previousBatch(h, c.maxBatch);
    if (b === undefined) continue;
    const nc = { ...c, maxBatch: b };
    const lowered = withModel(config, m, nc);
    if (c.replicas < stabilityBound(ctx, m, h, b)) continue;
    const label = `DecreaseBatch ${describe(m, nc)} + `;
    for (const o of ctx.order) {
      if (o === m) continue;
      out.push(...compoundCandidates(ctx, lowered, o, label));
      const co = lowered[o]!;
      if (co.replicas > 1) {
        const no = { ...co, replicas: co.replicas - 1 };
        out.push({ config: withModel(lowered, o, no), cost: configCostPerHour(profiles, lowered) - findProfile(profiles, o, co.hardware).pricePerHour, what: `${label}RemoveReplica ${describe(o, no)}` });
      }
    }
  }
  return out;
}

/** Cheapest feasible among candidates (first among equal costs); undefined if none is. */
function cheapestFeasible(ctx: Ctx, cands: Candidate[]): Candidate | undefined {
  const sorted = cands.map((c, i) => ({ c, i })).sort((a, b) => a.c.cost - b.c.cost || a.i - b.i);
  for (const { c } of sorted) if (stable(ctx, c.config) && feasible(ctx, c.config)) return c;
  return undefined;
}

/** DowngradeHW for one model: the next cheaper hardware, re-initialised and locally minimised. */
function downgrade(ctx: Ctx, config: PipelineConfig, m: string, beat: number): Candidate | undefined {
  const { profiles } = ctx.input;
  const c = config[m]!;
  const cur = findProfile(profiles, m, c.hardware);
  const cheaper = (profiles[m] ?? []).filter((h) => h.pricePerHour < cur.pricePerHour).sort((a, b) => b.pricePerHour - a.pricePerHour);
  const next = cheaper[0];
  if (!next) return undefined;
  const others = configCostPerHour(profiles, config) - c.replicas * cur.pricePerHour;
  // Cheapest this can possibly be: the stability bound at the new hardware's most efficient batch.
  let bestMu = 0;
  for (const [b] of next.batchLatencyMs) bestMu = Math.max(bestMu, muPerMs(next, b));
  const lower = others + next.pricePerHour * Math.max(1, Math.ceil((ctx.lambdaPerMs * (ctx.scale[m] ?? 1)) / bestMu - 1e-9));
  if (lower >= beat) return undefined;
  const b0 = smallestBatch(next);
  let local: PipelineConfig = withModel(config, m, { hardware: next.hardware, maxBatch: b0, replicas: stabilityBound(ctx, m, next, b0) });
  if (serviceTimeMs(ctx.input.pipeline, profiles, local) > ctx.input.sloMs) return undefined;
  const init = addReplicasUntilFeasible(ctx, local, [m]);
  if (!init) return undefined;
  local = init;
  for (;;) {
    const step = cheapestFeasible(ctx, [...simpleCandidates(ctx, local, m), ...compoundCandidates(ctx, local, m)]);
    if (!step) break;
    local = step.config;
  }
  const cost = configCostPerHour(profiles, local);
  if (cost >= configCostPerHour(profiles, config)) return undefined;
  return { config: local, cost, what: `DowngradeHW ${describe(m, local[m]!)}` };
}

/** InferLine Algorithm 2 (which starts with Algorithm 1). */
export function planPipeline(input: PlannerInput): PlanResult {
  const ctx = makeCtx(input);
  const init = initWith(ctx);
  if (!init.feasible || !init.config) return init;
  const steps = [...init.steps];
  let config = init.config;
  for (let iter = 0; iter < 10_000; iter++) {
    const moves = [
      ...ctx.order.flatMap((m) => simpleCandidates(ctx, config, m)),
      ...ctx.order.flatMap((m) => compoundCandidates(ctx, config, m)),
      ...rebalanceCandidates(ctx, config),
      ...decreaseBatchCandidates(ctx, config),
    ];
    let best = cheapestFeasible(ctx, moves);
    for (const m of ctx.order) {
      const d = downgrade(ctx, config, m, best ? best.cost : Infinity);
      if (d && (!best || d.cost < best.cost)) best = d;
    }
    if (!best) break;
    config = best.config;
    steps.push(`${best.what}: $${best.cost.toFixed(3)}/h`);
  }
  let reason = `no single action lowers the cost further without breaking the ${input.sloMs} ms P99 SLO`;
  const { holdout } = ctx;
  if (holdout) {
    const seen = outcomeOf(ctx, config, holdout);
    const pct = (x: number): string => `${(100 * x).toFixed(2)}%`;
    if (feasible(ctx, config, holdout)) {
      reason += `; ${pct(seen.missShare)} of the held-back ${holdout.arrivalsMs.length} queries miss it (at most ${pct(ctx.holdoutMissShare)})`;
    } else {
      steps.push(`hold-out: ${pct(seen.missShare)} of the held-back ${holdout.arrivalsMs.length} queries miss the SLO (more than ${pct(ctx.holdoutMissShare)}; P99 ${seen.p99Ms.toFixed(1)} ms)`);
      const repaired = addReplicasUntilFeasible(ctx, config, ctx.order, steps, [ctx.fit, holdout]);
      if (!repaired) {
        return {
          feasible: false, costPerHour: NaN, p99Ms: NaN, steps, estimatorCalls: ctx.calls,
          reason: `the plan misses the SLO on the held-back queries and ${ctx.maxReplicas} replicas per model do not fix it`,
        };
      }
      config = repaired;
      steps.push(`hold-out repaired: $${configCostPerHour(input.profiles, config).toFixed(3)}/h`);
      reason += `; replicas added until at most ${pct(ctx.holdoutMissShare)} of the held-back ${holdout.arrivalsMs.length} queries miss it`;
    }
  }
  return {
    feasible: true, config, costPerHour: configCostPerHour(input.profiles, config), p99Ms: p99Of(ctx, config), steps,
    ...(holdout ? { holdoutP99Ms: p99Of(ctx, config, holdout) } : {}),
    estimatorCalls: ctx.calls, reason,
  };
}
