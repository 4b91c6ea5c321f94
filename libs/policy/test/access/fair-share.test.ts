import { describe, expect, it } from "vitest";
import { FAIR_SHARE_DEFAULTS, FairShareAdmission, weightedFairShares, type FairShareDecision, type FairShareQuery } from "../../src/access/fair-share.js";

const T0 = 1_700_000_000_000;

/** Offers `qps` queries a second of each app for `seconds`, evenly spaced; the decisions per app. */
function run(f: FairShareAdmission, apps: Array<Omit<FairShareQuery, "pool" | "capacity"> & { qps: number }>, capacity: number, seconds: number, from = T0): Record<string, FairShareDecision[]> {
  const events: Array<{ at: number; app: (typeof apps)[number] }> = [];
  for (const a of apps) for (let k = 0; k < a.qps * seconds; k++) events.push({ at: from + Math.floor((k * 1000) / a.qps), app: a });
  events.sort((x, y) => x.at - y.at);
  const out: Record<string, FairShareDecision[]> = {};
  for (const e of events) (out[e.app.app] ??= []).push(f.admit({ pool: "cpu", app: e.app.app, quotaQps: e.app.quotaQps, costS: e.app.costS, capacity }, e.at));
  return out;
}
const admitted = (d: FairShareDecision[] | undefined): number => (d ?? []).filter((x) => x.admitted).length;

describe("fair share - weighted water-filling", () => {
  it("fair share - small demands are met, the rest split by weight, the total is min(capacity, demand)", () => {
    expect(weightedFairShares(1, [{ app: "a", demand: 0.1, weight: 1 }, { app: "b", demand: 5, weight: 1 }])).toEqual(new Map([["a", 0.1], ["b", 0.9]]));
    const s = weightedFairShares(1, [{ app: "a", demand: 5, weight: 3 }, { app: "b", demand: 5, weight: 1 }]);
    expect(s.get("a")).toBeCloseTo(0.75);
    expect(s.get("b")).toBeCloseTo(0.25);
    const t = weightedFairShares(10, [{ app: "a", demand: 1, weight: 1 }, { app: "b", demand: 2, weight: 1 }]);
    expect([t.get("a"), t.get("b")]).toEqual([1, 2]);
    expect(weightedFairShares(0, [{ app: "a", demand: 1, weight: 1 }]).get("a")).toBe(0);
  });
});

