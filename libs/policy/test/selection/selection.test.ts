import { describe, expect, it } from "vitest";
import {
  SelectionIndex,
  costPerQuery,
  createRng,
  selectVariant,
  variantLatencyMs,
  type SelectionDecision,
  type VariantProfile,
  type VariantRuntime,
  type VariantState,
} from "../../src/index.js";

function variant(name: string, o: Partial<VariantProfile> = {}): VariantProfile {
  return {
    name,
    model: "resnet50",
    app: "classify",
    hardware: "cpu",
    batchSize: 1,
    accuracy: 0.76,
    latencyMs: { 1: 100 },
    peakQps: 10,
    loadLatencyMs: 1000,
    pricePerS: 1,
    profiled: true,
    ...o,
  };
}

function rt(state: VariantState, instances = 1, qps = 0, workers: string[] = ["w1"]): VariantRuntime {
  return { state, instances, qps, workers: workers.map((worker) => ({ worker, qps: qps / Math.max(1, workers.length) })) };
}

// Table 2 style catalogue. Cost per query = price / peak QPS:
//   cpu   1 / 5   = 0.2      (200 ms)
//   inf   3 / 100 = 0.03     (20 ms)
//   gpu  16 / 800 = 0.02     (15 ms)
const cpu = variant("cpu", { latencyMs: { 1: 200 }, peakQps: 5, pricePerS: 1, loadLatencyMs: 2000 });
const inf = variant("inf", { hardware: "inferentia", latencyMs: { 1: 20 }, peakQps: 100, pricePerS: 3, loadLatencyMs: 3000 });
const gpu = variant("gpu", { hardware: "gpu", latencyMs: { 1: 15 }, peakQps: 800, pricePerS: 16, loadLatencyMs: 5000 });
const hiAcc = variant("hi-acc", { accuracy: 0.82, latencyMs: { 1: 400 }, peakQps: 4, pricePerS: 2, loadLatencyMs: 4000 });
const unprofiled = variant("unprofiled", { latencyMs: { 1: 1 }, peakQps: 1000, pricePerS: 0.001, profiled: false });
const catalogue = [cpu, inf, gpu, hiAcc, unprofiled];

function summary(d: SelectionDecision): string {
  if (d.kind === "infeasible") return `infeasible:${d.closest?.variant ?? "-"}`;
  if (d.kind === "load") return `load:${d.variant.name}${d.alreadyLoading ? "(loading)" : ""}${d.meanwhile ? `~${d.meanwhile.variant.name}` : ""}`;
  return `active:${d.variant.name}${d.degraded ? "(degraded)" : ""}`;
}

