import { describe, expect, it } from "vitest";
import { Simulator, ScheduledArrivals, constantRate, drop, POOL_DEADLINE, type ArrivalProcess, type Query, type Queue, type SimResult } from "../src/index.js";
import { billedCost } from "../src/billing.js";
import { EventHeap } from "../src/heap.js";
import { createRng } from "@sloserve/policy";

/** Arrivals at fixed times (ms). */
function at(...times: number[]): ArrivalProcess {
  let i = 0;
  return { endMs: times[times.length - 1] ?? 0, next: () => times[i++] ?? null };
}

function oneQueue(o: { times: number[]; latency?: Record<number, number>; maxBatch?: number; waitMs?: number; slo?: number; concurrency?: number; shedLate?: boolean; durationMs?: number }): { sim: Simulator; q: Queue } {
  const sim = new Simulator({ seed: 1, durationMs: o.durationMs ?? 10_000 });
  const q = sim.addQueue({ name: "v", maxBatch: o.maxBatch ?? 1, waitMs: o.waitMs ?? 0, shedLate: o.shedLate ?? false });
  const m = sim.launchMachine({ type: "t", kind: "cpu", pricePerS: 0 });
  sim.addReplica(q, m, { latencyMs: o.latency ?? { 1: 50 }, concurrency: o.concurrency ?? 1 });
  sim.addStream({ app: "a", sloMs: o.slo ?? 1000, process: at(...o.times) });
  sim.setRouter((_q, _f, cause) => (cause === "arrival" ? q : cause === "late" ? drop("late") : null));
  return { sim, q };
}

