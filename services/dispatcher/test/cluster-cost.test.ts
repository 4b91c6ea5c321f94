import { describe, expect, it } from "vitest";
import type { VariantMetrics, WorkerReport } from "@sloserve/contracts";
import { ClusterView } from "../src/cluster.js";

/** A variant's figures in a report: busy share and queries served a second. */
const variant = (name: string, utilisation: number, served: number): VariantMetrics => ({
  variant: name, state: "active", instances: 1, sloMisses: 0, batchP50Ms: 0, batchSizeP50: 0, arrivals: served, served, errors: 0, batches: 0, queueLength: 0, latencyP50Ms: 0, latencyP99Ms: 0, utilisation,
});
const report = (worker: string, hardware: "cpu" | "gpu", threads: number, atMs: number, variants: VariantMetrics[]): WorkerReport => ({
  worker, hardware, atMs, startedAtMs: 0, threads, threadsUsed: 1, memoryBytes: 8e9, memoryUsedBytes: 0, rssBytes: 1e8, variants,
});

describe("ClusterView: fair admission's costs and capacity", () => {
  it("a query's cost is busy time over queries served, summed over workers; the last one while none are served; else the profile", () => {
    const c = new ClusterView();
    c.applyReport(report("w1", "cpu", 2, 0, [variant("v", 0.5, 100)]), 0);
    c.applyReport(report("w2", "cpu", 4, 0, [variant("v", 0.3, 60)]), 0);
    c.applyReport(report("g1", "gpu", 1, 0, []), 0);
    expect(c.queryCostS("v", 10)).toBeCloseTo(0.8 / 160);
    expect([c.poolThreads("cpu"), c.poolThreads("gpu"), c.poolThreads("inferentia")]).toEqual([6, 1, 0]);
    // Idle for a report: the last cost stays.
    c.applyReport(report("w1", "cpu", 2, 1000, [variant("v", 0, 0)]), 1000);
    c.applyReport(report("w2", "cpu", 4, 1000, [variant("v", 0, 0)]), 1000);
    expect(c.queryCostS("v", 10)).toBeCloseTo(0.8 / 160);
    // Never served: one over the profiled peak, else nothing known.
    expect(c.queryCostS("u", 50)).toBeCloseTo(0.02);
    expect(c.queryCostS("u", undefined)).toBe(0);
  });
});
