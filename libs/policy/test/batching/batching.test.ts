import { describe, expect, it } from "vitest";
import { decideBatch, cannotFinishInTime, planBatch, RunTimeEstimate, RUN_TIME_STALE_AFTER_MS, RUN_TIME_STALE_HALF_LIFE_MS, type BatchQueueView, routeModelQuery, chooseWorker, type RouteCandidate, type WorkerView } from "../../src/index.js";

describe("batching", () => {
  const policy = { maxBatch: 8, batchWaitMs: 10 };
  it.each([
    // [queue length, oldest queued at, busy, now] → action
    ["busy executor waits", 5, 0, true, 100, "none"],
    ["empty queue", 0, undefined, false, 100, "none"],
    ["full batch leaves at once", 8, 95, false, 100, "run"],
    ["oldest waited Wbatch (100 - 90 = 10 ≥ 10)", 3, 90, false, 100, "run"],
    ["oldest waited 5 < 10: wait", 3, 95, false, 100, "wait"],
  ] as const)("batching - %s", (_name, length, oldest, busy, now, action) => {
    expect(decideBatch(length, oldest, busy, now, policy).action).toBe(action);
  });

  it("batching - the wait ends when the oldest query reaches Wbatch (95 + 10 = 105)", () => {
    expect(decideBatch(3, 95, false, 100, policy)).toMatchObject({ action: "wait", untilMs: 105 });
  });

  it("batching - a full queue runs Nbatch, a timed-out one runs what it has", () => {
    expect(decideBatch(20, 0, false, 1, policy)).toMatchObject({ action: "run", size: 8 });
    expect(decideBatch(3, 0, false, 50, policy)).toMatchObject({ action: "run", size: 3 });
  });

  it("batching - with Wbatch 0 an idle executor runs whatever is queued", () => {
    expect(decideBatch(1, 100, false, 100, { maxBatch: 8, batchWaitMs: 0 })).toMatchObject({ action: "run", size: 1 });
  });

  it("batching - a query that cannot finish by its deadline is not started silently", () => {
    expect(cannotFinishInTime(1000, 990, 15)).toBe(true); // 990 + 15 = 1005 > 1000
    expect(cannotFinishInTime(1000, 980, 15)).toBe(false); // 995 ≤ 1000
  });
});

/** A queue of [queuedAtMs, deadlineMs] pairs, oldest first. */
function queueOf(items: Array<[number, number]>): BatchQueueView {
  return { length: items.length, queuedAtMs: (i) => (items[i] as [number, number])[0], deadlineMs: (i) => (items[i] as [number, number])[1] };
}

describe("batching - planBatch (the executor's and the simulator's batcher)", () => {
  const policy = { maxBatch: 4, batchWaitMs: 10 };
  const t = (b: number): number => 5 + b; // T(1) = 6 ms, T(4) = 9 ms
  it.each([
    // [name, queue, now, late, action, size]
    ["nothing late: a full batch runs", [[0, 100], [1, 100], [2, 100], [3, 100], [4, 100]], 5, 0, "run", 4],
    // 95 + T(1) 6 = 101 > 100: the head is late; the next (deadline 200) is not, and it has waited
    // 95 - 1 = 94 ≥ Wbatch 10: it runs alone.
    ["a late head is taken out first", [[0, 100], [1, 200]], 95, 1, "run", 1],
    // The wait counts from the oldest query left: queued at 90, 95 - 90 = 5 < 10.
    ["the wait counts from the oldest query left", [[0, 100], [90, 200]], 95, 1, "wait", undefined],
    ["every query late: nothing to run", [[0, 50], [1, 60]], 95, 2, "none", undefined],
  ] as const)("%s", (_n, items, now, late, action, size) => {
    const step = planBatch(queueOf(items.map((x) => [...x] as [number, number])), false, now, policy, t);
    expect(step.late).toBe(late);
    expect(step.decision.action).toBe(action);
    if (size !== undefined) expect(step.decision).toMatchObject({ size });
  });

  it("waiting for Wbatch never makes a query late: the batch leaves at the tightest deadline's latest start", () => {
    const wide = { maxBatch: 4, batchWaitMs: 50 };
    // Two queries queued at 90 and 92, Wbatch 50 → due at 140. T(2) = 7: the second's deadline 130 → latest start 123.
    expect(planBatch(queueOf([[90, 1000], [92, 130]]), false, 100, wide, t).decision).toMatchObject({ action: "wait", untilMs: 123 });
    // At 123 it runs, two queries, though Wbatch is not over.
    expect(planBatch(queueOf([[90, 1000], [92, 130]]), false, 123, wide, t).decision).toMatchObject({ action: "run", size: 2 });
    // Deadlines far away: Wbatch as usual (90 + 50 = 140).
    expect(planBatch(queueOf([[90, 1000], [92, 1000]]), false, 100, wide, t).decision).toMatchObject({ action: "wait", untilMs: 140 });
    // Queries without a deadline (pipeline stages: Infinity) wait for Wbatch.
    expect(planBatch(queueOf([[90, Infinity]]), false, 100, wide, t).decision).toMatchObject({ action: "wait", untilMs: 140 });
  });

  it("a busy batcher sheds nothing and waits to be asked again", () => {
    expect(planBatch(queueOf([[0, 1]]), true, 95, policy, t)).toEqual({ late: 0, decision: { action: "none", reason: "executor busy" } });
  });

  it("shedding can be turned off (queues that never shed)", () => {
    expect(planBatch(queueOf([[0, 1]]), false, 95, policy, t, false)).toMatchObject({ late: 0, decision: { action: "run", size: 1 } });
  });
});

