import { describe, expect, it } from "vitest";
import { batchWaitMs, interpolateBatchLatency, tuneBatching } from "../../src/batching/batch-tuning.js";

describe("batch-tuning", () => {
  it("batch-tuning - interpolates between profiled points and extrapolates past the last", () => {
    const t = interpolateBatchLatency([[8, 24], [1, 10], [2, 12], [4, 16]]);
    expect(t(1)).toBe(10);
    expect(t(3)).toBe(14); // 12 + (16 - 12) · (3 - 2) / (4 - 2)
    expect(t(6)).toBe(20); // 16 + (24 - 16) · 2 / 4
    expect(t(16)).toBe(40); // 24 + (24 - 16) · (16 - 8) / (8 - 4)
    expect(t(0.5)).toBe(10); // clamps below the first point
  });

  it("batch-tuning - rejects a profile with a repeated batch size", () => {
    expect(() => interpolateBatchLatency([[1, 5], [1, 6]])).toThrow("batch latency profile: batch size 1 appears twice");
  });

  const cases: Array<{ name: string; t: (b: number) => number; slo: number; max?: number; nbatch: number; wbatch: number; qps: number }> = [
    // CPU, T(b) = 100·b. b = 2: Wbatch = 1·200/2 = 100, 100 + 200 = 300 > 2/μnb = 200 ms → Nbatch 1.
    { name: "linear CPU curve gains nothing: no batching", t: (b) => 100 * b, slo: 600, nbatch: 1, wbatch: 0, qps: 10 },
    // GPU, T(b) = 40 + 10b, μnb = 1000/50 = 20 qps. Wbatch + T = (40 + 10b)(2b − 1)/b:
    // b = 26: 300·51/26 = 588.5 ≤ 600; b = 27: 310·53/27 = 608.5 > 600 → Nbatch 26, Wbatch = 25·300/26 = 288.5,
    // μ* = 26·1000/300 = 86.7 qps.
    { name: "flat GPU curve grows until the SLO binds", t: (b) => 40 + 10 * b, slo: 600, nbatch: 26, wbatch: (25 * 300) / 26, qps: 26000 / 300 },
    // Same curve, runtime limit 16: T(16) = 200, Wbatch = 15·200/16 = 187.5, μ* = 16000/200 = 80 qps.
    { name: "runtime batch limit caps Nbatch", t: (b) => 40 + 10 * b, slo: 600, max: 16, nbatch: 16, wbatch: 187.5, qps: 80 },
    // T(1) = 700 > 600 → cannot serve.
    { name: "batch of one over the SLO: infeasible", t: (b) => 700 * b, slo: 600, nbatch: 0, wbatch: 0, qps: 0 },
  ];
  for (const c of cases) {
    it(`batch-tuning - ${c.name}`, () => {
      const r = tuneBatching({ latencyMs: c.t, sloMs: c.slo, ...(c.max ? { maxBatch: c.max } : {}) });
      expect(r.nbatch).toBe(c.nbatch);
      expect(r.wbatchMs).toBeCloseTo(c.wbatch, 9);
      expect(r.throughputQps).toBeCloseTo(c.qps, 9);
      expect(r.reason.length).toBeGreaterThan(0);
    });
  }

  it("batch-tuning - the stopping reason names the violated constraint", () => {
    // T(b) = 100b: b = 2: Wbatch 100 + T 200 = 300 > 2/μnb = 200 (does not pay); b = 3: 200 + 300 = 500 > 300;
    // b = 4: 300 + 400 = 700 > SLO 600: the bound.
    expect(tuneBatching({ latencyMs: (b) => 100 * b, sloMs: 600 }).reason).toBe(
      "Nbatch = 1; batching does not pay from b = 2 (Wbatch + T(b) = 300 ms > b/μnb = 200 ms) to the SLO bound (b = 4: Wbatch + T(b) = 700 ms > SLO 600 ms)",
    );
    expect(tuneBatching({ latencyMs: (b) => 40 + 10 * b, sloMs: 600 }).reason).toBe("Nbatch = 26; stopped at b = 27: Wbatch + T(b) = 608.5 ms > SLO 600 ms");
    expect(tuneBatching({ latencyMs: (b) => 700 * b, sloMs: 600 }).reason).toBe(
      "T(1) = 700 ms exceeds the SLO of 600 ms: this instance cannot serve the model",
    );
  });

  it("batch-tuning - a batch size where batching does not pay does not hide a larger one where it does", () => {
    // A measured CPU curve: batch 1 runs on a faster path (T(1) = 5), T(2) = 15, T(4) = 16, T(8) = 20 ms.
    // b = 2: Wbatch 7.5 + 15 = 22.5 > 2 × 5 = 10: does not pay (MArk's greedy rule would stop here, Nbatch 1);
    // b = 4: 12 + 16 = 28 > 20: does not pay; b = 5: Wbatch 4·17/5 = 13.6, 13.6 + 17 = 30.6 > 25;
    // b = 6: 5·18/6 = 15, 33 ≤ 30? no (33 > 30); b = 7: 6·19/7 = 16.29, 35.29 ≤ 35? no;
    // b = 8: 7·20/8 = 17.5, 37.5 ≤ 40: pays → Nbatch 8, Wbatch 17.5, μ* = 8000/20 = 400 qps.
    const t = interpolateBatchLatency([[1, 5], [2, 15], [4, 16], [8, 20]]);
    const r = tuneBatching({ latencyMs: t, sloMs: 1000, maxBatch: 8 });
    expect(r).toMatchObject({ nbatch: 8, wbatchMs: 17.5, throughputQps: 400 });
    expect(r.reason).toBe("Nbatch = 8; stopped at reached the largest batch 8");
    // Capped at 4, nothing pays: no batching, and the reason says up to where it looked.
    expect(tuneBatching({ latencyMs: t, sloMs: 1000, maxBatch: 4 }).reason).toBe(
      "Nbatch = 1; batching does not pay from b = 2 (Wbatch + T(b) = 22.5 ms > b/μnb = 10 ms) to the largest batch 4",
    );
  });

  it("batch-tuning - concurrency scales both rates", () => {
    // Two batches at once: μnb = 2·1000/100 = 20 qps; with T(b) = 100b no batching → μ* = 20 qps.
    const r = tuneBatching({ latencyMs: (b) => 100 * b, sloMs: 600, concurrency: 2 });
    expect(r.unbatchedQps).toBe(20);
    expect(r.throughputQps).toBe(20);
    expect(batchWaitMs((b) => 40 + 10 * b, 4)).toBe(60); // 3 · 80 / 4
  });
});
