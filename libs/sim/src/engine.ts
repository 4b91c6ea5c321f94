/**
 * A continuous-time discrete-event simulator of an inference-serving cluster, with a virtual clock
 * (DESIGN §2, §6). It runs the pure policies of `@sloserve/policy` unchanged: a scenario wires them in
 * as a router (called per query) and periodic controllers (called every N ms), and the engine moves
 * time, batches, serves, bills and measures.
 *
 * ## Model
 * - **Streams** produce queries (arrival processes from libs/policy common/arrivals.ts), each with an app, an SLO and
 *   optional accuracy/cost requirements.
 * - The **router** decides where a query goes: on arrival, after each queue has served it (so a
 *   pipeline routes stage by stage, fans out by returning several queues, and ends by returning
 *   `null`), and when a queue sheds it as late (a "late" query must not go back to the queue that shed
 *   it). It may return a {@link Queue}, a {@link FunctionPool}
 *   (serverless overflow), an array of queues (fan-out), {@link drop}(reason), or `null` (done).
 * - **Queues** are FIFO, one per variant (or pipeline stage), shared by all their replicas.
 * - **Replicas** (a loaded variant) sit on **machines** (billed instances with a boot delay and
 *   resources), or on no machine when a scenario bills replicas directly. A replica with a free slot
 *   takes a batch when the queue holds Nbatch (its `maxBatch`) queries, or when the oldest query has
 *   waited Wbatch (`waitMs`), or at once when Wbatch = 0 (libs/policy `planBatch`, the executor's rule).
 *   A batch of b takes T(b) × slowdowns. A queue with `shedLate` sheds, as the executor does, the
 *   queries that cannot finish by their deadline within the replica's expected run time (its profile ×
 *   the slowdown it has observed, libs/policy `RunTimeEstimate`).
 * - **Controllers** run every `periodMs` (`every`) and may launch/terminate machines and add/remove
 *   replicas; they read queue rates, replica busy times and states from the entities.
 * - **Measurement**: each query's end-to-end latency (arrival → last branch done), SLO attainment
 *   (completed within SLO / all arrivals; dropped queries count as misses), drops by reason, cost
 *   (machines and priced replicas per second with their billing minimum, functions per request and
 *   GB-second), and per-second series.
 * - **Conservation**: every arrival is either completed or dropped; queries still in flight when the
 *   drain window ends are dropped with reason "unfinished at end of run".
 * - Billing runs to `durationMs` (the experiment's window); after it the engine keeps serving queued
 *   queries for at most `drainMs` so that latencies of late queries are measured, without billing that.
 *
 * ## How a scenario drives it
 * ```ts
 * import { Simulator, ScheduledArrivals, constantRate, drop } from "@sloserve/sim";
 *
 * const sim = new Simulator({ seed: 1, durationMs: 3_600_000 });
 * const q = sim.addQueue({ name: "resnet50-gpu", maxBatch: 8, waitMs: 20 });
 * const gpu = sim.launchMachine({ type: "p3.2xlarge", kind: "gpu", pricePerS: 3.06 / 3600, bootMs: 30_000 });
 * sim.addReplica(q, gpu, { latencyMs: { 1: 5, 8: 15 }, loadMs: 5_000, label: "resnet50-gpu-b8" });
 * sim.addStream({ app: "classify", sloMs: 300, process: new ScheduledArrivals(constantRate(100, 3600), 1) });
 * sim.setRouter((query, from, cause) => (cause === "arrival" ? q : null)); // one stage, then done
 * sim.every(1000, (nowMs) => {
 *   // a controller: read q.rateQps(nowMs), q.length, replica.busyMsAt(nowMs) ...; call a pure policy;
 *   // apply its decisions with sim.launchMachine / addReplica / removeReplica / terminateMachine.
 * });
 * const result = sim.run(); // SimResult: latencies, attainment, drops, cost, per-second series
 * ```
 * Overflow: `sim.addFunctionPool({ name: "lambda", latencyMs: 380, memoryGb: 3 })` and return the pool
 * from the router (e.g. when `q.estimateCompletionMs() > query.sloMs`). Timers: `sim.at(tMs, fn)`.
 * Spot loss: `sim.killMachine(m)` puts the batches it was running back at the head of their queues.
 */
import { cannotFinishInTime, chooseContainer, createRng, expiredContainers, lambdaCost, planBatch, type Rng } from "@sloserve/policy";
import { BilledSum, billedCost } from "./billing.js";
import {
  FunctionPool,
  queryDeadlineMs,
  Machine,
  Queue,
  Replica,
  type Batch,
  type FunctionPoolOptions,
  type MachineOptions,
  type Query,
  type QueueOptions,
  type ReplicaOptions,
} from "./entities.js";
import { EventHeap } from "./heap.js";
import { BinCounter, LatencySample } from "./stats.js";
import type { ArrivalProcess } from "@sloserve/policy";

export * from "./entities.js";

/** A query is dropped (with a clear reason) instead of being served. */
export class Drop {
  constructor(readonly reason: string) {}
}
const dropCache = new Map<string, Drop>();
/** Why a query waiting for a function container failed (the live pool's deadline_exceeded). */
export const POOL_DEADLINE = "deadline: no function container free before the query's deadline";

/** A cached Drop for a reason (routers may call this per query without allocating). */
export function drop(reason: string): Drop {
  let d = dropCache.get(reason);
  if (!d) {
    d = new Drop(reason);
    dropCache.set(reason, d);
  }
  return d;
}

