/**
 * Where to load a variant (INFaaS Algorithm 1, step 2: "the lowest-utilised worker of its
 * hardware"). Pure: takes the workers' latest reports.
 *
 * Room is judged by threads and memory, or, when the request names the `resources` one instance needs
 * and the worker its `free` resources, by those (every resource, accelerators included; a resource the
 * worker does not list is one it lacks): the model autoscaler's place-elsewhere (libs/policy
 * model-actions) asks this way, live and in the simulator.
 *
 * **Bin packing** (INFaaS §4.2.3 "online bin packing", §6.3 "bin-packing … to one GPU at low load"):
 * with `packBelow` set, the load goes to the *busiest* worker with room whose utilisation is still
 * under `packBelow` (best fit by utilisation headroom; ties: the one holding most instances, then by
 * name), so a worker is filled before another is woken and idle workers stay idle for the VM autoscaler
 * to release. When every worker with room is at or over `packBelow`, it spreads as without it (the
 * lowest-utilised): packing then would cost latency. {@link PACK_BELOW_UTILISATION} is INFaaS's 80%
 * (the VM autoscaler's threshold). Caveat: utilisation is the last report's; a load placed since does
 * not show yet, so several loads in one second may go to one worker (its room still bounds them).
 */
import { instancesThatFit } from "../scaling/model-autoscaler.js";

export interface WorkerView {
  worker: string;
  hardware: string;
  /** Fraction of the worker's compute in use over the last report, 0..1 (or more when oversubscribed). */
  utilisation: number;
  threads: number;
  threadsUsed: number;
  /** Memory offered to instances and memory reserved by them, bytes (0/0 when not accounted). */
  memoryBytes?: number;
  memoryUsedBytes?: number;
  /** Variants already loaded or loading there. */
  variants: readonly string[];
  /** When the report was received, ms. */
  seenAtMs: number;
  /** Free amount of each resource (threads, memoryBytes, accelerators, …), for requests with `resources`. */
  free?: Readonly<Record<string, number>>;
  /** Instances loaded or loading there (bin packing's tie-break: the fuller worker). @default variants.length */
  instances?: number;
}

/** Pack loads onto workers under this utilisation (INFaaS's 80% threshold, §4.2.3). */
export const PACK_BELOW_UTILISATION = 0.8;

export interface PlacementRequest {
  variant: string;
  hardware: string;
  threads: number;
  /** Memory one instance takes (its profile), bytes. @default 0 */
  memoryBytes?: number;
  /**
   * Refuse workers busier than this (0..1). A load meant to relieve an Overloaded or Interfered
   * variant is of no use on a worker that is itself saturated. @default Infinity
   */
  maxUtilisation?: number;
  /**
   * Place on a worker without free threads when none has them (a first load must go somewhere; a
   * relief load on an oversubscribed worker only slows what runs there). @default true
   */
  allowOversubscription?: boolean;
  /** What one instance needs of each resource; judged against the workers' `free` instead of threads and memory. */
  resources?: Readonly<Record<string, number>>;
  /**
   * Bin packing: the busiest worker with room under this utilisation, else spread (see the header).
   * @default undefined (spread: the lowest-utilised worker)
   */
  packBelow?: number;
}

export type PlacementDecision =
  | { worker: string; reason: string }
  | { worker: undefined; reason: string };

/** Heartbeats older than this are ignored (a worker reports every second). */
export const WORKER_STALE_MS = 5_000;

export function chooseWorker(workers: readonly WorkerView[], request: PlacementRequest, nowMs: number): PlacementDecision {
  const alive = workers.filter((w) => w.hardware === request.hardware && nowMs - w.seenAtMs <= WORKER_STALE_MS);
  if (alive.length === 0) return { worker: undefined, reason: `no live ${request.hardware} worker` };
  const cap = request.maxUtilisation ?? Infinity;
  const live = alive.filter((w) => w.utilisation <= cap);
  if (live.length === 0) return { worker: undefined, reason: `every live ${request.hardware} worker is over ${Math.round(cap * 100)}% busy` };
  const already = live.find((w) => w.variants.includes(request.variant));
  const needMemory = request.memoryBytes ?? 0;
  const needs = request.resources;
  const byResources = (w: WorkerView): Readonly<Record<string, number>> | undefined => (needs && w.free ? w.free : undefined);
  const candidates = live.filter((w) => !w.variants.includes(request.variant) && (byResources(w) !== undefined || w.memoryBytes === undefined || (w.memoryUsedBytes ?? 0) + needMemory <= w.memoryBytes));
  const fits = candidates.filter((w) => {
    const free = byResources(w);
    return free ? instancesThatFit({ resources: { ...needs } }, free) >= 1 : w.threads - w.threadsUsed >= request.threads;
  });
  const pool = fits.length > 0 || request.allowOversubscription === false ? fits : candidates;
  if (pool.length === 0 && candidates.length > 0) {
    if (needs) return { worker: undefined, reason: `no ${request.hardware} worker has room for ${request.variant} (${Object.entries(needs).map(([k, n]) => `${k} ${n}`).join(", ")})` };
    return { worker: undefined, reason: `no ${request.hardware} worker has ${request.threads} free thread(s) for ${request.variant}` };
  }
  if (pool.length === 0) {
    return already
      ? { worker: undefined, reason: `every live ${request.hardware} worker already runs ${request.variant}` }
      : { worker: undefined, reason: `no ${request.hardware} worker can take ${request.variant}` };
  }
  const note = fits.length > 0 ? "" : " (oversubscribing threads: no worker has free threads)";
  const packBelow = request.packBelow;
  // (never packing onto a worker without room: that would oversubscribe the busiest one)
  if (packBelow !== undefined && fits.length > 0) {
    const fullness = (w: WorkerView): number => w.instances ?? w.variants.length;
    const under = pool.filter((w) => w.utilisation < packBelow);
    const fullest = under.sort((a, b) => b.utilisation - a.utilisation || fullness(b) - fullness(a) || a.worker.localeCompare(b.worker))[0];
    if (fullest) {
      return { worker: fullest.worker, reason: `bin packing: the busiest ${request.hardware} worker with room under ${Math.round(packBelow * 100)}% busy (${(fullest.utilisation * 100).toFixed(0)}% busy, ${fullness(fullest)} instance(s))` };
    }
  }
  const best = [...pool].sort((a, b) => a.utilisation - b.utilisation || a.variants.length - b.variants.length || a.worker.localeCompare(b.worker))[0] as WorkerView;
  const spread = packBelow !== undefined && fits.length > 0 ? `; every one with room is ${Math.round(packBelow * 100)}% busy or more, so not packing` : "";
  return { worker: best.worker, reason: `lowest-utilised ${request.hardware} worker (${(best.utilisation * 100).toFixed(0)}% busy, ${best.variants.length} variants)${note}${spread}` };
}
