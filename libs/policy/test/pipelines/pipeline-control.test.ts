import { describe, expect, it } from "vitest";
import { pipelineSpecSchema, type PipelineSpecInput, type VariantRecord } from "@sloserve/contracts";
import {
  pipelineFloors,
  pipelineSloCheck,
  planDeployment,
  planningModel,
  scaleFactors,
  spreadArrivals,
  stageHardware,
  stageShares,
  variantPricePerSecond,
} from "../../src/index.js";

/**
 * The pipeline controller's pure half (pipeline-control.ts): specs and variant records in, the
 * Planner's inputs and its answer as variants, floors and arrival times out.
 */

const spec = (o: Partial<PipelineSpecInput> = {}) =>
  pipelineSpecSchema.parse({
    name: "cascade",
    slo: { p99_ms: 200 },
    params: { threshold: 0.9 },
    stages: [{ name: "fast", model: "mlp" }, { name: "accurate", model: "cnn" }],
    edges: [{ from: "fast", to: "accurate", when: { output: "probabilities", op: "<", value: "$threshold" }, expected_share: 0.24 }],
    ...o,
  });

/** A profiled variant record, as the registrar and the profiler write them. */
function variant(model: string, maxBatch: number, threads: number, latencyMs: Record<number, number>, o: Partial<VariantRecord> = {}): VariantRecord {
  return {
    name: `${model}--cpu-fp32-b${maxBatch}-t${threads}`, model, app: "digits", hardware: "cpu", maxBatch, batchWaitMs: 0, quantization: "fp32", threads,
    object: `model/${model}.onnx`, accuracy: 0.9, profiled: true,
    profile: {
      loadLatencyMs: 50, latencyMs: Object.fromEntries(Object.entries(latencyMs).map(([b, ms]) => [b, ms])), peakQps: (1000 * maxBatch) / latencyMs[maxBatch]!,
      memoryBytes: 1e7, accuracy: 0.9, sampleShape: {}, worker: "w", profiledAtMs: 0,
    },
    ...o,
  };
}
// Batch latencies measured at 1, 2, 4, 8 (the profiler's powers of two); variants exist at b1 and b8.
const MLP = { 1: 0.1, 2: 0.12, 4: 0.16, 8: 0.24 };
const CNN = { 1: 0.4, 2: 0.6, 4: 1, 8: 1.8 };
const catalog: Record<string, VariantRecord[]> = {
  mlp: [variant("mlp", 1, 1, MLP), variant("mlp", 8, 1, MLP)],
  cnn: [variant("cnn", 1, 1, CNN), variant("cnn", 8, 1, CNN)],
};
const of = (m: string): VariantRecord[] => catalog[m] ?? [];

