import type { StateEvent, VariantMetrics, VariantState, WorkerReport } from "@sloserve/contracts";
import type { InstanceRecord } from "@sloserve/store";
import { WORKER_STALE_MS, reportUtilization, type WorkerView } from "@sloserve/policy";

/** A gap between two of its own heartbeats (sent every second) that says this dispatcher heard nothing meanwhile. */
const HEARD_GAP_MS = 2_500;

/**
 * The dispatcher's in-memory view of the running system: which variant instances run where and in
 * which state, and each worker's latest report. Fed by `state.>` events and `metrics.worker.*`
 * reports; seeded from Redis at start.
 */
export class ClusterView {
  /** variant → worker → state */
  readonly instances = new Map<string, Map<string, VariantState>>();
  readonly workers = new Map<string, { report: WorkerReport; seenAtMs: number }>();
  /** variant → arrivals/s, queue length, busy share and queries served/s, summed over workers, from the latest reports. */
  readonly load = new Map<string, { arrivalsPerS: number; queueLength: number; busy: number; servedPerS: number }>();
  /** variant → the last observed worker time per query (queryCostS), s. */
  private readonly lastCostS = new Map<string, number>();
  /** hardware kind → the threads of its live workers, from the latest reports. */
  private readonly threads = new Map<string, number>();

  seed(instances: readonly InstanceRecord[], workers: readonly WorkerReport[], nowMs: number): void {
    for (const w of workers) this.applyReport(w, nowMs);
    for (const i of instances) if (this.workers.has(i.worker)) this.setState(i.variant, i.worker, i.state);
  }

  private setState(variant: string, worker: string, state: VariantState): void {
    let byWorker = this.instances.get(variant);
    if (!byWorker) this.instances.set(variant, (byWorker = new Map()));
    if (state === "inactive") byWorker.delete(worker);
    else byWorker.set(worker, state);
  }

  applyState(event: StateEvent): void {
    this.setState(event.variant, event.worker, event.state);
  }

  /**
   * A report is the worker's full truth: it replaces the worker's instance states. A leaving worker's
   * last report (a clean stop) makes it forgotten at once.
   */
  applyReport(report: WorkerReport, nowMs: number): void {
    const previous = this.workers.get(report.worker);
    if (previous && previous.report.atMs > report.atMs) return; // out of order
    if (report.leaving) {
      this.forget(report.worker);
      this.recomputeLoad();
      return;
    }
    this.workers.set(report.worker, { report, seenAtMs: nowMs });
    const listed = new Set(report.variants.map((v) => v.variant));
    for (const [variant, byWorker] of this.instances) {
      if (byWorker.has(report.worker) && !listed.has(variant) && byWorker.get(report.worker) !== "loading") byWorker.delete(report.worker);
    }
    for (const v of report.variants) this.setState(v.variant, report.worker, v.state);
    this.recomputeLoad();
  }

  /**
   * This dispatcher's own heartbeat came back to it from NATS (main.ts): its link and its event loop
   * work. A silence longer than HEARD_GAP_MS before it (this process was paused, or its link stalled
   * or was cut) starts the stale clock again: every worker's report was held up with its own.
   */
  heard(nowMs: number): void {
    if (this.lastHeardMs === undefined || nowMs - this.lastHeardMs > HEARD_GAP_MS) this.hearingSinceMs = nowMs;
    this.lastHeardMs = nowMs;
  }

  private lastHeardMs: number | undefined;
  private hearingSinceMs = Number.NEGATIVE_INFINITY;

  /**
   * Forgets workers whose heartbeat is older than WORKER_STALE_MS; returns their last reports (the
   * capacity lost). With `heard` called: none while this dispatcher hears nothing itself, nor before
   * it has heard the bus again for WORKER_STALE_MS (a worker's silence is then its own, not this one's).
   */
  prune(nowMs: number): WorkerReport[] {
    const gone: WorkerReport[] = [];
    if (this.lastHeardMs !== undefined && (nowMs - this.lastHeardMs > HEARD_GAP_MS || nowMs - this.hearingSinceMs <= WORKER_STALE_MS)) return gone;
    for (const [id, w] of this.workers) {
      if (nowMs - w.seenAtMs > WORKER_STALE_MS) {
        this.forget(id);
        gone.push(w.report);
      }
    }
    if (gone.length) this.recomputeLoad();
    return gone;
  }

  private forget(worker: string): void {
    this.workers.delete(worker);
    for (const byWorker of this.instances.values()) byWorker.delete(worker);
  }

  /**
   * Instances of a variant serving queries now (Active, Overloaded or Interfered), summed over workers:
   * a worker's latest report gives how many it runs; a worker not in it yet (a state event came first)
   * counts one.
   */
  servingInstances(variant: string): number {
    let n = 0;
    for (const s of this.servingOn(variant)) n += s.instances;
    return n;
  }

