/**
 * The VM autoscaler's observation of the fleet: worker reports and the dispatchers' arrival reports
 * in, the machine plan's inputs out (libs/policy `planMachines`: the machine views, the SLO samples,
 * each app's tightest SLO, each kind's load). The vm-autoscaler service feeds it the reports it receives
 * and what its provider and the metadata store say; the simulator's INFaaS system feeds it its machines'
 * reports (libs/sim `simulatedWorkerReport`) and its own fleet, so a rule's input is built one way.
 *
 * - **Heartbeat**: each worker's latest report (a newer `atMs` only) and when it was received. Reports
 *   of workers silent for `forgetMs` (10 min) are dropped.
 * - **Utilisation**: the mean of {@link reportUtilization} over the reports received since the last
 *   reading (the interval over which the plan judges a machine; one report alone is one second).
 * - **SLO outcomes** since the last reading (the MArk SLO monitor's sample, {@link sloOutcomes}).
 * - **Tightest SLO per app** over the last minute ({@link SloWindow}) and **load per kind** (Σ arrivals
 *   in each kind's latest reports).
 * - **Liveness** ({@link FleetObservation.machines}): a worker that reports is running (booting
 *   before its first report when its provider launched it); one silent for longer than the heartbeat
 *   timeout is lost when its provider says so, or — for a worker the provider did not launch — when
 *   the store still lists instances on it or it was not seen to leave; one that stopped cleanly (its
 *   last report says `leaving`, or its records and command consumer are gone: {@link silentUnmanaged})
 *   has left and is forgotten. A worker replaced or left is not listed again unless it reports again.
 * - **Fleet states** for the cost summary ({@link fleetStateOf}): booting, running, draining, lost.
 *
 * Pure: time comes in with every call.
 */
import type { ArrivalsReport, WorkerReport } from "@sloserve/contracts";
import type { AppSloSample, MachineView } from "../scaling/machine-plan.js";
import { SLO_MEMORY_MS, SloWindow } from "./slo-window.js";
import { reportUtilization } from "./utilization.js";
import { machineView, reportHasArrivals, sloOutcomes, type HeldReport, type ObservedVariant } from "./worker-views.js";

export interface FleetObservationConfig {
  /** A worker silent for longer is lost (or left). @default 10_000 */
  heartbeatTimeoutMs: number;
  /** A worker serves while a serving variant had arrivals within this long. @default 5_000 */
  servingWindowMs: number;
  /** How long an app's tightest SLO counts. @default SLO_MEMORY_MS (60 s) */
  sloMemoryMs: number;
  /** Reports of workers silent for longer are forgotten. @default 600_000 */
  forgetMs: number;
}

export const DEFAULT_FLEET_OBSERVATION_CONFIG: FleetObservationConfig = { heartbeatTimeoutMs: 10_000, servingWindowMs: 5_000, sloMemoryMs: SLO_MEMORY_MS, forgetMs: 600_000 };

/** A machine its provider launched (libs/providers `WorkerInstance` fits). */
export interface ProviderMachine {
  id: string;
  workerId: string;
  kind: string;
  launchedAtMs: number;
  state: string;
}

/** What the reader knows beside the reports: the provider's machines and events, the store's records. */
export interface FleetFacts {
  /** The provider's machines (its ledger: terminated ones too). */
  instances: readonly ProviderMachine[];
  /** Provider ids the provider reported lost, with the reason. @default none */
  lost?: ReadonlyMap<string, string>;
  /** Provider ids with a spot interruption notice, with when they are taken back. @default none */
  notices?: ReadonlyMap<string, number>;
  /** Provider ids being terminated (left out of the views). @default none */
  terminating?: ReadonlySet<string>;
  /** Variants the metadata store lists per worker (loading or serving). @default none */
  records?: ReadonlyMap<string, readonly string[]>;
  /** Variants a replacement still has to reload, by the replacement's worker id. @default none */
  restoring?: ReadonlyMap<string, readonly string[]>;
  /** Silent workers known to have stopped cleanly (their command consumer is gone: {@link silentUnmanaged}). @default none */
  left?: ReadonlySet<string>;
}

