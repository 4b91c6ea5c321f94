import { describe, expect, it } from "vitest";
import { planModelActions, type ModelActionsContext, type VariantProfile, type WorkerRuns } from "../../src/index.js";

// planModelActions keeps what it derives from the catalog between calls with the same catalog array
// (the simulator passes one every tick). These calls reuse one array and change it between them, and
// must decide as a call given a fresh copy of the catalog does.
const v = (name: string, o: Partial<VariantProfile>): VariantProfile => ({
  name, model: "digits", app: "digits", hardware: "cpu", batchSize: 1, accuracy: 0.9,
  latencyMs: { 1: 50 }, peakQps: 20, loadLatencyMs: 2000, pricePerS: 1, profiled: true, ...o,
});
const worker = (qps: number, free: Record<string, number>): WorkerRuns => ({
  name: "w1", kind: "cpu", atMs: 0, seenAtMs: 0, utilisation: 0.5, free, variants: { d1: { ready: 1, loading: 0, arrivalsQps: qps } },
});
const decide = (ctx: ModelActionsContext): string[] =>
  planModelActions(ctx).actions.map((a) => (a.kind === "decision" ? `${a.decision.action} ${"variant" in a.decision ? a.decision.variant : a.decision.model}` : `${a.kind} ${a.variant}`));

describe("model-actions catalog reuse", () => {
  it("model-actions - a variant changed in place between calls is seen", () => {
    const catalog = [v("d1", { resources: { threads: 1 } }), v("d8", { batchSize: 8, latencyMs: { 1: 40, 8: 80 }, peakQps: 100, pricePerS: 2, resources: { threads: 2 } })];
    const ctx = (): ModelActionsContext => ({ nowMs: 0, workers: [worker(30, { threads: 8 })], catalog, sloMsByModel: { digits: 1000 } });
    const before = decide(ctx());
    expect(before).toEqual(decide({ ...ctx(), catalog: structuredClone(catalog) }));
    // d1 made dearer than an upgrade to d8: the same array, the same objects, one field changed.
    (catalog[0] as { pricePerS: number }).pricePerS = 10;
    const after = decide(ctx());
    expect(after).toEqual(decide({ ...ctx(), catalog: structuredClone(catalog) }));
    expect(after).not.toEqual(before);
    // Its resources changed in place: d8 no longer fits the worker, the upgrade goes elsewhere.
    (catalog[1]?.resources as Record<string, number>).threads = 16;
    const moved = decide(ctx());
    expect(moved).toEqual(decide({ ...ctx(), catalog: structuredClone(catalog) }));
    expect(moved).not.toEqual(after);
  });

  it("model-actions - a frozen catalog (checked without comparing its fields) decides as a fresh copy; a getter is still read", () => {
    const d1 = Object.freeze(v("d1", { resources: Object.freeze({ threads: 1 }) }));
    const d8 = Object.freeze(v("d8", { batchSize: 8, latencyMs: { 1: 40, 8: 80 }, peakQps: 100, pricePerS: 2, resources: Object.freeze({ threads: 2 }) }));
    const catalog = [d1, d8];
    for (const qps of [30, 5, 30, 90]) {
      const ctx: ModelActionsContext = { nowMs: 0, workers: [worker(qps, { threads: 8 })], catalog, sloMsByModel: { digits: 1000 } };
      expect(decide(ctx)).toEqual(decide({ ...ctx, catalog: structuredClone(catalog) }));
    }
    // Frozen, but its price a getter: not taken as unchangeable.
    let price = 1;
    const base = v("g1", { resources: Object.freeze({ threads: 1 }) });
    const g1 = Object.freeze(Object.defineProperty({ ...base }, "pricePerS", { get: () => price, enumerable: true })) as VariantProfile;
    const withGetter = [g1, d8];
    const ctx = (): ModelActionsContext => ({ nowMs: 0, workers: [{ ...worker(30, { threads: 8 }), variants: { g1: { ready: 1, loading: 0, arrivalsQps: 30 } } }], catalog: withGetter, sloMsByModel: { digits: 1000 } });
    const before = decide(ctx());
    price = 10;
    const after = decide(ctx());
    expect(after).toEqual(decide({ ...ctx(), catalog: [{ ...base, pricePerS: 10 }, d8] }));
    expect(after).not.toEqual(before);
  });

  it("model-actions - the kinds that can be launched are read at every call", () => {
    const catalog = [v("d1", { resources: { threads: 1 } }), v("g8", { hardware: "gpu", batchSize: 8, latencyMs: { 1: 5, 8: 10 }, peakQps: 800, pricePerS: 0.5, resources: { accelerators: 1 } })];
    const ctx = (launchableKinds: string[]): ModelActionsContext => ({ nowMs: 0, workers: [worker(30, { threads: 8 })], catalog, sloMsByModel: { digits: 1000 }, launchableKinds });
    const without = decide(ctx([]));
    const withGpu = decide(ctx(["gpu"]));
    expect(without).toEqual(decide({ ...ctx([]), catalog: structuredClone(catalog) }));
    expect(withGpu).toEqual(decide({ ...ctx(["gpu"]), catalog: structuredClone(catalog) }));
    expect(withGpu).not.toEqual(without);
    expect(decide(ctx([]))).toEqual(without);
  });
});
