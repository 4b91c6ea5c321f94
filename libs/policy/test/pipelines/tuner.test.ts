import { describe, expect, it } from "vitest";
import type { Pipeline, ProfileSet } from "../../src/pipelines/pipeline.js";
import { envelopeWindows, initialTunerState, makeTunerPlan, trafficEnvelope, tunerStep, type TunerState } from "../../src/pipelines/tuner.js";

const one: Pipeline = { name: "one", models: ["m"], edges: [] };
// T(4) = 40 ms → μ = 4/0.04 = 100 qps per replica.
const profiles: ProfileSet = { m: [{ hardware: "gpu", pricePerHour: 1, batchLatencyMs: [[1, 25], [4, 40]] }] };
const evenly = (qps: number, fromMs: number, toMs: number): number[] => {
  const out: number[] = [];
  for (let t = fromMs; t < toMs; t += 1000 / qps) out.push(t);
  return out;
};

describe("tuner", () => {
  it("tuner - windows double from the service time up to 60 s", () => {
    expect(envelopeWindows(50, 400)).toEqual([50, 100, 200, 400]);
    expect(envelopeWindows(40)).toHaveLength(11); // 40 · 2^10 = 40 960 ≤ 60 000 < 81 920
  });

  it("tuner - envelope is the busiest window of each width", () => {
    const a = [0, 10, 20, 100, 105, 110, 115];
    // 10 ms: (100,110] holds 105, 110 → 2/0.01 s = 200 qps; 20 ms: (95,115] holds 4 → 200; 100 ms: (15,115] holds 5 → 50.
    expect(trafficEnvelope(a, [10, 20, 100])).toEqual([200, 200, 50]);
    expect(trafficEnvelope(a, [100], 100)).toEqual([40]); // only 100..115 counted: 4 / 0.1 s
  });

  it("tuner - the plan carries μ, ρ and the planning envelope", () => {
    // 100 qps evenly for 70 s on 2 replicas of 100 qps: ρ = 100 / (2 · 100) = 0.5.
    const plan = makeTunerPlan(one, profiles, { m: { hardware: "gpu", maxBatch: 4, replicas: 2 } }, evenly(100, 0, 70_000));
    expect(plan.models.m!.replicaQps).toBe(100);
    expect(plan.models.m!.rho).toBeCloseTo(0.5, 3);
    expect(plan.minRho).toBe(plan.models.m!.rho);
    expect(plan.plannedEnvelopeQps[0]).toBeCloseTo(100, 6); // 4 arrivals in any (t − 40, t]
    // A 10 s planning trace caps the windows at 10 s.
    const short = makeTunerPlan(one, profiles, { m: { hardware: "gpu", maxBatch: 4, replicas: 2 } }, evenly(100, 0, 10_000));
    expect(Math.max(...short.windowsMs)).toBeLessThanOrEqual(10_000);
  });

  const plan = makeTunerPlan(one, profiles, { m: { hardware: "gpu", maxBatch: 4, replicas: 2 } }, evenly(100, 0, 70_000));

  it("tuner - scales up at once when the rate exceeds the planned envelope", () => {
    // Live 200 qps: r_max ≈ 200 → k = ⌈200 · 1 / (100 · 0.5)⌉ = 4.
    const d = tunerStep({ nowMs: 60_000, recentArrivalsMs: evenly(200, 0, 60_000), plan, state: initialTunerState(plan) });
    expect(d.changed).toBe(true);
    expect(d.state.replicas).toEqual({ m: 4 });
    expect(d.state.lastChangeMs).toBe(60_000);
  });

  it("tuner - a burst at a short time scale is caught by a short window", () => {
    // Planned traffic plus 30 extra queries within 30 ms at t = 59.9 s: the 40 ms window sees ≥ 33 queries → ≥ 825 qps.
    const burst = [...evenly(100, 0, 60_000), ...Array.from({ length: 30 }, (_, i) => 59_900 + i)].sort((x, y) => x - y);
    const d = tunerStep({ nowMs: 60_000, recentArrivalsMs: burst, plan, state: initialTunerState(plan) });
    expect(d.changed).toBe(true);
    expect(d.reason.startsWith("envelope at 0.040 s")).toBe(true);
    expect(d.state.replicas.m).toBeGreaterThanOrEqual(17); // ⌈825 / 50⌉
  });

  it("tuner - scales down only after 15 s quiet, to the 30 s max rate at ρ = min ρ_m", () => {
    const state: TunerState = { replicas: { m: 6 }, lastChangeMs: 0 };
    const live = evenly(100, 0, 60_000);
    expect(tunerStep({ nowMs: 10_000, recentArrivalsMs: live.filter((t) => t < 10_000), plan, state }).changed).toBe(false);
    // λ_new = 100 → k = ⌈100 / (100 · 0.5)⌉ = 2.
    const d = tunerStep({ nowMs: 60_000, recentArrivalsMs: live, plan, state });
    expect(d.state.replicas).toEqual({ m: 2 });
    expect(d.reason).toBe("λ_new 100.0 qps: m 6→2");
  });
});

