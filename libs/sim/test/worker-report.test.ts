import { describe, expect, it } from "vitest";
import { workerReportSchema } from "@sloserve/contracts";
import { reportUtilization, workerFreeResources } from "@sloserve/policy";
import { Simulator, drop, type ArrivalProcess } from "../src/index.js";
import { simulatedWorkerReport, type ReplicaReadings } from "../src/worker-report.js";

function at(...times: number[]): ArrivalProcess {
  let i = 0;
  return { endMs: times[times.length - 1] ?? 0, next: () => times[i++] ?? null };
}

describe("worker-report", () => {
  it("worker-report - a simulated machine's report is a valid worker report: busy share, answers, late ones, sheds", () => {
    // One 4-thread CPU machine, one 2-thread replica of v (50 ms a query, sheds late queries) and one of
    // w (50 ms, does not shed). v: queries at 0, 10, 20 (SLO 80 ms) and 500: the first runs 0-50; at 50
    // the second cannot finish by its deadline (90) and is shed; the third runs 50-100; the fourth
    // 500-550: busy 150 ms of 1000. w: queries at 600 and 610: the second ends at 700, 90 ms after it
    // came: answered past its SLO.
    const sim = new Simulator({ seed: 1, durationMs: 2000 });
    const q = sim.addQueue({ name: "v", maxBatch: 1, waitMs: 0, shedLate: true });
    const m = sim.launchMachine({ type: "c5.xlarge", kind: "cpu", pricePerS: 0, resources: { threads: 4, memoryBytes: 8e9 } });
    sim.addReplica(q, m, { latencyMs: { 1: 50 }, uses: { threads: 2 } });
    const w = sim.addQueue({ name: "w", maxBatch: 1, waitMs: 0, shedLate: false });
    sim.addReplica(w, m, { latencyMs: { 1: 50 }, uses: { threads: 1 } });
    sim.addStream({ app: "a", sloMs: 80, process: at(0, 10, 20, 500) });
    sim.addStream({ app: "b", sloMs: 80, process: at(600, 610) });
    sim.setRouter((query, _f, cause) => (cause === "arrival" ? (query.app === "a" ? q : w) : cause === "late" ? drop("late") : null));
    const readings: ReplicaReadings = new WeakMap();
    const reports: unknown[] = [];
    sim.at(0, (t) => void simulatedWorkerReport(m, t, 0, readings, { stateOf: () => "active", arrivalsOf: () => 0 }));
    sim.at(1000, (t) => {
      const r = simulatedWorkerReport(m, t, 0, readings, { stateOf: () => "active", arrivalsOf: (v, _m, from, to) => (v === "v" ? q : w).arrivals.sum(from, to) });
      reports.push(r);
      expect(workerReportSchema.safeParse(r).success).toBe(true);
      expect(r).toMatchObject({ worker: m.name, hardware: "cpu", atMs: 1000, threads: 4, memoryBytes: 8e9 });
      expect(r.variants).toEqual([
        expect.objectContaining({ variant: "v", state: "active", instances: 1, arrivals: 4, served: 3, sloMisses: 0, errors: 1 }),
        expect.objectContaining({ variant: "w", state: "active", instances: 1, arrivals: 2, served: 2, sloMisses: 1, errors: 0 }),
      ]);
      expect(r.variants[0]?.utilisation).toBeCloseTo(0.15, 9);
      expect(r.variants[1]?.utilisation).toBeCloseTo(0.1, 9);
      // The VM autoscaler's reading: (0.15 busy × 2 threads + 0.1 × 1) / 4 threads.
      expect(reportUtilization(r, new Map([["v", { threads: 2 }], ["w", { threads: 1 }]]))).toBeCloseTo(0.1, 9);
    });
    sim.at(2000, (t) => {
      // Nothing since: the next period's figures start from the last report's.
      const r = simulatedWorkerReport(m, t, 1000, readings, { stateOf: () => "overloaded", arrivalsOf: () => 0 });
      for (const v of r.variants) expect(v).toMatchObject({ state: "overloaded", served: 0, sloMisses: 0, errors: 0, utilisation: 0 });
    });
    sim.run();
    expect(reports).toHaveLength(1);
  });

  it("worker-report - the report names the machine's resources as the live workers do: its free resources are the machine's, and a mixed worker's busy share is over its slots", () => {
    // A GPU worker (4 slots, one 16 GiB GPU, host memory); the paper's mixed worker (kind "worker":
    // 8 threads for CPU instances + 2 GPU slots, 4 NeuronCores, 2 GiB of GPU memory); a machine whose
    // kind is an instance type and that names no accelerators (one model server). Each runs replicas
    // that take some of it; on the last two, one replica is busy 50 ms of the second.
    const GiB = 1024 ** 3;
    const sim = new Simulator({ seed: 1, durationMs: 2000 });
    const q = sim.addQueue({ name: "v", maxBatch: 1, waitMs: 0 });
    const idle = sim.addQueue({ name: "idle", maxBatch: 1, waitMs: 0 });
    const gpu = sim.launchMachine({ type: "p3.2xlarge", kind: "gpu", pricePerS: 0, resources: { threads: 4, accelerators: 1, acceleratorMemoryBytes: 16 * GiB, memoryBytes: 61 * GiB } });
    const mixed = sim.launchMachine({ type: "infaas-worker", kind: "worker", pricePerS: 0, resources: { threads: 10, accelerators: 4, acceleratorMemoryBytes: 2 * GiB } });
    const typed = sim.launchMachine({ type: "c5.xlarge", kind: "c5.xlarge", pricePerS: 0, resources: { threads: 1 } });
    sim.addReplica(idle, gpu, { latencyMs: { 1: 5 }, uses: { threads: 1, acceleratorMemoryBytes: 1.5 * GiB, memoryBytes: 2e9 } });
    sim.addReplica(idle, gpu, { latencyMs: { 1: 5 }, uses: { threads: 1, acceleratorMemoryBytes: 0.5 * GiB, memoryBytes: 1e9 } });
    const onMixed = sim.addReplica(q, mixed, { latencyMs: { 1: 50 }, uses: { threads: 4 } });
    sim.addReplica(idle, mixed, { latencyMs: { 1: 20 }, concurrency: 2, uses: { accelerators: 1 } });
    sim.addReplica(idle, mixed, { latencyMs: { 1: 5 }, uses: { threads: 1, acceleratorMemoryBytes: 1 * GiB } });
    const onTyped = sim.addReplica(q, typed, { latencyMs: { 1: 50 }, uses: { threads: 1 } });
    // (two queries at once: one to each of the queue's two replicas)
    sim.addStream({ app: "a", sloMs: 1000, process: at(0, 0) });
    sim.setRouter((_query, _f, cause) => (cause === "arrival" ? q : null));
    const readings: ReplicaReadings = new WeakMap();
    const input = { stateOf: () => "active" as const, arrivalsOf: () => 0 };
    let checked = 0;
    sim.at(1000, (t) => {
      for (const m of [gpu, mixed, typed]) {
        const r = simulatedWorkerReport(m, t, 0, readings, input);
        const free = workerFreeResources(r);
        for (const k of Object.keys(m.resources)) expect(free[k], `${m.kind} ${k}`).toBeCloseTo(m.free(k), 0);
        checked++;
      }
      const g = simulatedWorkerReport(gpu, t, 0, new WeakMap(), input);
      expect(g).toMatchObject({ threads: 4, threadsUsed: 2, accelerators: 1, acceleratorsUsed: 0, acceleratorMemoryBytes: 16 * GiB, acceleratorMemoryUsedBytes: 2 * GiB, memoryBytes: 61 * GiB, memoryUsedBytes: 3e9 });
      expect(workerReportSchema.safeParse(g).success).toBe(true);
      // The mixed worker: its 4 NeuronCores and each one's share of the GPU memory (0.5 GiB), and the
      // busy share of its slots (1 + 2 + 1): the CPU replica's 50 ms of 1000 ÷ 4.
      const busy = (onMixed?.busyMsAt(t) ?? 0) / 1000;
      expect(busy).toBeCloseTo(0.05, 9);
      const x = simulatedWorkerReport(mixed, t, 0, new WeakMap(), input);
      expect(x).toMatchObject({ threads: 10, threadsUsed: 5, accelerators: 4, acceleratorsUsed: 1, acceleratorMemoryBytes: 0.5 * GiB, acceleratorMemoryUsedBytes: 1 * GiB });
      expect(reportUtilization(x, new Map())).toBeCloseTo(busy / 4, 9);
      // The typed machine names no accelerators: its slots stand for them.
      const busyTyped = (onTyped?.busyMsAt(t) ?? 0) / 1000;
      expect(busyTyped).toBeCloseTo(0.05, 9);
      const y = simulatedWorkerReport(typed, t, 0, new WeakMap(), input);
      expect(y).toMatchObject({ threads: 1, threadsUsed: 1, accelerators: 1, acceleratorsUsed: 0 });
      expect(reportUtilization(y, new Map())).toBeCloseTo(busyTyped, 9);
    });
    sim.run();
    expect(checked).toBe(3);
  });
});