describe("batching - RunTimeEstimate", () => {
  it("profiled: T(b) × the moving average of observed / profiled", () => {
    const e = new RunTimeEstimate((b) => 10 * b);
    expect(e.expectedMs(2, 0)).toBe(20); // no evidence yet: the profile
    e.observe(1, 20, 0); // observed 2× the profile: slowdown 0.8 × 1 + 0.2 × 2 = 1.2
    expect(e.slowdown).toBeCloseTo(1.2);
    expect(e.expectedMs(2, 0)).toBeCloseTo(24); // 20 × 1.2
  });
  it("a profile given as an object (its latencyMs(b)) estimates as the same function does; planBatch takes the estimate itself", () => {
    const profile = { latencyMs: (b: number): number => 7 * b + 3 };
    const byFunction = new RunTimeEstimate((b) => profile.latencyMs(b));
    const byObject = new RunTimeEstimate(profile);
    const policy = { maxBatch: 8, batchWaitMs: 30 };
    let t = 0;
    for (let i = 0; i < 200; i++) {
      t += (i % 7) * 300;
      const size = 1 + (i % 8);
      expect(byObject.expectedMs(size, t)).toBe(byFunction.expectedMs(size, t));
      const queue: BatchQueueView = { length: 1 + (i % 5), queuedAtMs: (k) => t - 40 + k * 3, deadlineMs: (k) => t + 15 + 9 * k + (i % 11) };
      expect(planBatch(queue, false, t, policy, byObject)).toEqual(planBatch(queue, false, t, policy, (b) => byFunction.expectedMs(b, t)));
      byFunction.observe(size, (7 * size + 3) * (0.5 + (i % 5) / 2), t);
      byObject.observe(size, (7 * size + 3) * (0.5 + (i % 5) / 2), t);
      expect(byObject.slowdown).toBe(byFunction.slowdown);
    }
  });
  it("unprofiled: the moving average of observed batch times (0 before the first batch)", () => {
    const e = new RunTimeEstimate();
    expect(e.expectedMs(4, 0)).toBe(0);
    e.observe(4, 10, 0);
    e.observe(4, 20, 10); // 0.8 × 10 + 0.2 × 20 = 12
    expect(e.expectedMs(1, 10)).toBeCloseTo(12);
  });
  it("a stale estimate decays: the excess over the profile halves every second after one without a batch", () => {
    const e = new RunTimeEstimate((b) => 10 * b);
    for (let t = 0; t < 10; t++) e.observe(1, 60, t); // 6× the profile for a while
    const s = e.slowdown;
    expect(s).toBeGreaterThan(5);
    // [ms since the last batch, expected T(1)]: fresh for RUN_TIME_STALE_AFTER_MS, then the excess halves per half-life.
    const table: Array<[number, number]> = [
      [0, 10 * s],
      [RUN_TIME_STALE_AFTER_MS, 10 * s],
      [RUN_TIME_STALE_AFTER_MS + RUN_TIME_STALE_HALF_LIFE_MS, 10 * (1 + (s - 1) / 2)],
      [RUN_TIME_STALE_AFTER_MS + 2 * RUN_TIME_STALE_HALF_LIFE_MS, 10 * (1 + (s - 1) / 4)],
      [RUN_TIME_STALE_AFTER_MS + 60_000, 10],
    ];
    for (const [idle, expected] of table) expect(e.expectedMs(1, 9 + idle), `after ${idle} ms`).toBeCloseTo(expected, 6);
    // A batch after the pause blends with the decayed estimate, not with the old one.
    e.observe(1, 10, 9 + RUN_TIME_STALE_AFTER_MS + 60_000);
    expect(e.slowdown).toBeCloseTo(1, 6);
    // Faster than the profile does not decay (it is not what blocks a replica), nor does a fresh unprofiled average.
    const fast = new RunTimeEstimate((b) => 10 * b);
    fast.observe(1, 5, 0);
    expect(fast.expectedMs(1, 100_000)).toBeCloseTo(9, 6);
    const unprofiled = new RunTimeEstimate();
    unprofiled.observe(1, 40, 0);
    expect(unprofiled.expectedMs(1, RUN_TIME_STALE_AFTER_MS)).toBe(40);
    expect(unprofiled.expectedMs(1, RUN_TIME_STALE_AFTER_MS + RUN_TIME_STALE_HALF_LIFE_MS)).toBeCloseTo(20, 6);
  });
  it("a replica slowed past its queries' budget sheds, then lets a query through once its estimate is stale, and recovers", () => {
    const e = new RunTimeEstimate((b) => 10 * b);
    for (let t = 0; t < 20; t++) e.observe(1, 60, t); // a 6× slowdown (a neighbour's burst)
    const budgetMs = 50; // each query's SLO: 5× the profiled T(1)
    const queue = (nowMs: number): BatchQueueView => ({ length: 1, queuedAtMs: () => nowMs, deadlineMs: () => nowMs + budgetMs });
    const policy = { maxBatch: 4, batchWaitMs: 0 };
    const step = (nowMs: number) => planBatch(queue(nowMs), false, nowMs, policy, (b) => e.expectedMs(b, nowMs));
    expect(step(100).late).toBe(1); // shed: expected 6× > 5×
    // The slowdown passed; no batch runs while every query is shed, but the estimate goes stale.
    let t = 100;
    while (step(t).late === 1) t += 10;
    expect(t).toBeGreaterThan(19 + RUN_TIME_STALE_AFTER_MS);
    expect(t).toBeLessThan(19 + RUN_TIME_STALE_AFTER_MS + 2 * RUN_TIME_STALE_HALF_LIFE_MS);
    expect(step(t).decision.action).toBe("run");
    e.observe(1, 10, t + 10); // the replica is back at its profile: the next queries are served
    expect(step(t + 20).late).toBe(0);
  });
});

