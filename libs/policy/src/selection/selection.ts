/**
 * Per-query model-variant selection: INFaaS Algorithm 1 (`getVariant`, papers/infaas.txt §4.1,
 * DESIGN §3 "Variant selection").
 *
 * 1. Among the app's **Active** variants (loaded, neither Overloaded nor Interfered) that meet the
 *    query's accuracy (≥ min), latency (profiled latency at the batch size in use ≤ SLO) and cost
 *    (≤ max cost per query, if given), pick the cheapest per query; among equals, the one with the most
 *    headroom (Σ peak QPS of its instances − current QPS). Dispatch to its least-loaded worker.
 * 2. Else among **Inactive** variants (our refinement first: the cheapest that meets the requirements and
 *    whose load + inference latency fits in the SLO, since later queries will use what is loaded now;
 *    INFaaS's rule when none fits) the one with the lowest load + inference latency that meets the
 *    requirements; it is to be loaded on the lowest-utilised worker of its hardware, and the query waits
 *    in its queue. A variant already **Loading** that meets the requirements is preferred (lowest
 *    inference latency first): loading another one would take at least as long, and the caller must not
 *    load it twice; such a decision says `alreadyLoading: true`.
 *    Our addition: when the variant step 2 loads (or waits for) cannot be loaded and answer within the
 *    query's SLO (load + inference > SLO) and a loaded variant that meets the query is Interfered, the
 *    decision names that one as `meanwhile`: the load goes ahead for the queries after it, and this
 *    query is served by the Interfered instance (a query waiting for such a load misses its SLO for
 *    certain; an Interfered instance is not at its peak, only slower than profiled, and may still
 *    answer in time). Not an Overloaded one: it already serves at its peak, and the queries added to
 *    its queue during the load would miss as well and keep it behind after the load (measured on
 *    infaas-selection's spikes: 86.6% within the SLO against 90.8%). INFaaS "avoids selecting"
 *    Interfered variants (§4.1) but says nothing of a load that cannot answer in time.
 * 3. Our addition (the paper is silent): when every feasible variant is loaded but Overloaded or
 *    Interfered, the query is queued on the one with the most headroom (`degraded: true`) rather than
 *    refused; the model autoscaler is what relieves it.
 * 4. Else: infeasible, with the closest variant (accuracy, latency and cost it offers) and a reason.
 *
 * A query may say how large its input is (`inputElements`): a variant profiled per input size class
 * (input-classes.ts) is then judged by the latency of the query's class (the order in which step 2
 * tries Inactive variants stays that of their base profile).
 *
 * Unprofiled variants are never selected. Cost per query = `costPerQuery` if the profile gives one,
 * else price per second / peak QPS (the cost of a query on a saturated instance).
 *
 * Speed: {@link SelectionIndex} is built once and updated incrementally. Per app it keeps the variants
 * sorted by cost per query and by load + inference latency, and the currently Active ones in cost order,
 * so a query scans only the app's Active list and, if needed, the app's latency-sorted list; never the
 * whole catalogue (INFaaS §6.4: selection time stays flat as variants grow). Queries of an app
 * mostly repeat the same requirements, so the index also remembers its last few decisions per app,
 * keyed by the requirements and forgotten whenever its data changes (`setRuntime`, `setWorkers`,
 * `upsertVariant`, `removeVariant`): a repeated query costs a few comparisons. {@link selectVariant} is
 * the same algorithm as a plain scan, kept as the reference for tests.
 */
import type { HardwareKind } from "../costs/costs.js";
import { classFor } from "../variants/input-classes.js";

export type VariantState = "inactive" | "loading" | "active" | "overloaded" | "interfered";

/**
 * Two readings of Algorithm 1 step 2 (INFaaS §4.1: "select the variant with the lowest combined
 * loading and inference latency that meets the requirements"): `inference` — an Inactive variant is a
 * candidate when its inference latency meets the SLO (the requirement a query states), and among
 * those the lowest load + inference latency is loaded, even when the load alone is longer than the SLO
 * (the query waiting for it misses, later ones are served); `load-and-inference` — only variants whose
 * load + inference latency fits in the SLO are candidates, otherwise no load is asked for (step 3: the
 * query is queued on an Overloaded/Interfered variant). Both were measured on the INFaaS scenarios
 * (infaas-selection: `infaas` and `infaas (step 2: …)`); {@link DEFAULT_INACTIVE_RULE} is the one kept.
 */
