import { describe, expect, it } from "vitest";
import { SelectionIndex, createRng, type QueryRequirements, type VariantProfile, type VariantRuntime, type VariantState, type WorkerInfo } from "../../src/index.js";

// SelectionIndex remembers its recent decisions per app (keyed by the requirements, forgotten on every
// change of its data). Whatever it remembers, its answers must be those of an index built afresh
// from the same data.

function variant(app: string, i: number, rng: () => number): VariantProfile {
  return {
    name: `${app}-v${i}`,
    model: `${app}-m`,
    app,
    hardware: ["cpu", "gpu", "inferentia"][i % 3] as string,
    batchSize: 1,
    accuracy: 0.6 + 0.3 * rng(),
    latencyMs: { 1: Math.round(5 + 300 * rng()) },
    peakQps: Math.round(1 + 200 * rng()),
    loadLatencyMs: Math.round(100 + 3000 * rng()),
    pricePerS: Math.round(1 + 20 * rng()),
    profiled: rng() > 0.1,
  };
}

describe("selection memo", () => {
  it("selection-memo - answers equal a fresh index's through changes of runtimes, workers and variants", () => {
    const rng = createRng(11);
    const r = (): number => rng.next();
    const apps = ["a", "b"];
    const catalogue = new Map<string, VariantProfile>();
    for (const app of apps) for (let i = 0; i < 8; i++) catalogue.set(`${app}-v${i}`, variant(app, i, r));
    const states: VariantState[] = ["inactive", "loading", "active", "overloaded", "interfered"];
    const runtimes = new Map<string, VariantRuntime>();
    let workers: WorkerInfo[] = [];
    const index = new SelectionIndex(catalogue.values());
    // A few requirements, repeated (as a query stream repeats them), so that the memo is hit.
    const reqs: QueryRequirements[] = [{ latencyMs: 100 }, { latencyMs: 200, minAccuracy: 0.7 }, { latencyMs: 300, maxCostPerQuery: 0.1 }, { latencyMs: 50, minAccuracy: 0 }, { latencyMs: 1000, minAccuracy: 0.85 }, { latencyMs: 5 }];
    let hits = 0;
    const onChange: number[] = [];
    for (let step = 0; step < 3000; step++) {
      const x = r();
      // `revision` changes with every change of the data, and only then (a caller may keep a decision while it stays)
      const revision = index.revision;
      if (x < 0.21) onChange.push(revision);
      if (x < 0.15) {
        const name = [...catalogue.keys()][Math.floor(r() * catalogue.size)] as string;
        const rt: VariantRuntime = { state: states[Math.floor(r() * states.length)] as VariantState, instances: Math.floor(r() * 3), qps: Math.round(100 * r()), workers: [{ worker: `w${Math.floor(r() * 4)}`, qps: Math.round(50 * r()) }] };
        runtimes.set(name, rt);
        index.setRuntime(name, rt);
      } else if (x < 0.18) {
        workers = Array.from({ length: 4 }, (_, i) => ({ worker: `w${i}`, hardware: ["cpu", "gpu", "inferentia"][i % 3] as string, utilization: r() }));
        index.setWorkers(workers);
      } else if (x < 0.2) {
        const app = apps[Math.floor(r() * apps.length)] as string;
        const v = variant(app, Math.floor(r() * 10), r);
        catalogue.set(v.name, v);
        index.upsertVariant(v);
      } else if (x < 0.21) {
        const name = [...catalogue.keys()][Math.floor(r() * catalogue.size)] as string;
        catalogue.delete(name);
        runtimes.delete(name);
        index.removeVariant(name);
      } else {
        const app = apps[Math.floor(r() * apps.length)] as string;
        const req = reqs[Math.floor(r() * reqs.length)] as QueryRequirements;
        const allowLoad = r() < 0.8;
        const got = index.select(app, req, { allowLoad });
        const again = index.select(app, { ...req }, { allowLoad });
        if (again === got) hits++;
        const fresh = new SelectionIndex(catalogue.values());
        for (const [name, rt] of runtimes) fresh.setRuntime(name, rt);
        fresh.setWorkers(workers);
        expect(got).toEqual(fresh.select(app, req, { allowLoad }));
        expect(Object.isFrozen(got)).toBe(true);
        expect(index.revision).toBe(revision);
      }
      if (x < 0.21) expect(index.revision).not.toBe(revision);
    }
    expect(hits).toBeGreaterThan(1000);
    expect(new Set(onChange).size).toBe(onChange.length);
  });

  it("selection-memo - requirements that differ only in an absent minimum accuracy share a decision; others do not", () => {
    const rng = createRng(5);
    const r = (): number => rng.next();
    const vs = Array.from({ length: 6 }, (_, i) => variant("a", i, r));
    const index = new SelectionIndex(vs);
    for (const v of vs) index.setRuntime(v.name, { state: "active", instances: 1, qps: 0, workers: [{ worker: "w", qps: 0 }] });
    const d = index.select("a", { latencyMs: 400 });
    expect(index.select("a", { latencyMs: 400, minAccuracy: 0 })).toBe(d);
    expect(index.select("a", { latencyMs: 400, maxCostPerQuery: 1e9 })).not.toBe(d);
    expect(index.select("a", { latencyMs: 400 }, { allowLoad: false })).not.toBe(d);
    index.setRuntime(vs[0]?.name as string, { state: "inactive", instances: 0, qps: 0, workers: [] });
    expect(index.select("a", { latencyMs: 400 })).not.toBe(d);
  });
});
