/**
 * What the rules read of one worker, from its reports (libs/contracts `WorkerReport`, published every
 * second on `metrics.worker.<worker>`): the machine plan's view ({@link machineView}), the model
 * autoscaler's ({@link workerRunsFromReport}), and the SLO outcomes the MArk SLO monitor counts
 * ({@link sloOutcomes}). The services build them from the reports they receive; the simulator's
 * machines send the same reports (libs/sim `simulatedWorkerReport`) into the same functions.
 */
import type { WorkerReport } from "@sloserve/contracts";
import { workerFreeResources } from "../placement/accelerator-share.js";
import type { MachineView } from "../scaling/machine-plan.js";
import type { VariantRuns, WorkerRuns } from "../scaling/model-actions.js";
import { reportUtilization, type VariantThreads } from "./utilization.js";

/** What the views read of a registered variant (libs/contracts `VariantRecord` fits). */
export interface ObservedVariant {
  app: string;
  threads: number;
  profile?: { peakQps: number } | null | undefined;
}

/** A worker's latest report as a reader holds it. */
export interface HeldReport {
  report: WorkerReport;
  /** When the reader received it (its clock). */
  seenAtMs: number;
  /** When a report last showed arrivals at one of its serving variants. */
  lastArrivalMs: number | null;
}

/** What a worker provider says of a machine it launched (libs/providers `WorkerInstance` fits). */
export interface ProvidedMachine {
  kind: string;
  launchedAtMs: number;
}

export interface MachineViewInput {
  name: string;
  report?: HeldReport;
  instance?: ProvidedMachine;
  /** Variants the metadata store lists on the worker (loading or serving). */
  records: readonly string[];
  /** Variants a replacement is to reload (not reloaded yet). */
  restoring: readonly string[];
  lostReason?: string;
  interruptAtMs?: number;
  nowMs: number;
  variants: ReadonlyMap<string, ObservedVariant>;
  /** A worker serves while one of its serving variants had arrivals within this long. */
  servingWindowMs: number;
  /** Utilisation over the reader's interval (the mean of its reports). @default the latest report's */
  utilization?: number;
}

const SERVING = new Set(["active", "overloaded", "interfered"]);

/**
 * The machine plan's view of one worker:
 * - utilisation: {@link reportUtilization}, the mean over the reader's interval when given;
 * - serving: an Active (or Overloaded / Interfered) variant had arrivals within `servingWindowMs`
 *   (5 s, the variant state machine's load window);
 * - capacity: Σ profiled peak QPS of its serving instances;
 * - variants: what it runs or loads, what the store lists on it, and what a replacement still has to
 *   reload (what a lost worker's replacement restores).
 * Undefined when neither a report nor the provider tells its hardware kind.
 */
export function machineView(input: MachineViewInput): MachineView | undefined {
  const { report, instance } = input;
  const kind = report?.report.hardware ?? instance?.kind;
  if (!kind) return undefined;
  let capacityQps = 0;
  let interfered = false;
  let overloaded = false;
  const variants = new Set<string>([...input.records, ...input.restoring]);
  for (const v of report?.report.variants ?? []) {
    const record = input.variants.get(v.variant);
    if (v.instances > 0 || (v.loading ?? 0) > 0 || v.state === "loading") variants.add(v.variant);
    if (SERVING.has(v.state)) capacityQps += v.instances * (record?.profile?.peakQps ?? 0);
    if (v.state === "interfered") interfered = true;
    if (v.state === "overloaded") overloaded = true;
  }
  const apps = new Set<string>();
  for (const v of variants) {
    const app = input.variants.get(v)?.app;
    if (app) apps.add(app);
  }
  return {
    name: input.name,
    kind,
    booting: !report,
    utilization: input.utilization ?? (report ? reportUtilization(report.report, input.variants) : 0),
    interfered,
    overloaded,
    serving: report?.lastArrivalMs !== null && report?.lastArrivalMs !== undefined && input.nowMs - report.lastArrivalMs <= input.servingWindowMs,
    capacityQps,
    lastHeartbeatMs: report?.seenAtMs ?? instance?.launchedAtMs ?? input.nowMs,
    variants: [...variants].sort(),
    apps: [...apps].sort(),
    managed: instance !== undefined,
    ...(instance ? { launchedAtMs: instance.launchedAtMs } : {}),
    ...(input.lostReason !== undefined ? { lostReason: input.lostReason } : {}),
    ...(input.interruptAtMs !== undefined ? { interruptAtMs: input.interruptAtMs } : {}),
  };
}

/** Whether a report shows arrivals at a serving variant. */
export function reportHasArrivals(report: WorkerReport): boolean {
  return report.variants.some((v) => SERVING.has(v.state) && v.arrivals > 0);
}

/**
 * SLO outcomes in a report, per app: answered or failed queries, and those that missed (answered after
 * their SLO, or failed: deadline_exceeded and the like). `served` is per second over a one-second report
 * period, so it is the period's count.
 */
export function sloOutcomes(report: WorkerReport, variants: ReadonlyMap<string, { app: string }>): Map<string, { total: number; missed: number }> {
  const out = new Map<string, { total: number; missed: number }>();
  for (const v of report.variants) {
    const app = variants.get(v.variant)?.app;
    if (!app) continue;
    const total = v.served + v.errors;
    if (total <= 0) continue;
    const e = out.get(app) ?? { total: 0, missed: 0 };
    e.total += total;
    e.missed += Math.min(total, v.sloMisses + v.errors);
    out.set(app, e);
  }
  return out;
}

/**
 * What a worker runs, for the model autoscaler (libs/policy `planModelActions`), from its report:
 * ready and loading instances and arrivals per variant, its utilisation ({@link reportUtilization}) and
 * its free threads, memory, accelerators and GPU memory (`workerFreeResources`: GPU variants share a
 * GPU by memory footprint; a worker that accounts no memory has no limit on it).
 */
export function workerRunsFromReport(report: WorkerReport, seenAtMs: number, variants: VariantThreads): WorkerRuns {
  const runs: Record<string, VariantRuns> = {};
  for (const v of report.variants) {
    const ready = v.state === "loading" || v.state === "unloading" ? 0 : v.instances;
    const loading = Math.max(v.loading ?? 0, v.state === "loading" ? 1 : 0);
    runs[v.variant] = { ready, loading, arrivalsQps: v.arrivals, ...(v.state === "interfered" ? { interfered: true } : {}) };
  }
  return {
    name: report.worker,
    kind: report.hardware,
    atMs: report.atMs,
    seenAtMs,
    utilisation: reportUtilization(report, variants),
    free: workerFreeResources(report),
    variants: runs,
  };
}
