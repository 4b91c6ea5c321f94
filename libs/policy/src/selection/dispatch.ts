/**
 * Where one query goes: the dispatcher's decisions, shared by the live dispatcher
 * (services/dispatcher) and the simulator's INFaaS router (libs/sim/src/systems/infaas.ts), so the
 * two decide identically. Pure: time comes in as `nowMs`; the caller acts (publishes, loads, queues).
 *
 * **Model-specific queries** (`infer.model.<m>`): {@link modelQueryCandidates} turns the model's
 * variants and what the dispatcher sees of them into {@link RouteCandidate}s for `routeModelQuery`
 * (routing.ts). The user named the model as registered, so only its fp32 variants qualify (an int8
 * variant changes the model's accuracy; model-less queries may choose it). A variant whose load this
 * dispatcher asked for less than {@link PENDING_LOAD_WINDOW_MS} ago counts as loading
 * ({@link isLoadPending}): the state event that confirms a load lags the request, and asking twice
 * would load it twice. Cost per query is the price of the hardware's instance type over the profiled
 * peak QPS (unprofiled CPU variants: over their max batch, so bigger batches rank cheaper).
 *
 * **Model-less queries** (`infer.app.<app>`): {@link selectForApp} runs INFaaS Algorithm 1
 * (papers/infaas.txt §4.1, {@link SelectionIndex.select}); when it asks for a load it hands the
 * placement to the caller, then decides with the outcome:
 * - A load asked for while some variant of the app is Overloaded or Interfered is a *relief* load
 *   (ours; the paper is silent): it is only of use on a worker with room, so it may not go to a worker
 *   over {@link RELIEF_MAX_UTILISATION} busy and may not oversubscribe threads.
 * - When the load cannot be placed (no worker can take it, or for a relief load only saturated
 *   ones), the query goes where selection would send it without loading (`allowLoad: false`: a variant
 *   already loading, else the loaded variant with the most headroom, step 3); if there is none, there
 *   is no capacity now (a different outcome from infeasible: variants meet the query, none can run it).
 * - When selection names a `meanwhile` variant (the load, or the load under way, cannot answer within
 *   the query's SLO and a loaded variant that meets it is Interfered: selection.ts step 2), the load
 *   is placed as asked and the query goes to that variant (`via: "degraded"`).
 * - A placement the caller *defers* (the simulator asks its VM autoscaler for a machine that will load
 *   the variant) holds a first load's query in the variant's queue, but not a relief load's: a loaded
 *   variant serves it sooner than a machine that has yet to boot. The live dispatcher never defers.
 *
 * Caveat: "relief" looks at every variant of the app, not only those meeting the query (a cheap
 * Overloaded variant makes a load for a stricter query a relief load too): the rule as the
 * dispatcher has always applied it.
 */
import type { VariantRecord } from "@sloserve/contracts";
import { DEFAULT_TYPE_FOR_KIND, pricePerSecond } from "../costs/costs.js";
import type { RouteCandidate } from "./routing.js";
import type { ClosestVariant, QueryRequirements, SelectionIndex, VariantProfile } from "./selection.js";

/** After asking for a load, the dispatcher counts the variant as loading this long (or until a state event settles it). */
export const PENDING_LOAD_WINDOW_MS = 60_000;

/** A load meant to relieve Overloaded/Interfered variants is not placed on a worker busier than this. */
export const RELIEF_MAX_UTILISATION = 0.8;

/** Whether a load asked for at `askedAtMs` (undefined: never) still counts as under way at `nowMs`. */
export function isLoadPending(askedAtMs: number | undefined, nowMs: number): boolean {
  return askedAtMs !== undefined && nowMs - askedAtMs < PENDING_LOAD_WINDOW_MS;
}

/** The fields of a variant record that routing reads. */
export type RoutableVariant = Pick<VariantRecord, "name" | "hardware" | "quantization" | "maxBatch" | "profiled"> & {
  profile: { peakQps: number } | null;
};

/** What the dispatcher sees of one variant: its instances by state, summed over workers, and its load. */
export interface VariantDispatchView {
  active: number;
  overloaded: number;
  interfered: number;
  loading: number;
  /** Arrivals per second and queue length over the latest worker reports. */
  arrivalsPerS: number;
  queueLength: number;
  /** When this dispatcher asked for the variant to be loaded, ms; undefined when it has not. */
  loadAskedAtMs: number | undefined;
  /** Whether a live worker of the variant's hardware exists. */
  hardwareAvailable: boolean;
}

/** One variant as `routeModelQuery` ranks it. */
export function routeCandidate(v: RoutableVariant, view: VariantDispatchView, nowMs: number): RouteCandidate {
  return {
    variant: v.name,
    hardware: v.hardware,
    // A named model or variant is served by its instances whatever their state: Overloaded or
    // Interfered instances still drain their queue; adding capacity is the autoscaler's job.
    activeInstances: view.active + view.overloaded + view.interfered,
    loadingInstances: view.loading + (isLoadPending(view.loadAskedAtMs, nowMs) ? 1 : 0),
    arrivalsPerS: view.arrivalsPerS,
    queueLength: view.queueLength,
    // Cost per query at peak throughput; unprofiled CPU variants are ranked by their max batch.
    costPerQuery: pricePerSecond(DEFAULT_TYPE_FOR_KIND[v.hardware]) / (v.profile?.peakQps ?? v.maxBatch),
    hardwareAvailable: view.hardwareAvailable,
    selectable: v.hardware === "cpu" || v.profiled,
  };
}

