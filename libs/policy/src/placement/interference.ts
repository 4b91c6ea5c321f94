/**
 * Acting on interference (papers/infaas.txt §4.1 "Mitigating performance degradation"; §6.3): a
 * variant Interfered on a worker (variant-state.ts: its batches run slower than profiled, not from
 * load) is moved, in the background, to
 * 1. **free resources on the same worker** (INFaaS: "a different set of cores"; no fetch from the model
 *    repository), when the worker has room for as many instances as the variant runs there, else
 * 2. **the least-loaded other worker** of its kind with room for them (INFaaS: "the worker asks the
 *    controller's Dispatcher to place the variant on the least-loaded worker"; here the model
 *    autoscaler places it with {@link chooseWorker}, spreading, as the paper says), skipping workers
 *    where some variant is Interfered too (contention there is known).
 *
 * A move is a swap (model-actions.ts): the new instances are loaded first, the model is held on the
 * worker while they load, and the interfered instances (the oldest ones) are unloaded once the new ones
 * serve. Our rules where the paper is silent:
 * - After a move of a variant off (or within) a worker ends, none for `cooldownMs` (10 s): the state
 *   machine needs `interferenceSeconds` (3 s) of batches to judge the new instances.
 * - A variant Interfered again within `localRetryMs` (2 min) of a move on its own worker goes to
 *   another worker: the contention is the worker's, not its cores' (a machine-wide slowdown).
 * - With no worker to take it, a hold says so: when variants are Interfered on every worker of the
 *   kind, the VM autoscaler adds one (INFaaS §4.2.3 rule 2), and the next tick moves there.
 *
 * Pure: `planMigrations(ctx) -> { decisions, memory }`; the memory (when each move ended, and whether
 * it was local) comes in and goes out. Caveats: the executor does not pin threads to cores, so live a
 * move on the same worker is a fresh instance (new engine session and threads) whose threads the OS
 * places; the simulator judges a variant's state over all its machines (systems/infaas.ts), so there a
 * variant Interfered is moved off each machine that runs it.
 */
import { instancesThatFit } from "../scaling/model-autoscaler.js";
import { chooseWorker, type WorkerView } from "./placement.js";
import type { VariantProfile } from "../selection/selection.js";

export interface InterferenceConfig {
  /** No move of a variant on a worker for this long after its last one ended, ms. @default 10_000 */
  cooldownMs: number;
  /** Interfered again this soon after a move on its own worker: to another worker, ms. @default 120_000 */
  localRetryMs: number;
}

export const DEFAULT_INTERFERENCE_CONFIG: InterferenceConfig = { cooldownMs: 10_000, localRetryMs: 120_000 };

/** A worker as the migration rule sees it. */
export interface MigrationWorker {
  name: string;
  kind: string;
  seenAtMs: number;
  /** Busy fraction, 0..1 (the least-loaded worker takes a move). */
  utilisation: number;
  /** Free amount of each resource (a resource not listed is one the worker lacks). */
  free: Readonly<Record<string, number>>;
  /** Ready instances per variant. */
  ready: Readonly<Record<string, number>>;
  /** Variants Interfered there. */
  interfered: readonly string[];
}

/** Per `${worker}|${variant}`: when its last move ended (or was last seen in progress), and whether it stayed on the worker. */
export type InterferenceMemory = Record<string, { atMs: number; local: boolean }>;

export interface InterferenceContext {
  nowMs: number;
  workers: readonly MigrationWorker[];
  profileOf: (variant: string) => VariantProfile | undefined;
  /** Kind of worker a variant runs on. @default v.hardware */
  kindOf?: (v: VariantProfile) => string;
  /** Moves under way (their swaps hold the model): `${worker}|${variant}`. */
  inProgress?: ReadonlySet<string>;
  /** Whether the model is held on the worker for another reason (a swap of the autoscaler's). */
  held?: (worker: string, model: string) => boolean;
  memory?: InterferenceMemory;
  config?: Partial<InterferenceConfig>;
}

export type MigrationDecision =
  | { action: "migrate"; worker: string; model: string; variant: string; count: number; to: string; local: boolean; reason: string }
  | { action: "hold"; worker: string; model: string; variant: string; reason: string };

