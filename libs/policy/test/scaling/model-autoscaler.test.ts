import { describe, expect, it } from "vitest";
import { modelAutoscale, scalingCost, type ModelAutoscalerContext, type ModelAutoscalerState, type VariantProfile } from "../../src/index.js";

// INFaaS §6.2 ResNet50 variants with normalised prices per second; λ = 0.1 /s (the default).
const v = (name: string, o: Partial<VariantProfile>): VariantProfile => ({
  name, model: "resnet50", app: "classify", hardware: "cpu", batchSize: 1, accuracy: 0.76,
  latencyMs: { 1: 100 }, peakQps: 10, loadLatencyMs: 1000, pricePerS: 1, profiled: true, ...o,
});
const A = v("A", { latencyMs: { 1: 200 }, peakQps: 5, loadLatencyMs: 2000, pricePerS: 0.031, resources: { cores: 4 } });
const B = v("B", { hardware: "inferentia", latencyMs: { 1: 20 }, peakQps: 100, loadLatencyMs: 3000, pricePerS: 0.19, resources: { neuronCores: 1 } });
const G8 = v("G8", { hardware: "gpu", batchSize: 8, latencyMs: { 1: 3, 8: 10 }, peakQps: 800, loadLatencyMs: 5000, pricePerS: 0.498, resources: { gpus: 1 } });
const catalog = [A, B, G8];
const roomy = { cores: 16, neuronCores: 4, gpus: 1 };

function ctx(running: Array<[VariantProfile, number, number, number?]>, o: Partial<ModelAutoscalerContext> = {}): ModelAutoscalerContext {
  return {
    nowMs: 0,
    worker: { name: "w1", free: roomy },
    running: running.map(([variant, instances, loadQps, loading]) => ({ variant, instances, loadQps, loading: loading ?? 0 })),
    catalog,
    sloMsByModel: { resnet50: 300 },
    ...o,
  };
}

const brief = (c: ModelAutoscalerContext): string[] =>
  modelAutoscale(c).decisions.map((d) => (d.action === "hold" ? "hold" : `${d.action} ${d.variant} ×${d.count}${"remove" in d && d.remove.length ? ` -${d.remove.map((r) => `${r.variant}×${r.count}`).join(",")}` : ""}`));