describe("selection", () => {
  const cases: Array<{ name: string; states: Record<string, VariantRuntime>; req: { latencyMs: number; minAccuracy?: number; maxCostPerQuery?: number }; want: string }> = [
    // Active cpu (0.2/query) and gpu (0.02/query) both meet 300 ms: gpu is cheaper per query.
    { name: "cheapest active per query", states: { cpu: rt("active"), gpu: rt("active") }, req: { latencyMs: 300 }, want: "active:gpu" },
    // 50 ms excludes cpu (200 ms); inf (20 ms) is the only active one that meets it.
    { name: "latency filter", states: { cpu: rt("active"), inf: rt("active") }, req: { latencyMs: 50 }, want: "active:inf" },
    // 80% accuracy: only hi-acc (82%); it is inactive → load it.
    { name: "accuracy filter loads the accurate one", states: { cpu: rt("active") }, req: { latencyMs: 1000, minAccuracy: 0.8 }, want: "load:hi-acc" },
    // Max cost 0.025 per query: gpu (0.02) qualifies, inf (0.03) does not.
    { name: "cost filter", states: { inf: rt("active"), gpu: rt("active") }, req: { latencyMs: 300, maxCostPerQuery: 0.025 }, want: "active:gpu" },
    // Nothing active: inactive by load + inference: cpu 2000+200 = 2200 < inf 3000+20 < gpu 5000+15.
    { name: "inactive with lowest load + inference latency", states: {}, req: { latencyMs: 300 }, want: "load:cpu" },
    // 50 ms: cpu excluded; inf 3020 < gpu 5015.
    { name: "inactive respects the SLO", states: {}, req: { latencyMs: 50 }, want: "load:inf" },
    // Overloaded and interfered variants are skipped; inf is inactive → load inf. Its load + inference
    // (3020 ms) cannot answer within 300 ms: the Interfered cpu serves the query meanwhile.
    { name: "overloaded and interfered are not selected", states: { gpu: rt("overloaded"), cpu: rt("interfered") }, req: { latencyMs: 300 }, want: "load:inf~cpu" },
    // A loading variant is preferred over loading another.
    { name: "loading variant preferred", states: { gpu: rt("loading", 0) }, req: { latencyMs: 300 }, want: "load:gpu(loading)" },
    // Every feasible variant loaded but overloaded → queue on the most headroom (ours).
    {
      name: "degraded fallback",
      states: { cpu: rt("overloaded", 1, 6), inf: rt("overloaded", 1, 120), gpu: rt("overloaded", 1, 700), "hi-acc": rt("overloaded", 1, 5) },
      req: { latencyMs: 1000 },
      want: "active:gpu(degraded)",
    },
    // 10 ms: nothing meets it; the closest is gpu (15 ms, 50% over) — not the unprofiled 1 ms one.
    { name: "infeasible names the closest profiled variant", states: {}, req: { latencyMs: 10 }, want: "infeasible:gpu" },
  ];
  for (const c of cases) {
    it(`selection - ${c.name}`, () => {
      const index = new SelectionIndex(catalogue);
      for (const [n, r] of Object.entries(c.states)) index.setRuntime(n, r);
      const got = index.select("classify", c.req);
      expect(summary(got)).toBe(c.want);
      expect(summary(selectVariant("classify", catalogue, new Map(Object.entries(c.states)), c.req))).toBe(c.want);
      expect(got.reason.length).toBeGreaterThan(0);
    });
  }

  it("selection - ties on cost go to the most headroom", () => {
    const a = variant("a", { peakQps: 10, pricePerS: 1 });
    const b = variant("b", { peakQps: 10, pricePerS: 1 });
    const index = new SelectionIndex([a, b]);
    // a: 2 instances × 10 − 15 = 5 QPS headroom; b: 1 × 10 − 2 = 8 → b.
    index.setRuntime("a", rt("active", 2, 15));
    index.setRuntime("b", rt("active", 1, 2));
    expect(summary(index.select("classify", { latencyMs: 500 }))).toBe("active:b");
  });

  it("selection - active decision names the least-loaded worker", () => {
    const index = new SelectionIndex([cpu]);
    index.setRuntime("cpu", { state: "active", instances: 2, qps: 6, workers: [{ worker: "w1", qps: 4 }, { worker: "w2", qps: 2 }] });
    const d = index.select("classify", { latencyMs: 300 });
    expect(d.kind === "active" && d.worker).toBe("w2");
  });

  it("selection - load decision names the lowest-utilised worker of the hardware", () => {
    const index = new SelectionIndex([inf]);
    index.setWorkers([
      { worker: "i1", hardware: "inferentia", utilization: 0.7 },
      { worker: "i2", hardware: "inferentia", utilization: 0.2 },
      { worker: "c1", hardware: "cpu", utilization: 0 },
    ]);
    const d = index.select("classify", { latencyMs: 300 });
    expect(d.kind === "load" && d.worker).toBe("i2");
  });

  it("selection - infeasible reports accuracy and latency of the closest", () => {
    const d = new SelectionIndex(catalogue).select("classify", { latencyMs: 1000, minAccuracy: 0.9 });
    expect(d).toMatchObject({ kind: "infeasible", closest: { variant: "hi-acc", accuracy: 0.82, latency_ms: 400, cost_per_query: 0.5 } });
    expect(d.reason).toContain("closest is hi-acc");
  });

  it("selection - unknown app", () => {
    expect(new SelectionIndex(catalogue).select("nope", { latencyMs: 100 })).toEqual({ kind: "infeasible", closest: null, reason: 'unknown app "nope": no variants registered' });
  });

  it("selection - incremental updates move variants in and out of the active list", () => {
    const index = new SelectionIndex(catalogue);
    index.setRuntime("gpu", rt("active"));
    expect(summary(index.select("classify", { latencyMs: 300 }))).toBe("active:gpu");
    index.setRuntime("gpu", rt("overloaded"));
    index.setRuntime("inf", rt("active"));
    expect(summary(index.select("classify", { latencyMs: 300 }))).toBe("active:inf");
    index.removeVariant("inf");
    expect(summary(index.select("classify", { latencyMs: 300 }))).toBe("load:cpu");
    index.upsertVariant({ ...cpu, pricePerS: 0.01 });
    expect(index.variant("cpu")?.pricePerS).toBe(0.01);
  });

  it("selection - latency at the batch size in use and cost per query", () => {
    // Batch 8 runs at the profiled 8 → 30 ms; batch 3 is padded to 4 → 12 ms.
    expect(variantLatencyMs(variant("b8", { batchSize: 8, latencyMs: { 1: 5, 4: 12, 8: 30 } }))).toBe(30);
    expect(variantLatencyMs(variant("b3", { batchSize: 3, latencyMs: { 1: 5, 4: 12, 8: 30 } }))).toBe(12);
    // 16 / 800 = 0.02; an explicit cost per query wins.
    expect(costPerQuery(gpu)).toBe(0.02);
    expect(costPerQuery({ ...gpu, costPerQuery: 0.5 })).toBe(0.5);
  });

  it("selection - step 2 read as load + inference within the SLO: no load that cannot answer in time", () => {
    // cpu overloaded (the flat-4-QPS burst of infaas-selection), SLO 1000 ms. Inactive: inf 3000 + 20,
    // gpu 5000 + 15, hi-acc 4000 + 400: none loads and answers within 1000 ms.
    const states = { cpu: rt("overloaded", 1, 6) };
    const req = { latencyMs: 1000 };
    for (const [rule, want] of [["inference", "load:inf"], ["load-and-inference", "active:cpu(degraded)"]] as const) {
      const index = new SelectionIndex(catalogue, { inactiveRule: rule });
      index.setRuntime("cpu", states.cpu);
      expect(summary(index.select("classify", req))).toBe(want);
      expect(summary(selectVariant("classify", catalogue, new Map(Object.entries(states)), req, [], { inactiveRule: rule }))).toBe(want);
    }
    // With a 4000 ms SLO inf (3020 ms) fits both readings: loaded either way.
    const loose = new SelectionIndex(catalogue, { inactiveRule: "load-and-inference" });
    loose.setRuntime("cpu", states.cpu);
    expect(summary(loose.select("classify", { latencyMs: 4000 }))).toBe("load:inf");
  });

  it("selection - a load that cannot answer in time names an Interfered variant to serve meanwhile", () => {
    // cpu Interfered, SLO 1000 ms: inf's load + inference is 3000 + 20 = 3020 ms > 1000 ms. inf is
    // still the variant to load (the `inference` reading); the query is served by cpu meanwhile.
    const cases: Array<{ states: Record<string, VariantRuntime>; latencyMs: number; want: string }> = [
      { states: { cpu: rt("interfered", 1, 2) }, latencyMs: 1000, want: "load:inf~cpu" },
      // Already loading: no second load; served by cpu meanwhile.
      { states: { cpu: rt("interfered", 1, 2), inf: rt("loading", 0) }, latencyMs: 1000, want: "load:inf(loading)~cpu" },
      // 4000 ms: inf (3020 ms) answers in time: the query waits for it.
      { states: { cpu: rt("interfered", 1, 2) }, latencyMs: 4000, want: "load:inf" },
      // Overloaded cpu is at its peak: no meanwhile.
      { states: { cpu: rt("overloaded", 1, 6) }, latencyMs: 1000, want: "load:inf" },
    ];
    for (const c of cases) {
      const index = new SelectionIndex(catalogue);
      for (const [n, r] of Object.entries(c.states)) index.setRuntime(n, r);
      const d = index.select("classify", { latencyMs: c.latencyMs });
      expect(summary(d)).toBe(c.want);
      expect(summary(selectVariant("classify", catalogue, new Map(Object.entries(c.states)), { latencyMs: c.latencyMs }))).toBe(c.want);
      if (d.kind === "load" && d.meanwhile) {
        expect(d.meanwhile.worker).toBe("w1");
        expect(d.meanwhile.reason).toBe(`inf cannot load and answer within the SLO (3020 ms > 1000 ms): served meanwhile by Interfered cpu`);
      }
    }
  });

  it("selection - the index agrees with the plain scan on random catalogues", () => {
    const rng = createRng(7);
    const states: VariantState[] = ["inactive", "loading", "active", "overloaded", "interfered"];
    for (let trial = 0; trial < 200; trial++) {
      const vs: VariantProfile[] = [];
      const runtimes = new Map<string, VariantRuntime>();
      for (let i = 0; i < 12; i++) {
        const v = variant(`v${i}`, {
          accuracy: 0.5 + 0.4 * rng.next(),
          latencyMs: { 1: Math.round(5 + 300 * rng.next()) },
          peakQps: Math.round(1 + 200 * rng.next()),
          pricePerS: Math.round(1 + 20 * rng.next()),
          loadLatencyMs: Math.round(500 + 5000 * rng.next()),
          profiled: rng.next() > 0.1,
        });
        vs.push(v);
        runtimes.set(v.name, rt(states[Math.floor(rng.next() * states.length)] ?? "inactive", 1 + Math.floor(rng.next() * 3), Math.round(100 * rng.next())));
      }
      const inactiveRule = trial % 2 === 0 ? "inference" : "load-and-inference";
      const index = new SelectionIndex(vs, { inactiveRule });
      for (const [n, r] of runtimes) index.setRuntime(n, r);
      const req = { latencyMs: Math.round(20 + 3000 * rng.next()), minAccuracy: 0.5 + 0.4 * rng.next() };
      expect(summary(index.select("classify", req))).toBe(summary(selectVariant("classify", vs, runtimes, req, [], { inactiveRule })));
    }
  });

  it("selection - the index agrees with the plain scan at 1000 variants over 100 apps (its speed is in npm run bench)", () => {
    const rng = createRng(3);
    const vs: VariantProfile[] = [];
    for (let a = 0; a < 100; a++) {
      for (let i = 0; i < 10; i++) {
        vs.push(
          variant(`app${a}-v${i}`, {
            app: `app${a}`,
            accuracy: 0.55 + 0.3 * rng.next(),
            latencyMs: { 1: 2 + 400 * rng.next() },
            peakQps: 1 + 500 * rng.next(),
            pricePerS: 0.01 + rng.next(),
          }),
        );
      }
    }
    const index = new SelectionIndex(vs);
    for (const v of vs) if (rng.next() < 0.4) index.setRuntime(v.name, rt(rng.next() < 0.8 ? "active" : "overloaded", 1, 10));
    const reqs = Array.from({ length: 20_000 }, (_, i) => ({ app: `app${i % 100}`, req: { latencyMs: 20 + 300 * rng.next(), minAccuracy: 0.55 + 0.25 * rng.next() } }));
    const runtimes = new Map<string, VariantRuntime>();
    for (const v of vs) runtimes.set(v.name, index.runtime(v.name));
    for (const { app, req } of reqs.slice(0, 2000)) {
      expect(summary(index.select(app, req))).toBe(summary(selectVariant(app, vs.filter((v) => v.app === app), runtimes, req)));
    }
  });
});
