import type { ArrivalsReport, CostSummary, ForecastMessage, WorkerReport } from "@sloserve/contracts";
import { footprintOf, footprintPricePerSecond } from "@sloserve/policy";

/**
 * What the dashboard shows, kept from the bus as it goes by (the frontend subscribes: dashboard.ts):
 * the dispatchers' per-second arrival reports (throughput by app, overflow, each model's tightest SLO),
 * the workers' per-second reports (served, latency p50/p99, SLO misses, variant states, queues), the VM
 * autoscaler's cost summaries, the forecaster's forecasts and every scaling decision with its reason.
 * Series are kept per second for the last `windowMs` (10 min), from the messages' own timestamps.
 *
 * The cost of the loaded instances is their share of their hardware's price (libs/policy
 * `footprintPricePerSecond`, the price the selection ranks variants by); the machines' cost is the VM
 * autoscaler's, for the machines it launched.
 */

export interface DashboardData {
  atMs: number;
  windowMs: number;
  /** Queries per second arriving, by app (all dispatchers). */
  throughput: Array<{ t: number; app: string; qps: number }>;
  /** Queries per second sent to functions (serverless overflow), by app. */
  overflow: Array<{ t: number; app: string; qps: number }>;
  /** Latency by model (the slowest of its variants' instances that second). */
  latency: Array<{ t: number; model: string; p50_ms: number; p99_ms: number }>;
  /** The tightest latency SLO among each model's recent queries. */
  slo: Array<{ model: string; app: string; slo_ms: number }>;
  cost: {
    /** Machines launched by the VM autoscaler, $/h now, and $ so far. */
    machines_per_hour: number | null;
    machines_dollars: number | null;
    /** The loaded variant instances' share of their hardware, $/h now. */
    instances_per_hour: number;
    series: Array<{ t: number; kind: "machines" | "instances"; dollars_per_hour: number }>;
    /** Workers by hardware kind and state (the VM autoscaler's view). */
    workers_by_state: Array<{ kind: string; state: string; count: number }>;
  };
  workers: Array<{ worker: string; hardware: string; threads: number; threads_used: number; memory_bytes: number; memory_used_bytes: number; rss_bytes: number; variants: number; seen_ms_ago: number }>;
  variants: Array<{ variant: string; model: string; worker: string; state: string; instances: number; queue_length: number; served_qps: number; p50_ms: number; p99_ms: number; utilisation: number }>;
  decisions: Array<{ t: number; source: string; action: string; target: string; reason: string }>;
  /** Per app and unit: the maximum rate observed, the forecast made for it one unit ahead, and the units ahead. */
  forecast: Array<{ app: string; t: number; series: "observed" | "forecast"; qps: number }>;
  /** The last complete second's rates, the slowest model's p99 over the last minute, the window's SLO attainment (1 - misses / served). */
  totals: { qps: number; served_qps: number; p99_ms: number | null; slo_attainment: number | null; workers: number; active_variants: number };
}

/** A variant's model, and what prices it (libs/policy `footprintOf`: hardware, threads, profiled memory, settings). */
export type VariantLookup = (variant: string) => ({ model: string } & Parameters<typeof footprintOf>[0]) | undefined;

interface Second {
  arrivals: Map<string, number>;
  overflow: Map<string, number>;
  latency: Map<string, { p50: number; p99: number }>;
  served: number;
  misses: number;
  instancesPerHour?: number;
  machinesPerHour?: number;
}

/** Reports older than this are a lost worker's: left out of the tables. */
const WORKER_STALE_MS = 5_000;
const MAX_DECISIONS = 50;
/** The p99 figure is the slowest model's over this last stretch. */
const P99_WINDOW_MS = 60_000;
/** Units of forecast shown ahead of now. */
const FORECAST_AHEAD = 10;

export class DashboardFeed {
  private readonly seconds = new Map<number, Second>();
  private readonly workers = new Map<string, { report: WorkerReport; seenAtMs: number }>();
  private readonly slo = new Map<string, { app: string; ms: number }>();
  private readonly decisions: DashboardData["decisions"] = [];
  private readonly units = new Map<string, Map<number, { observed?: number; forecast?: number }>>();
  private readonly ahead = new Map<string, Array<{ t: number; qps: number }>>();
  private lastCost: CostSummary | undefined;

