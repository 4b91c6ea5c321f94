/**
 * VM-level autoscaling: INFaaS's controller rules (papers/infaas.txt §4.2.3, §7; DESIGN §3
 * "VM-level autoscaling"), run every 2 s.
 *
 * Add a worker of a hardware kind when
 *  1. the utilisation of that kind's resource is above the threshold (80%) on **all** its workers;
 *  2. variants on that kind are Interfered on all its workers;
 *  3. more than 80% of the workers of that kind have an Overloaded variant;
 *  4. the model autoscalers asked for placements (`place-elsewhere`) that no running worker could take
 *     (ours: unless a worker of the kind is up with nothing loaded — one that came up since — which
 *     takes them).
 * While a worker of that kind is still booting (or is being launched this tick as a replacement), no
 * second one is added (the booting one is the answer; VMs take 20-30 s to start).
 *
 * Rules 1-3 read each worker over the last `readingTicks` ticks (INFaaS: 1, each 2 s poll; default 2): its
 * utilisation is the mean of those ticks' readings, and it counts as Interfered or Overloaded only if
 * it was at each of them. A worker up for fewer ticks is read over those it has. Two ticks (the live
 * default: docs/ARCHITECTURE.md "Machines and money") leave a burst of one tick to queueing and overflow: a worker launched for it
 * boots after it is over and is billed for nothing it served.
 *
 * Replace a worker whose heartbeat is older than `heartbeatTimeoutMs` (§7): a new one of the same kind,
 * with the variants the lost one ran (from the metadata store) to restore.
 *
 * Remove idle workers (our rule; the paper does not give one): a worker that has run no Active variant
 * with load for `idleMs` (5 min), when the workers of its kind that remain offer at least
 * `removeCapacityFactor` (1.2) × the forecast load of that kind (or the current load without a
 * forecast), and at least `minWorkersPerKind` remain. One removal per kind per tick, so capacity
 * steps down gently. A worker marked `removable: false` (the caller's guards: not its own to
 * terminate, inside its billing minimum) keeps its idle clock but is never removed.
 *
 * Pure: `vmAutoscale(ctx) -> { decisions, state }`; the per-worker idle clocks are carried in `state`.
 */
import { merge } from "../common/merge.js";

export interface VmAutoscalerConfig {
  /** @default 0.8 */
  utilizationThreshold: number;
  /** @default 0.8 */
  overloadedFraction: number;
  /** @default 300_000 (5 min) */
  idleMs: number;
  /** @default 1.2 */
  removeCapacityFactor: number;
  /** @default 10_000 */
  heartbeatTimeoutMs: number;
  /** @default 0 */
  minWorkersPerKind: number;
  /** @default Infinity */
  maxWorkersPerKind: number;
  /** Per-kind overrides of the two limits above. @default {} */
  minWorkersByKind?: Readonly<Record<string, number>>;
  maxWorkersByKind?: Readonly<Record<string, number>>;
  /** Per kind: why its limit is what it is (the host's cores), said with each hold at it. @default {} */
  maxWorkersWhyByKind?: Readonly<Record<string, string>>;
  /** Ticks the utilisation, Interfered and Overloaded rules read (see the header); 1 is INFaaS's rule. @default LIVE_READING_TICKS (2) */
  readingTicks: number;
}

export const DEFAULT_VM_AUTOSCALER_CONFIG: VmAutoscalerConfig = {
  utilizationThreshold: 0.8,
  overloadedFraction: 0.8,
  idleMs: 300_000,
  removeCapacityFactor: 1.2,
  heartbeatTimeoutMs: 10_000,
  minWorkersPerKind: 0,
  maxWorkersPerKind: Infinity,
  readingTicks: 2,
};

export interface VmWorkerView {
  name: string;
  kind: string;
  /** Still booting: counts toward capacity to come, not toward the rules. */
  booting: boolean;
  /** 0..1, utilisation of the kind's main resource (accelerator or cores) over the last interval. */
  utilization: number;
  /** Any variant on it Interfered / Overloaded. */
  interfered: boolean;
  overloaded: boolean;
  /** Any Active variant with non-zero load. */
  serving: boolean;
  /** Σ profiled peak QPS of its loaded instances. */
  capacityQps: number;
  lastHeartbeatMs: number;
  /** Variants it runs (to restore on a replacement). */
  variants: string[];
  /** False: never removed by the idle rule (it still counts as capacity). @default true */
  removable?: boolean;
}