describe("routing", () => {
  const base: RouteCandidate = { variant: "m--cpu", hardware: "cpu", activeInstances: 0, loadingInstances: 0, arrivalsPerS: 0, queueLength: 0, costPerQuery: 1, hardwareAvailable: true, selectable: true };
  it("routing - picks the least loaded active variant per instance", () => {
    const d = routeModelQuery([
      { ...base, variant: "a", activeInstances: 1, arrivalsPerS: 50 }, // 50 per instance
      { ...base, variant: "b", activeInstances: 2, arrivalsPerS: 60 }, // 30 per instance
    ]);
    expect(d).toMatchObject({ kind: "active", variant: "b" });
  });
  it("routing - waits for a loading variant rather than loading another", () => {
    expect(routeModelQuery([{ ...base, variant: "a", loadingInstances: 1 }, { ...base, variant: "b" }])).toMatchObject({ kind: "loading", variant: "a" });
  });
  it("routing - loads the cheapest variant whose hardware has a worker", () => {
    const d = routeModelQuery([
      { ...base, variant: "gpu", hardware: "gpu", costPerQuery: 10, hardwareAvailable: true },
      { ...base, variant: "cpu", costPerQuery: 1 },
      { ...base, variant: "inf", hardware: "inferentia", costPerQuery: 0.5, hardwareAvailable: false },
    ]);
    expect(d).toMatchObject({ kind: "load", variant: "cpu" });
  });
  it("routing - says why when nothing can serve", () => {
    expect(routeModelQuery([{ ...base, hardware: "gpu", hardwareAvailable: false }])).toEqual({ kind: "none", reason: "no worker of hardware gpu is running" });
    expect(routeModelQuery([])).toEqual({ kind: "none", reason: "the model has no variants" });
  });
  it("routing - never picks an unselectable variant", () => {
    expect(routeModelQuery([{ ...base, activeInstances: 3, selectable: false }]).kind).toBe("none");
  });
});

