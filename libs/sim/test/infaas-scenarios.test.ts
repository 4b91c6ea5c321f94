import { describe, expect, it } from "vitest";
import { ScheduledArrivals, Simulator, constantRate, installInfaas, loadProfilerResults, replicaOptionsFor } from "../src/index.js";
import { infaasTable3 } from "../src/scenarios/infaas-table3.js";
import { runSelection } from "../src/scenarios/infaas-selection.js";
import { scenarios } from "../src/scenarios/index.js";
import { INFAAS_TABLE2, infaasResnet50Variants } from "../src/hardware.js";

describe("infaas scenarios", () => {
  it("infaas-table3 - reproduces Table 3 exactly, from the optimiser and from simulated billing", () => {
    const r = infaasTable3.run({ seed: 1, durationS: 60 });
    expect(r.table.map((row) => [row["#A"], row["#B"], row["#C"], row["cost/s (optimiser)"], row["cost/s (simulated)"]])).toEqual([
      [2, 0, 0, 2, 2],
      [0, 1, 0, 3, 3],
      [0, 2, 1, 22, 22],
    ]);
    // With evenly spaced arrivals each mix meets its SLO.
    expect(r.table.every((row) => row["SLO met (even arrivals)"] === 1)).toBe(true);
  });

  it("infaas-selection - INFaaS is cheaper than the GPU baselines at 4 QPS and in the fluctuating case", () => {
    const runs = runSelection({ seed: 1, durationS: 200 });
    const cost = (w: string, s: string): number => runs.find((r) => r.workload === w && r.system === s)?.result.costDollars ?? NaN;
    for (const w of ["flat", "fluctuating"]) {
      expect(cost(w, "clipper+-gpu") / cost(w, "infaas")).toBeGreaterThan(2);
      expect(cost(w, "sm+-gpu") / cost(w, "infaas")).toBeGreaterThan(2);
    }
    // 650-700 QPS: the CPU baselines top out near 2 × 5 = 10 QPS; INFaaS serves the load.
    const good = (s: string): number => runs.find((r) => r.workload === "high" && r.system === s)?.throughputQps ?? NaN;
    expect(good("clipper+-cpu")).toBeLessThan(11);
    expect(good("infaas")).toBeGreaterThan(600);
    // INFaaS moved to the batch-8 GPU variant under high load.
    const infaasHigh = runs.find((r) => r.workload === "high" && r.system === "infaas");
    expect(infaasHigh?.activeSeconds["resnet50-trt-gpu-b8"]).toBeGreaterThan(150);
  });

  it("infaas scenarios - the registry has unique names", () => {
    const names = scenarios.map((s) => s.name);
    expect(new Set(names).size).toBe(names.length);
    expect(names).toContain("infaas-table3");
    expect(names).toContain("infaas-selection");
  });
});

describe("infaas system", () => {
  it("infaas system - a lost worker is replaced and its variants restored", () => {
    const sim = new Simulator({ seed: 1, durationMs: 60_000 });
    const cpu = infaasResnet50Variants().filter((v) => v.hardware === "cpu");
    sim.addStream({ app: "classify", sloMs: 1000, process: new ScheduledArrivals(constantRate(2, 60), 1) });
    const worker = { type: "c5.xlarge", kind: "cpu", pricePerS: 0.17 / 3600, bootMs: 20_000, resources: { threads: 4 } };
    const sys = installInfaas(sim, { mode: "infaas", variants: cpu, workers: [worker], preload: [{ variant: "resnet50-tf-cpu-b1", count: 1 }], sloMsByModel: { resnet50: 1000 } });
    sim.at(5_000, () => sim.killMachine(sim.machines[0]!));
    const r = sim.run();
    const replace = sys.log.find((e) => e.action === "replace cpu");
    // Heartbeat lost at 5 s; the 2 s VM tick sees > 10 s of silence at 16 s.
    expect(replace?.tMs).toBe(16_000);
    expect(replace?.reason).toContain("restore 1 variant(s)");
    // Before the loss is detected, the dispatcher already asked for room for the variant (at the 6 s
    // tick), so a worker was added then too; both boot in 20 s and load the CPU variant.
    expect(sys.log.find((e) => e.action === "add cpu")?.tMs).toBe(6_000);
    expect(sim.machines.length).toBe(3);
    expect(sys.queueOf("resnet50-tf-cpu-b1").replicas.filter((x) => x.state === "ready").length).toBe(2);
    expect(r.completed).toBeGreaterThan(0);
    expect(r.completed + r.dropped).toBe(r.arrivals);
  });
});

describe("hardware", () => {
  it("hardware - replica options reach the profiled peak through concurrency", () => {
    // C: 15 ms at batch 1, 800 QPS → 800 × 15 / 1000 = 12 slots.
    const c = INFAAS_TABLE2.find((v) => v.name === "C");
    expect(c && replicaOptionsFor(c).concurrency).toBe(12);
  });

  it("hardware - profiler results load, and every problem is reported", () => {
    const ok = loadProfilerResults([{ variant: "mnist-mlp-b8", hardware: "cpu", latency_ms: { "1": 0.4, "8": 1.2 }, peak_qps: 6000, load_latency_ms: 80, price: 0.00005 }], { app: "digits", accuracy: 0.97 });
    expect(ok).toEqual([
      { name: "mnist-mlp-b8", model: "mnist-mlp-b8", app: "digits", hardware: "cpu", batchSize: 8, accuracy: 0.97, latencyMs: { 1: 0.4, 8: 1.2 }, peakQps: 6000, loadLatencyMs: 80, pricePerS: 0.00005, profiled: true },
    ]);
    expect(() => loadProfilerResults([{ variant: "", hardware: "cpu", latency_ms: { x: 1 }, peak_qps: 0, load_latency_ms: 1, price: 1 }])).toThrow(
      'profiler results[0]: variant must be a non-empty string\nprofiler results[0]: peak_qps must be a positive number\nprofiler results[0]: latency_ms["x"] must be a positive number at an integer batch size ≥ 1',
    );
  });
});