export type InactiveRule = "inference" | "load-and-inference";

/**
 * The reading kept: `inference`. On infaas-selection `load-and-inference` is cheaper at flat 4 QPS but
 * never loads the Inferentia variant (3 s load > 1 s SLO) when a spike overloads the CPU one, so the
 * fluctuating workload misses its SLO target; the cost at the SLO target is lower with `inference`.
 */
export const DEFAULT_INACTIVE_RULE: InactiveRule = "inference";

export interface SelectionOptions {
  /** How Algorithm 1 step 2 admits Inactive variants. @default {@link DEFAULT_INACTIVE_RULE} */
  inactiveRule?: InactiveRule;
}

export interface VariantProfile {
  /** Unique variant name, e.g. "resnet50-trt-v100-b8". */
  name: string;
  /** Model architecture the variant implements, e.g. "resnet50". */
  model: string;
  /** Application (task) the model serves; model-less queries name the app. */
  app: string;
  hardware: HardwareKind | string;
  /** Batch size the variant is optimised for (and runs at under load). */
  batchSize: number;
  /** Accuracy on the validation set, 0..1. */
  accuracy: number;
  /** Profiled latency (ms) of one batch, by batch size (1, 2, 4, ... as profiled). */
  latencyMs: Record<number, number>;
  /** Profiled saturation throughput of one instance, queries per second. */
  peakQps: number;
  /** Time to load an instance on a ready worker, ms. */
  loadLatencyMs: number;
  /** Price of one running instance, $/s (or normalised cost units per second). */
  pricePerS: number;
  /** Cost of one query, when known directly (e.g. per-request pricing). */
  costPerQuery?: number;
  /** Unprofiled variants are never selected. */
  profiled: boolean;
  /** Resources one instance takes on a worker, by the worker reports' names, e.g. { threads: 4 } or { threads: 1, acceleratorMemoryBytes: 2 ** 30 } (accelerator-share.ts `variantResources`). */
  resources?: Record<string, number>;
  /** Batches one instance runs at once (pipelined accelerators). @default 1 */
  concurrency?: number;
  /**
   * Latency by batch size per input size class (input-classes.ts), by the elements of one query,
   * ascending; absent: `latencyMs` holds for every input.
   */
  inputClasses?: ReadonlyArray<{ elements: number; latencyMs: Record<number, number> }>;
}

export interface WorkerLoad {
  worker: string;
  /** Current QPS the variant's instance(s) on this worker serve. */
  qps: number;
}

/** Runtime view of a variant, aggregated over its instances. */
export interface VariantRuntime {
  state: VariantState;
  /** Loaded (serving) instances. */
  instances: number;
  /** Current QPS over all instances. */
  qps: number;
  /** Workers running (or loading) an instance, with their load. */
  workers: WorkerLoad[];
}

export interface WorkerInfo {
  worker: string;
  hardware: string;
  /** 0..1 */
  utilization: number;
}

export interface QueryRequirements {
  latencyMs: number;
  /** 0..1 @default 0 */
  minAccuracy?: number;
  maxCostPerQuery?: number;
  /** Elements of the query's input (one row, all inputs): variants are judged by the latency of its size class. */
  inputElements?: number;
}

export interface ClosestVariant {
  variant: string;
  accuracy: number;
  latency_ms: number;
  cost_per_query: number;
}

/** A loaded, Interfered variant that serves a query while the load it asked for cannot answer in time. */
export interface MeanwhileVariant {
  variant: VariantProfile;
  worker?: string;
  reason: string;
}

export type SelectionDecision =
  | { kind: "active"; variant: VariantProfile; worker?: string; degraded?: true; reason: string }
  | { kind: "load"; variant: VariantProfile; worker?: string; alreadyLoading: boolean; reason: string; meanwhile?: MeanwhileVariant }
  | { kind: "infeasible"; closest: ClosestVariant | null; reason: string };

/** Profiled latency at the batch size the variant runs at (the smallest profiled size ≥ it). */
export function variantLatencyMs(v: VariantProfile): number {
  const exact = v.latencyMs[v.batchSize];
  if (exact !== undefined) return exact;
  let best = Infinity;
  let bestSize = Infinity;
  let largest = 0;
  for (const [k, ms] of Object.entries(v.latencyMs)) {
    const b = Number(k);
    if (b >= v.batchSize && b < bestSize) {
      bestSize = b;
      best = ms;
    }
    largest = Math.max(largest, ms);
  }
  return Number.isFinite(best) ? best : largest;
}

