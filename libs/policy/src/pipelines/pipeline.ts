/**
 * Inference pipelines: InferLine §2 and §4.1.
 *
 * A pipeline is a DAG of models. An edge may be conditional: it is taken for a fraction of the queries
 * that reach its source (decided at run time by the upstream output, e.g. "translate only posts that
 * are not in English"). A query visits every root (a model without incoming edges), then every model
 * with at least one taken incoming edge from a visited model; a model starts once all the models whose
 * edges into it were taken have finished, and the query completes when every model it visited has.
 * The scale factor s_m is the probability that a query visits m (InferLine §4.1).
 *
 * Profiles give, per (model, hardware), the price and the latency of a batch at profiled batch sizes
 * (powers of two); latencies between profiled sizes are interpolated (batch-tuning.ts).
 *
 * Conditional edges are sampled independently per query; scale factors are computed exactly by
 * enumerating the outcomes of the conditional edges (fine for the handful a pipeline has; limited to 20).
 */
import { interpolateBatchLatency, type BatchLatencyFn } from "../batching/batch-tuning.js";

export interface PipelineEdge {
  from: string;
  to: string;
  /** Fraction of the queries reaching `from` that continue to `to`. @default 1 */
  probability?: number;
}

export interface Pipeline {
  name: string;
  models: readonly string[];
  edges: readonly PipelineEdge[];
}

export interface HardwareProfile {
  hardware: string;
  /** Dollars per hour for one replica on this hardware. */
  pricePerHour: number;
  /** [batch size, latency ms] points, e.g. powers of two 1..64; the largest is the max batch. */
  batchLatencyMs: ReadonlyArray<readonly [number, number]>;
  /**
   * The max batch sizes a replica can be configured with, when not every profiled size can (live, the
   * model's variants: profiled at 1, 2, 4, 8 but generated only at 1 and 8). @default the profiled sizes
   */
  batchSizes?: readonly number[];
}

/** Model name → the hardware it can run on. */
export type ProfileSet = Readonly<Record<string, readonly HardwareProfile[]>>;

/** How one model is deployed: InferLine's three control parameters. */
export interface ModelConfig {
  hardware: string;
  maxBatch: number;
  replicas: number;
}

export type PipelineConfig = Readonly<Record<string, ModelConfig>>;

/** Models in topological order (Kahn's algorithm, ties in declaration order). Throws on a cycle. */
export function topologicalOrder(p: Pipeline): string[] {
  const indeg = new Map(p.models.map((m) => [m, 0]));
  for (const e of p.edges) indeg.set(e.to, (indeg.get(e.to) ?? 0) + 1);
  const out: string[] = [];
  const ready = p.models.filter((m) => indeg.get(m) === 0);
  while (ready.length > 0) {
    const m = ready.shift()!;
    out.push(m);
    for (const e of p.edges) {
      if (e.from !== m) continue;
      const d = (indeg.get(e.to) ?? 0) - 1;
      indeg.set(e.to, d);
      if (d === 0) ready.push(e.to);
    }
  }
  if (out.length !== p.models.length) throw new Error(`pipeline ${p.name}: the edges form a cycle`);
  return out;
}

/** Every error in a pipeline and its profiles, in a stable order; empty when valid. */
export function validatePipeline(p: Pipeline, profiles?: ProfileSet): string[] {
  const errors: string[] = [];
  const names = new Set<string>();
  for (const m of p.models) {
    if (names.has(m)) errors.push(`model ${m} is declared twice`);
    names.add(m);
  }
  if (p.models.length === 0) errors.push("the pipeline has no models");
  for (const e of p.edges) {
    if (!names.has(e.from)) errors.push(`edge ${e.from} → ${e.to}: unknown model ${e.from}`);
    if (!names.has(e.to)) errors.push(`edge ${e.from} → ${e.to}: unknown model ${e.to}`);
    const pr = e.probability ?? 1;
    if (!(pr > 0 && pr <= 1)) errors.push(`edge ${e.from} → ${e.to}: probability ${pr} is not in (0, 1]`);
    if (e.from === e.to) errors.push(`edge ${e.from} → ${e.to}: a model cannot feed itself`);
  }
  if (p.edges.filter((e) => (e.probability ?? 1) < 1).length > 20) errors.push("more than 20 conditional edges");
  if (errors.length === 0) {
    try {
      topologicalOrder(p);
    } catch (err) {
      errors.push((err as Error).message);
    }
  }
  if (profiles) {
    for (const m of names) {
      const hw = profiles[m];
      if (!hw || hw.length === 0) {
        errors.push(`model ${m} has no profile`);
        continue;
      }
      for (const h of hw) {
        if (!(h.pricePerHour >= 0)) errors.push(`model ${m} on ${h.hardware}: price ${h.pricePerHour} is negative`);
        if (h.batchLatencyMs.length === 0) errors.push(`model ${m} on ${h.hardware}: no batch latencies`);
        if (!h.batchLatencyMs.some(([b]) => b === 1)) errors.push(`model ${m} on ${h.hardware}: no latency for batch 1`);
        for (const [b, ms] of h.batchLatencyMs) {
          if (!(Number.isInteger(b) && b >= 1)) errors.push(`model ${m} on ${h.hardware}: batch size ${b} is not a positive integer`);
          if (!(ms > 0)) errors.push(`model ${m} on ${h.hardware}: latency ${ms} ms at batch ${b} is not positive`);
        }
      }
    }
  }
  return errors;
}

