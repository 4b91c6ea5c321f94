import { describe, expect, it } from "vitest";
import { workerReportSchema } from "@sloserve/contracts";
import { reportUtilization } from "@sloserve/policy";
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
});