export function costPerQuery(v: VariantProfile): number {
  return v.costPerQuery ?? v.pricePerS / v.peakQps;
}

const INACTIVE: VariantRuntime = { state: "inactive", instances: 0, qps: 0, workers: [] };

interface Reasons {
  active: string;
  loading: string;
  load: string;
  degraded: string;
}

interface Entry {
  v: VariantProfile;
  cost: number;
  latency: number;
  /** Latency at its batch size per input size class (elements ascending), when profiled so. */
  classLatency: Array<{ elements: number; latency: number }> | undefined;
  loadPlusInfer: number;
  rt: VariantRuntime;
  active: boolean;
  /** Decision reasons, built once per variant (selection runs per query). */
  reasons: Reasons;
}

function makeEntry(v: VariantProfile, rt: VariantRuntime): Entry {
  const latency = variantLatencyMs(v);
  return {
    v,
    cost: costPerQuery(v),
    latency,
    classLatency: v.inputClasses?.map((c) => ({ elements: c.elements, latency: variantLatencyMs({ ...v, latencyMs: c.latencyMs }) })),
    loadPlusInfer: v.loadLatencyMs + latency,
    rt,
    active: false,
    reasons: {
      active: `cheapest active variant meeting the query (${v.name}: ${latency} ms, accuracy ${pct(v.accuracy)})`,
      loading: `no active variant meets the query; ${v.name} is loading`,
      load: `no active variant meets the query; load ${v.name} (${v.loadLatencyMs} ms load + ${latency} ms inference, the lowest)`,
      degraded: `every variant meeting the query is overloaded or interfered; queued on ${v.name} (most headroom) while it scales`,
    },
  };
}

/** A decision {@link SelectionIndex.select} made, for the requirements it was made for. */
interface Memo {
  latencyMs: number;
  minAccuracy: number;
  maxCostPerQuery: number | undefined;
  inputElements: number | undefined;
  allowLoad: boolean;
  decision: SelectionDecision;
}

/** Decisions remembered per app (distinct requirements of an app's query streams in use at once). */
const MEMO_SIZE = 4;

interface AppIndex {
  /** Recent decisions (at most MEMO_SIZE, replaced round-robin from `memoNext`), made at index version `memoVersion`. */
  memo: Memo[];
  memoNext: number;
  memoVersion: number;
  /** All profiled variants, by cost per query (ties: name). */
  byCost: Entry[];
  /** All profiled variants, by load + inference latency (ties: cost, name). */
  byLoadLatency: Entry[];
  /** Active variants, by cost per query (ties: name). */
  active: Entry[];
  /** Every variant of the app, profiled or not (for "closest"). */
  all: Entry[];
  /** Variants profiled per input size class: while none is, a query's input size does not key its memo. */
  sized: number;
}

/** The variant's latency for the query: of the query's input size class when both know one (input-classes.ts). */
function latencyFor(e: Entry, req: QueryRequirements): number {
  if (req.inputElements === undefined || e.classLatency === undefined) return e.latency;
  return classFor(e.classLatency, req.inputElements)?.latency ?? e.latency;
}

function meets(e: Entry, req: QueryRequirements): boolean {
  return (
    e.v.accuracy >= (req.minAccuracy ?? 0) &&
    latencyFor(e, req) <= req.latencyMs &&
    (req.maxCostPerQuery === undefined || e.cost <= req.maxCostPerQuery)
  );
}

function headroom(rt: VariantRuntime, v: VariantProfile): number {
  return rt.instances * v.peakQps - rt.qps;
}

function byCostCmp(a: Entry, b: Entry): number {
  return a.cost - b.cost || (a.v.name < b.v.name ? -1 : a.v.name > b.v.name ? 1 : 0);
}

function byLoadCmp(a: Entry, b: Entry): number {
  return a.loadPlusInfer - b.loadPlusInfer || byCostCmp(a, b);
}

