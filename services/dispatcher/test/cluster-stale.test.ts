import { describe, expect, it } from "vitest";
import type { WorkerReport } from "@sloserve/contracts";
import { WORKER_STALE_MS } from "@sloserve/policy";
import { ClusterView } from "../src/cluster.js";

/** A worker's report at `atMs` running one active variant. */
const report = (worker: string, atMs: number): WorkerReport => ({
  worker, hardware: "cpu", atMs, startedAtMs: 0, threads: 1, threadsUsed: 1, memoryBytes: 8e9, memoryUsedBytes: 0, rssBytes: 1e8,
  variants: [{ variant: "v", state: "active", instances: 1, sloMisses: 0, batchP50Ms: 0, batchSizeP50: 0, arrivals: 0, served: 0, errors: 0, batches: 0, queueLength: 0, latencyP50Ms: 0, latencyP99Ms: 0, utilisation: 0 }],
});

/** The dispatcher's own heartbeat heard every second over [fromMs, toMs]. */
function hearEverySecond(c: ClusterView, fromMs: number, toMs: number): void {
  for (let t = fromMs; t <= toMs; t += 1000) c.heard(t);
}

describe("ClusterView: stale workers", () => {
  it("forgets a silent worker while the dispatcher hears the bus", () => {
    const c = new ClusterView();
    c.applyReport(report("w1", 0), 0);
    c.applyReport(report("w2", 0), 0);
    hearEverySecond(c, 0, WORKER_STALE_MS + 1000);
    c.applyReport(report("w2", WORKER_STALE_MS), WORKER_STALE_MS);
    expect(c.prune(WORKER_STALE_MS + 1000).map((r) => r.worker)).toEqual(["w1"]);
  });

  it("forgets nobody while it hears nothing itself (paused, or its link stalled), nor until the reports had time to come", () => {
    const c = new ClusterView();
    c.applyReport(report("w1", 0), 0);
    hearEverySecond(c, 0, 1000);
    // 12 s deaf: its own heartbeat does not come back.
    expect(c.prune(13_000)).toEqual([]);
    // Heard again: the workers' reports come with its own; none is forgotten for the stale window.
    c.heard(13_100);
    expect(c.prune(14_000)).toEqual([]);
    c.applyReport(report("w1", 13_000), 14_100);
    hearEverySecond(c, 14_100, 19_100);
    expect(c.prune(13_100 + WORKER_STALE_MS)).toEqual([]);
    // A worker silent while the bus is heard is lost as before.
    expect(c.prune(14_100 + WORKER_STALE_MS + 1).map((r) => r.worker)).toEqual(["w1"]);
  });

  it("without its own heartbeat (no `heard` call), prunes by age alone, as before", () => {
    const c = new ClusterView();
    c.applyReport(report("w1", 0), 0);
    expect(c.prune(WORKER_STALE_MS + 1).map((r) => r.worker)).toEqual(["w1"]);
  });
});
