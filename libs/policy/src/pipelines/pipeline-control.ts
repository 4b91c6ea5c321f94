/**
 * Pipelines, live: what the pipeline controller (services/model-autoscaler pipelines.ts) hands the
 * InferLine Planner and Tuner (planner.ts, tuner.ts; InferLine §4-5, DESIGN §3 "Pipelines"), and what
 * it makes of their answers. Pure: specs, variant records, counts and times come in.
 *
 * - **The planning pipeline.** The planner scales models; a spec's model stages are its models. Steps
 *   run in the dispatcher and app stages are model-less queries that INFaaS serves and scales: neither
 *   is planned (`unplanned` says so), and the DAG is contracted through them (a model stage's parents
 *   are the model stages that reach it through steps and apps only).
 * - **Scale factors (InferLine §4.1), measured.** Each stage's visit share v_s (queries that reach it /
 *   queries) and items per visit k_s (items that reach it / visiting queries; above 1 behind a fan-out)
 *   come from counts: a sample run at registration or the dispatchers' live reports
 *   (`metrics.pipeline.<name>`: `visits`, `items`, `queries`); without enough counts, from the spec's
 *   `expected_share`s (k = 1). An edge a → m of the planning pipeline is taken with probability
 *   v_m / v_a (unconditional at ≥ 0.999, at least 0.001), so `scaleFactors` of the planning pipeline
 *   gives back the measured shares exactly on trees; a stage with several parents is reached when any
 *   edge is taken, which over-counts it a little (conservative). s_m = v_m · k_m.
 * - **Profiles.** Per model stage, one "hardware" per (hardware kind, threads) of the model's profiled
 *   fp32 variants (int8 variants change the answers: a model stage means that model), e.g. `cpu-fp32-t1`,
 *   priced at the variant's share of its instance type (variantPricePerSecond), with the profiled batch
 *   latencies (median, or the P99 of the runs where the profile has it and `latency: "p99"`), and as
 *   `batchSizes` the max batch sizes that exist as variants. A stage with k items per visit is profiled
 *   in queries: a batch of b queries carries b·k items, T_q(b) = T(b·k) (interpolated, extrapolated
 *   linearly past the largest profiled batch), and its variant is the one whose max batch is the
 *   smallest size ≥ b·k (else the largest).
 * - **Floors.** A plan, or the Tuner's replica counts, becomes per-variant floors (model-actions
 *   `floors`): the model autoscaler places what is missing and never removes them; instances above a
 *   lowered floor are the autoscaler's to remove by its own rule.
 *
 * Caveat: the Estimator sees each stage at its planned variant only; a model that also runs other
 * variants (loaded on demand, or by INFaaS under load) has more capacity than planned.
 */
import type { PipelinePlanStatus, PipelineSpec, PipelineStagePlan, VariantRecord } from "@sloserve/contracts";
import { interpolateBatchLatency } from "../batching/batch-tuning.js";
import type { VariantFloor } from "../scaling/model-actions.js";
import { scaleFactors, topologicalOrder, type HardwareProfile, type Pipeline, type PipelineConfig, type PipelineEdge, type ProfileSet } from "./pipeline.js";
import { specToPipeline } from "./pipeline-spec.js";
import { planPipeline, serviceTimeCheck, type PlanResult, type ServiceTimeCheck } from "./planner.js";
import { sampleRoutes } from "./estimator.js";
import { createRng } from "../common/rng.js";
import { makeTunerPlan, type TunerPlan } from "./tuner.js";
import { variantPricePerSecond } from "../costs/variant-price.js";

/** Counts of a pipeline's answered queries: per stage, the queries that visited it and the items that reached it. */
export interface StageCounts {
  queries: number;
  visits: Readonly<Record<string, number>>;
  /** Absent: one item per visit. */
  items?: Readonly<Record<string, number>>;
}

export interface PipelineControlConfig {
  /** Counts with fewer queries than this are not trusted; the spec's shares are used. @default 100 */
  minQueriesForShares: number;
  /** Batch latency the plan uses: the profile's median, or the P99 of its runs where measured. @default "median" */
  latency: "median" | "p99";
  /** Hardware kinds that can run a replica now (kinds of live workers); others are no option. @default all */
  kinds?: readonly string[];
  /** Largest replica count per stage the planner considers. @default 64 */
  maxReplicas: number;
}

export const DEFAULT_PIPELINE_CONTROL_CONFIG: PipelineControlConfig = { minQueriesForShares: 100, latency: "median", maxReplicas: 64 };

/** Shares under this are taken as this (an edge needs a positive probability); at or over 1 − this, as 1. */
const MIN_SHARE = 0.001;