function insertSorted(list: Entry[], e: Entry, cmp: (a: Entry, b: Entry) => number): void {
  let lo = 0;
  let hi = list.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (cmp(list[mid] as Entry, e) < 0) lo = mid + 1;
    else hi = mid;
  }
  list.splice(lo, 0, e);
}

function removeFrom(list: Entry[], e: Entry): void {
  const i = list.indexOf(e);
  if (i >= 0) list.splice(i, 1);
}

function leastLoaded(rt: VariantRuntime): string | undefined {
  let best: WorkerLoad | undefined;
  for (const w of rt.workers) if (!best || w.qps < best.qps) best = w;
  return best?.worker;
}

function pct(x: number): string {
  return `${Math.round(x * 1000) / 10}%`;
}

/** Distance of an offer from a requirement: relative shortfalls in accuracy, latency and cost. */
function shortfall(e: Entry, req: QueryRequirements): number {
  const minAcc = req.minAccuracy ?? 0;
  let d = 0;
  if (e.v.accuracy < minAcc) d += (minAcc - e.v.accuracy) / Math.max(minAcc, 1e-9);
  const latency = latencyFor(e, req);
  if (latency > req.latencyMs) d += (latency - req.latencyMs) / Math.max(req.latencyMs, 1e-9);
  if (req.maxCostPerQuery !== undefined && e.cost > req.maxCostPerQuery) d += (e.cost - req.maxCostPerQuery) / Math.max(req.maxCostPerQuery, 1e-12);
  return d;
}

/**
 * The incrementally maintained selection index (one per dispatcher).
 *
 * It reads a variant's runtime and the workers when they are set: to change one, call `setRuntime` /
 * `setWorkers` again with new values rather than changing the objects passed in (its remembered
 * decisions are forgotten on each such call). Decisions may be shared between calls with the same
 * requirements (they are frozen): treat them as read-only.
 */
export class SelectionIndex {
  private readonly apps = new Map<string, AppIndex>();
  private readonly entries = new Map<string, Entry>();
  private readonly workers = new Map<string, WorkerInfo[]>();
  /** Bumped by every change of the data selection reads; remembered decisions of older versions are stale. */
  private version = 0;

  private readonly inactiveRule: InactiveRule;

  constructor(variants: Iterable<VariantProfile> = [], options: SelectionOptions = {}) {
    this.inactiveRule = options.inactiveRule ?? DEFAULT_INACTIVE_RULE;
    for (const v of variants) this.upsertVariant(v);
  }

  get size(): number {
    return this.entries.size;
  }

  /**
   * Changes whenever the data selection reads does (runtimes, workers, variants): while it stays the
   * same, `select` gives the same decision for the same app and requirements (and so does dispatch.ts
   * `selectForApp` when it asked for no load), so a caller may keep one.
   */
  get revision(): number {
    return this.version;
  }

  variant(name: string): VariantProfile | undefined {
    return this.entries.get(name)?.v;
  }

  runtime(name: string): VariantRuntime {
    return this.entries.get(name)?.rt ?? INACTIVE;
  }

  /** Variants of an app (profiled and not), cheapest per query first. */
  variantsOf(app: string): VariantProfile[] {
    return (this.apps.get(app)?.all ?? []).slice().sort(byCostCmp).map((e) => e.v);
  }

  /** Add or replace a variant's profile; keeps its runtime state. */
  upsertVariant(v: VariantProfile): void {
    this.version++;
    const old = this.entries.get(v.name);
    const rt = old?.rt ?? INACTIVE;
    if (old) this.removeVariant(v.name);
    const e = makeEntry(v, rt);
    this.entries.set(v.name, e);
    let app = this.apps.get(v.app);
    if (!app) {
      app = { memo: [], memoNext: 0, memoVersion: 0, byCost: [], byLoadLatency: [], active: [], all: [], sized: 0 };
      this.apps.set(v.app, app);
    }
    app.all.push(e);
    if (e.classLatency) app.sized++;
    if (v.profiled) {
      insertSorted(app.byCost, e, byCostCmp);
      insertSorted(app.byLoadLatency, e, byLoadCmp);
    }
    this.setRuntime(v.name, rt);
  }

  removeVariant(name: string): void {
    const e = this.entries.get(name);
    if (!e) return;
    this.version++;
    const app = this.apps.get(e.v.app);
    if (app) {
      removeFrom(app.byCost, e);
      removeFrom(app.byLoadLatency, e);
      removeFrom(app.active, e);
      removeFrom(app.all, e);
      if (e.classLatency) app.sized--;
    }
    this.entries.delete(name);
  }