  constructor(
    private readonly variantOf: VariantLookup,
    private readonly windowMs = 10 * 60_000,
  ) {}

  private second(atMs: number): Second {
    const s = Math.floor(atMs / 1000);
    let b = this.seconds.get(s);
    if (!b) this.seconds.set(s, (b = { arrivals: new Map(), overflow: new Map(), latency: new Map(), served: 0, misses: 0 }));
    return b;
  }

  arrivals(r: ArrivalsReport): void {
    // A report covers the second before it was sent.
    const b = this.second(r.atMs - 1);
    b.arrivals.set(r.app, (b.arrivals.get(r.app) ?? 0) + (r.arrivals * 1000) / Math.max(1000, r.windowMs));
    if (r.overflowed) b.overflow.set(r.app, (b.overflow.get(r.app) ?? 0) + r.overflowed);
    for (const [model, m] of Object.entries(r.models)) if (m.minSloMs !== null) this.slo.set(model, { app: r.app, ms: m.minSloMs });
  }

  worker(r: WorkerReport, seenAtMs: number): void {
    const prev = this.workers.get(r.worker);
    if (prev && prev.report.atMs > r.atMs) return;
    if (r.leaving) {
      this.workers.delete(r.worker);
      return;
    }
    this.workers.set(r.worker, { report: r, seenAtMs });
    const b = this.second(r.atMs - 1);
    for (const v of r.variants) {
      b.served += v.served;
      b.misses += v.sloMisses;
      if (v.served === 0) continue;
      const model = this.variantOf(v.variant)?.model ?? v.variant;
      const l = b.latency.get(model) ?? { p50: 0, p99: 0 };
      b.latency.set(model, { p50: Math.max(l.p50, v.latencyP50Ms), p99: Math.max(l.p99, v.latencyP99Ms) });
    }
    b.instancesPerHour = this.instancesPerHour(seenAtMs);
  }

  cost(summary: CostSummary): void {
    this.lastCost = summary;
    this.second(summary.atMs).machinesPerHour = summary.dollarsPerHour;
  }

  forecast(m: ForecastMessage): void {
    const unitMs = m.unitS * 1000;
    let units = this.units.get(m.app);
    if (!units) this.units.set(m.app, (units = new Map()));
    const closed = units.get(m.atMs - unitMs) ?? {};
    units.set(m.atMs - unitMs, { ...closed, observed: m.observed });
    const next = units.get(m.atMs) ?? {};
    units.set(m.atMs, { ...next, forecast: m.values[0] ?? 0 });
    this.ahead.set(m.app, m.values.slice(0, FORECAST_AHEAD).map((qps, i) => ({ t: m.atMs + i * unitMs, qps })));
  }

  /** A decision from `decision.<source>.<worker>`: whatever its shape, its action, what it is about and its reason. */
  decision(source: string, body: Record<string, unknown>, receivedAtMs: number): void {
    const str = (k: string): string | undefined => (typeof body[k] === "string" ? (body[k] as string) : undefined);
    const target = str("variant") ?? str("model") ?? str("pipeline") ?? str("kind") ?? str("hardware") ?? str("worker") ?? "";
    const where = str("worker") && target !== str("worker") ? ` on ${str("worker")}` : "";
    this.decisions.unshift({ t: typeof body.atMs === "number" ? body.atMs : receivedAtMs, source, action: str("action") ?? "?", target: target + where, reason: str("reason") ?? "" });
    if (this.decisions.length > MAX_DECISIONS) this.decisions.length = MAX_DECISIONS;
  }

  /** The loaded instances' share of their hardware, $/h, over the live workers' latest reports. */
  private instancesPerHour(nowMs: number): number {
    let perS = 0;
    for (const { report, seenAtMs } of this.workers.values()) {
      if (nowMs - seenAtMs > WORKER_STALE_MS) continue;
      for (const v of report.variants) {
        const info = this.variantOf(v.variant);
        if (info && v.instances > 0) perS += v.instances * footprintPricePerSecond(footprintOf(info));
      }
    }
    return perS * 3600;
  }

