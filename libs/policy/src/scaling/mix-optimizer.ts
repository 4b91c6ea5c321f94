/**
 * The exact cheapest mix of variants for a load and an SLO: the INFaaS ILP of §4.2.1 (constraints 1, 2
 * and 4, plus optional per-variant instance limits standing for constraint 3), solved exactly.
 *
 *   minimise Σ C_i·n_i   subject to   Σ Q_i·n_i ≥ L·slack,   n_i ∈ ℕ,   n_i ≤ max_i,   n_i = 0 if T_i > SLO
 *
 * (and accuracy_i ≥ min accuracy). This is an unbounded covering knapsack; with the handful of variants
 * of one model it is solved exactly by depth-first branch and bound: variants in increasing cost per
 * QPS, counts tried from the most useful down, pruned when the cost so far plus the remaining demand at
 * the best remaining cost per QPS cannot beat the best mix found. Among mixes of equal cost the one with
 * fewer instances wins, then the one with more capacity.
 *
 * INFaaS Table 3 with Table 2's variants (A 5 QPS/200 ms/1, B 100/20/3, C 800/15/16):
 * 10 QPS at 300 ms → 2×A (2); 10 QPS at 50 ms → 1×B (3); 1000 QPS at 300 ms → 2×B + 1×C (22).
 */
import { variantLatencyMs, type VariantProfile } from "../selection/selection.js";

export interface MixRequest {
  loadQps: number;
  sloMs: number;
  /** @default 0 */
  minAccuracy?: number;
  /** Capacity must reach loadQps × slack. @default 1 */
  slack?: number;
  /** Most instances of a variant (resources). @default unlimited */
  maxInstances?: Readonly<Record<string, number>>;
  /** Safety cap on the search (nodes visited). @default 5_000_000 */
  maxNodes?: number;
}

export interface MixEntry {
  variant: string;
  count: number;
}

export type MixResult =
  | { feasible: true; mix: MixEntry[]; costPerS: number; capacityQps: number; instances: number; nodes: number; reason: string }
  | { feasible: false; reason: string; nodes: number };

interface Item {
  v: VariantProfile;
  q: number;
  c: number;
  max: number;
}

export function cheapestMix(variants: readonly VariantProfile[], req: MixRequest): MixResult {
  const demand = req.loadQps * (req.slack ?? 1);
  const minAcc = req.minAccuracy ?? 0;
  const items: Item[] = variants
    .filter((v) => v.profiled && v.peakQps > 0 && v.accuracy >= minAcc && variantLatencyMs(v) <= req.sloMs)
    .map((v) => ({ v, q: v.peakQps, c: v.pricePerS, max: req.maxInstances?.[v.name] ?? Infinity }))
    .filter((it) => it.max > 0)
    .sort((a, b) => a.c / a.q - b.c / b.q || a.c - b.c);
  if (demand <= 0) return { feasible: true, mix: [], costPerS: 0, capacityQps: 0, instances: 0, nodes: 0, reason: "no load: no instance needed" };
  if (items.length === 0) return { feasible: false, nodes: 0, reason: `no variant meets latency ≤ ${req.sloMs} ms and accuracy ≥ ${minAcc}` };
  // Best cost per QPS among items[i..].
  const bestRate = items.map((_, i) => Math.min(...items.slice(i).map((it) => it.c / it.q)));
  // Remaining capacity available from items[i..] (Infinity when any is unlimited).
  const capFrom = items.map((_, i) => items.slice(i).reduce((s, it) => s + it.q * it.max, 0));
  const maxNodes = req.maxNodes ?? 5_000_000;
  let nodes = 0;
  let best: { cost: number; counts: number[]; instances: number; capacity: number } | null = null;
  const counts = new Array<number>(items.length).fill(0);
  const eps = 1e-9;

  const better = (cost: number, instances: number, capacity: number): boolean =>
    !best ||
    cost < best.cost - eps ||
    (Math.abs(cost - best.cost) <= eps && (instances < best.instances || (instances === best.instances && capacity > best.capacity + eps)));

  const dfs = (i: number, remaining: number, cost: number, instances: number, capacity: number): void => {
    nodes++;
    if (nodes > maxNodes) return;
    if (remaining <= eps) {
      if (better(cost, instances, capacity)) best = { cost, counts: counts.slice(), instances, capacity };
      return;
    }
    if (i >= items.length) return;
    if ((capFrom[i] ?? 0) < remaining - eps) return;
    if (best && cost + remaining * (bestRate[i] ?? Infinity) > best.cost + eps) return;
    const it = items[i] as Item;
    const upper = Math.min(it.max, Math.ceil(remaining / it.q - eps));
    for (let n = upper; n >= 0; n--) {
      counts[i] = n;
      dfs(i + 1, remaining - n * it.q, cost + n * it.c, instances + n, capacity + n * it.q);
    }
    counts[i] = 0;
  };
  dfs(0, demand, 0, 0, 0);
  const found = best as { cost: number; counts: number[]; instances: number; capacity: number } | null;
  if (!found) {
    return { feasible: false, nodes, reason: nodes > maxNodes ? `search stopped after ${maxNodes} nodes` : `the variants meeting the SLO cannot reach ${demand} QPS within their instance limits` };
  }
  const mix: MixEntry[] = [];
  items.forEach((it, i) => {
    const n = found.counts[i] ?? 0;
    if (n > 0) mix.push({ variant: it.v.name, count: n });
  });
  mix.sort((a, b) => (a.variant < b.variant ? -1 : 1));
  return {
    feasible: true,
    mix,
    costPerS: Math.round(found.cost * 1e9) / 1e9,
    capacityQps: found.capacity,
    instances: found.instances,
    nodes,
    reason: `cheapest mix for ${req.loadQps} QPS (×${req.slack ?? 1}) within ${req.sloMs} ms: ${mix.map((m) => `${m.count}×${m.variant}`).join(" + ")} at ${Math.round(found.cost * 1e6) / 1e6}/s`,
  };
}