  /** Update a variant's runtime state (from monitoring). O(active variants of its app) on a state change. */
  setRuntime(name: string, rt: VariantRuntime): void {
    const e = this.entries.get(name);
    if (!e) return;
    this.version++;
    e.rt = rt;
    const nowActive = rt.state === "active" && e.v.profiled;
    if (nowActive === e.active) return;
    const app = this.apps.get(e.v.app);
    if (!app) return;
    if (nowActive) insertSorted(app.active, e, byCostCmp);
    else removeFrom(app.active, e);
    e.active = nowActive;
  }

  /** Replace the worker list (hardware and utilisation) used to place loads. */
  setWorkers(workers: Iterable<WorkerInfo>): void {
    this.version++;
    this.workers.clear();
    for (const w of workers) {
      const list = this.workers.get(w.hardware) ?? [];
      list.push(w);
      this.workers.set(w.hardware, list);
    }
  }

  private lowestUtilised(hardware: string): string | undefined {
    let best: WorkerInfo | undefined;
    for (const w of this.workers.get(hardware) ?? []) if (!best || w.utilization < best.utilization) best = w;
    return best?.worker;
  }

  /**
   * INFaaS Algorithm 1 for one query of `app`. With `allowLoad: false` (no worker can take a new
   * variant now) step 2 considers only variants already loading, then falls through to step 3.
   */
  select(app: string, req: QueryRequirements, options?: { allowLoad?: boolean }): SelectionDecision {
    const idx = this.apps.get(app);
    if (!idx) return { kind: "infeasible", closest: null, reason: `unknown app "${app}": no variants registered` };
    const minAccuracy = req.minAccuracy ?? 0;
    const allowLoad = options?.allowLoad !== false; // (no default `{}`: this runs per query)
    const inputElements = idx.sized > 0 ? req.inputElements : undefined;
    if (idx.memoVersion !== this.version) {
      idx.memo.length = 0;
      idx.memoNext = 0;
      idx.memoVersion = this.version;
    }
    for (const m of idx.memo) {
      if (m.latencyMs === req.latencyMs && m.minAccuracy === minAccuracy && m.maxCostPerQuery === req.maxCostPerQuery && m.inputElements === inputElements && m.allowLoad === allowLoad) return m.decision;
    }
    const decision = this.decide(idx, app, req, allowLoad);
    if (decision.kind === "infeasible" && decision.closest) Object.freeze(decision.closest);
    const memo: Memo = { latencyMs: req.latencyMs, minAccuracy, maxCostPerQuery: req.maxCostPerQuery, inputElements, allowLoad, decision: Object.freeze(decision) };
    if (idx.memo.length < MEMO_SIZE) idx.memo.push(memo);
    else idx.memo[idx.memoNext] = memo;
    idx.memoNext = (idx.memoNext + 1) % MEMO_SIZE;
    return decision;
  }

