import { describe, expect, it } from "vitest";
import { decideOverflow, drainBacklog, observedOverflowCapacity, overflowInputFor, serviceRateOf, variantOverflowCapacity, type OverflowCapacity, type OverflowVariant } from "../../src/overflow/overflow.js";

const T0 = 1_000_000;
/** One instance: 100 q/s at max batch 4 (T(4) = 40 ms), Wbatch 10 ms. */
const cap = (instances: number, o: Partial<OverflowCapacity> = {}): OverflowCapacity => ({ instances, peakQpsPerInstance: 100, wbatchMs: 10, batchLatencyMs: 40, ...o });

describe("overflow input", () => {
  const cases: Array<{ name: string; view: Parameters<typeof overflowInputFor>[0]; want: ReturnType<typeof overflowInputFor>; action: "local" | "overflow"; estimatedMs: number }> = [
    {
      // μ = 2 × 100 = 200 q/s; 30 ahead → 150 ms, + 10 + 40 = 200 ms ≤ 250 left (deadline T0 + 300 at T0 + 50).
      name: "two serving instances, the queue fits the budget",
      view: { serving: [cap(2)], queueAhead: 30, nowMs: T0 + 50, deadlineMs: T0 + 300 },
      want: { queueAhead: 30, serviceRateQps: 200, wbatchMs: 10, batchLatencyMs: 40, remainingBudgetMs: 250 },
      action: "local",
      estimatedMs: 200,
    },
    {
      // Same, 60 ahead: 300 + 50 = 350 ms > 250 → overflow.
      name: "two serving instances, the queue is too long",
      view: { serving: [cap(2)], queueAhead: 60, nowMs: T0 + 50, deadlineMs: T0 + 300 },
      want: { queueAhead: 60, serviceRateQps: 200, wbatchMs: 10, batchLatencyMs: 40, remainingBudgetMs: 250 },
      action: "overflow",
      estimatedMs: 350,
    },
    {
      // Mixed replicas (the simulator's fleet): μ = 100 + 2 × 50 = 200; Wbatch max(10, 0) = 10, T max(40, 80) = 80.
      // 20 ahead → 100 ms + 10 + 80 = 190 ≤ 200.
      name: "mixed replicas take the sum of their rates and the largest Wbatch and T",
      view: { serving: [cap(1), cap(2, { peakQpsPerInstance: 50, wbatchMs: 0, batchLatencyMs: 80 })], queueAhead: 20, nowMs: T0, deadlineMs: T0 + 200 },
      want: { queueAhead: 20, serviceRateQps: 200, wbatchMs: 10, batchLatencyMs: 80, remainingBudgetMs: 200 },
      action: "local",
      estimatedMs: 190,
    },
    {
      // Nothing serves; one instance loading, up in 500 ms: 500 + 0 + 10 + 40 = 550 ≤ 30 000 → wait for it.
      name: "nothing serves, an instance is loading, the budget is long: local",
      view: { serving: [cap(0)], starting: { capacity: [cap(1)], inMs: 500 }, queueAhead: 0, nowMs: T0, deadlineMs: T0 + 30_000 },
      want: { queueAhead: 0, serviceRateQps: 100, wbatchMs: 10, batchLatencyMs: 40, remainingBudgetMs: 30_000, startupMs: 500 },
      action: "local",
      estimatedMs: 550,
    },
    {
      // The same with a 100 ms SLO: 550 > 100 → overflow while the instance boots.
      name: "nothing serves, an instance is loading, the SLO is tight: overflow",
      view: { serving: [], starting: { capacity: [cap(1)], inMs: 500 }, queueAhead: 0, nowMs: T0, deadlineMs: T0 + 100 },
      want: { queueAhead: 0, serviceRateQps: 100, wbatchMs: 10, batchLatencyMs: 40, remainingBudgetMs: 100, startupMs: 500 },
      action: "overflow",
      estimatedMs: 550,
    },
    {
      // Serving capacity makes the starting capacity irrelevant: 0 + 10 + 40 = 50 ms.
      name: "starting capacity does not count while something serves",
      view: { serving: [cap(1)], starting: { capacity: [cap(3)], inMs: 500 }, queueAhead: 0, nowMs: T0, deadlineMs: T0 + 100 },
      want: { queueAhead: 0, serviceRateQps: 100, wbatchMs: 10, batchLatencyMs: 40, remainingBudgetMs: 100 },
      action: "local",
      estimatedMs: 50,
    },
    {
      name: "nothing serves and nothing starts: no local capacity",
      view: { serving: [], queueAhead: 0, nowMs: T0, deadlineMs: T0 + 30_000 },
      want: { queueAhead: 0, serviceRateQps: 0, wbatchMs: 0, batchLatencyMs: 0, remainingBudgetMs: 30_000 },
      action: "overflow",
      estimatedMs: Infinity,
    },
    {
      // Already past its deadline: −20 ms left.
      name: "a query past its deadline overflows",
      view: { serving: [cap(1)], queueAhead: 0, nowMs: T0 + 20, deadlineMs: T0 },
      want: { queueAhead: 0, serviceRateQps: 100, wbatchMs: 10, batchLatencyMs: 40, remainingBudgetMs: -20 },
      action: "overflow",
      estimatedMs: 50,
    },
  ];
  for (const c of cases) {
    it(`overflow input - ${c.name}`, () => {
      const input = overflowInputFor(c.view);
      expect(input).toEqual(c.want);
      const d = decideOverflow(input);
      expect(d.action).toBe(c.action);
      expect(d.estimatedMs).toBe(c.estimatedMs);
    });
  }

  it("overflow input - a profiled variant's capacity: peak QPS, batch wait and T at its max batch", () => {
    const v: OverflowVariant = { maxBatch: 8, batchWaitMs: 5, profile: { peakQps: 160, latencyMs: { "1": 10, "4": 30, "8": 50 }, loadLatencyMs: 300 } };
    expect(variantOverflowCapacity(v, 3)).toEqual({ instances: 3, peakQpsPerInstance: 160, wbatchMs: 5, batchLatencyMs: 50 });
    // Max batch 6 was not profiled: the smallest profiled batch holding it, 8 → 50 ms.
    expect(variantOverflowCapacity({ ...v, maxBatch: 6 }, 1)?.batchLatencyMs).toBe(50);
    expect(variantOverflowCapacity({ ...v, profile: null }, 1)).toBeUndefined();
    expect(variantOverflowCapacity({ ...v, profile: { peakQps: 0, latencyMs: {}, loadLatencyMs: 0 } }, 1)).toBeUndefined();
  });

  it("overflow input - observed batches slow a worker's instances down; too few batches leave the profile", () => {
    const v: OverflowVariant = { maxBatch: 4, batchWaitMs: 5, profile: { peakQps: 100, latencyMs: { "1": 10, "2": 20, "4": 40 }, loadLatencyMs: 300 } };
    const profiled = { instances: 2, peakQpsPerInstance: 100, wbatchMs: 5, batchLatencyMs: 40 };
    // 12 batches, median 60 ms at median size 2 (profiled 20 ms): slowdown 3 → 100 / 3 q/s, T(4) = 120 ms.
    const slow = observedOverflowCapacity(v, 2, { batches: 12, batchP50Ms: 60, batchSizeP50: 2 });
    expect(slow?.peakQpsPerInstance).toBeCloseTo(100 / 3, 12);
    expect(slow).toMatchObject({ instances: 2, wbatchMs: 5, batchLatencyMs: 120 });
    // 9 batches: too little evidence (the variant-state rule's 10) → the profile.
    expect(observedOverflowCapacity(v, 2, { batches: 9, batchP50Ms: 60, batchSizeP50: 2 })).toEqual(profiled);
    // Faster than profiled: no credit (slowdown floored at 1).
    expect(observedOverflowCapacity(v, 2, { batches: 50, batchP50Ms: 5, batchSizeP50: 1 })).toEqual(profiled);
    // A median batch of 3 is compared with the profiled batch that holds it (4: 40 ms): 80 / 40 = 2.
    expect(observedOverflowCapacity(v, 1, { batches: 10, batchP50Ms: 80, batchSizeP50: 3 })?.batchLatencyMs).toBe(80);
    expect(observedOverflowCapacity(v, 2, undefined)).toEqual(profiled);
    expect(observedOverflowCapacity({ ...v, profile: null }, 2, { batches: 12, batchP50Ms: 60, batchSizeP50: 2 })).toBeUndefined();
    // Two workers, one slowed by 2: μ* = 100 + 100 / 2 = 150; T the slower one's.
    const groups = [observedOverflowCapacity(v, 1, undefined)!, observedOverflowCapacity(v, 1, { batches: 10, batchP50Ms: 20, batchSizeP50: 1 })!];
    expect(serviceRateOf(groups)).toBe(150);
    expect(overflowInputFor({ serving: groups, queueAhead: 15, nowMs: T0, deadlineMs: T0 + 200 })).toMatchObject({ serviceRateQps: 150, batchLatencyMs: 80 });
  });

  it("overflow input - the backlog estimate drains at μ and never below zero", () => {
    // First sight: empty at now.
    let b = drainBacklog(undefined, T0, 100);
    expect(b).toEqual({ queries: 0, atMs: T0 });
    // 50 queued at T0; at T0 + 200 ms, 100 q/s × 0.2 s = 20 served → 30 left.
    b = drainBacklog({ queries: 50, atMs: T0 }, T0 + 200, 100);
    expect(b).toEqual({ queries: 30, atMs: T0 + 200 });
    // 1 s later: 30 − 100 → 0.
    expect(drainBacklog(b, T0 + 1_200, 100)).toEqual({ queries: 0, atMs: T0 + 1_200 });
    // Nothing serves: nothing drains.
    expect(drainBacklog({ queries: 7, atMs: T0 }, T0 + 5_000, 0)).toEqual({ queries: 7, atMs: T0 + 5_000 });
    // A clock read before the estimate's time does not move it back.
    expect(drainBacklog({ queries: 7, atMs: T0 }, T0 - 10, 100)).toEqual({ queries: 7, atMs: T0 });
  });
});
