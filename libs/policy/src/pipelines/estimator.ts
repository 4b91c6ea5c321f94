/**
 * The InferLine Estimator (InferLine §4.2): a continuous-time discrete-event simulation of a pipeline
 * configuration on a sample arrival trace, returning the latency of every query.
 *
 * Model of the serving system (the centralized batched queueing system InferLine requires, §3): one
 * FIFO queue per model, shared by all of its replicas; whenever a replica is idle and the queue is not
 * empty, the replica takes min(queue length, max batch) queries at once and is busy for the profiled
 * latency of that batch size on its hardware. When a batch finishes, its queries are handed on to
 * the next models one at a time, in batch order, and an idle downstream replica starts on the first
 * that reaches it (executors answer each query of a batch with its own message, and the simulator's
 * engine routes each served query on its own; libs/sim/test/estimator-vs-engine.test.ts checks that
 * the two simulators agree); only then does the finished replica take its next batch.
 * A query's latency is from its arrival at the pipeline until every model it visits has finished with
 * it (pipelineRoute in pipeline.ts is the routing rule, shared with the simulator). Conditional
 * edges are decided per query in advance (sampleRoutes) so that every configuration the Planner
 * compares sees the same queries take the same paths.
 *
 * Extension for live simulation: an optional replica schedule changes a model's replica count at
 * given times (the Tuner's and baselines' scaling actions, activation delays already added by the
 * caller); a shrinking model retires idle replicas at once and busy ones when their batch completes.
 *
 * Caveats: no network or RPC overheads, no interference between co-located models, deterministic batch
 * latencies: the same idealisation as the paper's estimator, which it validates against measurements
 * (its Fig. 8).
 *
 * Implementation notes, for speed: external arrivals are consumed in order from the input array, the
 * only heap holds in-flight batches (at most one per replica), queues are append-only typed arrays
 * (a query enters each model at most once) and a batch is a slice of its model's queue.
 */
import { quantile } from "../common/quantile.js";
import type { Rng } from "../common/rng.js";
import {
  findProfile, latencyFn, pipelineRoute, rootModels, topologicalOrder, validatePipeline,
  type Pipeline, type PipelineConfig, type ProfileSet,
} from "./pipeline.js";

export interface ReplicaChange {
  atMs: number;
  model: string;
  replicas: number;
}

export interface EstimateInput {
  pipeline: Pipeline;
  profiles: ProfileSet;
  config: PipelineConfig;
  /** Arrival times at the pipeline, ms, non-decreasing. */
  arrivalsMs: ArrayLike<number>;
  /**
   * Per query, the conditional edges taken: bit j is the j-th conditional edge (probability < 1) in
   * `pipeline.edges` order. Required when the pipeline has conditional edges.
   */
  routes?: Uint32Array;
  /** Replica-count changes over time, sorted by atMs (config gives the counts at time 0). */
  replicaSchedule?: readonly ReplicaChange[];
  /**
   * Stop as soon as more than 1% of the queries have exceeded this latency: the P99 is then known to be
   * above it (result.stoppedEarly; latencies are incomplete).
   */
  stopWhenP99AboveMs?: number;
}

export interface EstimateResult {
  /** Latency of each query, ms (NaN for queries not finished when stopped early). */
  latenciesMs: Float64Array;
  p99Ms: number;
  meanMs: number;
  stoppedEarly: boolean;
  /** Batches run per model. */
  batches: Record<string, number>;
  /** Mean batch size per model. */
  meanBatch: Record<string, number>;
}

/** Draws the conditional-edge outcomes of n queries (bit j = j-th conditional edge taken). */
export function sampleRoutes(p: Pipeline, n: number, rng: Rng): Uint32Array {
  const probs = p.edges.map((e) => e.probability ?? 1).filter((x) => x < 1);
  const out = new Uint32Array(n);
  if (probs.length === 0) return out;
  for (let q = 0; q < n; q++) {
    let mask = 0;
    for (let j = 0; j < probs.length; j++) if (rng.next() < probs[j]!) mask |= 1 << j;
    out[q] = mask >>> 0;
  }
  return out;
}