/** One worker's state for the cost summary. */
export type FleetState = "booting" | "running" | "draining" | "lost";

export class FleetObservation {
  readonly config: FleetObservationConfig;
  private readonly reports = new Map<string, HeldReport>();
  /** Reports received since the last reading, per worker: Σ utilisation and their count. */
  private utilization = new Map<string, { sum: number; n: number }>();
  private slo = new Map<string, { total: number; missed: number }>();
  private readonly sloWindow: SloWindow;
  /** Workers that left cleanly or were replaced: not listed again unless they report again. */
  private readonly gone = new Set<string>();
  /** Workers whose last report said they were leaving. */
  private readonly leaving = new Set<string>();

  constructor(config: Partial<FleetObservationConfig> = {}) {
    this.config = { ...DEFAULT_FLEET_OBSERVATION_CONFIG, ...config };
    this.sloWindow = new SloWindow(this.config.sloMemoryMs);
  }

  /**
   * A worker report, received at `nowMs`. Returns "back" when a worker thought gone reports again,
   * "stale" for a report older than the one held, else "observed" (or "leaving" for a clean stop's last
   * report: its heartbeat stops, and the next reading lets it go). `reading` replaces the report's own
   * utilisation reading (a worker's first report standing for a reading taken before, as a replay that
   * starts mid-stream has it), or with `null` the report is a heartbeat alone.
   */
  observeReport(report: WorkerReport, nowMs: number, variants: ReadonlyMap<string, ObservedVariant>, reading?: number | null): "observed" | "back" | "stale" | "leaving" {
    if (report.leaving) {
      this.leaving.add(report.worker);
      return "leaving";
    }
    const back = this.gone.delete(report.worker);
    this.leaving.delete(report.worker);
    const prev = this.reports.get(report.worker);
    if (prev && prev.report.atMs >= report.atMs) return "stale";
    this.reports.set(report.worker, { report, seenAtMs: nowMs, lastArrivalMs: reportHasArrivals(report) ? nowMs : (prev?.lastArrivalMs ?? null) });
    if (reading !== null) {
      const u = this.utilization.get(report.worker) ?? { sum: 0, n: 0 };
      u.sum += reading ?? reportUtilization(report, variants);
      u.n += 1;
      this.utilization.set(report.worker, u);
    }
    for (const [app, o] of sloOutcomes(report, variants)) {
      const e = this.slo.get(app) ?? { total: 0, missed: 0 };
      e.total += o.total;
      e.missed += o.missed;
      this.slo.set(app, e);
    }
    return back ? "back" : "observed";
  }

  /** A dispatcher's arrivals report: the tightest SLO among the app's queries. */
  observeArrivals(a: ArrivalsReport): void {
    let minSloMs: number | null = null;
    for (const m of Object.values(a.models)) if (m.minSloMs !== null) minSloMs = minSloMs === null ? m.minSloMs : Math.min(minSloMs, m.minSloMs);
    if (minSloMs !== null) this.sloWindow.observe(a.app, minSloMs, a.atMs);
  }

  /** Each app's tightest SLO within the last `sloMemoryMs`. */
  tightestSloByApp(nowMs: number): Record<string, number> {
    return this.sloWindow.read(nowMs);
  }

  /** Each kind's load: Σ arrivals per second in its workers' latest reports. */
  loadQpsByKind(): Record<string, number> {
    const out: Record<string, number> = {};
    for (const { report } of this.reports.values()) {
      let n = 0;
      for (const v of report.variants) n += v.arrivals;
      out[report.hardware] = (out[report.hardware] ?? 0) + n;
    }
    return out;
  }

  /** The SLO outcomes since the last call, per app (the SLO monitor's sample); the count starts again. */
  takeSloSamples(): AppSloSample[] {
    const out = [...this.slo].map(([app, o]) => ({ app, total: o.total, missed: o.missed }));
    this.slo = new Map();
    return out;
  }

