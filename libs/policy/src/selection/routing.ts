/**
 * Routing of a model-specific query (`infer.model.<model>`) to one of the model's variants: the
 * user named the model, so only hardware/batching is left to choose. Pure; the dispatcher builds
 * the candidates from its in-memory view.
 *
 * 1. Among variants with Active instances, the least loaded per instance (arrivals per second and
 *    queue per instance), ties to the cheaper hardware.
 * 2. Else a variant that is already loading: the query waits in its queue.
 * 3. Else the variant cheapest per query whose hardware has a live worker: ask for it to be loaded.
 */

export interface RouteCandidate {
  variant: string;
  hardware: string;
  activeInstances: number;
  loadingInstances: number;
  /** Arrivals per second over the last report, summed over instances. */
  arrivalsPerS: number;
  queueLength: number;
  /** Cost of one query at the variant's peak throughput (relative is enough). */
  costPerQuery: number;
  /** Whether a live worker of this hardware exists. */
  hardwareAvailable: boolean;
  /** Whether the variant may be selected (false for Overloaded/Interfered-only variants, unprofiled accelerators, …). */
  selectable: boolean;
}

export type RouteDecision =
  | { kind: "active" | "loading"; variant: string; reason: string }
  | { kind: "load"; variant: string; reason: string }
  | { kind: "none"; reason: string };

export function routeModelQuery(candidates: readonly RouteCandidate[]): RouteDecision {
  let best: RouteCandidate | undefined;
  let bestLoad = Infinity;
  for (const c of candidates) {
    if (!c.selectable || c.activeInstances === 0) continue;
    const load = (c.arrivalsPerS + c.queueLength) / c.activeInstances;
    if (load < bestLoad || (load === bestLoad && best && c.costPerQuery < best.costPerQuery)) {
      best = c;
      bestLoad = load;
    }
  }
  if (best) return { kind: "active", variant: best.variant, reason: `active, ${bestLoad.toFixed(1)} queries/s per instance` };
  const loading = candidates.find((c) => c.selectable && c.loadingInstances > 0);
  if (loading) return { kind: "loading", variant: loading.variant, reason: "no active instance; waiting for the one loading" };
  const loadable = candidates.filter((c) => c.selectable && c.hardwareAvailable).sort((a, b) => a.costPerQuery - b.costPerQuery || a.variant.localeCompare(b.variant));
  const pick = loadable[0];
  if (pick) return { kind: "load", variant: pick.variant, reason: `no instance running; loading the cheapest variant (${pick.hardware})` };
  return { kind: "none", reason: candidates.length === 0 ? "the model has no variants" : `no worker of hardware ${[...new Set(candidates.map((c) => c.hardware))].join("/")} is running` };
}