describe("fair share - admission", () => {
  it("fair share - one app alone, however much it asks, is never refused", () => {
    const f = new FairShareAdmission();
    const d = run(f, [{ app: "b", quotaQps: undefined, costS: 0.01, qps: 500 }], 1, 3);
    expect(admitted(d.b)).toBe(d.b?.length);
  });

  it("fair share - two apps within the capacity: nothing refused, nothing marked contended", () => {
    const f = new FairShareAdmission();
    const d = run(f, [{ app: "a", quotaQps: undefined, costS: 0.01, qps: 20 }, { app: "b", quotaQps: undefined, costS: 0.01, qps: 50 }], 1, 3);
    expect([admitted(d.a), admitted(d.b)]).toEqual([d.a?.length, d.b?.length]);
    expect([...(d.a ?? []), ...(d.b ?? [])].some((x) => x.admitted && x.contended)).toBe(false);
  });

  it("fair share - a flood past the capacity beside a light app: the light app loses nothing, the flood is held to the rest, refused with 429 fair_share_exceeded", () => {
    const f = new FairShareAdmission();
    // Capacity 1 worker-second/s; a: 20 q/s × 10 ms = 0.2; b: 300 q/s × 10 ms = 3.
    const d = run(f, [{ app: "a", quotaQps: undefined, costS: 0.01, qps: 20 }, { app: "b", quotaQps: undefined, costS: 0.01, qps: 300 }], 1, 5);
    expect(admitted(d.a)).toBe(d.a?.length);
    // b's share: 1 − 0.2 = 0.8 worker-s/s = 80 q/s (one query over per window at most), after its first window.
    const bAdmitted = admitted(d.b);
    expect(bAdmitted).toBeGreaterThan(80 * 4);
    expect(bAdmitted).toBeLessThanOrEqual(300 * 1 + 81 * 4);
    const refusal = d.b?.find((x) => !x.admitted);
    expect(refusal && !refusal.admitted && refusal.error.code).toBe("fair_share_exceeded");
    expect(refusal && !refusal.admitted && refusal.retryAfterS).toBeGreaterThanOrEqual(1);
    expect(refusal && !refusal.admitted && refusal.error.message).toMatch(/^app 'b' is over its fair share of the congested cpu workers/);
  });

  it("fair share - two floods share by quota weight; an app without a quota weighs as the heaviest quota", () => {
    const f = new FairShareAdmission();
    const d = run(f, [{ app: "a", quotaQps: 30, costS: 0.01, qps: 200 }, { app: "b", quotaQps: 10, costS: 0.01, qps: 200 }], 1, 6);
    // Shares 0.75 and 0.25 worker-s/s: 75 and 25 q/s in steady state (the last 5 s).
    const steady = (x: FairShareDecision[] | undefined): number => admitted((x ?? []).slice(200));
    expect(steady(d.a)).toBeGreaterThan(70 * 5);
    expect(steady(d.a)).toBeLessThanOrEqual(76 * 5 + 1);
    expect(steady(d.b)).toBeGreaterThan(23 * 5);
    expect(steady(d.b)).toBeLessThanOrEqual(26 * 5 + 1);
    const g = new FairShareAdmission();
    const e = run(g, [{ app: "a", quotaQps: 30, costS: 0.01, qps: 200 }, { app: "c", quotaQps: undefined, costS: 0.01, qps: 200 }], 1, 6);
    expect(Math.abs(admitted((e.a ?? []).slice(200)) - admitted((e.c ?? []).slice(200)))).toBeLessThanOrEqual(12);
  });

  it("fair share - costs weigh: a cheap app's many queries against an expensive app's few", () => {
    const f = new FairShareAdmission();
    // a: 100 q/s × 2 ms = 0.2 (fits); b: 100 q/s × 20 ms = 2 → held to 0.8 = 40 q/s.
    const d = run(f, [{ app: "a", quotaQps: undefined, costS: 0.002, qps: 100 }, { app: "b", quotaQps: undefined, costS: 0.02, qps: 100 }], 1, 5);
    expect(admitted(d.a)).toBe(d.a?.length);
    expect(admitted((d.b ?? []).slice(100))).toBeLessThanOrEqual(41 * 4 + 1);
  });

  it("fair share - the flood stops: the other app alone again is admitted at once; unknown costs count nothing", () => {
    const f = new FairShareAdmission();
    run(f, [{ app: "a", quotaQps: undefined, costS: 0.01, qps: 20 }, { app: "b", quotaQps: undefined, costS: 0.01, qps: 300 }], 1, 2);
    // 1.1 s later b's window is empty: b alone is never refused.
    const later = run(f, [{ app: "b", quotaQps: undefined, costS: 0.01, qps: 300 }], 1, 1, T0 + 3_100);
    expect(admitted(later.b)).toBe(later.b?.length);
    const g = new FairShareAdmission();
    const free = run(g, [{ app: "a", quotaQps: undefined, costS: 0, qps: 20 }, { app: "b", quotaQps: undefined, costS: Number.NaN, qps: 300 }], 1, 2);
    expect(admitted(free.b)).toBe(free.b?.length);
  });

  it("fair share - pools are apart: a flood on one hardware kind does not touch another's apps", () => {
    const f = new FairShareAdmission(FAIR_SHARE_DEFAULTS);
    for (let k = 0; k < 1000; k++) f.admit({ pool: "cpu", app: "b", quotaQps: undefined, costS: 0.01, capacity: 1 }, T0 + k);
    const d = f.admit({ pool: "gpu", app: "b", quotaQps: undefined, costS: 0.01, capacity: 1 }, T0 + 999);
    expect(d.admitted).toBe(true);
    for (let k = 0; k < 10; k++) expect(f.admit({ pool: "gpu", app: "a", quotaQps: undefined, costS: 0.001, capacity: 1 }, T0 + 999).admitted).toBe(true);
  });
});