/** Remove x from a short array in place, keeping the order of the others (no allocation, unlike splice). */
function removeFrom<T>(a: T[], x: T): void {
  const i = a.indexOf(x);
  if (i < 0) return;
  for (let k = i + 1; k < a.length; k++) a[k - 1] = a[k] as T;
  a.pop();
}

export type Route = Queue | FunctionPool | readonly Queue[] | Drop | null;
/**
 * Why the router is called: a new query ("arrival"); a queue or function finished its stage ("served");
 * a queue shed it because it can no longer meet its deadline ("late"); a scenario took it out of a queue
 * with `rerouteQueued` (e.g. the variant was unloaded) and it needs a new place ("requeued").
 */
export type RouteCause = "arrival" | "served" | "late" | "requeued";
export type Router = (query: Query, from: Queue | FunctionPool | null, cause: RouteCause, sim: Simulator) => Route;

export interface StreamSpec {
  process: ArrivalProcess;
  app: string;
  sloMs: number;
  /**
   * The caller's deadline after arrival, ms (live: x-deadline-ms; a NATS caller that sends none gets
   * the dispatcher's default timeout): the executor sheds, and the function pool gives up on, a query
   * past it. @default sloMs
   */
  timeoutMs?: number;
  /** @default 0 */
  minAccuracy?: number;
  /** @default Infinity */
  maxCostPerQuery?: number;
  /** Called on each new query before routing (set query.data, vary the SLO, ...). */
  init?: (query: Query, sim: Simulator) => void;
  /**
   * false: the stream's queries are served like any other's but enter none of the results (counts,
   * latencies, SLO attainment, series, function invocations and their cost): a warm-up before the
   * measured window. @default true
   */
  counted?: boolean;
}

export interface SimulatorOptions {
  seed: number;
  /** Length of the experiment: arrivals stop and billing is measured here. */
  durationMs: number;
  /** Longest time after durationMs spent finishing queued queries. @default 60_000 */
  drainMs?: number;
  /** Period of the per-sample series (machines, cost). @default 1000 */
  sampleMs?: number;
}

export interface AppStats {
  arrivals: number;
  completed: number;
  dropped: number;
  sloMet: number;
  latency: LatencySample;
}

export interface Sample {
  tMs: number;
  costDollars: number;
  machinesByKind: Record<string, number>;
  replicasByQueue: Record<string, number>;
}

export interface SimResult {
  durationMs: number;
  /** Virtual time when the run stopped (≥ durationMs when queries were drained). */
  endMs: number;
  arrivals: number;
  completed: number;
  dropped: number;
  droppedByReason: Record<string, number>;
  sloMet: number;
  /** sloMet / arrivals (dropped queries count as misses). */
  sloAttainment: number;
  latencyMs: { p50: number; p99: number; mean: number; max: number };
  byApp: Record<string, { arrivals: number; completed: number; dropped: number; sloAttainment: number; p50: number; p99: number }>;
  costDollars: number;
  costByKind: Record<string, number>;
  functionCostDollars: number;
  functionInvocations: number;
  coldStarts: number;
  queues: Array<{ name: string; arrived: number; served: number; maxReplicas: number }>;
  /** Per second: arrivals, completions, completions within the SLO, misses (late completions + drops), drops. */
  series: { arrivals: number[]; completed: number[]; met: number[]; missed: number[]; dropped: number[] };
  samples: Sample[];
  events: number;
}

/** The quantiles a result reports (taken together: one copy of the latencies for both). */
const P50_P99: readonly number[] = [0.5, 0.99];

/** Kinds of events in the heap (arrivals are not: each stream holds its next one, see `run`). */
const enum Kind {
  BatchDone,
  QueueTimer,
  ReplicaReady,
  MachineReady,
  Tick,
  Call,
  FunctionDone,
  Sample,
}

interface Stream {
  index: number;
  spec: StreamSpec;
  rng: Rng;
  /** Stats of the stream's app (queries may not change app). */
  stats: AppStats | null;
  /** Its queries enter the results (`StreamSpec.counted`). */
  counted: boolean;
  /** The stream's next arrival: its time (Infinity when none) and its sequence number among all events. */
  nextT: number;
  nextSeq: number;
}

/** A query as the engine writes it (reused from one arrival to a later one, see `freeQueries`). */
type QueryRecord = { -readonly [K in keyof Query]: Query[K] };

interface Ticker {
  periodMs: number;
  fn: (nowMs: number) => void;
  cancelled: boolean;
}

interface FnCall {
  query: Query;
  pool: FunctionPool;
}

export class Simulator {
  /** Virtual time in ms. */
  nowMs = 0;
  /** The run's random generator (for routers and controllers); streams have their own. */
  readonly rng: Rng;
  readonly durationMs: number;
  readonly drainMs: number;
  readonly queues: Queue[] = [];
  readonly machines: Machine[] = [];
  readonly pools: FunctionPool[] = [];
  readonly byApp = new Map<string, AppStats>();

