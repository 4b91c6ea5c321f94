import { describe, expect, it } from "vitest";
import { cheapestMix, type VariantProfile } from "../../src/index.js";

// INFaaS Table 2 (NUMBERS.md): A 200 ms / 5 QPS / 1; B 20 ms / 100 QPS / 3; C 15 ms / 800 QPS / 16.
const v = (name: string, latency: number, qps: number, cost: number): VariantProfile => ({
  name, model: "resnet50", app: "classify", hardware: "x", batchSize: 1, accuracy: 0.76,
  latencyMs: { 1: latency }, peakQps: qps, loadLatencyMs: 1000, pricePerS: cost, profiled: true,
});
const table2 = [v("A", 200, 5, 1), v("B", 20, 100, 3), v("C", 15, 800, 16)];

describe("mix-optimizer", () => {
  const cases = [
    // 2×A = 2 beats 1×B = 3 and 1×C = 16.
    { qps: 10, slo: 300, mix: [{ variant: "A", count: 2 }], cost: 2 },
    // A (200 ms) misses 50 ms; 1×B = 3 beats 1×C = 16.
    { qps: 10, slo: 50, mix: [{ variant: "B", count: 1 }], cost: 3 },
    // 2×B + 1×C = 6 + 16 = 22 (capacity 1000) beats 10×B = 30, 2×C = 32, 1×C + 40×A = 56.
    { qps: 1000, slo: 300, mix: [{ variant: "B", count: 2 }, { variant: "C", count: 1 }], cost: 22 },
  ];
  for (const c of cases) {
    it(`mix-optimizer - INFaaS Table 3: ${c.qps} QPS at ${c.slo} ms`, () => {
      const r = cheapestMix(table2, { loadQps: c.qps, sloMs: c.slo });
      expect(r.feasible).toBe(true);
      if (!r.feasible) return;
      expect(r.mix).toEqual(c.mix);
      expect(r.costPerS).toBe(c.cost);
    });
  }

  it("mix-optimizer - slack raises the target", () => {
    // 10 × 1.05 = 10.5 QPS: 3×A = 3 ties 1×B = 3; fewer instances wins → 1×B.
    const r = cheapestMix(table2, { loadQps: 10, sloMs: 300, slack: 1.05 });
    expect(r.feasible && r.mix).toEqual([{ variant: "B", count: 1 }]);
  });

  it("mix-optimizer - instance limits (resources)", () => {
    // At most 1 B: 1000 QPS → 1×C (800) + 1×B (100) + 20×A (100) = 16 + 3 + 20 = 39 vs 2×C = 32 → 2×C.
    const r = cheapestMix(table2, { loadQps: 1000, sloMs: 300, maxInstances: { B: 1 } });
    expect(r.feasible && r.mix).toEqual([{ variant: "C", count: 2 }]);
    expect(r.feasible && r.costPerS).toBe(32);
  });

  it("mix-optimizer - accuracy filter and infeasible cases", () => {
    expect(cheapestMix(table2, { loadQps: 10, sloMs: 10 })).toMatchObject({ feasible: false, reason: "no variant meets latency ≤ 10 ms and accuracy ≥ 0" });
    expect(cheapestMix(table2, { loadQps: 10, sloMs: 300, minAccuracy: 0.9 }).feasible).toBe(false);
    expect(cheapestMix(table2, { loadQps: 2000, sloMs: 300, maxInstances: { A: 0, B: 1, C: 1 } })).toMatchObject({ feasible: false });
    expect(cheapestMix(table2, { loadQps: 0, sloMs: 300 })).toMatchObject({ feasible: true, mix: [], costPerS: 0 });
  });

  it("mix-optimizer - matches brute force on small random instances", () => {
    let seed = 11;
    const rand = (): number => ((seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648);
    for (let t = 0; t < 100; t++) {
      const vs = [0, 1, 2].map((i) => v(`v${i}`, 10, 1 + Math.floor(rand() * 50), 1 + Math.floor(rand() * 20)));
      const load = 1 + Math.floor(rand() * 120);
      let best = Infinity;
      for (let a = 0; a <= load; a++) for (let b = 0; b <= load; b++) for (let c = 0; c <= load; c++) {
        const cap = a * vs[0]!.peakQps + b * vs[1]!.peakQps + c * vs[2]!.peakQps;
        if (cap >= load) { best = Math.min(best, a * vs[0]!.pricePerS + b * vs[1]!.pricePerS + c * vs[2]!.pricePerS); break; }
      }
      const r = cheapestMix(vs, { loadQps: load, sloMs: 100 });
      expect(r.feasible && r.costPerS).toBe(best);
    }
  });
});