/** Roots: models without incoming edges; every query visits them. */
export function rootModels(p: Pipeline): string[] {
  const targets = new Set(p.edges.map((e) => e.to));
  return p.models.filter((m) => !targets.has(m));
}

/**
 * Scale factors s_m: the probability that a query visits m. Exact, by enumerating the joint outcomes
 * of the conditional edges (2^k for k conditional edges).
 */
export function scaleFactors(p: Pipeline): Record<string, number> {
  const order = topologicalOrder(p);
  const conditional = p.edges.map((e, i) => ({ e, i })).filter(({ e }) => (e.probability ?? 1) < 1);
  const s: Record<string, number> = Object.fromEntries(p.models.map((m) => [m, 0]));
  const roots = new Set(rootModels(p));
  const combos = 1 << conditional.length;
  for (let mask = 0; mask < combos; mask++) {
    let weight = 1;
    const taken = new Set<number>(p.edges.map((_, i) => i).filter((i) => (p.edges[i]!.probability ?? 1) >= 1));
    conditional.forEach(({ e, i }, bit) => {
      const on = (mask >> bit) & 1;
      weight *= on ? e.probability! : 1 - e.probability!;
      if (on) taken.add(i);
    });
    const visited = new Set<string>();
    for (const m of order) {
      if (roots.has(m) || p.edges.some((e, i) => e.to === m && taken.has(i) && visited.has(e.from))) visited.add(m);
    }
    for (const m of visited) s[m] = (s[m] ?? 0) + weight;
  }
  return s;
}

export function findProfile(profiles: ProfileSet, model: string, hardware: string): HardwareProfile {
  const h = profiles[model]?.find((x) => x.hardware === hardware);
  if (!h) throw new Error(`no profile for model ${model} on ${hardware}`);
  return h;
}

/** Largest batch size a (model, hardware) can be configured with: the largest profiled one by default. */
export function maxProfiledBatch(h: HardwareProfile): number {
  return Math.max(...configurableBatches(h));
}

/** The max batch sizes a (model, hardware) can be configured with, ascending. */
export function configurableBatches(h: HardwareProfile): number[] {
  return [...new Set(h.batchSizes ?? h.batchLatencyMs.map(([b]) => b))].sort((a, b) => a - b);
}

export function latencyFn(h: HardwareProfile): BatchLatencyFn {
  return interpolateBatchLatency(h.batchLatencyMs);
}

/** Peak throughput of one replica at its max batch, queries per second: b / T(b). */
export function replicaThroughputQps(profiles: ProfileSet, model: string, c: ModelConfig): number {
  return (1000 * c.maxBatch) / latencyFn(findProfile(profiles, model, c.hardware))(c.maxBatch);
}

/** Dollars per hour of a configuration: Σ replicas × price. */
export function configCostPerHour(profiles: ProfileSet, config: PipelineConfig): number {
  let sum = 0;
  for (const [model, c] of Object.entries(config)) sum += c.replicas * findProfile(profiles, model, c.hardware).pricePerHour;
  return sum;
}

/**
 * Service time of the pipeline (InferLine Algorithm 1, line 6): the largest sum of per-model batch
 * latencies along any path from a root, each model at its configured hardware and max batch.
 */
export function serviceTimeMs(p: Pipeline, profiles: ProfileSet, config: PipelineConfig): number {
  const finish: Record<string, number> = {};
  for (const m of topologicalOrder(p)) {
    const c = config[m];
    if (!c) throw new Error(`configuration has no entry for model ${m}`);
    const own = latencyFn(findProfile(profiles, m, c.hardware))(c.maxBatch);
    const start = Math.max(0, ...p.edges.filter((e) => e.to === m).map((e) => finish[e.from] ?? 0));
    finish[m] = start + own;
  }
  return Math.max(...Object.values(finish));
}

/**
 * How a query with the given conditional-edge outcomes travels through a pipeline: the one routing
 * rule that the Estimator (estimator.ts) and the simulator's pipeline system (libs/sim
 * systems/inferline.ts) both follow. Bit j of `mask` is the j-th conditional edge (probability < 1) in
 * `pipeline.edges` order, as {@link sampleRoutes} draws them. The query visits every root, then every
 * model with a taken incoming edge from a visited model; a visited model hands the query to the targets
 * of its taken edges, and a model starts once all its visited parents (taken edges into it) are done.
 */
export interface PipelineRoute {
  /** Models the query visits, in topological order. */
  visited: string[];
  /** Per visited model, the models it hands the query to when done (edge order). */
  children: Record<string, string[]>;
  /** Per visited model, the visited parents it waits for (0 for a root). */
  parents: Record<string, number>;
}

export function pipelineRoute(p: Pipeline, mask: number): PipelineRoute {
  const conditional = p.edges.filter((e) => (e.probability ?? 1) < 1);
  const taken = p.edges.filter((e) => {
    const bit = conditional.indexOf(e);
    return bit < 0 || ((mask >>> bit) & 1) === 1;
  });
  const roots = new Set(rootModels(p));
  const visited = new Set<string>();
  for (const m of topologicalOrder(p)) {
    if (roots.has(m) || taken.some((e) => e.to === m && visited.has(e.from))) visited.add(m);
  }
  const children: Record<string, string[]> = {};
  const parents: Record<string, number> = {};
  for (const m of visited) {
    children[m] = [];
    parents[m] = 0;
  }
  for (const e of taken) {
    if (!visited.has(e.from)) continue;
    children[e.from]!.push(e.to);
    parents[e.to] = (parents[e.to] ?? 0) + 1;
  }
  return { visited: [...visited], children, parents };
}
