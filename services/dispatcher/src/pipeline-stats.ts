import type { PipelineReport } from "@sloserve/contracts";
import { quantile } from "@sloserve/policy";

/**
 * Per-pipeline counters of one dispatcher, published every second on `metrics.pipeline.<name>` for the
 * tuner and the dashboard: this window's queries, SLO misses, failures, latency p50/p99, the queries
 * that visited each stage and the items that reached it (more than the queries behind a fan-out), and
 * the queries received by the second of their arrival (the arrival process, for the Tuner); since start, the queries, misses and each stage's measured share s_m (the
 * fraction of queries that visited it: InferLine's scale factor, counted live); the p99 of the last
 * 1000 queries.
 */

const RECENT = 1000;

interface PerPipeline {
  sloMs: number;
  queries: number;
  misses: number;
  errors: number;
  latencies: number[];
  visits: Record<string, number>;
  items: Record<string, number>;
  /** Queries received, by the epoch second of their arrival (its start, ms). */
  arrivals: Map<number, number>;
  totalQueries: number;
  totalMisses: number;
  totalVisits: Record<string, number>;
  recent: number[];
  recentAt: number;
}

export class PipelineStats {
  private readonly pipelines = new Map<string, PerPipeline>();
  private since: number;

  constructor(nowMs: number, private readonly dispatcher: string) {
    this.since = nowMs;
  }

  private of(pipeline: string, sloMs: number): PerPipeline {
    let p = this.pipelines.get(pipeline);
    if (!p) {
      p = { sloMs, queries: 0, misses: 0, errors: 0, latencies: [], visits: {}, items: {}, arrivals: new Map(), totalQueries: 0, totalMisses: 0, totalVisits: {}, recent: [], recentAt: 0 };
      this.pipelines.set(pipeline, p);
    }
    p.sloMs = sloMs;
    return p;
  }

  /** An answered query: its latency, whether it missed the SLO, and the stages it visited. */
  record(pipeline: string, sloMs: number, q: { latencyMs: number; missed: boolean; visits: Readonly<Record<string, number>> }): void {
    const p = this.of(pipeline, sloMs);
    p.queries++;
    p.totalQueries++;
    if (q.missed) {
      p.misses++;
      p.totalMisses++;
    }
    p.latencies.push(q.latencyMs);
    if (p.recent.length < RECENT) p.recent.push(q.latencyMs);
    else p.recent[p.recentAt] = q.latencyMs;
    p.recentAt = (p.recentAt + 1) % RECENT;
    for (const [stage, n] of Object.entries(q.visits)) {
      if (n <= 0) continue;
      p.visits[stage] = (p.visits[stage] ?? 0) + 1;
      p.items[stage] = (p.items[stage] ?? 0) + n;
      p.totalVisits[stage] = (p.totalVisits[stage] ?? 0) + 1;
    }
  }

  /** A query received, at `arrivedAtMs` (its `x-received-ms`, else now): the arrival process for the Tuner. */
  recordArrival(pipeline: string, sloMs: number, arrivedAtMs: number): void {
    const p = this.of(pipeline, sloMs);
    const second = Math.floor(arrivedAtMs / 1000) * 1000;
    p.arrivals.set(second, (p.arrivals.get(second) ?? 0) + 1);
  }

  /** A query that failed (no answer but an error). */
  recordError(pipeline: string, sloMs: number): void {
    this.of(pipeline, sloMs).errors++;
  }

  /** Each stage's share of this dispatcher's answered queries that visited it (s_m), since start. */
  shares(pipeline: string): Record<string, number> {
    const p = this.pipelines.get(pipeline);
    if (!p || p.totalQueries === 0) return {};
    return Object.fromEntries(Object.entries(p.totalVisits).map(([s, n]) => [s, n / p.totalQueries]));
  }

  /** A pipeline was deleted: forget it. */
  forget(pipeline: string): void {
    this.pipelines.delete(pipeline);
  }

  /** The window's report of every pipeline this dispatcher has run, and a new window. */
  take(nowMs: number): PipelineReport[] {
    const out: PipelineReport[] = [];
    for (const [pipeline, p] of this.pipelines) {
      out.push({
        pipeline,
        dispatcher: this.dispatcher,
        atMs: nowMs,
        windowMs: nowMs - this.since,
        sloMs: p.sloMs,
        queries: p.queries,
        misses: p.misses,
        errors: p.errors,
        latencyP50Ms: p.latencies.length > 0 ? quantile(p.latencies, 0.5) : null,
        latencyP99Ms: p.latencies.length > 0 ? quantile(p.latencies, 0.99) : null,
        visits: p.visits,
        items: p.items,
        arrivals: Object.fromEntries([...p.arrivals].map(([second, n]) => [String(second), n])),
        totalQueries: p.totalQueries,
        totalMisses: p.totalMisses,
        shares: this.shares(pipeline),
        recentP99Ms: p.recent.length > 0 ? quantile(p.recent, 0.99) : null,
      });
      p.queries = 0;
      p.misses = 0;
      p.errors = 0;
      p.latencies = [];
      p.visits = {};
      p.items = {};
      p.arrivals = new Map();
    }
    this.since = nowMs;
    return out;
  }
}