describe("tuner options", () => {
  const plan = makeTunerPlan(one, profiles, { m: { hardware: "gpu", maxBatch: 4, replicas: 2 } }, evenly(100, 0, 70_000));

  it("tuner - the relative rule scales the planned load by the worst exceedance", () => {
    // 30 extra queries within 30 ms: paper rule provisions for the 40 ms-window rate (≥ 825 qps → ≥ 17 replicas);
    // relative: 100 qps × (33 / 4) = 825 qps as well at the shortest window — the two agree when the plan is flat,
    const burst = [...evenly(100, 0, 60_000), ...Array.from({ length: 30 }, (_, i) => 59_900 + i)].sort((x, y) => x - y);
    const paper = tunerStep({ nowMs: 60_000, recentArrivalsMs: burst, plan, state: initialTunerState(plan) });
    const rel = tunerStep({ nowMs: 60_000, recentArrivalsMs: burst, plan, state: initialTunerState(plan) }, { scaleUpRule: "relative" });
    expect(rel.state.replicas.m).toBeLessThanOrEqual(paper.state.replicas.m!);
    expect(rel.state.replicas.m).toBeGreaterThan(2);
    // …and differ for a burstier plan: at 200 qps live the relative rule asks for 100 · 2 = 200 qps → ⌈200 / 50⌉ = 4.
    const rate = tunerStep({ nowMs: 60_000, recentArrivalsMs: evenly(200, 0, 60_000), plan, state: initialTunerState(plan) }, { scaleUpRule: "relative" });
    expect(rate.state.replicas.m).toBe(4);
  });

  it("tuner - min-replicated ignores one-replica models when scaling down", () => {
    const two: Pipeline = { name: "two", models: ["m", "cheap"], edges: [{ from: "m", to: "cheap" }] };
    const prof: ProfileSet = { ...profiles, cheap: [{ hardware: "cpu", pricePerHour: 0.1, batchLatencyMs: [[1, 1], [4, 1]] }] };
    // cheap: μ = 4000 qps, one replica → ρ = 100/4000 = 0.025; m: ρ = 0.5.
    const p = makeTunerPlan(two, prof, { m: { hardware: "gpu", maxBatch: 4, replicas: 2 }, cheap: { hardware: "cpu", maxBatch: 4, replicas: 1 } }, evenly(100, 0, 70_000));
    expect(p.minRho).toBeCloseTo(0.025, 3);
    expect(p.minRhoReplicated).toBeCloseTo(0.5, 3);
    const state = { replicas: { m: 6, cheap: 1 }, lastChangeMs: 0 };
    // ρ_p = 0.025: ⌈100 / (100 · 0.025)⌉ = 40 > 6 → no scale-down; with 0.5 → 2.
    expect(tunerStep({ nowMs: 60_000, recentArrivalsMs: evenly(100, 0, 60_000), plan: p, state }).changed).toBe(false);
    expect(tunerStep({ nowMs: 60_000, recentArrivalsMs: evenly(100, 0, 60_000), plan: p, state }, { scaleDownRho: "min-replicated" }).state.replicas.m).toBe(2);
  });

  it("tuner - a scale-down never goes below what the scale-up rule asks for the current envelope (no flapping)", () => {
    // Planned 100 qps on 2 replicas (μ·ρ = 50 qps each). Live: 200 qps from 0 to 20 s, then 100 qps. At
    // t = 55 s the 30 s look-back (25-55 s) sees 100 qps → λ_new asks ⌈100 / 50⌉ = 2; but the envelope,
    // counted from t − 40.96 s (its longest window) = 14.04 s, still holds 200 qps at every window up to
    // 5.12 s → the scale-up rule asks ⌈200 / 50⌉ = 4: no change (the paper's rule alone would go 4 → 2 at
    // 55 s and back to 4 at 56 s). At 62 s the burst is older than 40.96 s: 4 → 2.
    const live = [...evenly(200, 0, 20_000), ...evenly(100, 20_000, 62_000)];
    const state: TunerState = { replicas: { m: 4 }, lastChangeMs: 0 };
    const at55 = tunerStep({ nowMs: 55_000, recentArrivalsMs: live.filter((t) => t < 55_000), plan, state });
    expect(at55).toEqual({ state, changed: false, reason: "λ_new 100.0 qps: no model over-provisioned" });
    const at62 = tunerStep({ nowMs: 62_000, recentArrivalsMs: live, plan, state });
    expect(at62.state.replicas).toEqual({ m: 2 });
    expect(at62.reason).toBe("λ_new 100.0 qps: m 4→2");
  });
});