describe("engine", () => {
  it("engine - one query on an idle instance takes exactly its profiled latency", () => {
    const { sim } = oneQueue({ times: [100], latency: { 1: 37.5 } });
    const r = sim.run();
    expect(r.completed).toBe(1);
    expect(r.latencyMs.p50).toBe(37.5);
    expect(r.latencyMs.p99).toBe(37.5);
  });

  it("engine - FIFO on one replica: the second query waits for the first", () => {
    // t=0: q1 runs 0→50; q2 arrives at 10, starts at 50, ends 100 → 90 ms.
    const r = oneQueue({ times: [0, 10] }).sim.run();
    expect(r.latencyMs.max).toBe(90);
    expect(r.latencyMs.p50).toBe(50);
  });

  const batching: Array<{ name: string; times: number[]; maxBatch: number; waitMs: number; latency: Record<number, number>; want: number[] }> = [
    // Nbatch 4 reached at t=3 (after q1 ran alone from t=0 because the replica was idle and Wbatch=0):
    // q1: 0→10 (batch of 1). q2,q3,q4 queue by t=3; at t=10 take 3 → 10→30 (T(4) padding for 3).
    { name: "Wbatch 0: an idle replica takes what is there", times: [0, 1, 2, 3], maxBatch: 4, waitMs: 0, latency: { 1: 10, 4: 20 }, want: [10, 29, 28, 27] },
    // Wbatch 100: q1 at 0 waits; the batch fills to 4 at t=3 and leaves at once: 3→23.
    { name: "a full batch leaves at once", times: [0, 1, 2, 3], maxBatch: 4, waitMs: 100, latency: { 1: 10, 4: 20 }, want: [23, 22, 21, 20] },
    // Wbatch 100 and only 2 queries: they leave when the oldest has waited 100 ms: 100→115 (T(2)=15).
    { name: "a partial batch leaves after Wbatch", times: [0, 30], maxBatch: 4, waitMs: 100, latency: { 1: 10, 2: 15, 4: 20 }, want: [115, 85] },
  ];
  for (const c of batching) {
    it(`engine - batching: ${c.name}`, () => {
      const { sim } = oneQueue({ times: c.times, maxBatch: c.maxBatch, waitMs: c.waitMs, latency: c.latency });
      const lat: number[] = [];
      sim.setRouter((q, _f, cause) => {
        if (cause === "arrival") return sim.queues[0] ?? null;
        lat[q.id] = sim.nowMs - q.arrivalMs;
        return null;
      });
      sim.run();
      expect(lat).toEqual(c.want);
    });
  }

  it("engine - concurrency runs batches side by side", () => {
    // Two slots: q1 and q2 both start at once and finish at 50.
    const r = oneQueue({ times: [0, 0], concurrency: 2 }).sim.run();
    expect(r.latencyMs.max).toBe(50);
  });

  it("engine - conservation: every arrival is completed or dropped", () => {
    // 30 QPS Poisson into a 20 QPS server with a 500 ms deadline: many are shed.
    const sim = new Simulator({ seed: 3, durationMs: 60_000, drainMs: 1000 });
    const q = sim.addQueue({ name: "v", shedLate: true });
    sim.addReplica(q, null, { latencyMs: { 1: 50 } });
    sim.addStream({ app: "a", sloMs: 500, process: new ScheduledArrivals(constantRate(30, 60), 1) });
    sim.setRouter((_q, _f, cause) => (cause === "arrival" ? q : cause === "late" ? drop("late") : null));
    const r = sim.run();
    expect(r.arrivals).toBeGreaterThan(1500);
    expect(r.completed + r.dropped).toBe(r.arrivals);
    expect(r.droppedByReason.late).toBeGreaterThan(0);
    expect(r.completed).toBeLessThanOrEqual(Math.ceil(61_000 / 50));
    expect(r.series.arrivals.reduce((a, b) => a + b, 0)).toBe(r.arrivals);
  });

  it("engine - queries still queued when the drain ends are dropped as unfinished", () => {
    const sim = new Simulator({ seed: 1, durationMs: 1000, drainMs: 100 });
    const q = sim.addQueue({ name: "v" });
    sim.addReplica(q, null, { latencyMs: { 1: 400 } });
    sim.addStream({ app: "a", sloMs: 10_000, process: at(0, 1, 2, 3, 4) });
    sim.setRouter((_q, _f, cause) => (cause === "arrival" ? q : null));
    const r = sim.run();
    // 0→400, 400→800, 800→1200 (inside 1000 + 100? no: ends 1200 > 1100) → 2 completed.
    expect(r.completed).toBe(2);
    expect(r.droppedByReason).toEqual({ "unfinished at end of run": 3 });
  });

  it("engine - machine boot and variant load delay the first service", () => {
    const sim = new Simulator({ seed: 1, durationMs: 10_000 });
    const q = sim.addQueue({ name: "v" });
    const m = sim.launchMachine({ type: "t", kind: "gpu", pricePerS: 0, bootMs: 1000 });
    sim.addReplica(q, m, { latencyMs: { 1: 10 }, loadMs: 500 });
    sim.addStream({ app: "a", sloMs: 10_000, process: at(0) });
    sim.setRouter((_q, _f, cause) => (cause === "arrival" ? q : null));
    // ready at 1000 + 500, done at 1510.
    expect(sim.run().latencyMs.p50).toBe(1510);
  });

  it("engine - billing: per second with a 60 s minimum, start-up billed", () => {
    const sim = new Simulator({ seed: 1, durationMs: 200_000 });
    const price = 0.001;
    sim.launchMachine({ type: "t", kind: "cpu", pricePerS: price, bootMs: 30_000 }); // runs to the end: 200 s
    const short = sim.launchMachine({ type: "t", kind: "gpu", pricePerS: price });
    sim.at(20_000, () => sim.terminateMachine(short)); // 20 s → billed 60 s
    const later = sim.launchMachine({ type: "t", kind: "gpu", pricePerS: price });
    sim.at(0, () => undefined);
    sim.at(100_000, () => sim.terminateMachine(later)); // 100.0 s
    const r = sim.run();
    // 200 + 60 + 100 = 360 s × 0.001
    expect(r.costDollars).toBeCloseTo(0.36, 10);
    expect(r.costByKind.cpu).toBeCloseTo(0.2, 10);
    expect(r.costByKind.gpu).toBeCloseTo(0.16, 10);
  });

  it("engine - the cost so far, asked at any time, is every machine's billed cost summed in launch order", () => {
    // Machines launched at 0, 10, 20, … s; some terminated early, one killed, one still running.
    const ends: Array<number | null> = [30_000, 15_000, null, 50_000, 45_000, null, 200_000];
    const sim = new Simulator({ seed: 1, durationMs: 300_000 });
    const machines = ends.map((end, i) => {
      let m: ReturnType<Simulator["launchMachine"]> | undefined;
      sim.at(i * 10_000, () => {
        m = sim.launchMachine({ type: "t", kind: i % 2 === 0 ? "cpu" : "gpu", pricePerS: 0.001 * (i + 1), bootMs: 5_000 });
        if (end !== null) sim.at(end, () => (i === 3 ? sim.killMachine(m!) : sim.terminateMachine(m!)));
      });
      return () => m;
    });
    const seen: Array<{ at: number; cost: number; expected: number }> = [];
    const direct = (atMs: number): number => {
      let c = 0;
      for (const m of machines) {
        const x = m();
        if (x) c += billedCost(x, atMs);
      }
      return c;
    };
    // Ask every 5 s (the engine keeps the closed machines' sum), then at earlier times again.
    sim.every(5_000, (now) => seen.push({ at: now, cost: sim.costDollars(), expected: direct(now) }));
    const r = sim.run();
    for (const s of seen) expect(s.cost).toBe(s.expected);
    for (const t of [0, 12_000, 47_000, 120_000, 300_000]) expect(sim.costDollars(t)).toBe(direct(t));
    expect(r.costDollars).toBe(direct(300_000));
  });

  it("engine - priced replicas are billed while loaded", () => {
    const sim = new Simulator({ seed: 1, durationMs: 100_000 });
    const q = sim.addQueue({ name: "v" });
    const r1 = sim.addReplica(q, null, { latencyMs: { 1: 10 }, pricePerS: 0.5 });
    sim.at(40_000, () => r1 && sim.removeReplica(r1));
    expect(sim.run().costDollars).toBeCloseTo(20, 10); // 40 s × 0.5
  });

  it("engine - a full machine refuses a replica", () => {
    const sim = new Simulator({ seed: 1, durationMs: 1000 });
    const q = sim.addQueue({ name: "v" });
    const m = sim.launchMachine({ type: "t", kind: "cpu", pricePerS: 0, resources: { threads: 8 } });
    expect(sim.addReplica(q, m, { latencyMs: { 1: 1 }, uses: { threads: 4 } })).not.toBeNull();
    expect(sim.addReplica(q, m, { latencyMs: { 1: 1 }, uses: { threads: 4 } })).not.toBeNull();
    expect(sim.addReplica(q, m, { latencyMs: { 1: 1 }, uses: { threads: 4 } })).toBeNull();
    expect(m.free("threads")).toBe(0);
  });

  it("engine - overflow to a function pool: latency, cold starts and Lambda cost", () => {
    const sim = new Simulator({ seed: 1, durationMs: 10_000 });
    const pool = sim.addFunctionPool({ name: "lambda", latencyMs: 380, coldStartMs: 1000, memoryGb: 3 });
    sim.addStream({ app: "a", sloMs: 5000, process: at(0, 100, 2000) });
    sim.setRouter((_q, _f, cause) => (cause === "arrival" ? pool : null));
    const r = sim.run();
    // q1 cold 1380; q2 finds q1's container busy → cold 1380; q3 at 2000 reuses a warm one: 380.
    expect([r.latencyMs.max, r.latencyMs.p50]).toEqual([1380, 1380]);
    expect(r.coldStarts).toBe(2);
    expect(r.functionInvocations).toBe(3);
    // 3 × 2e-7 + 3 GB × (1.38 + 1.38 + 0.38) s × 1.66667e-5
    expect(r.functionCostDollars).toBeCloseTo(3 * 2e-7 + 3 * 3.14 * 0.0000166667, 10);
  });

  it("engine - a bounded function pool: an invocation waits for a container, and fails at its deadline as the live pool's", () => {
    const sim = new Simulator({ seed: 1, durationMs: 10_000 });
    const pool = sim.addFunctionPool({ name: "local", latencyMs: 400, coldStartMs: 0, memoryGb: 1, maxConcurrency: 1 });
    // SLO 1000 ms: q0 runs 0-400, q1 waits and runs 400-800, q2 would start at 800 and end at 1200 (late,
    // but it starts before its deadline), q3's container frees at 1200, after its deadline (1003).
    sim.addStream({ app: "a", sloMs: 1000, process: at(0, 1, 2, 3) });
    sim.setRouter((_q, _f, cause) => (cause === "arrival" ? pool : null));
    const r = sim.run();
    expect([r.completed, r.dropped, r.sloMet]).toEqual([3, 1, 2]);
    expect(r.droppedByReason).toEqual({ [POOL_DEADLINE]: 1 });
    expect(r.latencyMs.max).toBe(1198);
  });

  it("engine - an uncounted stream is served (it queues ahead, warms functions) but enters no result", () => {
    // Warm-up queries at 0 and 10 (uncounted), then the measured ones at 20 and 30, on one 50 ms replica.
    const sim = new Simulator({ seed: 1, durationMs: 10_000 });
    const q = sim.addQueue({ name: "v", maxBatch: 1, waitMs: 0, shedLate: false });
    sim.addReplica(q, sim.launchMachine({ type: "t", kind: "cpu", pricePerS: 0 }), { latencyMs: { 1: 50 } });
    sim.addStream({ app: "a", sloMs: 1000, process: at(0, 10), counted: false });
    sim.addStream({ app: "a", sloMs: 1000, process: at(20, 30) });
    sim.setRouter((_q, _f, cause) => (cause === "arrival" ? q : null));
    const r = sim.run();
    expect([r.arrivals, r.completed, r.dropped, r.sloMet]).toEqual([2, 2, 0, 2]);
    // (the two before them ran first: 20 ends at 150, 30 at 200)
    expect([r.latencyMs.p50, r.latencyMs.max]).toEqual([130, 170]);
    expect(r.byApp.a?.arrivals).toBe(2);
    expect(r.series.arrivals.reduce((a, b) => a + b, 0)).toBe(2);
    // A function pool: the uncounted invocation starts the container, and is neither counted nor billed.
    const f = new Simulator({ seed: 1, durationMs: 10_000 });
    const pool = f.addFunctionPool({ name: "lambda", latencyMs: 380, coldStartMs: 1000, memoryGb: 3 });
    f.addStream({ app: "a", sloMs: 5000, process: at(0), counted: false });
    f.addStream({ app: "a", sloMs: 5000, process: at(2000) });
    f.setRouter((_q, _f, cause) => (cause === "arrival" ? pool : null));
    const fr = f.run();
    expect([fr.functionInvocations, fr.coldStarts, fr.latencyMs.max]).toEqual([1, 0, 380]);
    expect(fr.functionCostDollars).toBeCloseTo(2e-7 + 3 * 0.38 * 0.0000166667, 10);
  });

  it("engine - a killed machine's running batch goes back to the queue", () => {
    const sim = new Simulator({ seed: 1, durationMs: 10_000 });
    const q = sim.addQueue({ name: "v" });
    const m1 = sim.launchMachine({ type: "t", kind: "cpu", pricePerS: 0 });
    const m2 = sim.launchMachine({ type: "t", kind: "cpu", pricePerS: 0, bootMs: 200 });
    sim.addReplica(q, m1, { latencyMs: { 1: 100 } });
    sim.addReplica(q, m2, { latencyMs: { 1: 100 } });
    sim.addStream({ app: "a", sloMs: 10_000, process: at(0) });
    sim.setRouter((_q, _f, cause) => (cause === "arrival" ? q : null));
    sim.at(50, () => sim.killMachine(m1));
    const r = sim.run();
    // Started on m1 at 0, lost at 50, redone on m2 from 200 to 300.
    expect(r.completed).toBe(1);
    expect(r.latencyMs.p50).toBe(300);
  });

  it("engine - pipelines: fan-out and join through the router", () => {
    const sim = new Simulator({ seed: 1, durationMs: 10_000 });
    const pre = sim.addQueue({ name: "pre" });
    const a = sim.addQueue({ name: "a" });
    const b = sim.addQueue({ name: "b" });
    sim.addReplica(pre, null, { latencyMs: { 1: 10 } });
    sim.addReplica(a, null, { latencyMs: { 1: 30 } });
    sim.addReplica(b, null, { latencyMs: { 1: 50 } });
    sim.addStream({ app: "p", sloMs: 1000, process: at(0) });
    sim.setRouter((_q, from, cause) => (cause === "arrival" ? pre : from === pre ? [a, b] : null));
    // 10 + max(30, 50) = 60
    expect(sim.run().latencyMs.p50).toBe(60);
  });

  it("engine - a query dropped on one branch is reused only once its other branch is back", () => {
    // Every query fans out to a (1 ms, then dropped) and b (20 ms, then done): the engine reuses query
    // records, so one handed out again while b still held it would arrive at b with another id.
    // (Arrivals stop at 5 s: the run ends at 10 s, after every branch is back, dropped queries' too.)
    const sim = new Simulator({ seed: 1, durationMs: 10_000 });
    const a = sim.addQueue({ name: "a" });
    const b = sim.addQueue({ name: "b" });
    sim.addReplica(a, null, { latencyMs: { 1: 1 }, concurrency: 100 });
    sim.addReplica(b, null, { latencyMs: { 1: 20 }, concurrency: 100 });
    sim.addStream({ app: "p", sloMs: 1000, process: new ScheduledArrivals(constantRate(200, 5), 1), init: (q) => void (q.data = q.id) });
    let mismatched = 0;
    let servedByB = 0;
    sim.setRouter((q, from, cause) => {
      if (cause === "arrival") return [a, b];
      if (q.data !== q.id) mismatched++;
      if (from === b) servedByB++;
      return from === a ? drop("branch a") : null;
    });
    const r = sim.run();
    expect(mismatched).toBe(0);
    expect(servedByB).toBe(r.arrivals);
    expect(r.dropped).toBe(r.arrivals);
    expect(r.completed).toBe(0);
  });

  it("engine - the event heap pops in (time, sequence) order, a taken event's place going to the next push", () => {
    const rng = createRng(3);
    const heap = new EventHeap();
    const pending: Array<{ t: number; seq: number; ref: number }> = [];
    const popped: number[] = [];
    let seq = 0;
    const push = (t: number): void => {
      const e = { t, seq: seq++, ref: seq };
      pending.push(e);
      heap.push(e.t, e.seq, e.ref % 7, e.ref);
    };
    for (let i = 0; i < 50; i++) push(Math.floor(rng.next() * 20)); // (many equal times)
    let now = 0;
    while (heap.size > 0) {
      expect(heap.topT()).toBeGreaterThanOrEqual(now);
      now = heap.topT();
      const ref = heap.topRef() as number;
      expect(heap.topKind()).toBe(ref % 7);
      popped.push(ref);
      // As the engine does: take the event, schedule 0-2 later ones while handling it, then settle.
      heap.take();
      const n = popped.length < 400 ? Math.floor(rng.next() * 3) : 0;
      for (let k = 0; k < n; k++) push(now + Math.floor(rng.next() * 20));
      heap.settle();
    }
    const expected = [...pending].sort((a, b) => a.t - b.t || a.seq - b.seq).map((e) => e.ref);
    expect(popped).toEqual(expected);
  });

  it("engine - a queue keeps its waiting queries in order through growth and put-backs", () => {
    const sim = new Simulator({ seed: 1, durationMs: 1000 });
    const q = sim.addQueue({ name: "v" });
    const mk = (id: number): Query => ({ id, stream: 0, app: "a", arrivalMs: id, sloMs: 10, timeoutMs: undefined, minAccuracy: 0, maxCostPerQuery: Infinity, enqueuedMs: id, hops: 0, outstanding: 1, failed: false, data: undefined });
    const model: number[] = [];
    let next = 0;
    const rng = createRng(5);
    for (let step = 0; step < 2000; step++) {
      const u = rng.next();
      if (u < 0.55) {
        q._push(mk(next));
        model.push(next++);
      } else if (u < 0.9) {
        expect(q._shift()?.id).toBe(model.shift());
      } else {
        const back: Query[] = [];
        for (let k = 0; k < 3 && q.length > 0; k++) back.push(q._shift() as Query);
        const ids = back.map((b) => b.id);
        model.splice(0, ids.length);
        // put back with two new ones in front (as a killed machine's batch goes back to the head)
        const extra = [mk(next++), mk(next++)];
        q._unshift([...extra, ...back]);
        model.unshift(...extra.map((e) => e.id), ...ids);
      }
      expect(q.length).toBe(model.length);
      expect(q.peek()?.id).toBe(model[0]);
      if (q.length > 0) expect(q.queuedAtMs(q.length - 1)).toBe(model[model.length - 1]);
    }
    expect(q._shift()?.id).toBe(model[0]);
  });

  it("engine - controllers tick on the virtual clock", () => {
    const sim = new Simulator({ seed: 1, durationMs: 10_000 });
    const ticks: number[] = [];
    sim.every(2000, (t) => ticks.push(t));
    sim.run();
    expect(ticks).toEqual([2000, 4000, 6000, 8000, 10_000]);
  });

  it("engine - same seed, same result; another seed differs", () => {
    const runWith = (seed: number): SimResult => {
      const sim = new Simulator({ seed, durationMs: 20_000 });
      const q = sim.addQueue({ name: "v", maxBatch: 4, waitMs: 5 });
      sim.addReplica(q, null, { latencyMs: { 1: 8, 4: 20 } });
      sim.addStream({ app: "a", sloMs: 100, process: new ScheduledArrivals(constantRate(120, 20), 2) });
      sim.setRouter((_q, _f, cause) => (cause === "arrival" ? q : null));
      return sim.run();
    };
    const a = runWith(7);
    const b = runWith(7);
    expect(b.latencyMs).toEqual(a.latencyMs);
    expect(b.series).toEqual(a.series);
    expect(runWith(8).latencyMs.p99).not.toBe(a.latencyMs.p99);
  });
});
