import { describe, expect, it } from "vitest";
import {
  PENDING_LOAD_WINDOW_MS,
  RELIEF_MAX_UTILISATION,
  SelectionIndex,
  isLoadPending,
  modelQueryCandidates,
  needsRelief,
  routeCandidate,
  routeModelQuery,
  selectForApp,
  type AppDispatchDecision,
  type LoadPlacement,
  type LoadRequest,
  type QueryRequirements,
  type RoutableVariant,
  type VariantDispatchView,
  type VariantProfile,
  type VariantRuntime,
  type VariantState,
} from "../../src/index.js";

// c5.xlarge (the CPU instance type): $0.17/h = 0.17 / 3600 = 4.7222e-5 $/s.
// p3.2xlarge (GPU): $3.06/h = 8.5e-4 $/s.
const CPU_PER_S = 0.17 / 3600;
const GPU_PER_S = 3.06 / 3600;

describe("dispatch - pending loads", () => {
  const cases: Array<{ askedAtMs: number | undefined; nowMs: number; want: boolean; why: string }> = [
    { askedAtMs: undefined, nowMs: 0, want: false, why: "never asked" },
    { askedAtMs: 1_000, nowMs: 1_000, want: true, why: "asked just now: 0 < 60 000" },
    { askedAtMs: 1_000, nowMs: 60_999, want: true, why: "60 999 − 1 000 = 59 999 < 60 000" },
    { askedAtMs: 1_000, nowMs: 61_000, want: false, why: "61 000 − 1 000 = 60 000: the window is over" },
    { askedAtMs: 1_000, nowMs: 500, want: true, why: "a clock that went back counts as within the window" },
  ];
  for (const c of cases) {
    it(`dispatch - pending load: ${c.why}`, () => {
      expect(isLoadPending(c.askedAtMs, c.nowMs)).toBe(c.want);
    });
  }
  it("dispatch - the window is a minute", () => {
    expect(PENDING_LOAD_WINDOW_MS).toBe(60_000);
  });
});

function rv(name: string, o: Partial<RoutableVariant> = {}): RoutableVariant {
  return { name, hardware: "cpu", quantization: "fp32", maxBatch: 1, profiled: true, profile: { peakQps: 100 }, ...o };
}

function view(o: Partial<VariantDispatchView> = {}): VariantDispatchView {
  return { active: 0, overloaded: 0, interfered: 0, loading: 0, arrivalsPerS: 0, queueLength: 0, loadAskedAtMs: undefined, hardwareAvailable: true, ...o };
}

