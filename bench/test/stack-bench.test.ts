import { describe, expect, it } from "vitest";
import { stackBenchmark } from "../lib/stack-bench.js";

describe("stack-bench", () => {
  it("stack-bench - the whole policy stack runs and meets most SLOs", () => {
    const { result, decisions } = stackBenchmark({ durationS: 120, qps: 200, seed: 1 });
    expect(result.completed + result.dropped).toBe(result.arrivals);
    expect(result.sloAttainment).toBeGreaterThan(0.8);
    expect(decisions).toBeGreaterThan(0);
  });
});