export interface MigrationResult {
  decisions: MigrationDecision[];
  memory: InterferenceMemory;
}

const key = (worker: string, variant: string): string => `${worker}|${variant}`;
const s1 = (ms: number): number => Math.round(ms / 100) / 10;

export function planMigrations(ctx: InterferenceContext): MigrationResult {
  const cfg: InterferenceConfig = { ...DEFAULT_INTERFERENCE_CONFIG, ...(ctx.config ?? {}) };
  const nowMs = ctx.nowMs;
  const kindOf = ctx.kindOf ?? ((v: VariantProfile) => String(v.hardware));
  const memory: InterferenceMemory = {};
  for (const [k, m] of Object.entries(ctx.memory ?? {})) if (nowMs - m.atMs < Math.max(cfg.cooldownMs, cfg.localRetryMs)) memory[k] = m;
  const decisions: MigrationDecision[] = [];
  const workers = [...ctx.workers].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  // What the moves decided here take, so that two moves do not count on the same room.
  const free = new Map(workers.map((w) => [w.name, { ...w.free }]));
  const take = (worker: string, v: VariantProfile, n: number): void => {
    const f = free.get(worker);
    if (f) for (const [k, need] of Object.entries(v.resources ?? {})) if (f[k] !== undefined) f[k] -= need * n;
  };
  for (const w of workers) {
    for (const variant of [...w.interfered].sort()) {
      const v = ctx.profileOf(variant);
      const count = w.ready[variant] ?? 0;
      if (!v || count <= 0) continue;
      const k = key(w.name, variant);
      const last = memory[k];
      if (ctx.inProgress?.has(k)) {
        memory[k] = { atMs: nowMs, local: last?.local ?? false };
        continue; // its swap holds the model and says so
      }
      if (ctx.held?.(w.name, v.model)) continue;
      if (last && nowMs - last.atMs < cfg.cooldownMs) {
        decisions.push({ action: "hold", worker: w.name, model: v.model, variant, reason: `${variant} Interfered on ${w.name}, moved ${s1(nowMs - last.atMs)} s ago: judging the new instances for ${s1(cfg.cooldownMs)} s first` });
        continue;
      }
      const retry = last?.local === true && nowMs - last.atMs < cfg.localRetryMs;
      if (!retry && instancesThatFit(v, free.get(w.name) ?? {}) >= count) {
        take(w.name, v, count);
        memory[k] = { atMs: nowMs, local: true };
        decisions.push({ action: "migrate", worker: w.name, model: v.model, variant, count, to: w.name, local: true, reason: `${variant} Interfered on ${w.name}: moving its ${count} instance(s) to free resources on the same worker (no fetch from the repository)` });
        continue;
      }
      const others: WorkerView[] = workers
        .filter((o) => o.name !== w.name && o.interfered.length === 0)
        .map((o) => ({ worker: o.name, hardware: o.kind, utilisation: o.utilisation, threads: 0, threadsUsed: 0, variants: [], seenAtMs: o.seenAtMs, free: free.get(o.name) ?? {} }));
      const resources: Record<string, number> = {};
      for (const [r, need] of Object.entries(v.resources ?? {})) resources[r] = need * count;
      const choice = chooseWorker(others, { variant, hardware: kindOf(v), threads: 0, resources, allowOversubscription: false }, nowMs);
      const why = retry ? `Interfered again ${s1(nowMs - (last?.atMs ?? nowMs))} s after a move on ${w.name}: the contention is the worker's` : `${w.name} has no room for ${count} more`;
      if (choice.worker === undefined) {
        decisions.push({ action: "hold", worker: w.name, model: v.model, variant, reason: `${variant} Interfered on ${w.name} (${why}), and no other ${kindOf(v)} worker free of interference can take ${count} (${choice.reason}); the VM autoscaler adds one when every worker of the kind has Interfered variants` });
        continue;
      }
      take(choice.worker, v, count);
      memory[k] = { atMs: nowMs, local: false };
      decisions.push({ action: "migrate", worker: w.name, model: v.model, variant, count, to: choice.worker, local: false, reason: `${variant} Interfered on ${w.name} (${why}): moving its ${count} instance(s) to ${choice.worker}, ${choice.reason}` });
    }
  }
  return { decisions, memory };
}