describe("dispatch - model query candidates", () => {
  it("dispatch - a candidate counts Overloaded and Interfered instances as serving, a pending load as loading", () => {
    // 2 active + 1 overloaded + 1 interfered = 4 serving; 1 loading + 1 pending (asked 10 s ago) = 2.
    const c = routeCandidate(rv("a"), view({ active: 2, overloaded: 1, interfered: 1, loading: 1, loadAskedAtMs: 0, arrivalsPerS: 7, queueLength: 3 }), 10_000);
    expect(c).toEqual({
      variant: "a",
      hardware: "cpu",
      activeInstances: 4,
      loadingInstances: 2,
      arrivalsPerS: 7,
      queueLength: 3,
      costPerQuery: CPU_PER_S / 100, // 4.7222e-5 / 100 QPS
      hardwareAvailable: true,
      selectable: true,
    });
    // 70 s after the ask the pending load no longer counts: 1 loading.
    expect(routeCandidate(rv("a"), view({ loading: 1, loadAskedAtMs: 0 }), 70_000).loadingInstances).toBe(1);
  });

  const costs: Array<{ v: RoutableVariant; want: number; why: string }> = [
    { v: rv("cpu-b8", { profile: { peakQps: 400 } }), want: CPU_PER_S / 400, why: "profiled: price / peak QPS = 4.7222e-5 / 400" },
    { v: rv("cpu-b8-new", { maxBatch: 8, profiled: false, profile: null }), want: CPU_PER_S / 8, why: "unprofiled CPU: price / max batch = 4.7222e-5 / 8" },
    { v: rv("gpu", { hardware: "gpu", profile: { peakQps: 1000 } }), want: GPU_PER_S / 1000, why: "GPU: 8.5e-4 / 1000" },
  ];
  for (const c of costs) {
    it(`dispatch - cost per query, ${c.why}`, () => {
      expect(routeCandidate(c.v, view(), 0).costPerQuery).toBeCloseTo(c.want, 15);
    });
  }

  it("dispatch - unprofiled accelerator variants are not selectable; unprofiled CPU ones are", () => {
    expect(routeCandidate(rv("g", { hardware: "gpu", profiled: false, profile: null }), view(), 0).selectable).toBe(false);
    expect(routeCandidate(rv("c", { profiled: false, profile: null }), view(), 0).selectable).toBe(true);
  });

  // The whole model-specific path: candidates, then routeModelQuery.
  const routes: Array<{ name: string; variants: RoutableVariant[]; views: Record<string, Partial<VariantDispatchView>>; nowMs?: number; want: string }> = [
    {
      // a: (10 + 0) / 1 = 10 per instance; b: (4 + 2) / 2 = 3 per instance → b.
      name: "the least-loaded active variant",
      variants: [rv("a"), rv("b")],
      views: { a: { active: 1, arrivalsPerS: 10 }, b: { active: 2, arrivalsPerS: 4, queueLength: 2 } },
      want: "active:b",
    },
    {
      // The int8 variant is idle (0 per instance) but changes the model's accuracy: not a candidate.
      name: "int8 variants are not candidates",
      variants: [rv("fp"), rv("q8", { quantization: "int8" })],
      views: { fp: { active: 1, arrivalsPerS: 10 }, q8: { active: 1 } },
      want: "active:fp",
    },
    {
      // Only an int8 variant runs: the fp32 one is loaded instead (cheapest fp32 with a live worker).
      name: "only int8 running: the fp32 variant is loaded",
      variants: [rv("fp"), rv("q8", { quantization: "int8", profile: { peakQps: 1000 } })],
      views: { q8: { active: 1 } },
      want: "load:fp",
    },
    {
      // Asked 30 s ago: 30 000 < 60 000, the query waits for that load instead of asking again.
      name: "a load asked within the window counts as loading",
      variants: [rv("a")],
      views: { a: { loadAskedAtMs: 0 } },
      nowMs: 30_000,
      want: "loading:a",
    },
    {
      // Asked 60 s ago: 60 000 − 0 = 60 000, no longer pending → ask again.
      name: "after the window the load is asked again",
      variants: [rv("a")],
      views: { a: { loadAskedAtMs: 0 } },
      nowMs: 60_000,
      want: "load:a",
    },
    {
      // b8: 4.7e-5 / 400 beats b1: 4.7e-5 / 100 → load the cheaper per query.
      name: "nothing running: load the cheapest per query",
      variants: [rv("b1"), rv("b8", { maxBatch: 8, profile: { peakQps: 400 } })],
      views: {},
      want: "load:b8",
    },
    {
      name: "no live worker of the hardware",
      variants: [rv("g", { hardware: "gpu" })],
      views: { g: { hardwareAvailable: false } },
      want: "none",
    },
  ];
  for (const c of routes) {
    it(`dispatch - model query: ${c.name}`, () => {
      const seen: string[] = [];
      const candidates = modelQueryCandidates(
        c.variants,
        (v) => {
          seen.push(v.name);
          return view(c.views[v.name]);
        },
        c.nowMs ?? 0,
      );
      const d = routeModelQuery(candidates);
      expect(d.kind === "none" ? "none" : `${d.kind}:${d.variant}`).toBe(c.want);
      // int8 variants are not even looked at.
      expect(seen).toEqual(c.variants.filter((v) => v.quantization === "fp32").map((v) => v.name));
    });
  }
});

function variant(name: string, o: Partial<VariantProfile> = {}): VariantProfile {
  return { name, model: name, app: "classify", hardware: "cpu", batchSize: 1, accuracy: 0.8, latencyMs: { 1: 50 }, peakQps: 10, loadLatencyMs: 500, pricePerS: 1, profiled: true, ...o };
}

function rt(state: VariantState, instances = 1, qps = 0): VariantRuntime {
  return { state, instances, qps, workers: instances > 0 ? [{ worker: "w1", qps }] : [] };
}

// Cost per query = price / peak QPS:
//   cheap   1 / 20 = 0.05   (50 ms, accuracy 0.80, load 500 ms)
//   mid     1 / 10 = 0.10   (50 ms, accuracy 0.80)
//   slow    1 / 10 = 0.10   (400 ms)
//   precise 4 / 10 = 0.40   (50 ms, accuracy 0.95)
const cheap = variant("cheap", { peakQps: 20 });
const mid = variant("mid");
const slow = variant("slow", { latencyMs: { 1: 400 } });
const precise = variant("precise", { accuracy: 0.95, pricePerS: 4 });
const catalogue = [cheap, mid, slow, precise];