/** The candidates of a model-specific query: the model's fp32 variants (see the header). */
export function modelQueryCandidates(variants: readonly RoutableVariant[], viewOf: (variant: RoutableVariant) => VariantDispatchView, nowMs: number): RouteCandidate[] {
  const out: RouteCandidate[] = [];
  for (const v of variants) if (v.quantization === "fp32") out.push(routeCandidate(v, viewOf(v), nowMs));
  return out;
}

/** A load {@link selectForApp} asks the caller to place. */
export interface LoadRequest {
  nowMs: number;
  /** Why the load is asked for (for the actor's decision log). */
  reason: string;
  /** A load meant to relieve Overloaded/Interfered variants of the app. */
  relief: boolean;
  /** Workers busier than this are refused (relief loads: {@link RELIEF_MAX_UTILISATION}); undefined: no cap. */
  maxUtilisation: number | undefined;
  /** Whether a worker without free threads may take it (false for relief loads). */
  allowOversubscription: boolean;
  /** The lowest-utilised worker of the variant's hardware as the selection index saw it, if it knows the workers. */
  suggestedWorker: string | undefined;
}

/**
 * What became of a load: `placed` (a worker will load it, or a load asked for earlier is still
 * pending), `deferred` (no worker can now; capacity that will load it was asked for) or `refused`.
 */
export interface LoadPlacement {
  outcome: "placed" | "deferred" | "refused";
  reason: string;
}

export type AppDispatchDecision =
  | {
      kind: "route";
      variant: VariantProfile;
      /** How selection chose it: loaded and Active, loaded but Overloaded/Interfered, loading, or to be loaded (by the placement reported). */
      via: "active" | "degraded" | "loading" | "load";
      /** The placement of the load asked for, when one was. */
      load?: LoadPlacement;
      reason: string;
    }
  | { kind: "no-capacity"; reason: string }
  | { kind: "infeasible"; closest: ClosestVariant | null; reason: string };

/** Whether some variant of the app is Overloaded or Interfered (a load asked for now would relieve it). */
export function needsRelief(index: SelectionIndex, app: string): boolean {
  return index.variantsOf(app).some((v) => {
    const state = index.runtime(v.name).state;
    return state === "overloaded" || state === "interfered";
  });
}

/**
 * INFaaS Algorithm 1 through the selection index, then the load it asks for, placed by `place` (the
 * caller's actor: it places the load and reports what became of it). See the header for the rules.
 */
export function selectForApp(
  index: SelectionIndex,
  app: string,
  req: QueryRequirements,
  nowMs: number,
  place: (variant: VariantProfile, load: LoadRequest) => LoadPlacement,
): AppDispatchDecision {
  let decision = index.select(app, req);
  let refused: string | undefined;
  let load: LoadPlacement | undefined;
  if (decision.kind === "load" && !decision.alreadyLoading) {
    const relief = needsRelief(index, app);
    const request: LoadRequest = {
      nowMs,
      reason: `model-less query for ${app}: ${decision.reason}`,
      relief,
      maxUtilisation: relief ? RELIEF_MAX_UTILISATION : undefined,
      allowOversubscription: !relief,
      suggestedWorker: decision.worker,
    };
    load = place(decision.variant, request);
    if (load.outcome === "placed" || (load.outcome === "deferred" && !relief)) {
      const m = decision.meanwhile;
      if (m) return { kind: "route", variant: m.variant, via: "degraded", load, reason: `${decision.reason}; ${load.reason}; ${m.reason}` };
      return { kind: "route", variant: decision.variant, via: "load", load, reason: `${decision.reason}; ${load.reason}` };
    }
    refused = `cannot place ${decision.variant.name}: ${load.reason}${relief ? ` (relief loads avoid workers over ${RELIEF_MAX_UTILISATION * 100}% busy)` : ""}`;
    decision = index.select(app, req, { allowLoad: false });
  }
  if (decision.kind === "infeasible") {
    if (refused !== undefined) {
      return { kind: "no-capacity", reason: `app '${app}' has variants that meet the requirements, but none is loaded and no worker can load one now: ${refused}` };
    }
    return { kind: "infeasible", closest: decision.closest, reason: decision.reason };
  }
  const meanwhile = decision.kind === "load" ? decision.meanwhile : undefined;
  const variant = meanwhile ? meanwhile.variant : decision.variant;
  const via = meanwhile ? "degraded" : decision.kind === "load" ? "loading" : decision.degraded ? "degraded" : "active";
  const said = meanwhile ? `${decision.reason}; ${meanwhile.reason}` : decision.reason;
  const reason = refused !== undefined ? `${refused}; ${said}` : said;
  // Two literals rather than a conditional spread: this runs per query, and the spread is ~10% of a simulated day.
  return load ? { kind: "route", variant, via, load, reason } : { kind: "route", variant, via, reason };
}