describe("placement", () => {
  const w = (worker: string, utilisation: number, extra: Partial<WorkerView> = {}): WorkerView => ({
    worker, hardware: "cpu", utilisation, threads: 4, threadsUsed: 0, variants: [], seenAtMs: 1000, ...extra,
  });
  const request = { variant: "v", hardware: "cpu", threads: 1 };
  it("placement - lowest-utilised live worker of the hardware", () => {
    expect(chooseWorker([w("a", 0.7), w("b", 0.2), w("c", 0.1, { hardware: "gpu" })], request, 2000).worker).toBe("b");
  });
  it("placement - ignores stale heartbeats (2000 + 5000 < 8000)", () => {
    expect(chooseWorker([w("a", 0.1, { seenAtMs: 2000 })], request, 8000)).toEqual({ worker: undefined, reason: "no live cpu worker" });
  });
  it("placement - prefers a worker with free threads, and skips workers that already run the variant", () => {
    expect(chooseWorker([w("full", 0.0, { threadsUsed: 4 }), w("free", 0.5)], request, 1000).worker).toBe("free");
    expect(chooseWorker([w("has", 0.0, { variants: ["v"] }), w("other", 0.9)], request, 1000).worker).toBe("other");
  });
});

describe("placement - relief loads", () => {
  it("placement - a relief load refuses saturated workers", () => {
    const w: WorkerView = { worker: "a", hardware: "cpu", utilisation: 0.95, threads: 2, threadsUsed: 1, variants: [], seenAtMs: 0 };
    expect(chooseWorker([w], { variant: "v", hardware: "cpu", threads: 1, maxUtilisation: 0.8 }, 0)).toEqual({ worker: undefined, reason: "every live cpu worker is over 80% busy" });
    expect(chooseWorker([w], { variant: "v", hardware: "cpu", threads: 1 }, 0).worker).toBe("a");
  });
});

describe("placement - memory", () => {
  it("placement - skips workers without the memory the variant's profile needs", () => {
    const w = (worker: string, used: number): WorkerView => ({ worker, hardware: "cpu", utilisation: 0, threads: 4, threadsUsed: 0, memoryBytes: 1000, memoryUsedBytes: used, variants: [], seenAtMs: 0 });
    // a: 900 + 200 > 1000; b: 700 + 200 ≤ 1000
    expect(chooseWorker([w("a", 900), w("b", 700)], { variant: "v", hardware: "cpu", threads: 1, memoryBytes: 200 }, 0).worker).toBe("b");
    expect(chooseWorker([w("a", 900)], { variant: "v", hardware: "cpu", threads: 1, memoryBytes: 200 }, 0).worker).toBeUndefined();
  });
});

describe("placement - oversubscription", () => {
  it("placement - a first load may oversubscribe threads; a relief load may not", () => {
    const full: WorkerView = { worker: "a", hardware: "cpu", utilisation: 0.3, threads: 2, threadsUsed: 2, variants: ["x"], seenAtMs: 0 };
    expect(chooseWorker([full], { variant: "v", hardware: "cpu", threads: 1 }, 0).worker).toBe("a");
    expect(chooseWorker([full], { variant: "v", hardware: "cpu", threads: 1, allowOversubscription: false }, 0)).toEqual({ worker: undefined, reason: "no cpu worker has 1 free thread(s) for v" });
  });
});