  /** Pending events (not arrivals, see `run`): kept in typed arrays, no object per event. */
  private readonly heap = new EventHeap();
  /** The time, for the replicas' run-time estimates: one function for all of them (a call site that sees one function can inline it). */
  private readonly clock = (): number => this.nowMs;
  /**
   * Queries that have completed or been dropped (every branch back), reused by the next arrivals: a
   * fresh query per arrival is young garbage that the queues (old objects) point at while it waits,
   * which is what the collector's scavenges pay for. Nothing in the engine keeps a finished query.
   */
  private readonly freeQueries: QueryRecord[] = [];
  private seq = 0;
  private nextId = 0;
  private readonly streams: Stream[] = [];
  private readonly allReplicas: Replica[] = [];
  private router: Router = () => drop("no router");
  private inFlight = 0;
  private activeStreams = 0;
  /** The stream whose pending arrival comes first, or null when no stream has one. */
  private nextStream: Stream | null = null;
  private arrivals = 0;
  private completed = 0;
  private dropped = 0;
  private sloMet = 0;
  private readonly droppedByReason: Record<string, number> = {};
  /**
   * Latency of all completed queries: their sum and max here (in completion order), their values in
   * the apps' samples (`byApp`), which the quantiles are taken over together (LatencySample.quantileOfUnion).
   */
  private latencySum = 0;
  private latencyMax = 0;
  private readonly arrivalSeries = new BinCounter();
  private readonly completedSeries = new BinCounter();
  private readonly metSeries = new BinCounter();
  private readonly missedSeries = new BinCounter();
  private readonly droppedSeries = new BinCounter();
  /**
   * The five series above are the engine's own and read only by `result`: the current second's counts
   * wait here (whole numbers: the same sums) and go into them when the second changes (`syncBin`).
   */
  private pendArrivals = 0;
  private pendCompleted = 0;
  private pendMet = 0;
  private pendMissed = 0;
  private pendDropped = 0;
  private readonly samples: Sample[] = [];
  private readonly sampleMs: number;
  private readonly sampleHooks: Array<(nowMs: number, sim: Simulator) => void> = [];
  private events = 0;
  private ran = false;
  private readonly seedBase: number;

  constructor(opts: SimulatorOptions) {
    this.rng = createRng(opts.seed);
    this.durationMs = opts.durationMs;
    this.drainMs = opts.drainMs ?? 60_000;
    this.sampleMs = opts.sampleMs ?? 1000;
    this.seedBase = opts.seed;
  }

  // ---------------------------------------------------------------- building

  addStream(spec: StreamSpec): void {
    const index = this.streams.length;
    this.streams.push({ index, spec, rng: createRng((this.seedBase * 1_000_003 + index * 7919 + 17) | 0), stats: null, counted: spec.counted !== false, nextT: Infinity, nextSeq: 0 });
  }

  setRouter(router: Router): void {
    this.router = router;
  }

  addQueue(opts: QueueOptions): Queue {
    const q = new Queue(this.queues.length, opts);
    this.queues.push(q);
    return q;
  }

  addFunctionPool(opts: FunctionPoolOptions): FunctionPool {
    const p = new FunctionPool(this.pools.length, opts);
    this.pools.push(p);
    return p;
  }

  /** Request a machine now; it is usable after `bootMs` and billed from now. */
  launchMachine(opts: MachineOptions): Machine {
    const m = new Machine(this.machines.length, opts, this.nowMs);
    this.machines.push(m);
    this.machineCosts.push(m);
    this.openMachines.push(m);
    this.schedule(this.nowMs + (opts.bootMs ?? 0), Kind.MachineReady, m);
    return m;
  }

  /**
   * Terminate a machine gracefully: its replicas stop taking work, running batches finish, billing
   * stops now.
   */
  terminateMachine(m: Machine): void {
    if (m.state === "terminated" || m.state === "draining") return;
    if (m.billedToMs === null) removeFrom(this.openMachines, m);
    m.billedToMs = this.nowMs;
    m.state = "draining";
    for (const r of [...m.replicas]) this.removeReplica(r);
    if (m.replicas.size === 0) m.state = "terminated";
  }

  /**
   * Lose a machine at once (spot interruption, failure): queries in its running batches go back to the
   * head of their queues; billing stops now.
   */
  killMachine(m: Machine): void {
    if (m.state === "terminated") return;
    if (m.billedToMs === null) removeFrom(this.openMachines, m);
    m.billedToMs ??= this.nowMs;
    m.state = "terminated";
    m.failed = true;
    for (const r of [...m.replicas]) {
      const lost: Query[] = [];
      for (const b of [...r.batches]) {
        b.cancelled = true;
        lost.push(...b.queries);
        r._finish(b, this.nowMs);
      }
      this.detach(r);
      if (lost.length > 0) {
        r.queue._unshift(lost);
        this.tryDispatch(r.queue);
      }
    }
  }

  /**
   * Load a replica of a variant on a machine (or on no machine). Returns null when the machine lacks
   * the resources or is terminating. It starts serving `loadMs` after the machine is up.
   */
  addReplica(queue: Queue, machine: Machine | null, opts: ReplicaOptions): Replica | null {
    if (machine && (machine.state === "draining" || machine.state === "terminated")) return null;
    if (machine && !machine.fits(opts.uses ?? {}, opts.mayExceed)) return null;
    const r = new Replica(this.allReplicas.length, queue, machine, opts, this.nowMs, this.clock);
    this.allReplicas.push(r);
    // (a replica without a price adds 0 to every sum of costs: only priced ones are summed)
    if (r.pricePerS > 0) this.replicaCosts.push(r);
    queue.replicas.push(r);
    queue.replicaVersion++;
    if (machine) {
      machine.replicas.add(r);
      for (const [k, v] of Object.entries(r.uses)) machine.used[k] = (machine.used[k] ?? 0) + v;
    }
    const up = machine ? Math.max(this.nowMs, machine.readyMs) : this.nowMs;
    if (!machine || machine.state === "running") this.schedule(up + r.loadMs, Kind.ReplicaReady, r);
    return r;
  }