type Placer = (v: VariantProfile, load: LoadRequest) => LoadPlacement;
const placed: Placer = (v) => ({ outcome: "placed", reason: `on w1` });
const refused: Placer = () => ({ outcome: "refused", reason: "no live cpu worker" });
const deferred: Placer = () => ({ outcome: "deferred", reason: "asked the VM autoscaler" });

function summary(d: AppDispatchDecision): string {
  if (d.kind === "route") return `${d.via}:${d.variant.name}${d.load ? `(${d.load.outcome})` : ""}`;
  return d.kind;
}

describe("dispatch - model-less selection and its load", () => {
  const cases: Array<{ name: string; states: Record<string, VariantRuntime>; req: QueryRequirements; place: Placer; want: string; wantPlaced: string[]; relief?: boolean }> = [
    // cheap is active and meets 100 ms: no load asked.
    { name: "an active variant: no load", states: { cheap: rt("active") }, req: { latencyMs: 100 }, place: placed, want: "active:cheap", wantPlaced: [] },
    // Nothing active: load cheap (cheapest meeting; 500 + 50 = 550 ms ≤ 1000 ms SLO).
    { name: "nothing active: the load is placed", states: {}, req: { latencyMs: 1000 }, place: placed, want: "load:cheap(placed)", wantPlaced: ["cheap"] },
    // A variant already loading is waited for; nothing more is placed.
    { name: "a loading variant: no second load", states: { mid: rt("loading", 0) }, req: { latencyMs: 100 }, place: placed, want: "loading:mid", wantPlaced: [] },
    // Nothing loaded, the load refused, nothing to fall back to → no capacity (not infeasible).
    { name: "the load refused and nothing loaded: no capacity", states: {}, req: { latencyMs: 1000 }, place: refused, want: "no-capacity", wantPlaced: ["cheap"] },
    // mid is overloaded (relief): cheap's load refused → queue on mid (degraded), the loaded one.
    {
      name: "the load refused: falls back to a loaded variant",
      states: { mid: rt("overloaded", 1, 12) },
      req: { latencyMs: 100 },
      place: refused,
      want: "degraded:mid(refused)",
      wantPlaced: ["cheap"],
      relief: true,
    },
    // A first load deferred to new capacity (the simulator's VM autoscaler) holds the query.
    { name: "a first load deferred: the query waits for it", states: {}, req: { latencyMs: 1000 }, place: deferred, want: "load:cheap(deferred)", wantPlaced: ["cheap"] },
    // A relief load deferred does not: a loaded variant serves sooner than a machine that boots.
    {
      name: "a relief load deferred: falls back to the loaded variant",
      states: { mid: rt("interfered", 1, 3) },
      req: { latencyMs: 100 },
      place: deferred,
      want: "degraded:mid(deferred)",
      wantPlaced: ["cheap"],
      relief: true,
    },
    // 10 ms: nothing meets it; no load is asked; the closest is named.
    { name: "infeasible: no load asked", states: {}, req: { latencyMs: 10 }, place: placed, want: "infeasible", wantPlaced: [] },
    // mid Interfered, SLO 520 ms: cheap's load (500 + 50 = 550 ms) cannot answer in time. The load is
    // placed for the queries after this one; this one is served by mid meanwhile.
    {
      name: "a load that cannot answer in time, mid Interfered: placed, and the query served by mid meanwhile",
      states: { mid: rt("interfered", 1, 3) },
      req: { latencyMs: 520 },
      place: placed,
      want: "degraded:mid(placed)",
      wantPlaced: ["cheap"],
      relief: true,
    },
    // The same with a 1000 ms SLO: the load (550 ms) answers in time, so the query waits for it.
    { name: "a load that answers in time, mid Interfered: the query waits for it", states: { mid: rt("interfered", 1, 3) }, req: { latencyMs: 1000 }, place: placed, want: "load:cheap(placed)", wantPlaced: ["cheap"], relief: true },
    // cheap already loading, mid Interfered, 520 ms: no second load, the query served by mid.
    { name: "a load under way that cannot answer in time: served by the Interfered variant", states: { cheap: rt("loading", 0), mid: rt("interfered", 1, 3) }, req: { latencyMs: 520 }, place: placed, want: "degraded:mid", wantPlaced: [] },
    // mid Overloaded (at its peak): the query waits for the load as before (it would only lengthen mid's queue).
    { name: "a load that cannot answer in time, mid Overloaded: the query waits for the load", states: { mid: rt("overloaded", 1, 12) }, req: { latencyMs: 520 }, place: placed, want: "load:cheap(placed)", wantPlaced: ["cheap"], relief: true },
  ];
  for (const c of cases) {
    it(`dispatch - app query: ${c.name}`, () => {
      const index = new SelectionIndex(catalogue);
      for (const [n, r] of Object.entries(c.states)) index.setRuntime(n, r);
      const asked: LoadRequest[] = [];
      const names: string[] = [];
      const d = selectForApp(index, "classify", c.req, 5_000, (v, load) => {
        names.push(v.name);
        asked.push(load);
        return c.place(v, load);
      });
      expect(summary(d)).toBe(c.want);
      expect(names).toEqual(c.wantPlaced);
      for (const load of asked) {
        expect(load.nowMs).toBe(5_000);
        expect(load.relief).toBe(c.relief ?? false);
        // Relief loads: no worker over 80% busy, no oversubscription; first loads: anywhere.
        expect(load.maxUtilisation).toBe(c.relief ? RELIEF_MAX_UTILISATION : undefined);
        expect(load.allowOversubscription).toBe(!c.relief);
        expect(load.reason).toMatch(/^model-less query for classify: /);
      }
      expect(d.reason.length).toBeGreaterThan(0);
    });
  }

  it("dispatch - no capacity says which load could not be placed and why", () => {
    const index = new SelectionIndex(catalogue);
    const d = selectForApp(index, "classify", { latencyMs: 1000 }, 0, refused);
    expect(d).toEqual({
      kind: "no-capacity",
      reason: "app 'classify' has variants that meet the requirements, but none is loaded and no worker can load one now: cannot place cheap: no live cpu worker",
    });
  });

  it("dispatch - a refused relief load says relief loads avoid busy workers", () => {
    const index = new SelectionIndex(catalogue);
    // Only precise (95%) meets 0.9 accuracy and it is not loaded; cheap's overload makes its load a
    // relief load. Refused, and nothing loaded meets the query: no capacity.
    index.setRuntime("cheap", rt("overloaded", 1, 30));
    const d = selectForApp(index, "classify", { latencyMs: 100, minAccuracy: 0.9 }, 0, () => ({ outcome: "refused", reason: "every live cpu worker is over 80% busy" }));
    expect(summary(d)).toBe("no-capacity");
    expect(d.reason).toContain("cannot place precise: every live cpu worker is over 80% busy (relief loads avoid workers over 80% busy)");
  });

  it("dispatch - infeasible names the closest variant", () => {
    // 10 ms: every variant is over; cheap, mid and precise are 50 ms (400% over), slow 400 ms.
    // Ties on shortfall go to the cheapest per query: cheap (0.05).
    const d = selectForApp(new SelectionIndex(catalogue), "classify", { latencyMs: 10 }, 0, placed);
    expect(d).toMatchObject({ kind: "infeasible", closest: { variant: "cheap", accuracy: 0.8, latency_ms: 50, cost_per_query: 0.05 } });
  });

  it("dispatch - the load is placed on the worker selection suggests, when it knows the workers", () => {
    const index = new SelectionIndex(catalogue);
    index.setWorkers([
      { worker: "w1", hardware: "cpu", utilization: 0.6 },
      { worker: "w2", hardware: "cpu", utilization: 0.1 },
    ]);
    let suggested: string | undefined;
    selectForApp(index, "classify", { latencyMs: 1000 }, 0, (_v, load) => {
      suggested = load.suggestedWorker;
      return { outcome: "placed", reason: "ok" };
    });
    expect(suggested).toBe("w2");
  });

  const relief: Array<{ states: Record<string, VariantRuntime>; want: boolean }> = [
    { states: {}, want: false },
    { states: { mid: rt("active") }, want: false },
    { states: { mid: rt("loading", 0) }, want: false },
    { states: { mid: rt("overloaded") }, want: true },
    { states: { slow: rt("interfered") }, want: true },
  ];
  for (const c of relief) {
    it(`dispatch - relief needed with ${JSON.stringify(Object.fromEntries(Object.entries(c.states).map(([k, v]) => [k, v.state])))}: ${c.want}`, () => {
      const index = new SelectionIndex(catalogue);
      for (const [n, r] of Object.entries(c.states)) index.setRuntime(n, r);
      expect(needsRelief(index, "classify")).toBe(c.want);
    });
  }
});