  /** Algorithm 1 proper (see {@link select}). */
  private decide(idx: AppIndex, app: string, req: QueryRequirements, allowLoad: boolean): SelectionDecision {
    // 1. Active: cheapest per query, ties by most headroom.
    let pick: Entry | undefined;
    for (const e of idx.active) {
      if (pick && e.cost > pick.cost) break;
      if (!meets(e, req)) continue;
      if (!pick || headroom(e.rt, e.v) > headroom(pick.rt, pick.v)) pick = e;
    }
    if (pick) {
      const worker = leastLoaded(pick.rt);
      return {
        kind: "active",
        variant: pick.v,
        ...(worker !== undefined ? { worker } : {}),
        reason: pick.reasons.active,
      };
    }
    // 2. Loading (lowest inference latency), then Inactive (lowest load + inference latency).
    let loading: Entry | undefined;
    let inactive: Entry | undefined;
    let degraded: Entry | undefined;
    let interfered: Entry | undefined;
    for (const e of idx.byLoadLatency) {
      if (e.active || !meets(e, req)) continue;
      const st = e.rt.state;
      if (st === "loading") {
        if (!loading || latencyFor(e, req) < latencyFor(loading, req)) loading = e;
      } else if (st === "inactive") {
        inactive ??= e;
      } else {
        if (!degraded || headroom(e.rt, e.v) > headroom(degraded.rt, degraded.v)) degraded = e;
        if (st === "interfered" && (!interfered || headroom(e.rt, e.v) > headroom(interfered.rt, interfered.v))) interfered = e;
      }
    }
    if (loading) {
      const worker = leastLoaded(loading.rt);
      return {
        kind: "load",
        variant: loading.v,
        ...(worker !== undefined ? { worker } : {}),
        alreadyLoading: true,
        reason: loading.reasons.loading,
        ...meanwhileOf(loading, interfered, req),
      };
    }
    // Step 2 read as "load + inference within the SLO": an Inactive variant that cannot be loaded and
    // answer in time is no candidate (the query goes on to step 3).
    if (inactive && this.inactiveRule === "load-and-inference" && inactive.v.loadLatencyMs + latencyFor(inactive, req) > req.latencyMs) inactive = undefined;
    if (inactive && allowLoad) {
      // Our refinement: the query waits for a load anyway, so if the cheapest feasible variant can
      // be loaded and answer within the SLO, load that one: later queries will use it.
      const cheap = cheapestLoadableInSlo(idx.byCost, req);
      const chosen = cheap ?? inactive;
      const worker = this.lowestUtilised(String(chosen.v.hardware));
      return {
        kind: "load",
        variant: chosen.v,
        ...(worker !== undefined ? { worker } : {}),
        alreadyLoading: false,
        reason: cheap ? cheapReason(cheap) : inactive.reasons.load,
        ...meanwhileOf(chosen, interfered, req),
      };
    }
    // 3. Every feasible variant is loaded but Overloaded/Interfered: queue on the most headroom.
    if (degraded) {
      const worker = leastLoaded(degraded.rt);
      return {
        kind: "active",
        variant: degraded.v,
        ...(worker !== undefined ? { worker } : {}),
        degraded: true,
        reason: degraded.reasons.degraded,
      };
    }
    return infeasible(app, idx.all, req);
  }
}

/**
 * `{ meanwhile }` when the variant to load (or loading) cannot be loaded and answer within the query's
 * SLO and a loaded, Interfered variant meets the query (step 2's addition); else `{}`.
 */
function meanwhileOf(load: Entry, interfered: Entry | undefined, req: QueryRequirements): { meanwhile?: MeanwhileVariant } {
  const loadAndAnswerMs = load.v.loadLatencyMs + latencyFor(load, req);
  if (interfered === undefined || loadAndAnswerMs <= req.latencyMs) return {};
  const worker = leastLoaded(interfered.rt);
  return {
    meanwhile: {
      variant: interfered.v,
      ...(worker !== undefined ? { worker } : {}),
      reason: `${load.v.name} cannot load and answer within the SLO (${Math.round(loadAndAnswerMs)} ms > ${req.latencyMs} ms): served meanwhile by Interfered ${interfered.v.name}`,
    },
  };
}

/**
 * The cheapest Inactive variant (in `byCost` order) that meets the query and whose load plus
 * inference latency fits in its SLO, if any.
 */
function cheapestLoadableInSlo(byCost: readonly Entry[], req: QueryRequirements): Entry | undefined {
  for (const e of byCost) {
    if (e.active || e.rt.state !== "inactive" || !e.v.profiled || !meets(e, req)) continue;
    if (e.v.loadLatencyMs + latencyFor(e, req) <= req.latencyMs) return e;
  }
  return undefined;
}

function cheapReason(e: Entry): string {
  return `no active variant meets the query; load ${e.v.name}, the cheapest that meets it and whose load + inference (${Math.round(e.loadPlusInfer)} ms) fits in the SLO`;
}

function infeasible(app: string, all: Entry[], req: QueryRequirements): SelectionDecision {
  let best: Entry | undefined;
  let bestD = Infinity;
  for (const e of all) {
    if (!e.v.profiled) continue;
    const d = shortfall(e, req);
    if (d < bestD || (d === bestD && best && byCostCmp(e, best) < 0)) {
      best = e;
      bestD = d;
    }
  }
  const wanted = `accuracy ≥ ${pct(req.minAccuracy ?? 0)}, latency ≤ ${req.latencyMs} ms${req.maxCostPerQuery !== undefined ? `, cost ≤ ${req.maxCostPerQuery} per query` : ""}`;
  if (!best) return { kind: "infeasible", closest: null, reason: `no profiled variant of app "${app}"` };
  return {
    kind: "infeasible",
    closest: { variant: best.v.name, accuracy: best.v.accuracy, latency_ms: best.latency, cost_per_query: best.cost },
    reason: `no variant of app "${app}" meets ${wanted}; closest is ${best.v.name} (accuracy ${pct(best.v.accuracy)}, ${best.latency} ms, ${best.cost.toPrecision(3)} per query)`,
  };
}