  /** Unload a replica gracefully: it takes no new batch; running batches finish. */
  removeReplica(r: Replica): void {
    if (r.state === "removed" || r.state === "draining") return;
    r.billedToMs = this.nowMs;
    removeFrom(r.queue.avail, r);
    r.queue.replicaVersion++;
    if (r.inFlight > 0) r.state = "draining";
    else this.detach(r);
  }

  /**
   * Take every query waiting in a queue out and route it again (cause "requeued"): used when a variant
   * is unloaded with queries still waiting. Returns how many were moved.
   */
  rerouteQueued(queue: Queue): number {
    const waiting: Query[] = [];
    for (let q = queue._shift(); q; q = queue._shift()) waiting.push(q);
    for (const q of waiting) this.route(q, this.router(q, queue, "requeued", this));
    return waiting.length;
  }

  /** Call fn every periodMs, first at offsetMs (default: one period from now). */
  every(periodMs: number, fn: (nowMs: number) => void, offsetMs?: number): { cancel(): void } {
    const ticker: Ticker = { periodMs, fn, cancelled: false };
    this.schedule(offsetMs ?? this.nowMs + periodMs, Kind.Tick, ticker);
    return { cancel: () => void (ticker.cancelled = true) };
  }

  /** Call fn once at tMs. */
  at(tMs: number, fn: (nowMs: number) => void): void {
    this.schedule(Math.max(tMs, this.nowMs), Kind.Call, fn);
  }

  /** Called at every sample (default each second) after the engine's own sample is taken. */
  onSample(fn: (nowMs: number, sim: Simulator) => void): void {
    this.sampleHooks.push(fn);
  }

  // ---------------------------------------------------------------- reading

  /** All replicas ever created (removed ones included). */
  get replicas(): readonly Replica[] {
    return this.allReplicas;
  }

  /** Dollars billed up to atMs (default now) for machines, priced replicas and functions. */
  costDollars(atMs = this.nowMs): number {
    let c = 0;
    const machines = this.machines;
    let i = 0;
    if (atMs >= this.closedUntilMs) {
      // The leading machines whose billing has ended cost the same at every later time: their sum (in
      // the same order, so the same number) is kept and extended, and only the rest is added up.
      c = this.closedSum;
      i = this.closedMachines;
      for (; i < machines.length; i++) {
        const m = machines[i] as Machine;
        if (m.billedToMs === null || m.billedToMs > atMs || m.billedFromMs > atMs) break;
        c += billedCost(m, atMs);
        this.closedMachines = i + 1;
        this.closedSum = c;
        this.closedUntilMs = Math.max(this.closedUntilMs, m.billedToMs, m.billedFromMs);
      }
    }
    c = this.machineCosts.sum(i, atMs, c);
    c = this.replicaCosts.sum(0, atMs, c);
    for (const p of this.pools) c += p.costDollars;
    return c;
  }

  /** Every machine (by id) and every priced replica, with their costs kept once their billing has ended. */
  private readonly machineCosts = new BilledSum<Machine>();
  private readonly replicaCosts = new BilledSum<Replica>();
  /** Machines still billed (billedToMs null), by id: the per-second sample counts them. */
  private readonly openMachines: Machine[] = [];

  /** costDollars' memory: machines[0 .. closedMachines) have stopped billing; closedSum is their cost, valid from closedUntilMs on. */
  private closedMachines = 0;
  private closedSum = 0;
  private closedUntilMs = 0;

  /** Queries accepted and not yet completed or dropped. */
  get queriesInFlight(): number {
    return this.inFlight;
  }

  // ---------------------------------------------------------------- running

  run(): SimResult {
    if (this.ran) throw new Error("a Simulator runs once; build a new one");
    this.ran = true;
    for (const s of this.streams) this.scheduleArrival(s);
    this.schedule(0, Kind.Sample, null);
    const hardStop = this.durationMs + this.drainMs;
    // Events run in (time, sequence number) order. Arrivals, half of all events, stay out of the heap:
    // each stream holds its next one (with the sequence number it would have had in the heap), and
    // the earliest of them (`nextStream`) competes with the heap's top: the same order, fewer heap
    // operations.
    const heap = this.heap;
    for (;;) {
      const et = heap.topT();
      const s = this.nextStream;
      if (s !== null && (heap.size === 0 || s.nextT < et || (s.nextT === et && s.nextSeq < heap.topSeq()))) {
        const t = s.nextT;
        if (t > hardStop) break;
        if (t > this.durationMs && this.inFlight === 0) break;
        this.nowMs = t;
        this.events++;
        this.onArrival(s);
        continue;
      }
      if (heap.size === 0 || et > hardStop) break;
      if (et > this.durationMs && this.inFlight === 0) break;
      const kind = heap.topKind() as Kind;
      const ref = heap.topRef();
      // (the event's place goes to the first one it schedules, see EventHeap.take)
      heap.take();
      this.nowMs = et;
      this.events++;
      this.handle(kind, ref);
      heap.settle();
    }
    const endMs = Math.max(this.nowMs, this.durationMs);
    this.nowMs = endMs;
    if (this.inFlight > 0) {
      const n = this.inFlight;
      this.dropped += n;
      this.droppedByReason["unfinished at end of run"] = (this.droppedByReason["unfinished at end of run"] ?? 0) + n;
      this.inFlight = 0;
    }
    return this.result(endMs);
  }

