import { describe, expect, it } from "vitest";
import { decideOverflow, estimateLocalCompletionMs } from "../src/overflow.js";

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
