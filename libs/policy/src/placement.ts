/**
 * Where to load a variant (INFaaS Algorithm 1, step 2: "the lowest-utilised worker of its
 * hardware"). Pure: takes the workers' latest reports.
 *
 * Room is judged by threads and memory, or, when the request names the `resources` one instance needs
 * and the worker its `free` resources, by those (every resource, accelerators included; a resource the
 * worker does not list is one it lacks): the model autoscaler's place-elsewhere (libs/policy
 * model-actions) asks this way, live and in the simulator.
 */
import { instancesThatFit } from "./model-autoscaler.js";

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
}

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
  const best = [...pool].sort((a, b) => a.utilisation - b.utilisation || a.variants.length - b.variants.length || a.worker.localeCompare(b.worker))[0] as WorkerView;
  const note = fits.length > 0 ? "" : " (oversubscribing threads: no worker has free threads)";
  return { worker: best.worker, reason: `lowest-utilised ${request.hardware} worker (${(best.utilisation * 100).toFixed(0)}% busy, ${best.variants.length} variants)${note}` };
}