  private handle(kind: Kind, ref: unknown): void {
    switch (kind) {
      case Kind.BatchDone:
        this.onBatchDone(ref as Batch);
        break;
      case Kind.QueueTimer: {
        const q = ref as Queue;
        if (q.timerAt === this.nowMs) {
          q.timerAt = Infinity;
          this.tryDispatch(q);
        }
        break;
      }
      case Kind.ReplicaReady: {
        const r = ref as Replica;
        if (r.state !== "loading") break;
        r.state = "ready";
        r.queue.replicaVersion++;
        r.readyMs = this.nowMs;
        r.queue.avail.push(r);
        this.tryDispatch(r.queue);
        break;
      }
      case Kind.MachineReady: {
        const m = ref as Machine;
        if (m.state !== "booting") break;
        m.state = "running";
        m.readyMs = this.nowMs;
        for (const r of m.replicas) if (r.state === "loading") this.schedule(this.nowMs + r.loadMs, Kind.ReplicaReady, r);
        break;
      }
      case Kind.Tick: {
        const t = ref as Ticker;
        if (t.cancelled) break;
        t.fn(this.nowMs);
        this.schedule(this.nowMs + t.periodMs, Kind.Tick, t);
        break;
      }
      case Kind.Call:
        (ref as (nowMs: number) => void)(this.nowMs);
        break;
      case Kind.FunctionDone: {
        const c = ref as FnCall;
        this.route(c.query, this.router(c.query, c.pool, "served", this));
        break;
      }
      case Kind.Sample:
        this.takeSample();
        if (this.nowMs + this.sampleMs <= this.durationMs) this.schedule(this.nowMs + this.sampleMs, Kind.Sample, null);
        break;
    }
  }

  /**
   * The one-second bin of nowMs, kept for the times in [binLoMs, binHiMs): every counter bins by one
   * second, and a division per event (events come at new times) is what this saves. Within
   * [b·1000, b·1000 + 999) `Math.floor(t / 1000)` is b (division rounds monotonically, and b + 0.999
   * is far from b + 1 at a double's precision); in a bin's last millisecond it is computed.
   */
  private bin = 0;
  private binLoMs = Infinity;
  private binHiMs = -Infinity;

  /** Make `bin` nowMs's second, first moving the engine's pending counts into their series when the second changes. */
  private syncBin(): void {
    const t = this.nowMs;
    if (t >= this.binLoMs && t < this.binHiMs) return;
    this.newBin(t);
  }

  /** {@link syncBin} outside the kept second (a method of its own: syncBin runs per event and stays small enough to inline). */
  private newBin(t: number): void {
    const b = Math.floor(t / 1000);
    if (b !== this.bin) this.flushSeries();
    this.bin = b;
    // (past 2^40 s the argument above is not made: every time is divided)
    this.binLoMs = Math.abs(b) < 2 ** 40 ? b * 1000 : Infinity;
    this.binHiMs = b * 1000 + 999;
  }

  /** The engine's pending counts into their series, at `bin`. */
  private flushSeries(): void {
    const b = this.bin;
    if (this.pendArrivals > 0) this.arrivalSeries.addBin(b, this.pendArrivals);
    if (this.pendCompleted > 0) this.completedSeries.addBin(b, this.pendCompleted);
    if (this.pendMet > 0) this.metSeries.addBin(b, this.pendMet);
    if (this.pendMissed > 0) this.missedSeries.addBin(b, this.pendMissed);
    if (this.pendDropped > 0) this.droppedSeries.addBin(b, this.pendDropped);
    this.pendArrivals = 0;
    this.pendCompleted = 0;
    this.pendMet = 0;
    this.pendMissed = 0;
    this.pendDropped = 0;
  }

  /** `c.add(this.nowMs, n)`, with the bin computed once per second rather than once per counter. */
  private count(c: BinCounter, n = 1): void {
    if (c.binMs !== 1000) {
      c.add(this.nowMs, n);
      return;
    }
    this.syncBin();
    c.addBin(this.bin, n);
  }

  private schedule(t: number, kind: Kind, ref: unknown): void {
    this.heap.push(t, this.seq++, kind, ref);
  }

  /** Draw a stream's next arrival (none past durationMs) and find the stream whose arrival is next. */
  private scheduleArrival(s: Stream): void {
    const t = s.spec.process.next(s.rng);
    if (t === null || t > this.durationMs) {
      s.nextT = Infinity;
    } else {
      this.activeStreams++;
      s.nextT = t;
      s.nextSeq = this.seq++;
    }
    let next: Stream | null = null;
    let nextT = Infinity;
    let nextSeq = 0;
    const streams = this.streams;
    for (let i = 0; i < streams.length; i++) {
      const x = streams[i] as Stream;
      const xt = x.nextT;
      if (xt < nextT || (xt === nextT && next !== null && x.nextSeq < nextSeq)) {
        next = x;
        nextT = xt;
        nextSeq = x.nextSeq;
      }
    }
    this.nextStream = next;
  }

