import { describe, expect, it } from "vitest";
import type { ArrivalsReport, WorkerReport } from "@sloserve/contracts";
import { DashboardFeed } from "../src/dashboard-feed.js";

/** The dashboard's figures from the bus messages, on a hand-set clock (t0 = 1 000 000 ms). */

const t0 = 1_000_000;
const variants: Record<string, { model: string; hardware: "cpu"; threads: number }> = {
  "m1-b8-t1": { model: "m1", hardware: "cpu", threads: 1 },
  "m1-b1-t2": { model: "m1", hardware: "cpu", threads: 2 },
};
const feed = (): DashboardFeed => new DashboardFeed((name) => variants[name]);

function arrivals(atMs: number, dispatcher: string, n: number, extra: Partial<ArrivalsReport> = {}): ArrivalsReport {
  return { app: "a", dispatcher, atMs, windowMs: 1000, arrivals: n, infeasible: 0, models: { m1: { queries: n, minSloMs: 200 } }, ...extra };
}

function worker(atMs: number, name: string, v: Array<{ variant: string; served: number; p50: number; p99: number; misses?: number; instances?: number }>): WorkerReport {
  return {
    worker: name, hardware: "cpu", atMs, startedAtMs: 0, threads: 4, threadsUsed: 3, memoryBytes: 1e9, memoryUsedBytes: 1e8, rssBytes: 2e8,
    variants: v.map((x) => ({ variant: x.variant, state: "active", instances: x.instances ?? 1, queueLength: 0, arrivals: x.served, served: x.served, errors: 0, batches: 1, sloMisses: x.misses ?? 0, latencyP50Ms: x.p50, latencyP99Ms: x.p99, batchP50Ms: 1, batchSizeP50: 1, utilisation: 0.5 })),
  };
}

describe("dashboard feed", () => {
  it("dashboard feed - throughput sums the dispatchers' reports of each second; the SLO is the model's tightest", () => {
    const f = feed();
    f.arrivals(arrivals(t0 + 500, "d1", 10));
    f.arrivals(arrivals(t0 + 700, "d2", 5, { overflowed: 2, overflowFailed: 0, overflowCostDollars: 0.001 }));
    f.arrivals(arrivals(t0 + 1500, "d1", 4));
    const d = f.snapshot(t0 + 2500);
    // second t0: 10 + 5 = 15 q/s; second t0 + 1 s: 4 q/s (the last complete second before 2.5 s)
    expect(d.throughput).toEqual([{ t: t0, app: "a", qps: 15 }, { t: t0 + 1000, app: "a", qps: 4 }]);
    expect(d.overflow).toEqual([{ t: t0, app: "a", qps: 2 }]);
    expect(d.totals.qps).toBe(4);
    expect(d.slo).toEqual([{ model: "m1", app: "a", slo_ms: 200 }]);
  });

  it("dashboard feed - latency per model is the slowest variant's; attainment is 1 - misses / served; instances are priced by their hardware share", () => {
    const f = feed();
    f.worker(worker(t0 + 900, "w1", [{ variant: "m1-b8-t1", served: 30, p50: 4, p99: 9, misses: 1 }, { variant: "m1-b1-t2", served: 10, p50: 6, p99: 7, instances: 2 }]), t0 + 900);
    const d = f.snapshot(t0 + 1000);
    expect(d.latency).toEqual([{ t: t0, model: "m1", p50_ms: 6, p99_ms: 9 }]);
    // 1 miss of 40 served: 0.975
    expect(d.totals.slo_attainment).toBeCloseTo(0.975, 10);
    // c5.xlarge: $0.17/h for 4 vCPUs. 1 instance × 1 thread + 2 instances × 2 threads = 5 threads: 5 × 0.17 / 4 = 0.2125 $/h
    expect(d.cost.instances_per_hour).toBeCloseTo(0.2125, 10);
    expect(d.variants.map((v) => [v.variant, v.model, v.state])).toEqual([["m1-b1-t2", "m1", "active"], ["m1-b8-t1", "m1", "active"]]);
    expect(d.totals).toMatchObject({ workers: 1, active_variants: 2, p99_ms: 9 });
    // A worker silent for more than 5 s leaves the tables (its history stays in the charts).
    expect(f.snapshot(t0 + 7000).workers).toEqual([]);
  });

  it("dashboard feed - forecast against actual: each unit's observed max and the forecast made for it, then the units ahead", () => {
    const f = feed();
    const base = { app: "a", unitS: 60, sampleS: 5, method: "last-value", historyUnits: 3 };
    f.forecast({ ...base, atMs: t0, observed: 8, values: [9, 9, 9] });
    f.forecast({ ...base, atMs: t0 + 60_000, observed: 11, values: [12, 12, 12] });
    const d = f.snapshot(t0 + 61_000);
    expect(d.forecast).toEqual([
      { app: "a", t: t0 - 60_000, series: "observed", qps: 8 },
      { app: "a", t: t0, series: "observed", qps: 11 },
      { app: "a", t: t0, series: "forecast", qps: 9 }, // made one unit ahead for the unit observed at 11
      { app: "a", t: t0 + 60_000, series: "forecast", qps: 12 },
      { app: "a", t: t0 + 120_000, series: "forecast", qps: 12 },
      { app: "a", t: t0 + 180_000, series: "forecast", qps: 12 },
    ]);
  });

  it("dashboard feed - decisions of every source, newest first, with what they are about and their reason", () => {
    const f = feed();
    f.decision("dispatcher", { action: "load", worker: "w1", model: "m1", variant: "m1-b8-t1", reason: "query for m1", atMs: t0 }, t0);
    f.decision("vm", { action: "launch", kind: "cpu", trigger: "utilisation", reason: "80% busy" }, t0 + 5);
    expect(f.snapshot(t0 + 10).decisions).toEqual([
      { t: t0 + 5, source: "vm", action: "launch", target: "cpu", reason: "80% busy" },
      { t: t0, source: "dispatcher", action: "load", target: "m1-b8-t1 on w1", reason: "query for m1" },
    ]);
  });
});
