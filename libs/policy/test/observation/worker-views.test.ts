import { describe, expect, it } from "vitest";
import type { WorkerReport } from "@sloserve/contracts";
import { FleetObservation, fleetStateOf, machineView, sloOutcomes, workerRunsFromReport, type ObservedVariant, type ProviderMachine } from "../../src/index.js";

const V = "ocr-cls--cpu-fp32-b4-t1";
const variants = new Map<string, ObservedVariant>([
  [V, { app: "ocr-cls", threads: 1, profile: { peakQps: 5 } }],
  ["big--cpu-fp32-b8-t2", { app: "big", threads: 2, profile: { peakQps: 50 } }],
]);

function report(worker: string, atMs: number, vs: Array<Partial<WorkerReport["variants"][number]>>, extra: Partial<WorkerReport> = {}): WorkerReport {
  return {
    worker, hardware: "cpu", atMs, startedAtMs: 0, threads: 4, threadsUsed: 2, memoryBytes: 1e9, memoryUsedBytes: 0, rssBytes: 0,
    variants: vs.map((v) => ({ variant: V, state: "active", instances: 1, sloMisses: 0, batchP50Ms: 0, batchSizeP50: 0, arrivals: 0, served: 0, errors: 0, batches: 0, queueLength: 0, latencyP50Ms: 0, latencyP99Ms: 0, utilisation: 0, ...v })),
    ...extra,
  };
}

describe("worker-views", () => {
  const cases: Array<{ name: string; variants: Array<Partial<WorkerReport["variants"][number]>>; lastArrivalMs: number | null; want: Record<string, unknown> }> = [
    // 2 instances × 5 QPS = 10; busy 1.8 (two 1-thread instances) / 4 threads = 45%.
    { name: "capacity and utilisation", variants: [{ instances: 2, utilisation: 1.8, arrivals: 3 }], lastArrivalMs: 1000, want: { capacityQps: 10, utilization: 0.45, serving: true } },
    // Last arrivals 6 s ago > the 5 s window: idle.
    { name: "no arrivals for 6 s: not serving", variants: [{}], lastArrivalMs: -5000, want: { serving: false, overloaded: false } },
    { name: "an overloaded variant", variants: [{ state: "overloaded", arrivals: 9 }], lastArrivalMs: 1000, want: { overloaded: true, interfered: false } },
    { name: "a loading variant is restored too, and holds no capacity", variants: [{ state: "loading", instances: 0, loading: 1 }], lastArrivalMs: null, want: { capacityQps: 0, variants: [V] } },
  ];
  for (const c of cases) {
    it(`worker-views - machine view: ${c.name}`, () => {
      const v = machineView({ name: "w", report: { report: report("w", 0, c.variants), seenAtMs: 1000, lastArrivalMs: c.lastArrivalMs }, records: [], restoring: [], nowMs: 1000, variants, servingWindowMs: 5000 });
      expect(v).toMatchObject({ name: "w", kind: "cpu", booting: false, managed: false, apps: ["ocr-cls"], ...c.want });
    });
  }

  it("worker-views - SLO outcomes: errors count as misses", () => {
    // 20 served of which 2 late, plus 1 deadline_exceeded: 21 queries, 3 missed.
    expect(sloOutcomes(report("w", 0, [{ served: 20, sloMisses: 2, errors: 1 }]), variants)).toEqual(new Map([["ocr-cls", { total: 21, missed: 3 }]]));
  });

  it("worker-views - the model autoscaler's runs read utilisation as the VM autoscaler does (threads-weighted)", () => {
    // ocr-cls (1 thread) busy 0.5, big (2 threads) busy 0.5: (0.5·1 + 0.5·2) / 4 threads = 0.375.
    const r = report("w", 0, [{ utilisation: 0.5, arrivals: 4 }, { variant: "big--cpu-fp32-b8-t2", utilisation: 0.5, state: "loading", instances: 0 }]);
    const runs = workerRunsFromReport(r, 10, variants);
    expect(runs.utilisation).toBeCloseTo(0.375, 9);
    expect(runs.variants[V]).toEqual({ ready: 1, loading: 0, arrivalsQps: 4 });
    expect(runs.variants["big--cpu-fp32-b8-t2"]).toEqual({ ready: 0, loading: 1, arrivalsQps: 0 });
  });
});

