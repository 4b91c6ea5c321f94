import { describe, expect, it } from "vitest";
import { chooseWorker, PACK_BELOW_UTILISATION, planModelActions, type PlacementRequest, type VariantProfile, type WorkerRuns, type WorkerView } from "../../src/index.js";

const w = (worker: string, utilisation: number, extra: Partial<WorkerView> = {}): WorkerView => ({
  worker, hardware: "cpu", utilisation, threads: 4, threadsUsed: 0, variants: [], seenAtMs: 0, ...extra,
});
const pack: PlacementRequest = { variant: "v", hardware: "cpu", threads: 1, packBelow: PACK_BELOW_UTILISATION };

describe("placement - bin packing (INFaaS §4.2.3)", () => {
  const cases: Array<{ name: string; workers: WorkerView[]; request?: Partial<PlacementRequest>; want: string | undefined }> = [
    { name: "the busiest worker under 80%, not the idle one", workers: [w("idle", 0), w("half", 0.5), w("busy", 0.7)], want: "busy" },
    { name: "without packBelow it spreads to the least utilised", workers: [w("idle", 0), w("half", 0.5), w("busy", 0.7)], request: { packBelow: undefined }, want: "idle" },
    { name: "a worker at 80% or more is not packed onto: the busiest under it", workers: [w("idle", 0), w("full", 0.8), w("half", 0.5)], want: "half" },
    { name: "every worker at 80% or more: spread (the least utilised)", workers: [w("a", 0.95), w("b", 0.85)], want: "b" },
    { name: "at equal utilisation, the one holding more instances (an idle worker stays idle)", workers: [w("empty", 0), w("holds", 0, { variants: ["x", "y"] })], want: "holds" },
    { name: "`instances` counts before the variant list", workers: [w("one", 0, { variants: ["x"], instances: 1 }), w("three", 0, { variants: ["y"], instances: 3 })], want: "three" },
    { name: "a worker without room is not packed onto (no oversubscription)", workers: [w("full", 0.6, { threadsUsed: 4 }), w("idle", 0)], want: "idle" },
    { name: "by resources: room for the instance counts", workers: [w("busy", 0.6, { free: { threads: 0 } }), w("some", 0.3, { free: { threads: 2 } }), w("idle", 0, { free: { threads: 4 } })], request: { resources: { threads: 1 } }, want: "some" },
    { name: "a cap on utilisation still applies", workers: [w("busy", 0.7), w("idle", 0)], request: { maxUtilisation: 0.6 }, want: "idle" },
    { name: "a lower threshold packs less", workers: [w("busy", 0.7), w("idle", 0)], request: { packBelow: 0.5 }, want: "idle" },
  ];
  for (const c of cases) {
    it(`placement - packing: ${c.name}`, () => {
      const request: PlacementRequest = { ...pack, ...(c.request ?? {}) };
      if (c.request && "packBelow" in c.request && c.request.packBelow === undefined) delete request.packBelow;
      expect(chooseWorker(c.workers, request, 0).worker).toBe(c.want);
    });
  }

  it("placement - packing says why", () => {
    expect(chooseWorker([w("idle", 0), w("busy", 0.7, { variants: ["x"] })], pack, 0).reason).toBe("bin packing: the busiest cpu worker with room under 80% busy (70% busy, 1 instance(s))");
    expect(chooseWorker([w("a", 0.95), w("b", 0.85)], pack, 0).reason).toBe("lowest-utilised cpu worker (85% busy, 0 variants); every one with room is 80% busy or more, so not packing");
  });
});

describe("placement - bin packing in the model autoscaler's placements elsewhere", () => {
  // d1: 20 QPS, one thread. w1 is full (1 thread) at 30 QPS → one more d1 elsewhere: w2 (40% busy,
  // room) with packing, w3 (idle) without.
  const D1: VariantProfile = { name: "d1", model: "digits", app: "digits", hardware: "cpu", batchSize: 1, accuracy: 0.9, latencyMs: { 1: 50 }, peakQps: 20, loadLatencyMs: 2000, pricePerS: 1, profiled: true, resources: { threads: 1 } };
  const runs = (name: string, utilisation: number, free: number, d1: number, qps: number): WorkerRuns => ({
    name, kind: "cpu", atMs: 1000, seenAtMs: 1000, utilisation, free: { threads: free }, variants: d1 > 0 ? { d1: { ready: d1, loading: 0, arrivalsQps: qps } } : {},
  });
  const workers = [runs("w1", 0.9, 0, 1, 30), runs("w2", 0.4, 3, 1, 8), runs("w3", 0, 4, 0, 0)];
  const addOn = (packBelowUtilisation: number | undefined): string[] =>
    planModelActions({ nowMs: 1000, workers, catalog: [D1], sloMsByModel: {}, ...(packBelowUtilisation !== undefined ? { packBelowUtilisation } : {}) })
      .actions.filter((a) => a.kind === "add")
      .map((a) => a.worker);
  it("placement - packing: place-elsewhere fills w2 before waking w3; without packing it spreads to w3", () => {
    expect(addOn(PACK_BELOW_UTILISATION)).toEqual(["w2"]);
    expect(addOn(undefined)).toEqual(["w3"]);
  });
});