export interface PendingPlacement {
  kind: string;
  variant: string;
  count: number;
}

/** Ticks the INFaaS rules read by default (the vm-autoscaler's `READING_TICKS`): two 2 s ticks (see the header). */
export const LIVE_READING_TICKS = DEFAULT_VM_AUTOSCALER_CONFIG.readingTicks;

/** A worker's readings at its last ticks, oldest first (at most `readingTicks`). */
export interface WorkerReadings {
  utilization: number[];
  interfered: boolean[];
  overloaded: boolean[];
}

export interface VmAutoscalerState {
  idleSinceMs: Record<string, number>;
  /** Per running worker, with `readingTicks` > 1. @default {} */
  readings?: Record<string, WorkerReadings>;
}

export interface VmAutoscalerContext {
  nowMs: number;
  workers: readonly VmWorkerView[];
  pending?: readonly PendingPlacement[];
  /** Forecast load (QPS) per kind for the remove-idle rule. */
  forecastQpsByKind?: Readonly<Record<string, number>>;
  /** Current load (QPS) per kind, used when there is no forecast. */
  loadQpsByKind?: Readonly<Record<string, number>>;
  config?: Partial<VmAutoscalerConfig>;
  state?: VmAutoscalerState;
}

export type VmScalingDecision =
  | { action: "add"; kind: string; count: number; reason: string }
  | { action: "remove"; worker: string; kind: string; reason: string }
  | { action: "replace"; worker: string; kind: string; restore: string[]; reason: string }
  | { action: "hold"; kind: string; reason: string };

export interface VmAutoscalerResult {
  decisions: VmScalingDecision[];
  state: VmAutoscalerState;
}

const pct = (x: number): string => `${Math.round(x * 100)}%`;