/** Min-heap of batch slots keyed by finish time. */
class FinishHeap {
  private t = new Float64Array(64);
  private s = new Int32Array(64);
  size = 0;

  push(time: number, slot: number): void {
    if (this.size === this.t.length) {
      const t = new Float64Array(this.size * 2);
      t.set(this.t);
      const s = new Int32Array(this.size * 2);
      s.set(this.s);
      this.t = t;
      this.s = s;
    }
    let i = this.size++;
    while (i > 0) {
      const p = (i - 1) >> 1;
      if (this.t[p]! <= time) break;
      this.t[i] = this.t[p]!;
      this.s[i] = this.s[p]!;
      i = p;
    }
    this.t[i] = time;
    this.s[i] = slot;
  }

  topTime(): number {
    return this.size > 0 ? this.t[0]! : Infinity;
  }

  /** Removes the minimum and returns its slot. */
  pop(): number {
    const top = this.s[0]!;
    const n = --this.size;
    const lt = this.t[n]!;
    const ls = this.s[n]!;
    let i = 0;
    for (;;) {
      let c = 2 * i + 1;
      if (c >= n) break;
      if (c + 1 < n && this.t[c + 1]! < this.t[c]!) c++;
      if (this.t[c]! >= lt) break;
      this.t[i] = this.t[c]!;
      this.s[i] = this.s[c]!;
      i = c;
    }
    this.t[i] = lt;
    this.s[i] = ls;
    return top;
  }
}

