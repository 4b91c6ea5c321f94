import { describe, expect, it } from "vitest";
import { planBatchWaits, tuneBatching, tunedBatchWaitMs, tunedBatching, type BatchWaitVariant } from "../../src/index.js";

/**
 * Live SLO-aware batching (batch-wait.ts) on hand-made profiles, the arithmetic in comments.
 *
 * Profile "flat" (a GPU-like curve, as the profiler stores it): T(1) = 50, T(2) = 60, T(4) = 80,
 * T(8) = 120 ms, linear in between (T(b) = 40 + 10b). μnb = 20 qps.
 */
const flat = { "1": 50, "2": 60, "4": 80, "8": 120 };
const v = (o: Partial<BatchWaitVariant> = {}): BatchWaitVariant => ({ name: "m--gpu-fp32-b8-t1", maxBatch: 8, batchWaitMs: 0, profiled: true, profile: { latencyMs: flat }, ...o });

describe("batch-wait", () => {
  it("batch-wait - tunedBatching is tuneBatching on the interpolated profile, capped at the variant's max batch", () => {
    const viaPoints = tunedBatching({ latencyMs: flat, maxBatch: 8 }, 600);
    const viaCurve = tuneBatching({ latencyMs: (b) => 40 + 10 * b, sloMs: 600, maxBatch: 8 });
    expect(viaPoints).toEqual(viaCurve);
    // b = 8: Wbatch = 7 · 120 / 8 = 105, 105 + 120 = 225 ≤ 600 and ≤ 8/μnb = 400 → Nbatch 8, μ* = 8000/120.
    expect(viaPoints).toMatchObject({ nbatch: 8, wbatchMs: 105, throughputQps: 8000 / 120 });
    // Selection's VariantProfile keys are numbers; the same curve.
    expect(tunedBatching({ latencyMs: { 1: 50, 2: 60, 4: 80, 8: 120 }, maxBatch: 8 }, 600)).toEqual(viaCurve);
  });

  const cases: Array<{ name: string; sloMs: number; variant: BatchWaitVariant; want: Array<{ batchWaitMs: number; nbatch: number }> }> = [
    // Loose SLO: as above, Wbatch 105 ms.
    { name: "a loose SLO gives the variant its full Wbatch", sloMs: 600, variant: v(), want: [{ batchWaitMs: 105, nbatch: 8 }] },
    // SLO 200: b = 4: Wbatch = 3·80/4 = 60, 60 + 80 = 140 ≤ 200; b = 5: 4·90/5 = 72, 72 + 90 = 162 ≤ 200;
    // b = 6: 5·100/6 = 83.33, 183.33 ≤ 200; b = 7: 6·110/7 = 94.29, 204.29 > 200 → Nbatch 6, Wbatch 83.33.
    { name: "a tighter SLO binds below the max batch", sloMs: 200, variant: v(), want: [{ batchWaitMs: 83.33, nbatch: 6 }] },
    // SLO 40 < T(1) = 50: the variant cannot serve it; Wbatch 0 (from 30).
    { name: "an SLO under T(1) gives 0", sloMs: 40, variant: v({ batchWaitMs: 30 }), want: [{ batchWaitMs: 0, nbatch: 0 }] },
    // Max batch 1: nothing to wait for.
    { name: "a batch-1 variant keeps 0: no decision", sloMs: 600, variant: v({ name: "m--b1", maxBatch: 1 }), want: [] },
    // Already at its Wbatch (within the 0.01 ms rounding): no decision.
    { name: "an unchanged Wbatch is no decision", sloMs: 600, variant: v({ batchWaitMs: 105.001 }), want: [] },
    // CPU-like linear curve T(b) = 10b: b = 2: Wbatch 10, 10 + 20 = 30 > 2/μnb = 20 → Nbatch 1, Wbatch 0.
    { name: "a linear (CPU-like) curve does not batch", sloMs: 600, variant: v({ batchWaitMs: 5, profile: { latencyMs: { "1": 10, "2": 20, "4": 40, "8": 80 } } }), want: [{ batchWaitMs: 0, nbatch: 1 }] },
    { name: "an unprofiled variant is left alone", sloMs: 600, variant: v({ profiled: false, profile: null }), want: [] },
  ];
  for (const c of cases) {
    it(`batch-wait - ${c.name}`, () => {
      const d = planBatchWaits([c.variant], c.sloMs);
      expect(d.map((x) => ({ batchWaitMs: x.batchWaitMs, nbatch: x.nbatch }))).toEqual(c.want);
      for (const x of d) {
        expect(x.previousMs).toBe(c.variant.batchWaitMs);
        expect(x.reason).toMatch(new RegExp(`^SLO ${c.sloMs} ms: Wbatch `));
        expect(x.batchWaitMs).toBe(tunedBatchWaitMs({ latencyMs: c.variant.profile!.latencyMs, maxBatch: c.variant.maxBatch }, c.sloMs));
      }
    });
  }

  it("batch-wait - the decision says why", () => {
    expect(planBatchWaits([v()], 600)[0]!.reason).toBe(
      "SLO 600 ms: Wbatch 0 → 105 ms; Nbatch 8 of max 8, T(8) = 120 ms, μ* = 66.67 qps (Nbatch = 8; stopped at reached the largest batch 8)",
    );
    expect(planBatchWaits([v({ batchWaitMs: 30 })], 40)[0]!.reason).toBe(
      "SLO 40 ms: Wbatch 30 → 0 ms; T(1) = 50 ms exceeds the SLO of 40 ms: this instance cannot serve the model",
    );
  });

});