  private onArrival(s: Stream): void {
    const t = this.nowMs;
    this.activeStreams--;
    const spec = s.spec;
    let q = this.freeQueries.pop();
    if (q === undefined) {
      q = {
        id: this.nextId++,
        stream: s.index,
        app: spec.app,
        arrivalMs: t,
        sloMs: spec.sloMs,
        timeoutMs: spec.timeoutMs,
        minAccuracy: spec.minAccuracy ?? 0,
        maxCostPerQuery: spec.maxCostPerQuery ?? Infinity,
        enqueuedMs: t,
        hops: 0,
        outstanding: 1,
        failed: false,
        data: undefined,
      };
    } else {
      q.id = this.nextId++;
      q.stream = s.index;
      q.app = spec.app;
      q.arrivalMs = t;
      q.sloMs = spec.sloMs;
      q.timeoutMs = spec.timeoutMs;
      q.minAccuracy = spec.minAccuracy ?? 0;
      q.maxCostPerQuery = spec.maxCostPerQuery ?? Infinity;
      q.enqueuedMs = t;
      q.hops = 0;
      q.outstanding = 1;
      q.failed = false;
      q.data = undefined;
    }
    if (spec.init !== undefined) spec.init(q, this);
    this.inFlight++;
    if (s.counted) {
      this.arrivals++;
      this.syncBin();
      this.pendArrivals++;
      const stats = (s.stats ??= this.app(spec.app));
      (q.app === spec.app ? stats : this.app(q.app)).arrivals++;
    }
    this.scheduleArrival(s);
    this.route(q, this.router(q, null, "arrival", this));
  }

  private statsOf(q: Query): AppStats {
    const s = this.streams[q.stream];
    return s?.stats && q.app === s.spec.app ? s.stats : this.app(q.app);
  }

  private app(name: string): AppStats {
    let a = this.byApp.get(name);
    if (!a) {
      a = { arrivals: 0, completed: 0, dropped: 0, sloMet: 0, latency: new LatencySample() };
      this.byApp.set(name, a);
    }
    return a;
  }

  /** Apply a router decision to a query (one branch of it). */
  private route(q: Query, r: Route): void {
    if (r === null) {
      this.branchDone(q);
    } else if (r instanceof Queue) {
      this.enqueue(q, r);
    } else if (r instanceof Drop) {
      this.fail(q, r.reason);
    } else if (r instanceof FunctionPool) {
      this.invoke(q, r);
    } else if (r.length === 0) {
      this.branchDone(q);
    } else {
      q.outstanding += r.length - 1;
      for (const queue of r) this.enqueue(q, queue);
    }
  }

  private enqueue(q: Query, queue: Queue): void {
    q.enqueuedMs = this.nowMs;
    q.hops++;
    this.count(queue.arrivals);
    queue._push(q);
    if (queue.avail.length > 0) this.tryDispatch(queue);
  }

  private branchDone(q: QueryRecord): void {
    q.outstanding--;
    if (q.outstanding > 0) return;
    if (q.failed) {
      this.freeQueries.push(q);
      return;
    }
    const lat = this.nowMs - q.arrivalMs;
    this.inFlight--;
    if (!this.isCounted(q)) {
      this.freeQueries.push(q);
      return;
    }
    this.completed++;
    this.latencySum += lat;
    if (lat > this.latencyMax) this.latencyMax = lat;
    this.syncBin();
    this.pendCompleted++;
    const a = this.statsOf(q);
    a.completed++;
    a.latency.add(lat);
    if (lat <= q.sloMs + 1e-9) {
      this.pendMet++;
      this.sloMet++;
      a.sloMet++;
    } else {
      this.pendMissed++;
    }
    this.freeQueries.push(q);
  }

  private fail(q: QueryRecord, reason: string): void {
    q.outstanding--;
    if (!q.failed) {
      q.failed = true;
      this.inFlight--;
      if (this.isCounted(q)) {
        this.dropped++;
        this.droppedByReason[reason] = (this.droppedByReason[reason] ?? 0) + 1;
        this.syncBin();
        this.pendDropped++;
        this.pendMissed++;
        this.statsOf(q).dropped++;
      }
    }
    if (q.outstanding === 0) this.freeQueries.push(q);
  }

  /** Whether the query's stream counts in the results (`StreamSpec.counted`). */
  private isCounted(q: Query): boolean {
    return this.streams[q.stream]?.counted !== false;
  }

  private invoke(q: Query, pool: FunctionPool): void {
    q.hops++;
    const counted = this.isCounted(q);
    if (counted) pool.invocations++;
    this.count(pool.arrivals);
    const now = this.nowMs;
    const exec = typeof pool.latency === "number" ? pool.latency : pool.latency(q);
    // The live pool's rules (libs/policy function-pool.ts): idle containers past their keep-alive
    // expire, then `chooseContainer` takes the most recently used idle one, else starts one (a cold
    // start) while fewer than maxConcurrency exist, else the query waits for the first to free up.
    const expired = expiredContainers(pool.containerViews(now), now, pool.keepAliveMs);
    if (expired.length > 0) pool.retire(expired.map((e) => Number(e.id)));
    const choice = chooseContainer(pool.containerViews(now), pool.name, { maxConcurrency: pool.maxConcurrency, whenFull: "queue" });
    let pick: number;
    let start = now;
    let duration = exec;
    if (choice.action === "warm") {
      pick = Number(choice.id);
    } else if (choice.action === "wait") {
      pick = 0;
      for (let i = 1; i < pool.busyUntil.length; i++) if ((pool.busyUntil[i] ?? 0) < (pool.busyUntil[pick] ?? 0)) pick = i;
      start = pool.busyUntil[pick] ?? now;
      // The live pool fails a waiting invocation at the query's deadline (libs/providers
      // local-functions.ts): one whose container frees up only after it never takes the container.
      const deadline = queryDeadlineMs(q);
      if (start > deadline) {
        this.schedule(deadline, Kind.Call, () => this.fail(q, POOL_DEADLINE));
        return;
      }
    } else {
      // "start" (every container busy, room for one more). A simulated pool holds one model, so its
      // idle containers all hold it: "load" and "claim" do not arise; "reject" is not asked for.
      pick = pool.busyUntil.length;
      pool.busyUntil.push(0);
      pool.lastUsedMs.push(-Infinity);
      duration += pool.coldStartMs;
      if (counted) pool.coldStarts++;
    }
    const end = start + duration;
    pool.busyUntil[pick] = end;
    pool.lastUsedMs[pick] = end;
    if (counted) pool.costDollars += lambdaCost(duration, pool.memoryGb, pool.pricing);
    this.schedule(end, Kind.FunctionDone, { query: q, pool } satisfies FnCall);
  }