describe("pipeline-control", () => {
  it("pipeline-control - shares: the spec's expected shares until the counts hold enough queries", () => {
    // 50 counted queries < 100: the spec's 0.24.
    expect(stageShares(spec(), { queries: 50, visits: { fast: 50, accurate: 40 } })).toEqual({ visitShare: { fast: 1, accurate: 0.24 }, itemsPerVisit: { fast: 1, accurate: 1 }, source: "spec" });
    // 200 queries, 60 reached accurate: v = 60 / 200 = 0.3; items = visits → k = 1.
    expect(stageShares(spec(), { queries: 200, visits: { fast: 200, accurate: 60 }, items: { fast: 200, accurate: 60 } })).toEqual({ visitShare: { fast: 1, accurate: 0.3 }, itemsPerVisit: { fast: 1, accurate: 1 }, source: "counts" });
  });

  it("pipeline-control - the planning pipeline: model stages, contracted through steps and apps; p(edge) = v_child / v_parent; s = v·k", () => {
    const s = spec({
      stages: [
        { name: "pre", step: "split-rows" },
        { name: "fast", model: "mlp", inputs: { input: "pre.x" } },
        { name: "post", step: "argmax", inputs: { x: "fast.probabilities" } },
        { name: "accurate", model: "cnn", inputs: { input: "pre.x" } },
        { name: "other", app: "digits", inputs: { input: "pre.x" } },
      ],
      edges: [
        { from: "pre", to: "fast" },
        { from: "fast", to: "post", when: { output: "probabilities", op: "<", value: "$threshold" } },
        { from: "post", to: "accurate" },
        { from: "fast", to: "other" },
      ],
    });
    // 1000 queries; 400 reached post and accurate, with 1200 items at accurate (3 per visit).
    const counts = { queries: 1000, visits: { pre: 1000, fast: 1000, post: 400, accurate: 400, other: 1000 }, items: { pre: 1000, fast: 1000, post: 400, accurate: 1200, other: 1000 } };
    const m = planningModel(s, of, counts);
    // fast → accurate through the step post: p = 0.4 / 1 = 0.4.
    expect(m.pipeline).toEqual({ name: "cascade", models: ["fast", "accurate"], edges: [{ from: "fast", to: "accurate", probability: 0.4 }] });
    expect(scaleFactors(m.pipeline)).toEqual({ fast: 1, accurate: 0.4 });
    // s_accurate = 0.4 visits × 3 items = 1.2.
    expect(m.scaleFactor.fast).toBe(1);
    expect(m.scaleFactor.accurate).toBeCloseTo(1.2, 12);
    expect(m.unplanned).toEqual({ pre: "step split-rows: runs in the dispatcher", post: "step argmax: runs in the dispatcher", other: "app digits: a model-less stage, scaled by INFaaS" });
    expect(m.problems).toEqual([]);
    // accurate is profiled in queries: b queries carry 3b items, T_q(1) = T(3) = 0.6 + (1 − 0.6)·1/2 = 0.8 ms.
    expect(m.profiles.accurate![0]!.batchLatencyMs[0]).toEqual([1, 0.8]);
  });

  it("pipeline-control - stage hardware: one option per (kind, threads) of profiled fp32 variants, its variants by max batch", () => {
    const vs = [
      variant("mlp", 1, 1, MLP), variant("mlp", 8, 1, MLP),
      variant("mlp", 1, 2, { 1: 0.08, 2: 0.09 }),
      variant("mlp", 1, 1, MLP, { name: "mlp--cpu-int8-b1-t1", quantization: "int8" }),
      variant("mlp", 16, 1, MLP, { name: "mlp--cpu-fp32-b16-t1", profiled: false, profile: null }),
    ];
    const { options, variantOf } = stageHardware(vs, 1, "median");
    expect(options).toEqual([
      { hardware: "cpu-fp32-t1", pricePerHour: variantPricePerSecond("cpu", 1) * 3600, batchLatencyMs: [[1, 0.1], [2, 0.12], [4, 0.16], [8, 0.24]], batchSizes: [1, 8] },
      { hardware: "cpu-fp32-t2", pricePerHour: variantPricePerSecond("cpu", 2) * 3600, batchLatencyMs: [[1, 0.08], [2, 0.09]], batchSizes: [1] },
    ]);
    expect(variantOf).toEqual({ "cpu-fp32-t1": { 1: "mlp--cpu-fp32-b1-t1", 8: "mlp--cpu-fp32-b8-t1" }, "cpu-fp32-t2": { 1: "mlp--cpu-fp32-b1-t2" } });
    // Two items per visit: batch sizes in queries ⌊1/2⌋ → 1 and 8/2 = 4; T_q(1) = T(2) = 0.12, T_q(4) = T(8) = 0.24;
    // one query's 2 items need the b8 variant (the smallest max batch ≥ 2).
    const two = stageHardware(vs.slice(0, 2), 2, "median");
    expect(two.options[0]).toMatchObject({ batchLatencyMs: [[1, 0.12], [4, 0.24]], batchSizes: [1, 4] });
    expect(two.variantOf["cpu-fp32-t1"]).toEqual({ 1: "mlp--cpu-fp32-b8-t1", 4: "mlp--cpu-fp32-b8-t1" });
    // The tail where the profile has it.
    const tail = variant("mlp", 1, 1, { 1: 0.1 });
    tail.profile!.latencyP99Ms = { 1: 0.5 };
    expect(stageHardware([tail], 1, "p99").options[0]!.batchLatencyMs).toEqual([[1, 0.5]]);
    expect(stageHardware([tail], 1, "median").options[0]!.batchLatencyMs).toEqual([[1, 0.1]]);
    // Only the kinds asked for.
    expect(stageHardware(vs, 1, "median", ["gpu"]).options).toEqual([]);
  });

  it("pipeline-control - Algorithm 1 at registration: the stage that cannot fit, by stage and model; nothing to say before profiles", () => {
    // Fastest at batch 1: fast 0.1 ms, accurate 0.4 ms → 0.5 ms > 0.45 ms; neither alone exceeds it.
    const tight = spec({ slo: { p99_ms: 0.45 } });
    const check = pipelineSloCheck(tight, planningModel(tight, of));
    expect(check?.feasible).toBe(false);
    expect(check?.reason).toBe("pipeline cascade: service time 0.5 ms at batch 1 on the fastest hardware exceeds the SLO of 0.45 ms on the path fast → accurate: the slowest on it is stage accurate (model cnn) (0.4 ms on cpu-fp32-t1); the path takes fast 0.1 ms + accurate 0.4 ms");
    // 0.4 ms alone > 0.3 ms.
    const tighter = spec({ slo: { p99_ms: 0.3 } });
    expect(pipelineSloCheck(tighter, planningModel(tighter, of))?.reason).toContain("stage accurate (model cnn) cannot fit: it alone takes 0.4 ms on cpu-fp32-t1, its fastest hardware at batch 1");
    expect(pipelineSloCheck(spec(), planningModel(spec(), of))?.feasible).toBe(true);
    // cnn not profiled yet: no verdict; the model says why.
    const waiting = planningModel(spec(), (m) => (m === "cnn" ? [] : of(m)));
    expect(pipelineSloCheck(spec(), waiting)).toBeUndefined();
    expect(waiting.problems).toEqual(["stage accurate (model cnn) has no profiled fp32 variant yet"]);
    expect(planDeployment({ spec: spec(), model: waiting, arrivalsMs: new Float64Array(0), seed: 1 })).toMatchObject({ feasible: false, reason: "pipeline cascade cannot be planned yet: stage accurate (model cnn) has no profiled fp32 variant yet" });
  });

  it("pipeline-control - a plan as variants, the Tuner's plan, and floors", () => {
    // 20 qps evenly for 60 s; sub-millisecond stages: one replica each; IncreaseBatch keeps the cost and
    // goes b1 → b8 (the only other variant) on both.
    const arrivalsMs = Float64Array.from({ length: 1200 }, (_, i) => 50 * i);
    const d = planDeployment({ spec: spec(), model: planningModel(spec(), of), arrivalsMs, seed: 1 });
    expect(d.feasible).toBe(true);
    expect(d.stages).toEqual({
      fast: { model: "mlp", variant: "mlp--cpu-fp32-b8-t1", hardware: "cpu-fp32-t1", maxBatch: 8, replicas: 1, scaleFactor: 1 },
      accurate: { model: "cnn", variant: "cnn--cpu-fp32-b8-t1", hardware: "cpu-fp32-t1", maxBatch: 8, replicas: 1, scaleFactor: 0.24 },
    });
    expect(d.tunerPlan?.plannedQps).toBeCloseTo(20, 6);
    expect(d.reason).toMatch(/^planned for 20\.0 qps: fast 1× mlp--cpu-fp32-b8-t1, accurate 1× cnn--cpu-fp32-b8-t1; estimated P99 0\.\d ms ≤ SLO 200 ms/);
    expect(pipelineFloors("cascade", d.stages, "plan")).toEqual([
      { variant: "mlp--cpu-fp32-b8-t1", count: 1, owner: "pipeline-cascade", reason: "pipeline cascade stage fast: plan, 1 replica" },
      { variant: "cnn--cpu-fp32-b8-t1", count: 1, owner: "pipeline-cascade", reason: "pipeline cascade stage accurate: plan, 1 replica" },
    ]);
  });

  it("pipeline-control - arrivals spread evenly over each report window", () => {
    // 2 queries in (1000, 2000]: at 1250 and 1750; 1 in (1500, 2500]: at 2000.
    expect(Array.from(spreadArrivals([{ endMs: 2000, ms: 1000, count: 2 }, { endMs: 2500, ms: 1000, count: 1 }]))).toEqual([1250, 1750, 2000]);
  });
});