  snapshot(nowMs: number): DashboardData {
    const from = Math.floor((nowMs - this.windowMs) / 1000);
    for (const s of this.seconds.keys()) if (s < from) this.seconds.delete(s);
    for (const [id, w] of this.workers) if (nowMs - w.seenAtMs > 60_000) this.workers.delete(id);
    const data: DashboardData = {
      atMs: nowMs,
      windowMs: this.windowMs,
      throughput: [],
      overflow: [],
      latency: [],
      slo: [...this.slo].map(([model, s]) => ({ model, app: s.app, slo_ms: s.ms })),
      cost: {
        machines_per_hour: this.lastCost?.dollarsPerHour ?? null,
        machines_dollars: this.lastCost?.totalDollars ?? null,
        instances_per_hour: this.instancesPerHour(nowMs),
        series: [],
        workers_by_state: this.lastCost?.workers ?? [],
      },
      workers: [],
      variants: [],
      decisions: [...this.decisions],
      forecast: [],
      totals: { qps: 0, served_qps: 0, p99_ms: null, slo_attainment: null, workers: 0, active_variants: 0 },
    };
    let served = 0;
    let misses = 0;
    const last = Math.floor(nowMs / 1000) - 1;
    for (const [s, b] of [...this.seconds].sort((x, y) => x[0] - y[0])) {
      const t = s * 1000;
      for (const [app, qps] of b.arrivals) data.throughput.push({ t, app, qps });
      for (const [app, n] of b.overflow) data.overflow.push({ t, app, qps: n });
      for (const [model, l] of b.latency) {
        data.latency.push({ t, model, p50_ms: l.p50, p99_ms: l.p99 });
        if (t >= nowMs - P99_WINDOW_MS) data.totals.p99_ms = Math.max(data.totals.p99_ms ?? 0, l.p99);
      }
      if (b.machinesPerHour !== undefined) data.cost.series.push({ t, kind: "machines", dollars_per_hour: b.machinesPerHour });
      if (b.instancesPerHour !== undefined) data.cost.series.push({ t, kind: "instances", dollars_per_hour: b.instancesPerHour });
      served += b.served;
      misses += b.misses;
      if (s === last) {
        data.totals.qps = [...b.arrivals.values()].reduce((a, x) => a + x, 0);
        data.totals.served_qps = b.served;
      }
    }
    data.totals.slo_attainment = served > 0 ? Math.max(0, 1 - misses / served) : null;
    for (const { report, seenAtMs } of this.workers.values()) {
      if (nowMs - seenAtMs > WORKER_STALE_MS) continue;
      data.workers.push({ worker: report.worker, hardware: report.hardware, threads: report.threads, threads_used: report.threadsUsed, memory_bytes: report.memoryBytes, memory_used_bytes: report.memoryUsedBytes, rss_bytes: report.rssBytes, variants: report.variants.length, seen_ms_ago: nowMs - seenAtMs });
      for (const v of report.variants) {
        data.variants.push({ variant: v.variant, model: this.variantOf(v.variant)?.model ?? "", worker: report.worker, state: v.state, instances: v.instances, queue_length: v.queueLength, served_qps: v.served, p50_ms: v.latencyP50Ms, p99_ms: v.latencyP99Ms, utilisation: v.utilisation });
      }
    }
    data.workers.sort((a, b) => a.worker.localeCompare(b.worker));
    data.variants.sort((a, b) => a.variant.localeCompare(b.variant) || a.worker.localeCompare(b.worker));
    data.totals.workers = data.workers.length;
    data.totals.active_variants = new Set(data.variants.filter((v) => v.state === "active").map((v) => v.variant)).size;
    const fromMs = nowMs - this.windowMs;
    for (const [app, units] of this.units) {
      for (const [t, u] of [...units].sort((x, y) => x[0] - y[0])) {
        if (t < fromMs) {
          units.delete(t);
          continue;
        }
        if (u.observed !== undefined) data.forecast.push({ app, t, series: "observed", qps: u.observed });
        if (u.forecast !== undefined) data.forecast.push({ app, t, series: "forecast", qps: u.forecast });
      }
      for (const p of (this.ahead.get(app) ?? []).slice(1)) data.forecast.push({ app, t: p.t, series: "forecast", qps: p.qps });
    }
    return data;
  }
}
