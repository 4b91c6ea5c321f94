import type { VariantRecord, WorkerReport } from "@sloserve/contracts";
import { reportUtilization, type MachineView } from "@sloserve/policy";
import type { WorkerInstance } from "@sloserve/providers";

/**
 * What the machine plan sees of one worker, from what the shell holds: its latest report (the
 * heartbeat), the provider's record when the autoscaler launched it, its instance records in Redis (the
 * metadata store: what a lost worker ran), and the variants a replacement is still to reload.
 *
 * - utilisation: the busy share of what the worker offers — for a CPU worker Σ busy fraction × threads
 *   of each variant / the worker's threads, for an accelerator worker Σ busy fraction / accelerators
 *   (libs/policy `reportUtilization`); the controller gives the mean of the reports since its last tick, the
 *   interval over which the simulator measures a machine's busy time (one report alone is one second);
 * - serving: an Active (or Overloaded / Interfered) variant had arrivals within the last
 *   `servingWindowMs` (5 s, the variant state machine's load window);
 * - capacity: Σ profiled peak QPS of its loaded instances.
 */

export interface HeldReport {
  report: WorkerReport;
  /** When the shell received it (the injected clock). */
  seenAtMs: number;
  /** When a report last showed arrivals at one of its serving variants. */
  lastArrivalMs: number | null;
}

export interface ViewInput {
  name: string;
  report?: HeldReport;
  instance?: WorkerInstance;
  /** Variants Redis lists on the worker (loading or serving). */
  records: readonly string[];
  /** Variants a replacement is to reload (not reloaded yet). */
  restoring: readonly string[];
  lostReason?: string;
  interruptAtMs?: number;
  nowMs: number;
  variants: ReadonlyMap<string, VariantRecord>;
  servingWindowMs: number;
  /** Utilisation over the autoscaler's interval (mean of its reports). @default the latest report's */
  utilization?: number;
}

const SERVING = new Set(["active", "overloaded", "interfered"]);

export function machineView(input: ViewInput): MachineView | undefined {
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
export function sloOutcomes(report: WorkerReport, variants: ReadonlyMap<string, VariantRecord>): Map<string, { total: number; missed: number }> {
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
