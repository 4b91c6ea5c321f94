import { describe, expect, it } from "vitest";
import client from "prom-client";
import { ProcessPeer, SummedRegistry, countProcess, reforkDelayMs, type MetricsPart } from "../src/processes.js";
import { InferenceStatistics, sumCounts } from "../src/statistics.js";

/**
 * What several frontend processes (FRONTEND_PROCESSES, processes.ts) sum for the user, without the
 * processes: Triton's counts and the Prometheus registry, summed from parts as the primary gathers
 * them. test/e2e-frontend-processes.test.ts runs the real processes.
 */

describe("frontend processes", () => {
  it("processes - Triton's counts of several processes summed per name, the last inference the latest", async () => {
    const a = new InferenceStatistics();
    const b = new InferenceStatistics();
    // total, input, queue, infer, output ms; rows; answered at
    a.of("m").success(10, 1, 2, 3, 1, 1, 1_000);
    a.of("app").failure(4);
    b.of("m").success(20, 2, 4, 6, 2, 2, 3_000);
    b.of("m").failure(1);
    const sum = sumCounts([a.snapshot(), b.snapshot()]);
    expect(sum.names().sort()).toEqual(["app", "m"]);
    expect(sum.get("m")).toEqual({
      successCount: 2,
      successNs: 30_000_000, // 10 + 20 ms
      failCount: 1,
      failNs: 1_000_000,
      queueNs: 6_000_000, // 2 + 4
      computeInputNs: 3_000_000, // 1 + 2
      computeInferNs: 9_000_000, // 3 + 6
      computeOutputNs: 3_000_000, // 1 + 2
      inferenceCount: 3, // 1 row + 2
      lastInferenceMs: 3_000,
    });
    expect(sum.get("app")).toMatchObject({ successCount: 0, failCount: 1, failNs: 4_000_000 });
    // A part is a copy: counting on does not change a snapshot already sent.
    const snap = a.snapshot();
    a.of("m").failure(1);
    expect(snap.m!.failCount).toBe(0);

    // A process's statistics request reads every process's counts through its gather; a lone process, its own.
    const summed = new InferenceStatistics(async () => [a.snapshot(), b.snapshot()]);
    summed.of("m").success(1, 0, 0, 1, 0, 1, 5_000); // its own counts come back through the gather, not beside it
    expect((await summed.view()).get("m")?.successCount).toBe(2);
    expect(await a.view()).toBe(a);
  });

  it("processes - /metrics sums every process's counters and histograms, and counts the processes it summed", async () => {
    const part = async (requests: number, seconds: number[]): Promise<MetricsPart> => {
      const registry = new client.Registry();
      countProcess(registry);
      const counter = new client.Counter({ name: "sloserve_test_requests_total", help: "test", labelNames: ["route"], registers: [registry] });
      counter.inc({ route: "/infer" }, requests);
      const histogram = new client.Histogram({ name: "sloserve_test_seconds", help: "test", buckets: [0.01, 0.1], registers: [registry] });
      for (const s of seconds) histogram.observe(s);
      return registry.getMetricsAsJSON();
    };
    const parts = [await part(3, [0.005, 0.05]), await part(4, [0.5])];
    const registry = new SummedRegistry(async () => parts);
    const text = await registry.metrics();
    expect(text).toContain('sloserve_test_requests_total{route="/infer"} 7');
    expect(text).toContain('sloserve_test_seconds_bucket{le="0.01"} 1');
    expect(text).toContain('sloserve_test_seconds_bucket{le="0.1"} 2');
    expect(text).toContain('sloserve_test_seconds_bucket{le="+Inf"} 3');
    expect(text).toContain("sloserve_test_seconds_count 3");
    expect(text).toMatch(/^sloserve_frontend_processes 2$/m);
    expect(registry.contentType).toBe(new client.Registry().contentType);
  });

  it("processes - outside a cluster a gather is this process's part alone", async () => {
    const peer = new ProcessPeer<{ stats: number }>();
    try {
      peer.provide("stats", () => 42);
      expect(await peer.gather("stats")).toEqual([42]);
    } finally {
      peer.close();
    }
  });

  it("processes - a process that dies young is forked again after a pause doubling from 1 s to 30 s; an old one's at once", () => {
    expect([0, 1, 2, 3, 4, 5, 6, 10].map(reforkDelayMs)).toEqual([0, 1_000, 2_000, 4_000, 8_000, 16_000, 30_000, 30_000]);
  });
});
