/**
 * The InferLine Planner (InferLine §4.3): the low-frequency, cost-minimising configuration of a
 * pipeline (hardware, max batch size and replicas per model) under an end-to-end P99 latency SLO on a
 * sample arrival trace, with the Estimator (estimator.ts) as the feasibility oracle.
 *
 * Algorithm 1 (Initialize): every model at batch 1 on its lowest-latency hardware with one replica;
 * infeasible when the service time (the longest path's batch-1 latency) exceeds the SLO; otherwise add
 * a replica to the throughput bottleneck until the Estimator's P99 meets the SLO.
 *
 * Algorithm 2 (MinimizeCost): repeat — for each model try IncreaseBatch (×2, up to the largest profiled
 * batch), RemoveReplica and DowngradeHW; keep the cheapest feasible candidate (first found among
 * equals, as in the paper's `new.cost < best.cost`; IncreaseBatch leaves the cost unchanged, so it is
 * taken only when nothing cheaper is feasible) — until no candidate is feasible. DowngradeHW moves the
 * model to the next cheaper hardware, freezes the other models, re-runs the initialisation for that
 * model alone and then a local cost minimisation (IncreaseBatch / RemoveReplica on that model); it is
 * a candidate only if the result is cheaper than the current configuration.
 *
 * Shortcuts that do not change the result (documented because they are ours, not the paper's):
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
  configCostPerHour, findProfile, latencyFn, maxProfiledBatch, scaleFactors, serviceTimeMs, topologicalOrder,
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
}

export interface PlanResult {
  feasible: boolean;
  config?: PipelineConfig;
  costPerHour: number;
  /** P99 of the planning trace under the final configuration, ms. */
  p99Ms: number;
  /** Human-readable steps taken, in order. */
  steps: string[];
  estimatorCalls: number;
  reason: string;
}

interface Ctx {
  input: PlannerInput;
  order: string[];
  scale: Record<string, number>;
  /** Mean arrival rate of the planning trace, queries per ms. */
  lambdaPerMs: number;
  cache: Map<string, number>;
  calls: number;
  maxReplicas: number;
}

/** P99 of a configuration on the planning trace (Infinity once known to exceed the SLO). Cached. */
function p99Of(ctx: Ctx, config: PipelineConfig): number {
  const key = ctx.order.map((m) => {
    const c = config[m]!;
    return `${c.hardware}/${c.maxBatch}/${c.replicas}`;
  }).join("|");
  const hit = ctx.cache.get(key);
  if (hit !== undefined) return hit;
  ctx.calls++;
  const r = estimate({
    pipeline: ctx.input.pipeline, profiles: ctx.input.profiles, config,
    arrivalsMs: ctx.input.arrivalsMs as ArrayLike<number>, ...(ctx.input.routes ? { routes: ctx.input.routes } : {}),
    stopWhenP99AboveMs: ctx.input.sloMs,
  });
  ctx.cache.set(key, r.p99Ms);
  return r.p99Ms;
}

function feasible(ctx: Ctx, config: PipelineConfig): boolean {
  return p99Of(ctx, config) <= ctx.input.sloMs;
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

/** Adds replicas to `models`' bottleneck until feasible; undefined when the cap is reached. */
function addReplicasUntilFeasible(ctx: Ctx, config: PipelineConfig, models: readonly string[], steps?: string[]): PipelineConfig | undefined {
  let cur = config;
  const { profiles } = ctx.input;
  while (!feasible(ctx, cur)) {
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

/** InferLine Algorithm 1. */
export function initializePlan(input: PlannerInput): PlanResult {
  const ctx = makeCtx(input);
  return initWith(ctx);
}

function makeCtx(input: PlannerInput): Ctx {
  const n = input.arrivalsMs.length;
  const first = n > 0 ? input.arrivalsMs[0]! : 0;
  const last = n > 0 ? input.arrivalsMs[n - 1]! : 0;
  const spanMs = Math.max(1, last - first);
  return {
    input,
    order: topologicalOrder(input.pipeline),
    scale: scaleFactors(input.pipeline),
    lambdaPerMs: n > 1 ? (n - 1) / spanMs : 0,
    cache: new Map(),
    calls: 0,
    maxReplicas: input.maxReplicas ?? 256,
  };
}

function initWith(ctx: Ctx): PlanResult {
  const { pipeline, profiles, sloMs } = ctx.input;
  const steps: string[] = [];
  let config: Record<string, ModelConfig> = {};
  for (const m of ctx.order) {
    const h = bestHardware(profiles, m);
    config[m] = { hardware: h.hardware, maxBatch: 1, replicas: stabilityBound(ctx, m, h, 1) };
  }
  const st = serviceTimeMs(pipeline, profiles, config);
  if (st > sloMs) {
    return {
      feasible: false, costPerHour: NaN, p99Ms: NaN, steps, estimatorCalls: 0,
      reason: `service time ${st.toFixed(1)} ms at batch 1 on the fastest hardware exceeds the SLO of ${sloMs} ms`,
    };
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
    const nc = { ...c, maxBatch: Math.min(maxB, c.maxBatch * 2) };
    out.push({ config: withModel(config, m, nc), cost, what: `IncreaseBatch ${describe(m, nc)}` });
  }
  if (c.replicas > 1) {
    const nc = { ...c, replicas: c.replicas - 1 };
    out.push({ config: withModel(config, m, nc), cost: cost - h.pricePerHour, what: `RemoveReplica ${describe(m, nc)}` });
  }
  return out;
}

/** Cheapest feasible among candidates (first among equal costs); undefined if none is. */
function cheapestFeasible(ctx: Ctx, cands: Candidate[]): Candidate | undefined {
  const sorted = cands.map((c, i) => ({ c, i })).sort((a, b) => a.c.cost - b.c.cost || a.i - b.i);
  for (const { c } of sorted) if (feasible(ctx, c.config)) return c;
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
  let local: PipelineConfig = withModel(config, m, { hardware: next.hardware, maxBatch: 1, replicas: stabilityBound(ctx, m, next, 1) });
  if (serviceTimeMs(ctx.input.pipeline, profiles, local) > ctx.input.sloMs) return undefined;
  const init = addReplicasUntilFeasible(ctx, local, [m]);
  if (!init) return undefined;
  local = init;
  for (;;) {
    const step = cheapestFeasible(ctx, simpleCandidates(ctx, local, m));
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
    const simple = ctx.order.flatMap((m) => simpleCandidates(ctx, config, m));
    let best = cheapestFeasible(ctx, simple);
    for (const m of ctx.order) {
      const d = downgrade(ctx, config, m, best ? best.cost : Infinity);
      if (d && (!best || d.cost < best.cost)) best = d;
    }
    if (!best) break;
    config = best.config;
    steps.push(`${best.what}: $${best.cost.toFixed(3)}/h`);
  }
  return {
    feasible: true, config, costPerHour: configCostPerHour(input.profiles, config), p99Ms: p99Of(ctx, config), steps,
    estimatorCalls: ctx.calls, reason: `no single action lowers the cost further without breaking the ${input.sloMs} ms P99 SLO`,
  };
}
