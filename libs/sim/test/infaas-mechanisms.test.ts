import { describe, expect, it } from "vitest";
import { runInterferenceMigration, runLowLoadPacking } from "../src/scenarios/infaas-mechanisms.js";

const mean = (xs: readonly number[], from: number, to: number): number => {
  const part = xs.slice(from, to).filter((x) => Number.isFinite(x));
  return part.reduce((a, b) => a + b, 0) / part.length;
};

describe("infaas mechanisms", () => {
  it("infaas mechanisms - an Interfered variant is moved and its latency recovers", () => {
    const moved = runInterferenceMigration({ seed: 1 });
    const marked = runInterferenceMigration({ seed: 1, migrate: false });
    // As profiled before 20 s; 2× slower from 20 s (the replica's cores).
    expect(mean(moved.slowdown, 5, 20)).toBeCloseTo(1, 6);
    expect(mean(moved.slowdown, 21, 23)).toBeCloseTo(2, 6);
    // Interfered after 3 s of slow batches: moved within its machine (room: 3 free cores), and the new
    // replica serves as profiled; only marked, it stays 2× slower.
    const [first, second, third] = moved.moves;
    expect(first?.action).toMatch(/^migrate v-cpu ×1 on (cpu-\d+) to \1$/);
    expect(first?.reason).toContain("to free resources on the same worker");
    expect(first?.tMs).toBeGreaterThan(20_000);
    expect(first?.tMs).toBeLessThanOrEqual(25_000);
    expect(mean(moved.slowdown, 40, 160)).toBeCloseTo(1, 6);
    expect(mean(marked.slowdown, 40, 160)).toBeCloseTo(2, 6);
    // At 160 s the whole machine slows down: moved within it again (over 2 min after the first move),
    // which does not help (Interfered again within 2 min of a local move), so the next move goes to the
    // other machine, where the variant serves as profiled again.
    expect(second?.reason).toContain("to free resources on the same worker");
    expect(second?.tMs).toBeGreaterThan(160_000);
    expect(third?.reason).toContain("the contention is the worker's");
    expect(third?.action).toMatch(/^migrate v-cpu ×1 on (cpu-\d+) to (?!\1)cpu-\d+$/);
    expect(third?.tMs).toBeGreaterThan(second?.tMs ?? Infinity);
    expect(moved.moves.length).toBe(3);
    expect(mean(moved.slowdown, 190, 220)).toBeCloseTo(1, 6);
    // The variant ends on the second machine only.
    const [m0, m1] = Object.keys(moved.replicasAtEnd).sort();
    expect(moved.replicasAtEnd).toEqual({ [m0 as string]: 0, [m1 as string]: 1 });
    // No machine was added: the second one was free of interference all along.
    expect(moved.log.filter((e) => e.source === "vm-autoscaler")).toEqual([]);
    // Queries meet their SLO better than when the state is only marked.
    expect(moved.result.sloAttainment).toBeGreaterThan(marked.result.sloAttainment);
    expect(moved.result.sloAttainment).toBeGreaterThan(0.99);
  });

  it("infaas mechanisms - at low load, packing keeps machines idle, releases them early and costs less at the same SLO attainment", () => {
    const spread = runLowLoadPacking({ seed: 1, mode: "spread" });
    const pack = runLowLoadPacking({ seed: 1, mode: "pack" });
    // Three apps of 10 QPS (each 20% of a 50 QPS replica) started 20 s apart: spread over the three
    // machines, or packed on one (at most 3 × 20% = 60% busy, under 80%).
    expect(mean(spread.busyMachines, 60, 300)).toBeCloseTo(3, 6);
    expect(mean(pack.busyMachines, 60, 300)).toBeCloseTo(1, 6);
    // The two idle machines go after the VM autoscaler's idle time (90 s here); spread, none ever does.
    expect(spread.firstReleaseMs).toBeNull();
    expect(pack.firstReleaseMs).toBeGreaterThanOrEqual(90_000);
    expect(pack.firstReleaseMs).toBeLessThan(100_000);
    expect(pack.machines[pack.machines.length - 1]).toBe(1);
    expect(pack.result.costDollars).toBeLessThan(0.6 * spread.result.costDollars);
    // (the few misses are the first queries of each app, waiting for its 1 s load)
    expect(pack.result.sloAttainment).toBeGreaterThan(0.99);
    expect(Math.abs(pack.result.sloAttainment - spread.result.sloAttainment)).toBeLessThan(0.001);
  });
});