  /** Per worker serving the variant: its instances and what its latest report says of them (if it lists them yet). */
  servingOn(variant: string): Array<{ worker: string; instances: number; metrics: VariantMetrics | undefined }> {
    const out: Array<{ worker: string; instances: number; metrics: VariantMetrics | undefined }> = [];
    for (const [worker, state] of this.instances.get(variant) ?? []) {
      if (state !== "active" && state !== "overloaded" && state !== "interfered") continue;
      const metrics = this.workers.get(worker)?.report.variants.find((v) => v.variant === variant);
      out.push({ worker, instances: metrics ? Math.max(1, metrics.instances) : 1, metrics });
    }
    return out;
  }

  private recomputeLoad(): void {
    this.load.clear();
    this.threads.clear();
    for (const { report } of this.workers.values()) {
      this.threads.set(report.hardware, (this.threads.get(report.hardware) ?? 0) + report.threads);
      for (const v of report.variants) {
        const l = this.load.get(v.variant) ?? { arrivalsPerS: 0, queueLength: 0, busy: 0, servedPerS: 0 };
        l.arrivalsPerS += v.arrivals;
        l.queueLength += v.queueLength;
        l.busy += v.utilisation;
        l.servedPerS += v.served;
        this.load.set(v.variant, l);
      }
    }
  }

  /**
   * Worker time one query of a variant takes, seconds (fair admission's cost, libs/policy
   * fair-share.ts): busy time over queries served in the latest reports, summed over workers; when
   * they served none, the last such figure; else one over the profiled peak rate; 0 when none is known.
   */
  queryCostS(variant: string, peakQps: number | undefined): number {
    const l = this.load.get(variant);
    if (l && l.servedPerS > 0 && l.busy > 0) {
      const cost = l.busy / l.servedPerS;
      this.lastCostS.set(variant, cost);
      return cost;
    }
    return this.lastCostS.get(variant) ?? (peakQps !== undefined && peakQps > 0 ? 1 / peakQps : 0);
  }

  /** The worker time a hardware kind's live workers have a second: their threads. */
  poolThreads(hardware: string): number {
    return this.threads.get(hardware) ?? 0;
  }

  /** Arrivals per second of a variant on one worker, from that worker's latest report. */
  variantQpsOn(variant: string, worker: string): number {
    return this.workers.get(worker)?.report.variants.find((v) => v.variant === variant)?.arrivals ?? 0;
  }

  /** Instances of a variant per state, counted in one pass (the query path reads four of them). */
  counts(variant: string): Record<"active" | "overloaded" | "interfered" | "loading", number> {
    const n = { active: 0, overloaded: 0, interfered: 0, loading: 0 };
    const byWorker = this.instances.get(variant);
    if (byWorker) for (const s of byWorker.values()) if (s === "active" || s === "overloaded" || s === "interfered" || s === "loading") n[s]++;
    return n;
  }

  count(variant: string, state: VariantState): number {
    let n = 0;
    for (const s of this.instances.get(variant)?.values() ?? []) if (s === state) n++;
    return n;
  }

  hasLiveWorker(hardware: string, nowMs: number): boolean {
    for (const w of this.workers.values()) if (w.report.hardware === hardware && nowMs - w.seenAtMs <= WORKER_STALE_MS) return true;
    return false;
  }

  /**
   * Each worker as placement sees it: its latest report, with the state events since. A variant
   * unloaded since the report (the event came first: reports are a second apart) no longer runs there
   * and gives back what its instances held; one loading since (not listed yet) runs there and holds
   * one instance's worth. `footprint` is what one instance of a variant holds (the catalog's); without
   * it the report's figures stand.
   */
  workerViews(footprint?: (variant: string) => { threads: number; memoryBytes: number } | undefined): WorkerView[] {
    return [...this.workers.values()].map(({ report, seenAtMs }) => {
      const worker = report.worker;
      let threadsUsed = report.threadsUsed;
      let memoryUsedBytes = report.memoryUsedBytes;
      const variants: string[] = [];
      const listed = new Set<string>();
      for (const v of report.variants) {
        listed.add(v.variant);
        if (this.instances.get(v.variant)?.has(worker)) variants.push(v.variant);
        else {
          const f = footprint?.(v.variant);
          const n = v.instances + (v.loading ?? 0);
          if (f && v.state !== "inactive") {
            threadsUsed -= f.threads * n;
            memoryUsedBytes -= f.memoryBytes * n;
          }
        }
      }
      for (const [variant, byWorker] of this.instances) {
        if (listed.has(variant) || !byWorker.has(worker)) continue;
        variants.push(variant);
        const f = footprint?.(variant);
        if (f) {
          threadsUsed += f.threads;
          memoryUsedBytes += f.memoryBytes;
        }
      }
      return {
        worker,
        hardware: report.hardware,
        utilisation: reportUtilization(report, { get: (v) => footprint?.(v) }),
        threads: report.threads,
        threadsUsed: Math.max(0, threadsUsed),
        memoryBytes: report.memoryBytes,
        memoryUsedBytes: Math.max(0, memoryUsedBytes),
        variants,
        seenAtMs,
      };
    });
  }
}