  /** The latest report of a worker, as held. */
  held(worker: string): HeldReport | undefined {
    return this.reports.get(worker);
  }

  /** Whether a worker has reported since it was launched (or forgotten). */
  hasReported(worker: string): boolean {
    return this.reports.has(worker);
  }

  /**
   * Silent workers the provider did not launch, with no records left in the store, that might have
   * stopped cleanly: the reader checks whether their command consumer is gone (I/O) and passes those in
   * `facts.left`. One whose last report said it was leaving needs no check.
   */
  silentUnmanaged(nowMs: number, facts: Pick<FleetFacts, "instances" | "records">): string[] {
    const managed = new Set(facts.instances.map((i) => i.workerId));
    const out: string[] = [];
    for (const [name, r] of this.reports) {
      if (this.gone.has(name) || this.leaving.has(name) || managed.has(name) || nowMs - r.seenAtMs <= this.config.heartbeatTimeoutMs) continue;
      if ((facts.records?.get(name) ?? []).length > 0) continue;
      out.push(name);
    }
    return out;
  }

  /**
   * Every worker the plan should see, and those that have left since the last call (forgotten now).
   * Utilisation is the mean of each worker's reports since the last call (the latest report's when none
   * came); the means start again.
   */
  machines(nowMs: number, facts: FleetFacts, variants: ReadonlyMap<string, ObservedVariant>): { views: MachineView[]; left: string[] } {
    const byWorker = new Map<string, ProviderMachine>();
    for (const i of facts.instances) byWorker.set(i.workerId, i);
    for (const [id, r] of this.reports) if (nowMs - r.seenAtMs > this.config.forgetMs) this.reports.delete(id);
    const names = new Set<string>([...this.reports.keys()]);
    for (const i of facts.instances) if (i.state !== "terminated" || facts.lost?.has(i.id)) names.add(i.workerId);
    const views: MachineView[] = [];
    const left: string[] = [];
    for (const name of [...names].sort()) {
      if (this.gone.has(name)) continue;
      const instance = byWorker.get(name);
      if (instance && facts.terminating?.has(instance.id)) continue;
      const report = this.reports.get(name);
      const stale = report !== undefined && nowMs - report.seenAtMs > this.config.heartbeatTimeoutMs;
      if (!instance && report !== undefined && (this.leaving.has(name) || (stale && facts.left?.has(name)))) {
        // A clean stop says so, or removes the worker's records and its command consumer: it left, nothing to replace.
        this.forget(name);
        left.push(name);
        continue;
      }
      const lostReason = instance ? facts.lost?.get(instance.id) : undefined;
      const interruptAtMs = instance ? facts.notices?.get(instance.id) : undefined;
      const busy = this.utilization.get(name);
      const view = machineView({
        name,
        ...(report ? { report } : {}),
        ...(instance ? { instance } : {}),
        records: facts.records?.get(name) ?? [],
        restoring: facts.restoring?.get(name) ?? [],
        ...(lostReason !== undefined ? { lostReason } : {}),
        ...(interruptAtMs !== undefined ? { interruptAtMs } : {}),
        nowMs,
        variants,
        servingWindowMs: this.config.servingWindowMs,
        ...(busy ? { utilization: busy.sum / busy.n } : {}),
      });
      if (view) views.push(view);
    }
    this.utilization = new Map();
    return { views, left };
  }

  /** A worker replaced (or left): its report is dropped and it is not listed again unless it reports again. */
  forget(worker: string): void {
    this.gone.add(worker);
    this.leaving.delete(worker);
    this.reports.delete(worker);
    this.utilization.delete(worker);
  }
}

/** One worker's state for the cost summary: lost (provider says so, or silent past the timeout), draining (a spot notice), booting, running. */
export function fleetStateOf(w: MachineView, nowMs: number, heartbeatTimeoutMs: number): FleetState {
  if (w.lostReason !== undefined || (!w.booting && nowMs - w.lastHeartbeatMs > heartbeatTimeoutMs)) return "lost";
  if (w.interruptAtMs !== undefined) return "draining";
  return w.booting ? "booting" : "running";
}
