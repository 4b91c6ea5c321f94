import { describe, expect, it } from "vitest";
import { decideOverflow, estimateLocalCompletionMs, queueAheadOf } from "../../src/overflow/overflow.js";

describe("overflow", () => {
  const cases = [
    // 10 ahead at 50 qps: 10/50 = 0.2 s = 200 ms, + Wbatch 100 + T 150 = 450 ms ≤ 600 → local.
    { name: "fits the budget: local", queueAhead: 10, mu: 50, w: 100, t: 150, budget: 600, action: "local", est: 450 },
    // 20 ahead: 400 + 100 + 150 = 650 > 600 → overflow.
    { name: "queue too long: overflow", queueAhead: 20, mu: 50, w: 100, t: 150, budget: 600, action: "overflow", est: 650 },
    // Budget already spent waiting upstream: 0 + 100 + 150 = 250 > 200 → overflow.
    { name: "little budget left: overflow", queueAhead: 0, mu: 50, w: 100, t: 150, budget: 200, action: "overflow", est: 250 },
    // Exactly on the budget counts as meeting it: 5/50 → 100 + 100 + 150 = 350.
    { name: "estimate equal to the budget: local", queueAhead: 5, mu: 50, w: 100, t: 150, budget: 350, action: "local", est: 350 },
    { name: "no local capacity: overflow", queueAhead: 0, mu: 0, w: 0, t: 10, budget: 1000, action: "overflow", est: Infinity },
  ] as const;
  for (const c of cases) {
    it(`overflow - ${c.name}`, () => {
      const d = decideOverflow({ queueAhead: c.queueAhead, serviceRateQps: c.mu, wbatchMs: c.w, batchLatencyMs: c.t, remainingBudgetMs: c.budget });
      expect(d.action).toBe(c.action);
      expect(d.estimatedMs).toBe(c.est);
    });
  }

  it("overflow - reasons state the comparison", () => {
    expect(decideOverflow({ queueAhead: 20, serviceRateQps: 50, wbatchMs: 100, batchLatencyMs: 150, remainingBudgetMs: 600 }).reason)
      .toBe("estimated 650.0 ms > budget 600.0 ms");
    expect(estimateLocalCompletionMs({ queueAhead: 3, serviceRateQps: 30, wbatchMs: 0, batchLatencyMs: 20 })).toBe(120); // 3/30 s = 100 ms + 20
  });
});

describe("overflow - queue ahead with the batches in service", () => {
  const cases: Array<{ name: string; waiting: number; batches: Array<{ size: number; startMs: number; endMs: number }>; nowMs: number; want: number }> = [
    { name: "nothing in service: the waiting queries", waiting: 3, batches: [], nowMs: 100, want: 3 },
    { name: "a batch of 8 just started counts whole", waiting: 0, batches: [{ size: 8, startMs: 100, endMs: 800 }], nowMs: 100, want: 8 },
    { name: "a batch of 8 three quarters done counts 2", waiting: 1, batches: [{ size: 8, startMs: 0, endMs: 400 }], nowMs: 300, want: 3 },
    { name: "an ended batch counts nothing", waiting: 0, batches: [{ size: 8, startMs: 0, endMs: 400 }], nowMs: 400, want: 0 },
    { name: "two replicas add up", waiting: 2, batches: [{ size: 4, startMs: 0, endMs: 100 }, { size: 2, startMs: 50, endMs: 150 }], nowMs: 50, want: 2 + 2 + 2 },
    { name: "a zero-length batch not yet ended counts whole", waiting: 0, batches: [{ size: 5, startMs: 60, endMs: 60 }], nowMs: 50, want: 5 },
  ];
  for (const c of cases) {
    it(`overflow - queue ahead: ${c.name}`, () => {
      expect(queueAheadOf(c.waiting, c.batches, c.nowMs)).toBeCloseTo(c.want, 9);
    });
  }

  it("overflow - a query behind a batch that just started is charged its remaining time", () => {
    // One replica, Nbatch 8 in 700 ms (μ* = 11.4 q/s), a batch of 8 started now, SLO 1000 ms: the query
    // cannot start before 700 ms and ends at 1 400 ms, so it overflows; 600 ms later it fits.
    const base = { serviceRateQps: 8000 / 700, wbatchMs: 0, batchLatencyMs: 700, remainingBudgetMs: 1000 };
    const batch = [{ size: 8, startMs: 0, endMs: 700 }];
    expect(decideOverflow({ ...base, queueAhead: 0 }).action).toBe("local");
    expect(decideOverflow({ ...base, queueAhead: queueAheadOf(0, batch, 0) }).action).toBe("overflow");
    expect(decideOverflow({ ...base, queueAhead: queueAheadOf(0, batch, 600) }).action).toBe("local");
  });
});