export interface PlanningModel {
  /** The model stages and the edges between them (contracted through steps and app stages). */
  pipeline: Pipeline;
  /** Per model stage, one hardware option per (kind, threads) of its model's profiled fp32 variants. */
  profiles: ProfileSet;
  /** stage → hardware option → max batch (in queries) → variant. */
  variantOf: Record<string, Record<string, Record<number, string>>>;
  /** stage → model. */
  modelOf: Record<string, string>;
  /** Per stage (every stage): visit share v, items per visit k and scale factor s = v·k. */
  visitShare: Record<string, number>;
  itemsPerVisit: Record<string, number>;
  scaleFactor: Record<string, number>;
  shareSource: "spec" | "counts";
  /** Stages not planned, with why. */
  unplanned: Record<string, string>;
  /** Why the model cannot be planned yet (a model stage without profiled variants, …); empty when it can. */
  problems: string[];
}

function label(spec: PipelineSpec, stage: string): string {
  const s = spec.stages.find((x) => x.name === stage);
  return s?.model !== undefined ? `stage ${stage} (model ${s.model})` : `stage ${stage}`;
}

/** Visit shares and items per visit of every stage: from counts when there are enough, else from the spec. */
export function stageShares(spec: PipelineSpec, counts: StageCounts | undefined, minQueries = DEFAULT_PIPELINE_CONTROL_CONFIG.minQueriesForShares): { visitShare: Record<string, number>; itemsPerVisit: Record<string, number>; source: "spec" | "counts" } {
  const visitShare: Record<string, number> = {};
  const itemsPerVisit: Record<string, number> = {};
  if (counts && counts.queries >= minQueries && counts.queries > 0) {
    for (const s of spec.stages) {
      const visits = counts.visits[s.name] ?? 0;
      visitShare[s.name] = Math.min(1, visits / counts.queries);
      const items = counts.items?.[s.name];
      itemsPerVisit[s.name] = visits > 0 && items !== undefined ? Math.max(1, items / visits) : 1;
    }
    return { visitShare, itemsPerVisit, source: "counts" };
  }
  const s = scaleFactors(specToPipeline(spec));
  for (const st of spec.stages) {
    visitShare[st.name] = s[st.name] ?? 0;
    itemsPerVisit[st.name] = 1;
  }
  return { visitShare, itemsPerVisit, source: "spec" };
}

/**
 * One hardware option per (kind, threads) of a model's profiled fp32 variants, in queries for a stage
 * with `k` items per visit; and the variant for each configurable max batch.
 */
export function stageHardware(variants: readonly VariantRecord[], k: number, latency: "median" | "p99", kinds?: readonly string[]): { options: HardwareProfile[]; variantOf: Record<string, Record<number, string>> } {
  const groups = new Map<string, VariantRecord[]>();
  for (const v of variants) {
    if (!v.profiled || !v.profile || v.quantization !== "fp32") continue;
    if (kinds && !kinds.includes(v.hardware)) continue;
    const key = `${v.hardware}-${v.quantization}-t${v.threads}`;
    groups.set(key, [...(groups.get(key) ?? []), v]);
  }
  const options: HardwareProfile[] = [];
  const variantOf: Record<string, Record<number, string>> = {};
  for (const [hardware, vs] of [...groups].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) {
    const points = new Map<number, number>();
    for (const v of vs) {
      const med = v.profile!.latencyMs;
      const tail = latency === "p99" ? v.profile!.latencyP99Ms : undefined;
      for (const [b, ms] of Object.entries(med)) {
        const batch = Number(b);
        const value = tail?.[b] ?? ms;
        if (!points.has(batch) && Number.isInteger(batch) && batch >= 1 && value > 0) points.set(batch, value);
      }
    }
    if (!points.has(1)) continue; // the estimator needs batch 1
    const sizes = [...new Set(vs.map((v) => v.maxBatch))].sort((a, b) => a - b);
    const byItems = new Map(vs.map((v) => [v.maxBatch, v.name]));
    const item = interpolateBatchLatency([...points]);
    let batchLatencyMs: Array<[number, number]>;
    let batchSizes: number[];
    const map: Record<number, string> = {};
    if (k <= 1 + 1e-9) {
      batchLatencyMs = [...points].sort((a, b) => a[0] - b[0]);
      batchSizes = sizes;
      for (const b of sizes) map[b] = byItems.get(b)!;
    } else {
      // In queries: a batch of b queries carries b·k items.
      batchSizes = [...new Set([1, ...sizes.map((b) => Math.max(1, Math.floor(b / k)))])].sort((a, b) => a - b);
      batchLatencyMs = batchSizes.map((b) => [b, item(b * k)]);
      for (const b of batchSizes) map[b] = byItems.get(sizes.find((s) => s >= b * k - 1e-9) ?? sizes[sizes.length - 1]!)!;
    }
    const v0 = vs[0]!;
    options.push({ hardware, pricePerHour: variantPricePerSecond(v0.hardware, v0.threads) * 3600, batchLatencyMs, batchSizes });
    variantOf[hardware] = map;
  }
  return { options, variantOf };
}