/**
 * The same algorithm as {@link SelectionIndex.select} as a plain scan over a list (reference for tests
 * and for one-off decisions). `runtimes` defaults every variant to Inactive.
 */
export function selectVariant(
  app: string,
  variants: readonly VariantProfile[],
  runtimes: ReadonlyMap<string, VariantRuntime>,
  req: QueryRequirements,
  workers: readonly WorkerInfo[] = [],
  options: { allowLoad?: boolean } & SelectionOptions = {},
): SelectionDecision {
  const all: Entry[] = [];
  for (const v of variants) {
    if (v.app !== app) continue;
    const e = makeEntry(v, runtimes.get(v.name) ?? INACTIVE);
    e.active = e.rt.state === "active" && v.profiled;
    all.push(e);
  }
  if (all.length === 0) return { kind: "infeasible", closest: null, reason: `unknown app "${app}": no variants registered` };
  let pick: Entry | undefined;
  for (const e of all) {
    if (!e.active || !meets(e, req)) continue;
    const better =
      !pick ||
      e.cost < pick.cost ||
      (e.cost === pick.cost && (headroom(e.rt, e.v) > headroom(pick.rt, pick.v) || (headroom(e.rt, e.v) === headroom(pick.rt, pick.v) && e.v.name < pick.v.name)));
    if (better) pick = e;
  }
  if (pick) {
    const worker = leastLoaded(pick.rt);
    return { kind: "active", variant: pick.v, ...(worker !== undefined ? { worker } : {}), reason: `cheapest active variant meeting the query (${pick.v.name})` };
  }
  const feasible = all.filter((e) => !e.active && e.v.profiled && meets(e, req));
  let degraded: Entry | undefined;
  let interfered: Entry | undefined;
  for (const e of [...feasible].sort(byLoadCmp)) {
    if (e.rt.state === "loading" || e.rt.state === "inactive") continue;
    if (!degraded || headroom(e.rt, e.v) > headroom(degraded.rt, degraded.v)) degraded = e;
    if (e.rt.state === "interfered" && (!interfered || headroom(e.rt, e.v) > headroom(interfered.rt, interfered.v))) interfered = e;
  }
  const loading = feasible.filter((e) => e.rt.state === "loading").sort((a, b) => latencyFor(a, req) - latencyFor(b, req) || byLoadCmp(a, b))[0];
  if (loading) {
    const worker = leastLoaded(loading.rt);
    return { kind: "load", variant: loading.v, ...(worker !== undefined ? { worker } : {}), alreadyLoading: true, reason: `${loading.v.name} is loading`, ...meanwhileOf(loading, interfered, req) };
  }
  const inSlo = (options.inactiveRule ?? DEFAULT_INACTIVE_RULE) === "load-and-inference";
  const inactive = options.allowLoad === false ? undefined : (cheapestLoadableInSlo([...feasible].sort(byCostCmp), req) ??
    feasible.filter((e) => e.rt.state === "inactive" && (!inSlo || e.v.loadLatencyMs + latencyFor(e, req) <= req.latencyMs)).sort(byLoadCmp)[0]);
  if (inactive) {
    let best: WorkerInfo | undefined;
    for (const w of workers) if (w.hardware === inactive.v.hardware && (!best || w.utilization < best.utilization)) best = w;
    const worker = best?.worker;
    return { kind: "load", variant: inactive.v, ...(worker !== undefined ? { worker } : {}), alreadyLoading: false, reason: `load ${inactive.v.name}`, ...meanwhileOf(inactive, interfered, req) };
  }
  if (degraded) {
    const worker = leastLoaded(degraded.rt);
    return { kind: "active", variant: degraded.v, ...(worker !== undefined ? { worker } : {}), degraded: true, reason: `queued on ${degraded.v.name}` };
  }
  return infeasible(app, all, req);
}