describe("fleet", () => {
  const launched = (workerId: string, launchedAtMs: number, state = "running"): ProviderMachine => ({ id: `i-${workerId}`, workerId, kind: "cpu", launchedAtMs, state });

  it("fleet - utilisation is the mean of the reports since the last reading; the mean starts again", () => {
    const f = new FleetObservation({ heartbeatTimeoutMs: 10_000 });
    f.observeReport(report("w", 1000, [{ utilisation: 4 }]), 1000, variants); // 4 threads busy: 100%
    f.observeReport(report("w", 2000, [{ utilisation: 0 }]), 2000, variants);
    expect(f.machines(2000, { instances: [] }, variants).views[0]?.utilization).toBe(0.5);
    // No report since: the latest report's own.
    expect(f.machines(4000, { instances: [] }, variants).views[0]?.utilization).toBe(0);
  });

  it("fleet - an older report than the one held is stale; a newer one is the heartbeat", () => {
    const f = new FleetObservation();
    expect(f.observeReport(report("w", 2000, []), 2000, variants)).toBe("observed");
    expect(f.observeReport(report("w", 1000, []), 2100, variants)).toBe("stale");
    expect(f.held("w")?.seenAtMs).toBe(2000);
  });

  it("fleet - liveness: booting, running, lost, left", () => {
    const f = new FleetObservation({ heartbeatTimeoutMs: 10_000 });
    const instances = [launched("boot", 0), launched("ours", 0)];
    f.observeReport(report("ours", 1000, []), 1000, variants);
    f.observeReport(report("stack", 1000, []), 1000, variants);
    f.observeReport(report("crashed", 1000, []), 1000, variants);
    f.observeReport(report("stopped", 1000, []), 1000, variants);
    f.observeReport(report("said-bye", 1000, []), 1000, variants);
    f.observeReport(report("said-bye", 1500, [], { leaving: true }), 1500, variants);
    // 12 s later only "ours" and "stack" still report.
    f.observeReport(report("ours", 12_000, []), 12_000, variants);
    f.observeReport(report("stack", 12_000, []), 12_000, variants);
    const records = new Map([["crashed", [V]]]);
    // "crashed" has records left (a crash leaves them): not a candidate; "stopped" has none: the shell asks JetStream.
    expect(f.silentUnmanaged(12_000, { instances, records })).toEqual(["stopped"]);
    const { views, left } = f.machines(12_000, { instances, records, left: new Set(["stopped"]) }, variants);
    expect(left.sort()).toEqual(["said-bye", "stopped"]);
    const state = Object.fromEntries(views.map((v) => [v.name, fleetStateOf(v, 12_000, 10_000)]));
    expect(state).toEqual({ boot: "booting", ours: "running", stack: "running", crashed: "lost" });
    expect(views.find((v) => v.name === "crashed")?.variants).toEqual([V]);
    // Forgotten: not listed again until it reports again.
    expect(f.machines(14_000, { instances, records }, variants).views.map((v) => v.name)).not.toContain("stopped");
    expect(f.observeReport(report("stopped", 20_000, []), 20_000, variants)).toBe("back");
  });

  it("fleet - the provider's lost reason and spot notice reach the view; a worker being terminated is left out", () => {
    const f = new FleetObservation();
    const a = launched("a", 0);
    const b = launched("b", 0);
    const c = launched("c", 0);
    for (const w of ["a", "b", "c"]) f.observeReport(report(w, 1000, []), 1000, variants);
    const { views } = f.machines(2000, { instances: [a, b, c], lost: new Map([[a.id, "instance terminated"]]), notices: new Map([[b.id, 90_000]]), terminating: new Set([c.id]) }, variants);
    expect(views.map((v) => [v.name, fleetStateOf(v, 2000, 10_000)])).toEqual([["a", "lost"], ["b", "draining"]]);
    expect(views[0]).toMatchObject({ lostReason: "instance terminated", managed: true, launchedAtMs: 0 });
  });

  it("fleet - SLO samples since the last take; load per kind; the tightest SLO per app over the last minute", () => {
    const f = new FleetObservation();
    f.observeReport(report("w", 1000, [{ served: 10, sloMisses: 1, arrivals: 12 }]), 1000, variants);
    f.observeReport(report("w", 2000, [{ served: 10, sloMisses: 0, arrivals: 7 }]), 2000, variants);
    expect(f.takeSloSamples()).toEqual([{ app: "ocr-cls", total: 20, missed: 1 }]);
    expect(f.takeSloSamples()).toEqual([]);
    expect(f.loadQpsByKind()).toEqual({ cpu: 7 });
    const arrivals = (atMs: number, minSloMs: number | null) => ({ app: "ocr-cls", dispatcher: "d", atMs, windowMs: 1000, arrivals: 1, models: { "ocr-cls": { queries: 1, minSloMs } }, infeasible: 0 });
    f.observeArrivals(arrivals(0, 200));
    f.observeArrivals(arrivals(30_000, 500));
    f.observeArrivals(arrivals(31_000, null));
    expect(f.tightestSloByApp(60_000)).toEqual({ "ocr-cls": 200 });
    expect(f.tightestSloByApp(60_001)).toEqual({ "ocr-cls": 500 });
  });
});
