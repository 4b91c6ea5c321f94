import { describe, expect, it } from "vitest";
import { estimate, missRate, sampleRoutes } from "../../src/pipelines/estimator.js";
import type { Pipeline, PipelineConfig, ProfileSet } from "../../src/pipelines/pipeline.js";
import { createRng, sampleExponential } from "../../src/common/rng.js";

const one: Pipeline = { name: "one", models: ["a"], edges: [] };
// T(b) = 10 + 5(b − 1): 10, 15, 20, 25 ms.
const lin: ProfileSet = { a: [{ hardware: "gpu", pricePerHour: 1, batchLatencyMs: [[1, 10], [2, 15], [4, 25], [8, 45]] }] };
const cfg = (maxBatch: number, replicas: number): PipelineConfig => ({ a: { hardware: "gpu", maxBatch, replicas } });
const lat = (r: { latenciesMs: Float64Array }): number[] => Array.from(r.latenciesMs);

describe("estimator", () => {
  it("estimator - FIFO queue, one replica, batch one", () => {
    // q0: 0 → 10; q1 arrives at 5, starts at 10 → 20 (15); q2: 30 → 40 (10).
    const r = estimate({ pipeline: one, profiles: lin, config: cfg(1, 1), arrivalsMs: [0, 5, 30] });
    expect(lat(r)).toEqual([10, 15, 10]);
    expect(r.p99Ms).toBe(15); // nearest rank ⌈0.99·3⌉ = 3rd of [10, 10, 15]
    expect(r.meanMs).toBeCloseTo(35 / 3, 12);
  });

  it("estimator - an idle replica takes the whole queue up to the max batch at once", () => {
    // q0 alone 0 → 10; q1..q4 queued by 10, one batch of 4: T(4) = 25 → all finish at 35.
    const r = estimate({ pipeline: one, profiles: lin, config: cfg(4, 1), arrivalsMs: [0, 1, 2, 3, 4] });
    expect(lat(r)).toEqual([10, 34, 33, 32, 31]);
    expect(r.batches).toEqual({ a: 2 });
    expect(r.meanBatch).toEqual({ a: 2.5 });
    // Max batch 2: q1,q2 at 10 → 25; q3,q4 at 25 → 40.
    expect(lat(estimate({ pipeline: one, profiles: lin, config: cfg(2, 1), arrivalsMs: [0, 1, 2, 3, 4] }))).toEqual([10, 24, 23, 37, 36]);
  });

  it("estimator - replicas share one queue", () => {
    expect(lat(estimate({ pipeline: one, profiles: lin, config: cfg(1, 2), arrivalsMs: [0, 0, 0] }))).toEqual([10, 10, 20]);
  });

  it("estimator - chains add up and joins wait for every visited parent", () => {
    const diamond: Pipeline = { name: "d", models: ["a", "b", "c", "d"], edges: [{ from: "a", to: "b" }, { from: "a", to: "c" }, { from: "b", to: "d" }, { from: "c", to: "d" }] };
    const p = (ms: number) => [{ hardware: "cpu", pricePerHour: 1, batchLatencyMs: [[1, ms]] as Array<[number, number]> }];
    const profiles: ProfileSet = { a: p(1), b: p(2), c: p(7), d: p(3) };
    const config: PipelineConfig = Object.fromEntries(["a", "b", "c", "d"].map((m) => [m, { hardware: "cpu", maxBatch: 1, replicas: 1 }]));
    // a 0 → 1; b 1 → 3; c 1 → 8; d waits for c: 8 → 11.
    expect(lat(estimate({ pipeline: diamond, profiles, config, arrivalsMs: [0] }))).toEqual([11]);
  });

  it("estimator - a finished batch is handed on query by query: an idle replica starts on the first", () => {
    // a: T(1) = 10, T(2) = 15; b: two replicas, T(1) = 100, T(2) = 110.
    const chain: Pipeline = { name: "ab", models: ["a", "b"], edges: [{ from: "a", to: "b" }] };
    const profiles: ProfileSet = {
      a: [{ hardware: "gpu", pricePerHour: 1, batchLatencyMs: [[1, 10], [2, 15]] }],
      b: [{ hardware: "gpu", pricePerHour: 1, batchLatencyMs: [[1, 100], [2, 110]] }],
    };
    const config: PipelineConfig = { a: { hardware: "gpu", maxBatch: 2, replicas: 1 }, b: { hardware: "gpu", maxBatch: 2, replicas: 2 } };
    // q0: a 0 → 10, b 10 → 110. q1, q2: a 10 → 25 as one batch; q1 reaches b first and the idle
    // replica takes it alone (25 → 125); q2 waits for the first replica (110 → 210).
    expect(lat(estimate({ pipeline: chain, profiles, config, arrivalsMs: [0, 1, 2] }))).toEqual([110, 124, 208]);
  });

  it("estimator - conditional edges follow the sampled routes", () => {
    const cond: Pipeline = { name: "c", models: ["a", "b"], edges: [{ from: "a", to: "b", probability: 0.5 }] };
    const profiles: ProfileSet = { a: lin.a!, b: [{ hardware: "gpu", pricePerHour: 1, batchLatencyMs: [[1, 100]] }] };
    const config: PipelineConfig = { a: { hardware: "gpu", maxBatch: 1, replicas: 1 }, b: { hardware: "gpu", maxBatch: 1, replicas: 1 } };
    // q0 skips b: 10; q1 (at 50) visits b: 50 → 60 → 160 = 110.
    const r = estimate({ pipeline: cond, profiles, config, arrivalsMs: [0, 50], routes: Uint32Array.from([0, 1]) });
    expect(lat(r)).toEqual([10, 110]);
    expect(() => estimate({ pipeline: cond, profiles, config, arrivalsMs: [0] })).toThrow("pass routes");
    const routes = sampleRoutes(cond, 10_000, createRng(7));
    const taken = routes.reduce((a, b) => a + b, 0) / routes.length;
    expect(Math.abs(taken - 0.5)).toBeLessThan(0.02);
  });

  it("estimator - a replica schedule adds and retires replicas over time", () => {
    // Add a second replica at 5: q1 (at 1) starts at 5 → 15 = 14.
    expect(lat(estimate({ pipeline: one, profiles: lin, config: cfg(1, 1), arrivalsMs: [0, 1], replicaSchedule: [{ atMs: 5, model: "a", replicas: 2 }] })))
      .toEqual([10, 14]);
    // Two replicas, down to one at 1 (the idle one goes): q1 at 2 waits for q0 → 10 → 20 = 18.
    expect(lat(estimate({ pipeline: one, profiles: lin, config: cfg(1, 2), arrivalsMs: [0, 2], replicaSchedule: [{ atMs: 1, model: "a", replicas: 1 }] })))
      .toEqual([10, 18]);
    // Down to zero while busy: the busy replica retires after its batch and q1 never runs.
    const r = estimate({ pipeline: one, profiles: lin, config: cfg(1, 1), arrivalsMs: [0, 2], replicaSchedule: [{ atMs: 1, model: "a", replicas: 0 }] });
    expect(lat(r)[0]).toBe(10);
    expect(Number.isNaN(lat(r)[1])).toBe(true);
    expect(missRate(r.latenciesMs, 100)).toBe(0.5);
  });

  it("estimator - stops early once the P99 is known to exceed a bound", () => {
    // 1000 queries at once on one replica at 10 ms: the 11th finishes at 110 ms > 50 → more than 1% miss.
    const r = estimate({ pipeline: one, profiles: lin, config: cfg(1, 1), arrivalsMs: new Array<number>(1000).fill(0), stopWhenP99AboveMs: 50 });
    expect(r.stoppedEarly).toBe(true);
    expect(r.p99Ms).toBe(Infinity);
  });

  it("estimator - one hour at 150 QPS through a four-stage pipeline (its speed is in npm run bench)", () => {
    const p: Pipeline = {
      name: "four", models: ["pre", "lang", "nmt", "img"],
      edges: [{ from: "pre", to: "lang" }, { from: "lang", to: "nmt", probability: 0.3 }, { from: "pre", to: "img" }],
    };
    const prof = (t1: number, slope: number) => [{ hardware: "gpu", pricePerHour: 1, batchLatencyMs: [1, 2, 4, 8, 16, 32].map((b) => [b, t1 + slope * (b - 1)] as [number, number]) }];
    const profiles: ProfileSet = { pre: prof(3, 2.8), lang: prof(5, 0.5), nmt: prof(40, 4), img: prof(20, 2) };
    const config: PipelineConfig = {
      pre: { hardware: "gpu", maxBatch: 1, replicas: 1 }, lang: { hardware: "gpu", maxBatch: 8, replicas: 1 },
      nmt: { hardware: "gpu", maxBatch: 8, replicas: 2 }, img: { hardware: "gpu", maxBatch: 16, replicas: 1 },
    };
    const rng = createRng(1);
    const arrivals: number[] = [];
    for (let t = sampleExponential(rng, 0.15); t < 3_600_000; t += sampleExponential(rng, 0.15)) arrivals.push(t);
    const a = Float64Array.from(arrivals);
    const routes = sampleRoutes(p, a.length, rng);
    const r = estimate({ pipeline: p, profiles, config, arrivalsMs: a, routes });
    expect(a.length).toBeGreaterThan(530_000);
    expect(r.latenciesMs.every((x) => x >= 3)).toBe(true);
    expect(r.p99Ms).toBeLessThan(150);
  });
});