/** The planning model of a spec: InferLine's pipeline, profiles and scale factors from what is known. */
export function planningModel(spec: PipelineSpec, variantsOfModel: (model: string) => readonly VariantRecord[], counts?: StageCounts, config: Partial<PipelineControlConfig> = {}): PlanningModel {
  const cfg = { ...DEFAULT_PIPELINE_CONTROL_CONFIG, ...config };
  const { visitShare, itemsPerVisit, source } = stageShares(spec, counts, cfg.minQueriesForShares);
  const modelOf: Record<string, string> = {};
  const unplanned: Record<string, string> = {};
  for (const s of spec.stages) {
    if (s.model !== undefined) modelOf[s.name] = s.model;
    else if (s.app !== undefined) unplanned[s.name] = `app ${s.app}: a model-less stage, scaled by INFaaS`;
    else unplanned[s.name] = `step ${s.step ?? ""}: runs in the dispatcher`;
  }
  // Contract: a model stage's parents are the model stages that reach it through non-model stages only.
  const parents = new Map<string, string[]>(spec.stages.map((s) => [s.name, []]));
  for (const e of spec.edges) parents.get(e.to)?.push(e.from);
  const modelParents = (stage: string): string[] => {
    const out = new Set<string>();
    const seen = new Set<string>();
    const walk = (s: string): void => {
      for (const p of parents.get(s) ?? []) {
        if (seen.has(p)) continue;
        seen.add(p);
        if (modelOf[p] !== undefined) out.add(p);
        else walk(p);
      }
    };
    walk(stage);
    return [...out];
  };
  const order = topologicalOrder(specToPipeline(spec)).filter((s) => modelOf[s] !== undefined);
  const edges: PipelineEdge[] = [];
  for (const m of order) {
    for (const a of modelParents(m).sort((x, y) => order.indexOf(x) - order.indexOf(y))) {
      const p = Math.min(1, (visitShare[m] ?? 0) / Math.max(MIN_SHARE, visitShare[a] ?? 0));
      edges.push(p >= 1 - MIN_SHARE ? { from: a, to: m } : { from: a, to: m, probability: Math.max(MIN_SHARE, p) });
    }
  }
  const profiles: Record<string, HardwareProfile[]> = {};
  const variantOf: PlanningModel["variantOf"] = {};
  const problems: string[] = [];
  for (const m of order) {
    const { options, variantOf: map } = stageHardware(variantsOfModel(modelOf[m]!), itemsPerVisit[m] ?? 1, cfg.latency, cfg.kinds);
    if (options.length === 0) problems.push(`${label(spec, m)} has no profiled fp32 variant${cfg.kinds ? ` on ${cfg.kinds.join("/") || "any running hardware"}` : ""} yet`);
    profiles[m] = options;
    variantOf[m] = map;
  }
  if (order.length === 0) problems.push("the pipeline has no model stage to plan");
  const scaleFactor: Record<string, number> = {};
  for (const s of spec.stages) scaleFactor[s.name] = (visitShare[s.name] ?? 0) * (itemsPerVisit[s.name] ?? 1);
  return {
    pipeline: { name: spec.name, models: order, edges }, profiles, variantOf, modelOf, visitShare, itemsPerVisit, scaleFactor,
    shareSource: source, unplanned, problems,
  };
}

/** Algorithm 1's check for a spec (registration, the dispatcher): undefined while a model stage has no profile. */
export function pipelineSloCheck(spec: PipelineSpec, model: PlanningModel): ServiceTimeCheck | undefined {
  if (model.problems.length > 0) return undefined;
  const check = serviceTimeCheck(model.pipeline, model.profiles, spec.slo.p99_ms, (m) => label(spec, m));
  return { ...check, reason: `pipeline ${spec.name}: ${check.reason}` };
}

export interface DeploymentInput {
  spec: PipelineSpec;
  model: PlanningModel;
  /** The planning trace, ms, non-decreasing. */
  arrivalsMs: Float64Array;
  /** The same trace as the Tuner will see live arrivals (e.g. binned per second and spread); @default arrivalsMs */
  tunerViewMs?: Float64Array;
  /** Seed of the conditional-edge draws. */
  seed: number;
  config?: Partial<PipelineControlConfig>;
}

export interface Deployment {
  feasible: boolean;
  reason: string;
  stages: Record<string, PipelineStagePlan>;
  plan?: PlanResult;
  config?: PipelineConfig;
  tunerPlan?: TunerPlan;
}