/** Runs the estimator. Throws on an invalid pipeline, a missing profile or missing routes. */
export function estimate(input: EstimateInput): EstimateResult {
  const { pipeline: p, profiles, config } = input;
  const problems = validatePipeline(p, profiles);
  if (problems.length > 0) throw new Error(`estimator: ${problems.join("; ")}`);
  const order = topologicalOrder(p);
  const index = new Map(order.map((m, i) => [m, i]));
  const M = order.length;
  const arrivals = input.arrivalsMs instanceof Float64Array ? input.arrivalsMs : Float64Array.from(input.arrivalsMs);
  const n = arrivals.length;
  const conditional = p.edges.filter((e) => (e.probability ?? 1) < 1);
  if (conditional.length > 0 && (!input.routes || input.routes.length < n)) {
    throw new Error("estimator: the pipeline has conditional edges; pass routes (sampleRoutes) for every query");
  }

  // Per-model batch latency table, lat[m·stride + b] for b in 1..maxBatch.
  const maxBatch = new Int32Array(M);
  const replicas = new Int32Array(M);
  let stride = 1;
  for (const m of order) stride = Math.max(stride, (config[m]?.maxBatch ?? 0) + 1);
  const lat = new Float64Array(M * stride);
  for (let i = 0; i < M; i++) {
    const m = order[i]!;
    const c = config[m];
    if (!c) throw new Error(`estimator: configuration has no entry for model ${m}`);
    if (!(c.maxBatch >= 1) || !(c.replicas >= 0)) throw new Error(`estimator: model ${m} needs maxBatch ≥ 1 and replicas ≥ 0`);
    const f = latencyFn(findProfile(profiles, m, c.hardware));
    for (let b = 1; b <= c.maxBatch; b++) lat[i * stride + b] = f(b);
    maxBatch[i] = c.maxBatch;
    replicas[i] = c.replicas;
  }

  // Route classes, one per distinct mask, flattened: per class, the visited count, the initial number
  // of awaited parents per model, and per model the children reached by taken edges (CSR layout).
  // The routing rule is pipelineRoute's (pipeline.ts), shared with the simulator's pipeline system.
  const roots = Int32Array.from(rootModels(p).map((m) => index.get(m)!));
  const classOfMask = new Map<number, number>();
  const visitedCount: number[] = [];
  const needTable: number[] = [];
  const childStart: number[] = [];
  const childList: number[] = [];
  const routeClass = (mask: number): number => {
    const known = classOfMask.get(mask);
    if (known !== undefined) return known;
    const route = pipelineRoute(p, mask);
    const cls = visitedCount.length;
    visitedCount.push(route.visited.length);
    for (let i = 0; i < M; i++) {
      const m = order[i]!;
      childStart.push(childList.length);
      for (const c of route.children[m] ?? []) childList.push(index.get(c)!);
      needTable.push(route.parents[m] ?? 0);
    }
    childStart.push(childList.length);
    classOfMask.set(mask, cls);
    return cls;
  };
  const qClass = new Int32Array(n);
  if (input.routes) {
    const routes = input.routes;
    // Masks index a small table when there are few conditional edges (the usual case).
    const table = conditional.length <= 12 ? new Int32Array(1 << conditional.length).fill(-1) : null;
    for (let q = 0; q < n; q++) {
      const mask = routes[q]!;
      if (table && mask < table.length) {
        let c = table[mask]!;
        if (c < 0) table[mask] = c = routeClass(mask);
        qClass[q] = c;
      } else {
        qClass[q] = routeClass(mask);
      }
    }
  } else {
    qClass.fill(routeClass(0));
  }

  const visitedOf = Int32Array.from(visitedCount);
  const needOf = Uint8Array.from(needTable);
  const childStartOf = Int32Array.from(childStart);
  const childOf = Int32Array.from(childList);


  // Queue of model m: queue[m·n + qHead[m] … m·n + qTail[m]).
  const queue = new Int32Array(n * M);
  const qHead = new Int32Array(M);
  const qTail = new Int32Array(M);
  const idle = new Int32Array(M);
  const alive = new Int32Array(M);
  const target = new Int32Array(M);
  for (let i = 0; i < M; i++) {
    idle[i] = replicas[i]!;
    alive[i] = replicas[i]!;
    target[i] = replicas[i]!;
  }
  const need = new Uint8Array(n * M);
  const outstanding = new Int32Array(n);
  const latencies = new Float64Array(n).fill(NaN);
  const batchCount = new Float64Array(M);
  const batchQueries = new Float64Array(M);

  // In-flight batch slots.
  let slotModel: Int32Array = new Int32Array(64);
  let slotStart: Int32Array = new Int32Array(64);
  let slotCount: Int32Array = new Int32Array(64);
  const freeSlots: number[] = [];
  let slotsUsed = 0;
  const heap = new FinishHeap();

  const allocSlot = (): number => {
    const s = freeSlots.pop();
    if (s !== undefined) return s;
    if (slotsUsed === slotModel.length) {
      const grow = (a: Int32Array): Int32Array => {
        const b = new Int32Array(a.length * 2);
        b.set(a);
        return b;
      };
      slotModel = grow(slotModel);
      slotStart = grow(slotStart);
      slotCount = grow(slotCount);
    }
    return slotsUsed++;
  };

  const dispatch = (m: number, t: number): void => {
    while (idle[m]! > 0 && qTail[m]! > qHead[m]!) {
      const b = Math.min(qTail[m]! - qHead[m]!, maxBatch[m]!);
      const slot = allocSlot();
      slotModel[slot] = m;
      slotStart[slot] = qHead[m]!;
      slotCount[slot] = b;
      qHead[m] = qHead[m]! + b;
      idle[m]!--;
      batchCount[m]!++;
      batchQueries[m] = batchQueries[m]! + b;
      heap.push(t + lat[m * stride + b]!, slot);
    }
  };

  const enqueue = (m: number, q: number, t: number): void => {
    queue[m * n + qTail[m]!] = q;
    qTail[m]!++;
    dispatch(m, t);
  };

  const schedule = input.replicaSchedule ?? [];
  let si = 0;
  let ai = 0;
  let done = 0;
  let misses = 0;
  const missLimit = Math.floor(0.01 * n);
  const stopAt = input.stopWhenP99AboveMs;
  let stoppedEarly = false;
  let sum = 0;

  for (;;) {
    const tA = ai < n ? arrivals[ai]! : Infinity;
    const tB = heap.topTime();
    const tS = si < schedule.length ? schedule[si]!.atMs : Infinity;
    if (tA === Infinity && tB === Infinity) break;
    if (tS <= tA && tS <= tB) {
      const ch = schedule[si++]!;
      const m = index.get(ch.model);
      if (m === undefined) throw new Error(`estimator: replica schedule names unknown model ${ch.model}`);
      target[m] = ch.replicas;
      if (ch.replicas > alive[m]!) {
        idle[m] = idle[m]! + (ch.replicas - alive[m]!);
        alive[m] = ch.replicas;
        dispatch(m, ch.atMs);
      } else {
        const drop = Math.min(idle[m]!, alive[m]! - ch.replicas);
        idle[m] = idle[m]! - drop;
        alive[m] = alive[m]! - drop;
      }
    } else if (tB <= tA) {
      const slot = heap.pop();
      freeSlots.push(slot);
      const m = slotModel[slot]!;
      if (alive[m]! > target[m]!) alive[m]!--;
      else idle[m]!++;
      const end = m * n + slotStart[slot]! + slotCount[slot]!;
      for (let k = m * n + slotStart[slot]!; k < end; k++) {
        const q = queue[k]!;
        const cs = qClass[q]! * (M + 1) + m;
        const ce = childStartOf[cs + 1]!;
        for (let j = childStartOf[cs]!; j < ce; j++) {
          const c = childOf[j]!;
          if (--need[q * M + c]! === 0) {
            // Handed on at once: an idle replica of c starts on it now (enqueue, inlined).
            queue[c * n + qTail[c]!] = q;
            qTail[c]!++;
            if (idle[c]! > 0) dispatch(c, tB);
          }
        }
        if (--outstanding[q]! === 0) {
          const l = tB - arrivals[q]!;
          latencies[q] = l;
          sum += l;
          done++;
          if (stopAt !== undefined && l > stopAt && ++misses > missLimit) {
            stoppedEarly = true;
            break;
          }
        }
      }
      if (stoppedEarly) break;
      // Downstream models were dispatched as each query reached them; this model has a free replica.
      dispatch(m, tB);
    } else {
      const q = ai++;
      const cls = qClass[q]!;
      outstanding[q] = visitedOf[cls]!;
      const base = q * M;
      const nb = cls * M;
      for (let i = 0; i < M; i++) need[base + i] = needOf[nb + i]!;
      for (let r = 0; r < roots.length; r++) enqueue(roots[r]!, q, tA);
    }
  }

  const batches: Record<string, number> = {};
  const meanBatch: Record<string, number> = {};
  order.forEach((m, i) => {
    batches[m] = batchCount[i]!;
    meanBatch[m] = batchCount[i]! > 0 ? batchQueries[i]! / batchCount[i]! : 0;
  });
  return {
    latenciesMs: latencies,
    p99Ms: stoppedEarly ? Infinity : quantile(latencies, 0.99),
    meanMs: done > 0 ? sum / done : NaN,
    stoppedEarly,
    batches,
    meanBatch,
  };
}

/** Fraction of finished queries whose latency exceeded the SLO (unfinished ones count as misses). */
export function missRate(latenciesMs: ArrayLike<number>, sloMs: number): number {
  if (latenciesMs.length === 0) return 0;
  let miss = 0;
  for (let i = 0; i < latenciesMs.length; i++) {
    const v = latenciesMs[i]!;
    if (Number.isNaN(v) || v > sloMs) miss++;
  }
  return miss / latenciesMs.length;
}