  /**
   * Start batches on free replicas of a queue while the batching rule allows: the executor's own rule
   * (libs/policy `planBatch`, `cannotFinishInTime`, each replica's `RunTimeEstimate`), so that the
   * simulator batches and sheds exactly as the live executor does.
   */
  private tryDispatch(queue: Queue): void {
    while (queue.length > 0 && queue.avail.length > 0) {
      let progressed = false;
      let wakeAt = Infinity;
      for (let i = 0; i < queue.avail.length; i++) {
        const r = queue.avail[i] as Replica;
        // (`r.runTime` for `r.expectedMs`: the same estimate, see planBatch)
        const step = planBatch(queue, false, this.nowMs, r.batchPolicy, r.runTime, queue.shedLate);
        for (let k = 0; k < step.late; k++) {
          const late = queue._shift() as Query;
          r.shed++;
          this.route(late, this.router(late, queue, "late", this));
        }
        const d = step.decision;
        if (d.action === "run") {
          // (nothing was shed: planBatch found the head able to finish alone, which is startBatch's
          // test for a batch of one at the same time, with the same estimate)
          this.startBatch(r, d.size, step.late === 0);
          progressed = true;
          break;
        }
        if (d.action === "wait") wakeAt = Math.min(wakeAt, d.untilMs);
        if (step.late > 0) {
          progressed = true;
          break;
        }
      }
      if (!progressed) {
        if (wakeAt < queue.timerAt) {
          queue.timerAt = wakeAt;
          this.schedule(wakeAt, Kind.QueueTimer, queue);
        }
        return;
      }
    }
  }

  /**
   * Take n queries off the queue into a batch on r. Those that cannot finish within the batch's
   * expected run time are shed first (as the executor does), and the rest run.
   */
  private startBatch(r: Replica, n: number, headChecked = false): void {
    const queue = r.queue;
    // A batch record and its array of queries from the pool (see `freeBatches`).
    const b = this.freeBatches.pop() ?? { replica: r, queries: [], startMs: 0, endMs: 0, profiledMs: 0, cancelled: false };
    const queries = b.queries;
    if (n === 1 && headChecked) {
      // A batch of one whose query planBatch has just found able to finish alone (`cannotFinishInTime`
      // with `expectedMs(1)` at this time, nothing routed since): the test below would keep it.
      queries.push(queue._shift() as Query);
    } else {
      // (`r.expectedMs(n)`, called as the method it wraps: one call site for every replica)
      const expected = queue.shedLate ? r.runTime.expectedMs(n, this.nowMs) : 0;
      for (let k = 0; k < n; k++) {
        const q = queue._shift() as Query;
        if (queue.shedLate && cannotFinishInTime(queryDeadlineMs(q), this.nowMs, expected)) {
          r.shed++;
          this.route(q, this.router(q, queue, "late", this));
        } else queries.push(q);
      }
    }
    if (queries.length === 0 || r.state !== "ready") {
      // Every query was shed (or routing a late one took the replica away): nothing to run.
      if (queries.length > 0) queue._unshift(queries);
      this.releaseBatch(b);
      return;
    }
    const size = queries.length;
    const profiled = r.lat[size] as number;
    const svc = profiled * r.slowdown * (r.machine?.slowdown ?? 1);
    b.replica = r;
    b.startMs = this.nowMs;
    b.endMs = this.nowMs + svc;
    b.profiledMs = profiled;
    b.cancelled = false;
    r._start(b);
    if (r.inFlight >= r.concurrency) removeFrom(queue.avail, r);
    this.schedule(b.endMs, Kind.BatchDone, b);
  }

  private onBatchDone(b: Batch): void {
    if (b.cancelled) {
      this.releaseBatch(b);
      return;
    }
    const r = b.replica;
    const queue = r.queue;
    r._finish(b, this.nowMs);
    r.runTime.observe(b.queries.length, b.endMs - b.startMs, b.endMs);
    // (a queue's counters bin by one second: they are built with the default binMs, which is readonly)
    this.syncBin();
    const bin = this.bin;
    queue.served.addBin(bin, b.queries.length);
    queue.batchesDone.addBin(bin, 1);
    const runMs = b.endMs - b.startMs;
    queue.observedMs.addBin(bin, runMs);
    queue.p50Ms.addBin(bin, runMs * (r.machine?.observedFactor ?? 1));
    queue.profiledMs.addBin(bin, b.profiledMs);
    if (r.state === "ready") {
      if (r.inFlight === r.concurrency - 1) queue.avail.push(r);
    } else if (r.state === "draining" && r.inFlight === 0) {
      this.detach(r);
    }
    r.served += b.queries.length;
    for (const q of b.queries) {
      if (this.nowMs - q.arrivalMs > q.sloMs) r.sloMisses++;
      this.route(q, this.router(q, queue, "served", this));
    }
    this.releaseBatch(b);
    // (tryDispatch does nothing on an empty queue; the test here leaves the inliner's budget for the rest)
    if (queue.length > 0) this.tryDispatch(queue);
  }