/** Runs the Planner (Algorithm 2 with the Estimator) on a planning model and trace; maps its choice to variants. */
export function planDeployment(input: DeploymentInput): Deployment {
  const { spec, model } = input;
  const cfg = { ...DEFAULT_PIPELINE_CONTROL_CONFIG, ...(input.config ?? {}) };
  if (model.problems.length > 0) return { feasible: false, reason: `pipeline ${spec.name} cannot be planned yet: ${model.problems.join("; ")}`, stages: {} };
  const check = pipelineSloCheck(spec, model)!;
  if (!check.feasible) return { feasible: false, reason: check.reason, stages: {} };
  const routes = sampleRoutes(model.pipeline, input.arrivalsMs.length, createRng(input.seed));
  const plan = planPipeline({ pipeline: model.pipeline, profiles: model.profiles, sloMs: spec.slo.p99_ms, arrivalsMs: input.arrivalsMs, routes, maxReplicas: cfg.maxReplicas });
  if (!plan.feasible || !plan.config) return { feasible: false, reason: `pipeline ${spec.name}: ${plan.reason}`, stages: {}, plan };
  const stages = stagePlans(model, plan.config);
  const tunerPlan = makeTunerPlan(model.pipeline, model.profiles, plan.config, input.tunerViewMs ?? input.arrivalsMs);
  const what = Object.entries(stages).map(([s, p]) => `${s} ${p.replicas}× ${p.variant}`).join(", ");
  return {
    feasible: true, stages, plan, config: plan.config, tunerPlan,
    reason: `planned for ${tunerPlan.plannedQps.toFixed(1)} qps: ${what}; estimated P99 ${plan.p99Ms.toFixed(1)} ms ≤ SLO ${spec.slo.p99_ms} ms at $${plan.costPerHour.toFixed(4)}/h (${plan.reason})`,
  };
}

/** The stages of a configuration as variants and replicas. */
export function stagePlans(model: PlanningModel, config: PipelineConfig): Record<string, PipelineStagePlan> {
  const out: Record<string, PipelineStagePlan> = {};
  for (const m of model.pipeline.models) {
    const c = config[m];
    const variant = c ? model.variantOf[m]?.[c.hardware]?.[c.maxBatch] : undefined;
    if (!c || variant === undefined) continue;
    out[m] = { model: model.modelOf[m]!, variant, hardware: c.hardware, maxBatch: c.maxBatch, replicas: c.replicas, scaleFactor: model.scaleFactor[m] ?? 1 };
  }
  return out;
}

/** The same stages with the Tuner's replica counts. */
export function withReplicas(stages: Readonly<Record<string, PipelineStagePlan>>, replicas: Readonly<Record<string, number>>): Record<string, PipelineStagePlan> {
  return Object.fromEntries(Object.entries(stages).map(([s, p]) => [s, { ...p, replicas: replicas[s] ?? p.replicas }]));
}

/** A pipeline's stages as floors for the model autoscaler (model-actions `floors`). */
export function pipelineFloors(pipeline: string, stages: Readonly<Record<string, PipelineStagePlan>>, why: string): VariantFloor[] {
  return Object.entries(stages)
    .filter(([, p]) => p.replicas > 0)
    .map(([stage, p]) => ({ variant: p.variant, count: p.replicas, owner: `pipeline-${pipeline}`, reason: `pipeline ${pipeline} stage ${stage}: ${why}, ${p.replicas} replica${p.replicas === 1 ? "" : "s"}` }));
}

/** A report window: `count` queries answered in the `ms` before `endMs`. */
export interface ArrivalWindow {
  endMs: number;
  ms: number;
  count: number;
}

/**
 * Arrival times from per-window counts, spread evenly inside each window (a window of n holds n
 * arrivals at its (i + ½)/n points): the resolution at which the live Tuner sees arrivals, from the
 * dispatchers' one-second reports. Sorted.
 */
export function spreadArrivals(windows: readonly ArrivalWindow[]): Float64Array {
  const out: number[] = [];
  for (const w of windows) {
    for (let i = 0; i < w.count; i++) out.push(w.endMs - w.ms + ((i + 0.5) * w.ms) / w.count);
  }
  return Float64Array.from(out.sort((a, b) => a - b));
}

/** A status for the store and `GET /v1/pipelines/{name}`. */
export function planStatus(pipeline: string, atMs: number, d: Deployment, model: PlanningModel, trace: PipelinePlanStatus["trace"], scaleFactorSource: PipelinePlanStatus["scaleFactorSource"]): PipelinePlanStatus {
  const waiting = model.problems.length > 0;
  return {
    pipeline, atMs, reason: d.reason, stages: d.stages, trace, scaleFactorSource,
    state: d.feasible ? "planned" : waiting ? "waiting" : "infeasible",
    estimatedP99Ms: d.feasible && d.plan ? d.plan.p99Ms : null,
    costPerHour: d.feasible && d.plan ? d.plan.costPerHour : null,
    unplanned: model.unplanned,
  };
}
