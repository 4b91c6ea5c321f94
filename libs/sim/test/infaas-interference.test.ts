import { describe, expect, it } from "vitest";
import { runAblations, runSharing, sharingWorkload, timeSlicedSlowdown } from "../src/scenarios/infaas-interference.js";

describe("infaas interference (§6.3) and §6.2's ablations", () => {
  it("infaas interference - the simulated GPU slows a small model beside a busy large one, not the reverse", () => {
    const cases: Array<{ own: number; others: Array<{ busy: number; latencyMs: number }>; want: number }> = [
      { own: 1, others: [], want: 1 },
      { own: 1, others: [{ busy: 0.5, latencyMs: 4 }], want: 3 },
      { own: 4, others: [{ busy: 0.5, latencyMs: 1 }], want: 1.125 },
      { own: 4, others: [{ busy: 1, latencyMs: 4 }], want: 2 }, // two busy instances of one model: half speed each
      { own: 4, others: [{ busy: 1.7, latencyMs: 4 }], want: 2 }, // busy is a fraction of the time
    ];
    for (const c of cases) expect(timeSlicedSlowdown(c.own, c.others)).toBeCloseTo(c.want, 9);
  });

  it("infaas interference - INFaaS shares one GPU at low load, adds the second on contention, and costs less than Clipper+ at no lower SLO attainment", () => {
    // Reduced: the deterministic 50 → 500 → 50 QPS rise and fall, 160 s.
    const workload = sharingWorkload({ seed: 3, durationS: 160 });
    const clipper = runSharing({ seed: 3, system: "clipper+", workload });
    const infaas = runSharing({ seed: 3, system: "infaas", workload });
    // Clipper+ holds two GPUs throughout; INFaaS starts on one and never exceeds two.
    expect(clipper.gpus.every((n) => n === 2)).toBe(true);
    expect(infaas.gpus[0]).toBe(1);
    expect(Math.max(...infaas.gpus)).toBe(2);
    const added = infaas.events.find((e) => e.source === "vm-autoscaler" && e.action === "add gpu");
    expect(added?.reason).toMatch(/interfered|overloaded/);
    // The small model is marked Interfered beside the large one on the shared GPU; Clipper+ keeps them apart.
    expect(infaas.firstInterferedMs["mobilenet-v1"]).not.toBeNull();
    expect(clipper.firstInterferedMs["mobilenet-v1"]).toBeNull();
    // Cheaper, at an SLO attainment at least Clipper+'s (whose one GPU for the large model is too small at the peak).
    expect(infaas.result.costDollars).toBeLessThan(clipper.result.costDollars);
    expect(infaas.result.sloAttainment).toBeGreaterThanOrEqual(clipper.result.sloAttainment);
    expect(clipper.result.byApp["inception-resnet-v2"]?.sloAttainment ?? 1).toBeLessThan(0.99);
  });

  it("infaas interference - §6.2 ablations: INFaaS without Inferentia still beats the GPU baselines, and the baselines with Inferentia still cost more than INFaaS", () => {
    const runs = runAblations({ seed: 1 });
    const cost = (s: string): number => {
      const r = runs.find((x) => x.system === s);
      if (!r) throw new Error(`no run ${s}`);
      return r.result.costDollars;
    };
    expect(cost("infaas")).toBeLessThan(cost("infaas (CPU+GPU only)"));
    expect(cost("infaas (CPU+GPU only)")).toBeLessThan(Math.min(cost("clipper+-gpu"), cost("sm+-gpu")));
    expect(cost("infaas")).toBeLessThan(Math.min(cost("clipper+-inf"), cost("sm+-inf")));
    // The Inferentia baselines cost less than the GPU ones (the cheaper accelerator), more than INFaaS.
    expect(Math.max(cost("clipper+-inf"), cost("sm+-inf"))).toBeLessThan(Math.min(cost("clipper+-gpu"), cost("sm+-gpu")));
  });
});