  /**
   * Batch records are reused: a run starts about one batch per query, and a fresh record and array each
   * time are garbage the collector must trace through the queues that point at them. A batch is free
   * once its BatchDone event has been handled (a cancelled batch's event still points at it until then);
   * nothing else keeps one (`Replica.batches` holds running batches only).
   */
  private readonly freeBatches: Batch[] = [];

  private releaseBatch(b: Batch): void {
    const queries = b.queries;
    while (queries.length > 0) queries.pop(); // (setting `length` calls into the runtime)
    this.freeBatches.push(b);
  }

  /** Take a replica off its queue and machine for good. */
  private detach(r: Replica): void {
    r.state = "removed";
    r.queue.replicaVersion++;
    r.billedToMs ??= this.nowMs;
    removeFrom(r.queue.replicas, r);
    removeFrom(r.queue.avail, r);
    const m = r.machine;
    if (m) {
      m.replicas.delete(r);
      for (const [k, v] of Object.entries(r.uses)) m.used[k] = (m.used[k] ?? 0) - v;
      if (m.state === "draining" && m.replicas.size === 0) m.state = "terminated";
    }
  }

  private takeSample(): void {
    const machinesByKind: Record<string, number> = {};
    // (the machines not yet terminated nor draining: their billing has not ended)
    for (const m of this.openMachines) machinesByKind[m.kind] = (machinesByKind[m.kind] ?? 0) + 1;
    const replicasByQueue: Record<string, number> = {};
    for (const q of this.queues) {
      let n = 0;
      for (const r of q.replicas) if (r.state !== "draining") n++;
      replicasByQueue[q.name] = n;
    }
    this.samples.push({ tMs: this.nowMs, costDollars: this.costDollars(), machinesByKind, replicasByQueue });
    for (const h of this.sampleHooks) h(this.nowMs, this);
  }

  private result(endMs: number): SimResult {
    this.flushSeries();
    const byApp: SimResult["byApp"] = {};
    const samples: LatencySample[] = [];
    for (const [name, a] of this.byApp) {
      samples.push(a.latency);
      const [p50, p99] = a.latency.quantiles(P50_P99) as [number, number];
      byApp[name] = {
        arrivals: a.arrivals,
        completed: a.completed,
        dropped: a.dropped,
        sloAttainment: a.arrivals > 0 ? a.sloMet / a.arrivals : 1,
        p50,
        p99,
      };
    }
    const [p50, p99] = LatencySample.quantilesOfUnion(samples, P50_P99) as [number, number];
    const costByKind: Record<string, number> = {};
    for (const m of this.machines) costByKind[m.kind] = (costByKind[m.kind] ?? 0) + billedCost(m, this.durationMs);
    for (const r of this.allReplicas) {
      const k = r.machine?.kind ?? "replica";
      const c = billedCost(r, this.durationMs);
      if (c > 0) costByKind[k] = (costByKind[k] ?? 0) + c;
    }
    let functionCost = 0;
    let invocations = 0;
    let coldStarts = 0;
    for (const p of this.pools) {
      functionCost += p.costDollars;
      invocations += p.invocations;
      coldStarts += p.coldStarts;
    }
    if (functionCost > 0) costByKind.function = functionCost;
    const maxReplicas = new Map<string, number>();
    for (const s of this.samples) for (const [k, v] of Object.entries(s.replicasByQueue)) maxReplicas.set(k, Math.max(maxReplicas.get(k) ?? 0, v));
    const seconds = Math.ceil(this.durationMs / 1000);
    const pad = (c: BinCounter): number[] => Array.from({ length: seconds }, (_, i) => c.counts[i] ?? 0);
    return {
      durationMs: this.durationMs,
      endMs,
      arrivals: this.arrivals,
      completed: this.completed,
      dropped: this.dropped,
      droppedByReason: { ...this.droppedByReason },
      sloMet: this.sloMet,
      sloAttainment: this.arrivals > 0 ? this.sloMet / this.arrivals : 1,
      latencyMs: {
        p50,
        p99,
        mean: this.completed === 0 ? NaN : this.latencySum / this.completed,
        max: this.latencyMax,
      },
      byApp,
      costDollars: this.costDollars(this.durationMs),
      costByKind,
      functionCostDollars: functionCost,
      functionInvocations: invocations,
      coldStarts,
      queues: this.queues.map((q) => ({ name: q.name, arrived: q.arrivals.total, served: q.served.total, maxReplicas: maxReplicas.get(q.name) ?? 0 })),
      series: {
        arrivals: pad(this.arrivalSeries),
        completed: pad(this.completedSeries),
        met: pad(this.metSeries),
        missed: pad(this.missedSeries),
        dropped: pad(this.droppedSeries),
      },
      samples: this.samples,
      events: this.events,
    };
  }
}