export function vmAutoscale(ctx: VmAutoscalerContext): VmAutoscalerResult {
  const cfg: VmAutoscalerConfig = merge(DEFAULT_VM_AUTOSCALER_CONFIG, ctx.config);
  const decisions: VmScalingDecision[] = [];
  const prevIdle = ctx.state?.idleSinceMs ?? {};
  const idleSinceMs: Record<string, number> = {};
  const lost = new Set<string>();
  const read = readWorkers(ctx.workers, cfg.readingTicks, ctx.state?.readings);

  for (const w of ctx.workers) {
    if (!w.booting && ctx.nowMs - w.lastHeartbeatMs > cfg.heartbeatTimeoutMs) {
      lost.add(w.name);
      decisions.push({
        action: "replace",
        worker: w.name,
        kind: w.kind,
        restore: [...w.variants],
        reason: `heartbeat lost for ${Math.round((ctx.nowMs - w.lastHeartbeatMs) / 1000)} s (> ${cfg.heartbeatTimeoutMs / 1000} s): replace it and restore ${w.variants.length} variant(s)`,
      });
    }
  }

  const kinds = new Set<string>([...ctx.workers.map((w) => w.kind), ...(ctx.pending ?? []).map((p) => p.kind)]);
  for (const kind of [...kinds].sort()) {
    const all = ctx.workers.filter((w) => w.kind === kind && !lost.has(w.name));
    const up = all.filter((w) => !w.booting);
    // A replacement launched this tick is booting capacity of its kind too.
    const booting = all.length - up.length + ctx.workers.filter((w) => w.kind === kind && lost.has(w.name)).length;
    const pending = (ctx.pending ?? []).filter((p) => p.kind === kind);
    const maxWorkers = cfg.maxWorkersByKind?.[kind] ?? cfg.maxWorkersPerKind;
    const minWorkers = cfg.minWorkersByKind?.[kind] ?? cfg.minWorkersPerKind;
    const reasons: string[] = [];
    const over = read.ticks > 1 ? ` over the last ${read.ticks} ticks` : "";
    if (up.length > 0 && up.every((w) => read.utilization(w) > cfg.utilizationThreshold)) {
      reasons.push(`utilisation above ${pct(cfg.utilizationThreshold)} on all ${up.length} ${kind} worker(s)${over} (min ${pct(Math.min(...up.map((w) => read.utilization(w))))})`);
    }
    if (up.length > 0 && up.every((w) => read.interfered(w))) reasons.push(`variants interfered on all ${up.length} ${kind} worker(s)${over}`);
    const overloaded = up.filter((w) => read.overloaded(w)).length;
    if (up.length > 0 && overloaded / up.length > cfg.overloadedFraction) {
      reasons.push(`${overloaded} of ${up.length} ${kind} workers (${pct(overloaded / up.length)} > ${pct(cfg.overloadedFraction)}) have overloaded variants`);
    }
    if (pending.length > 0) {
      const asked = pending.map((p) => `${p.count}×${p.variant}`).join(", ");
      // A worker of the kind that is up with nothing on it takes what a new one would (one instance
      // type per kind): it came up after the placement was asked for, and the model autoscaler places
      // it there at its next period.
      const empty = up.find((w) => w.variants.length === 0);
      if (empty) decisions.push({ action: "hold", kind, reason: `placement of ${asked} fit on no running ${kind} worker when asked, but ${empty.name} is up with nothing loaded: it takes it` });
      else reasons.push(`placement of ${asked} fits on no running ${kind} worker`);
    }
    if (reasons.length > 0) {
      if (booting > 0) decisions.push({ action: "hold", kind, reason: `${reasons.join("; ")}; ${booting} ${kind} worker(s) already booting` });
      else if (all.length >= maxWorkers) {
        const why = cfg.maxWorkersWhyByKind?.[kind];
        decisions.push({ action: "hold", kind, reason: `${reasons.join("; ")}; at the limit of ${maxWorkers} ${kind} worker(s)${why ? ` (${why})` : ""}` });
      }
      else decisions.push({ action: "add", kind, count: 1, reason: reasons.join("; ") });
      // A kind that needs more capacity removes none.
      for (const w of all) if (!w.serving) idleSinceMs[w.name] = prevIdle[w.name] ?? ctx.nowMs;
      continue;
    }
    // Remove-idle rule.
    const forecast = ctx.forecastQpsByKind?.[kind] ?? ctx.loadQpsByKind?.[kind] ?? 0;
    let removed = false;
    for (const w of [...up].sort((a, b) => (a.name < b.name ? -1 : 1))) {
      if (w.serving) continue;
      const since = prevIdle[w.name] ?? ctx.nowMs;
      idleSinceMs[w.name] = since;
      if (removed || ctx.nowMs - since < cfg.idleMs || w.removable === false) continue;
      const remaining = all.filter((o) => o !== w);
      const remainingCap = remaining.reduce((s, o) => s + o.capacityQps, 0);
      if (remaining.length < minWorkers) continue;
      if (remainingCap + 1e-9 < cfg.removeCapacityFactor * forecast) continue;
      removed = true;
      delete idleSinceMs[w.name];
      decisions.push({
        action: "remove",
        worker: w.name,
        kind,
        reason: `no active variant for ${Math.round((ctx.nowMs - since) / 1000)} s (≥ ${cfg.idleMs / 1000} s) and the other ${remaining.length} ${kind} worker(s) offer ${Math.round(remainingCap * 10) / 10} QPS ≥ ${cfg.removeCapacityFactor} × forecast ${Math.round(forecast * 10) / 10} QPS`,
      });
    }
  }
  return { decisions, state: read.readings ? { idleSinceMs, readings: read.readings } : { idleSinceMs } };
}

/** The rules' view of each running worker over its last `ticks` readings (this tick's included). */
function readWorkers(workers: readonly VmWorkerView[], ticks: number, prev: Record<string, WorkerReadings> | undefined) {
  const n = Math.max(1, Math.floor(ticks));
  if (n === 1) {
    return { ticks: 1, readings: undefined, utilization: (w: VmWorkerView) => w.utilization, interfered: (w: VmWorkerView) => w.interfered, overloaded: (w: VmWorkerView) => w.overloaded };
  }
  const readings: Record<string, WorkerReadings> = {};
  for (const w of workers) {
    if (w.booting) continue;
    const p = prev?.[w.name];
    readings[w.name] = {
      utilization: [...(p?.utilization ?? []), w.utilization].slice(-n),
      interfered: [...(p?.interfered ?? []), w.interfered].slice(-n),
      overloaded: [...(p?.overloaded ?? []), w.overloaded].slice(-n),
    };
  }
  const of = (w: VmWorkerView): WorkerReadings => readings[w.name] ?? { utilization: [w.utilization], interfered: [w.interfered], overloaded: [w.overloaded] };
  return {
    ticks: n,
    readings,
    utilization: (w: VmWorkerView) => {
      const u = of(w).utilization;
      return u.reduce((a, b) => a + b, 0) / u.length;
    },
    interfered: (w: VmWorkerView) => of(w).interfered.every(Boolean),
    overloaded: (w: VmWorkerView) => of(w).overloaded.every(Boolean),
  };
}