describe("model-autoscaler", () => {
  it("model-autoscaler - ILP cost C·(δ + λ·T_load·max(δ, 0))", () => {
    // 0.031 × (4 + 0.1 × 2 × 4) = 0.031 × 4.8 = 0.1488
    expect(scalingCost(A, 4, 0.1)).toBeCloseTo(0.1488, 10);
    // removing: 0.19 × (−1) = −0.19, no loading term
    expect(scalingCost(B, -1, 0.1)).toBeCloseTo(-0.19, 10);
  });

  const cases: Array<{ name: string; c: ModelAutoscalerContext; want: string[] }> = [
    // 5 / 4 = 1.25 ≥ 1.05; one instance is the minimum; B would cost 0.19·1.3 − 0.031 > 0.
    { name: "enough headroom: nothing", c: ctx([[A, 1, 4]]), want: [] },
    // target 20 × 1.05 = 21, capacity 5. Replicate ⌈16/5⌉ = 4: 0.031·4·1.2 = 0.149;
    // upgrade B×1: 0.19·1.3 − 0.031 = 0.216; G8×1: 0.498·1.5 − 0.031 = 0.716 → replicate.
    { name: "replicate when cheaper", c: ctx([[A, 1, 20]]), want: ["replicate A ×4"] },
    // target 84. Replicate ⌈79/5⌉ = 16: 0.031·16·1.2 = 0.595; upgrade B×1: 0.216 → upgrade.
    { name: "upgrade when cheaper", c: ctx([[A, 1, 80]]), want: ["upgrade B ×1 -A×1"] },
    // target 682.5. Replicate 136: 5.06; B×7: 0.19·7·1.3 − 0.031 = 1.698; G8×1: 0.716 → G8 (INFaaS picks batch-8 GPU).
    { name: "650 QPS upgrades to the batch-8 GPU variant", c: ctx([[A, 1, 650]]), want: ["upgrade G8 ×1 -A×1"] },
    // replicate 4 needs 16 cores; only 8 free → 2 here, 2 elsewhere.
    { name: "replicas that do not fit go elsewhere", c: ctx([[A, 1, 20]], { worker: { name: "w1", free: { cores: 8 } } }), want: ["replicate A ×2", "place-elsewhere A ×2"] },
    // Upgrade B chosen but the worker has no NeuronCores at all.
    { name: "upgrade to hardware the worker lacks goes elsewhere", c: ctx([[A, 1, 80]], { worker: { name: "w1", free: { cores: 16 } } }), want: ["place-elsewhere B ×1 -A×1"] },
    // Capacity 10 (one loaded, one loading) < 21: wait for the loading one.
    { name: "hold while an instance is loading", c: ctx([[A, 1, 20, 1]]), want: ["hold"] },
    // Horizontal only (SM+): 80 QPS → ⌈79/5⌉ = 16 replicas; 16 × 4 cores = 64 > 16 free → 4 here, 12 elsewhere.
    { name: "horizontal only never upgrades", c: ctx([[A, 1, 80]], { config: { allowVertical: false } }), want: ["replicate A ×4", "place-elsewhere A ×12"] },
    // New instances must meet the SLO (constraint 2): at 10 ms, B (20 ms) may not even replicate
    // (which would cost 0.19·2·1.3 = 0.494 < G8's 0.498·1.5 − 0.19 = 0.557); only G8 (10 ms) qualifies.
    { name: "candidates meet the SLO", c: ctx([[B, 1, 200]], { sloMsByModel: { resnet50: 10 } }), want: ["upgrade G8 ×1 -B×1"] },
  ];
  for (const c of cases) {
    it(`model-autoscaler - ${c.name}`, () => {
      expect(brief(c.c)).toEqual(c.want);
    });
  }

  it("model-autoscaler - an upgrade may use the resources of the instances it replaces", () => {
    // One CPU worker with 2 cores, both held: A1 (1 core, peak 100) and an unrelated variant.
    // Load 150 > 100: upgrade to A8 (1 core, peak 600) fits only by reusing A1's core.
    const A1 = v("A1", { latencyMs: { 1: 8 }, peakQps: 100, loadLatencyMs: 200, pricePerS: 1, resources: { cores: 1 } });
    const A8 = v("A8", { batchSize: 8, latencyMs: { 8: 13 }, peakQps: 600, loadLatencyMs: 200, pricePerS: 1, resources: { cores: 1 } });
    const c = ctx([[A1, 1, 150]], { worker: { name: "w1", free: { cores: 0 } }, catalog: [A1, A8] });
    expect(brief(c)).toEqual(["upgrade A8 ×1 -A1×1"]);
  });

  it("model-autoscaler - reasons explain the choice", () => {
    const d = modelAutoscale(ctx([[A, 1, 80]])).decisions[0];
    expect(d?.reason).toContain("headroom 0.06 < slack 1.05 (load 80 QPS, capacity 5 QPS)");
    expect(d?.reason).toContain("upgrade to B ×1 costs 0.216");
    expect(d?.reason).toContain("replicate A ×16 costs 0.595");
  });

  it("model-autoscaler - downgrade only after the load allowed it for T_v", () => {
    // B at 4 QPS: downgrade to A×1 costs 0.031·1.2 − 0.19 = −0.153 < 0; T_v = B's load latency 3 s.
    let state: ModelAutoscalerState = { downSinceMs: {} };
    const seen: string[] = [];
    for (const [t, load] of [[0, 4], [1000, 4], [2000, 50], [3000, 4], [4000, 4], [5000, 4], [6000, 4]] as const) {
      const r = modelAutoscale(ctx([[B, 1, load]], { nowMs: t, state }));
      state = r.state;
      seen.push(r.decisions.map((d) => (d.action === "hold" ? "hold" : `${d.action} ${d.variant}`)).join(",") || "-");
    }
    // 50 QPS at 2 s resets the clock (A cannot hold 52.5 QPS for less than B costs), so 3 s → 6 s.
    expect(seen).toEqual(["hold", "hold", "-", "hold", "hold", "hold", "downgrade A"]);
  });

  it("model-autoscaler - remove one replica after T_v", () => {
    // 3 × A = 15 QPS for 4 QPS: 10 ≥ 4.2 after removing one (−0.031); T_v = 2 s.
    const first = modelAutoscale(ctx([[A, 3, 4]], { nowMs: 10_000 }));
    expect(first.decisions[0]?.action).toBe("hold");
    expect(first.decisions[0]?.reason).toContain("allowed for 0 s of T_v = 2 s");
    const later = modelAutoscale(ctx([[A, 3, 4]], { nowMs: 12_000, state: first.state }));
    expect(later.decisions.map((d) => d.action)).toEqual(["remove"]);
  });

  it("model-autoscaler - models are scaled independently", () => {
    const M = v("M", { model: "mobilenet", peakQps: 10, pricePerS: 0.01, resources: { cores: 1 } });
    const r = modelAutoscale(ctx([[A, 1, 20], [M, 1, 30]], { catalog: [...catalog, M], sloMsByModel: { resnet50: 300, mobilenet: 300 } }));
    // mobilenet first: target 31.5, capacity 10 → ⌈21.5/10⌉ = 3 replicas, 3 cores.
    // resnet50: 4 replicas × 4 cores = 16 > 16 − 3 = 13 free → 3 here, 1 elsewhere.
    expect(r.decisions.map((d) => `${d.model}:${d.action}${"count" in d ? ` ×${d.count}` : ""}`)).toEqual(["mobilenet:replicate ×3", "resnet50:replicate ×3", "resnet50:place-elsewhere ×1"]);
  });
});
