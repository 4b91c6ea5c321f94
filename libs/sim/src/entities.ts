/**
 * The things a simulation is made of: queries, machines (billed instances with a boot delay and
 * resources), replicas (a loaded model variant on a machine that serves batches from one queue),
 * queues (one FIFO per variant/model stage, shared by its replicas: InferLine's centralized batched
 * queue, DESIGN §2 `q.<variant>`), and function pools (serverless overflow, MArk §4.5).
 * The {@link Simulator} in engine.ts owns them and moves time; scenarios read their fields and call the
 * simulator's methods to change them.
 */
import type { FunctionContainerView, LambdaPricing } from "@sloserve/policy";
import { LAMBDA_PRICING, RunTimeEstimate, type BatchPolicy, type BatchQueueView } from "@sloserve/policy";
import { BinCounter } from "./stats.js";

/**
 * One inference request. `data` is scratch space for the scenario's router (e.g. pipeline progress).
 * The engine reuses the object for a later arrival once the query has completed or been dropped (every
 * branch back): a router, `init` or controller must not keep a query past its last routing.
 */
export interface Query {
  readonly id: number;
  /** Index of the stream that produced it. */
  readonly stream: number;
  readonly app: string;
  readonly arrivalMs: number;
  /** End-to-end latency objective: the query meets its SLO when it completes by arrivalMs + sloMs. */
  sloMs: number;
  /**
   * The caller's deadline after arrival (live: x-deadline-ms, else the dispatcher's default timeout):
   * past it the executor sheds the query and the function pool gives up on it. Undefined: the SLO
   * ({@link queryDeadlineMs}).
   */
  timeoutMs: number | undefined;
  minAccuracy: number;
  /** Infinity when the query sets no cost limit. */
  maxCostPerQuery: number;
  /** When the query entered its current queue. */
  enqueuedMs: number;
  /** Number of queues/functions the query has visited. */
  hops: number;
  /** Branches of a fan-out still in flight (1 for a linear path). */
  outstanding: number;
  /** Set once the query is dropped; later branch completions are ignored. */
  failed: boolean;
  data: unknown;
}

/** When the executor sheds a query and the function pool gives up on it: arrival + its timeout, else + its SLO. */
export function queryDeadlineMs(q: Query): number {
  return q.arrivalMs + (q.timeoutMs ?? q.sloMs);
}

export type ResourceMap = Record<string, number>;

export type MachineState = "booting" | "running" | "draining" | "terminated";

export interface MachineOptions {
  /** Instance type, e.g. "p3.2xlarge". */
  type: string;
  /** Hardware kind, e.g. "cpu" | "gpu" | "inferentia". */
  kind: string;
  /** Price in $/s; 0 for machines billed elsewhere. */
  pricePerS: number;
  /** Delay between the launch request and the machine being usable. @default 0 */
  bootMs?: number;
  /**
   * What replicas on this machine may use, by the names of the live workers' reports (libs/contracts
   * `WorkerReport`; libs/policy `instanceOffer`): e.g. { threads: 4, memoryBytes: 8e9 } for a CPU
   * worker, { threads: 4, accelerators: 1, acceleratorMemoryBytes: 16 GiB } for a GPU worker (its
   * threads are its slots; acceleratorMemoryBytes is all its GPUs' memory). @default {} (unlimited)
   */
  resources?: ResourceMap;
  /** EC2's 60 s minimum. @default 60 */
  billingMinimumS?: number;
  /** Spot instance (for reporting only; the price is what the caller passes). @default false */
  spot?: boolean;
  tags?: Record<string, unknown>;
}

export class Machine {
  state: MachineState = "booting";
  readyMs = Infinity;
  billedToMs: number | null = null;
  readonly replicas = new Set<Replica>();
  readonly used: ResourceMap = {};
  /** Multiplies the service time of every batch on this machine (interference); 1 = as profiled. */
  slowdown = 1;
  /**
   * What the dispatcher's overflow estimate sees of this machine's batch times, over their run time:
   * it reads the live workers' median batch (`batchP50Ms` of their reports), and batch times skew
   * right, so the median is below the mean the run times add up to (the live replay gives the ratio
   * per second); 1 = the run time. The variant-state monitor reads the run times themselves, as the
   * executors' interference evidence is their Σ observed over Σ profiled batch time.
   */
  observedFactor = 1;
  /** Set when the machine was lost (killMachine) rather than terminated. */
  failed = false;
  readonly type: string;
  readonly kind: string;
  readonly pricePerS: number;
  readonly resources: ResourceMap;
  readonly billingMinimumS: number;
  readonly spot: boolean;
  readonly tags: Record<string, unknown>;
  /** `<kind>-<id>` (a field, not a getter: controllers key maps by it every tick). */
  readonly name: string;

  constructor(
    readonly id: number,
    opts: MachineOptions,
    readonly billedFromMs: number,
  ) {
    this.type = opts.type;
    this.kind = opts.kind;
    this.name = `${this.kind}-${this.id}`;
    this.pricePerS = opts.pricePerS;
    this.resources = { ...(opts.resources ?? {}) };
    this.billingMinimumS = opts.billingMinimumS ?? 60;
    this.spot = opts.spot ?? false;
    this.tags = { ...(opts.tags ?? {}) };
  }


  /** Free amount of a resource (Infinity when the machine does not limit it). */
  free(resource: string): number {
    const cap = this.resources[resource];
    return cap === undefined ? Infinity : cap - (this.used[resource] ?? 0);
  }

  /** Whether `uses` fits in what is free; resources in `mayExceed` are not checked. */
  fits(uses: ResourceMap, mayExceed?: readonly string[]): boolean {
    for (const [k, v] of Object.entries(uses)) if (this.free(k) < v - 1e-9 && !mayExceed?.includes(k)) return false;
    return true;
  }

  /** Busy slot-milliseconds of this machine's replicas so far (difference two readings for a window). */
  busyMsAt(nowMs: number): number {
    let s = 0;
    for (const r of this.replicas) s += r.busyMsAt(nowMs);
    return s;
  }
}

export type ReplicaState = "loading" | "ready" | "draining" | "removed";

export interface ReplicaOptions {
  /** Service time of a batch of b queries: a function, or a table by batch size (see latencyArray). */
  latencyMs: ((batch: number) => number) | Record<number, number>;
  /** Nbatch: largest batch. @default the queue's maxBatch */
  maxBatch?: number;
  /** Wbatch: longest wait of the oldest query before a partial batch leaves. @default the queue's waitMs */
  waitMs?: number;
  /** Batches that may run at once (pipelined accelerators). @default 1 */
  concurrency?: number;
  /** Loading latency once the machine is up. @default 0 */
  loadMs?: number;
  /** Resources taken on the machine. @default {} */
  uses?: ResourceMap;
  /**
   * Resources of `uses` the replica may take beyond what its machine has free (still counted as
   * used): a CPU executor checks only memory when it loads, so a swap's new instance shares the
   * threads of the one it replaces until that one is unloaded. @default none
   */
  mayExceed?: readonly string[];
  /** Own price in $/s (INFaaS §6.2 bills variant instances). @default 0 */
  pricePerS?: number;
  /** @default 0 */
  billingMinimumS?: number;
  /** Free-form label, e.g. the variant name. */
  label?: string;
  tags?: Record<string, unknown>;
}

/**
 * Latency table → array indexed by batch size 1..maxBatch. A table gives profiled sizes (1, 2, 4, ...);
 * a batch of b runs at the smallest profiled size ≥ b (padded), and sizes past the largest profiled one
 * scale linearly from it.
 */
export function latencyArray(latency: ReplicaOptions["latencyMs"], maxBatch: number): Float64Array {
  const out = new Float64Array(maxBatch + 1);
  if (typeof latency === "function") {
    for (let b = 1; b <= maxBatch; b++) out[b] = latency(b);
    return out;
  }
  const sizes = Object.keys(latency).map(Number).filter((b) => b >= 1).sort((a, b) => a - b);
  const largest = sizes[sizes.length - 1];
  if (largest === undefined) throw new Error("latency table is empty");
  for (let b = 1; b <= maxBatch; b++) {
    const at = sizes.find((s) => s >= b);
    out[b] = at !== undefined ? (latency[at] as number) : ((latency[largest] as number) * b) / largest;
  }
  return out;
}

export interface Batch {
  replica: Replica;
  queries: Query[];
  startMs: number;
  endMs: number;
  profiledMs: number;
  cancelled: boolean;
}

export class Replica {
  state: ReplicaState = "loading";
  readyMs = Infinity;
  billedToMs: number | null = null;
  inFlight = 0;
  /** Multiplies this replica's service times (interference injected by a scenario); 1 = as profiled. */
  slowdown = 1;
  /** Batches running now (at most `concurrency`). */
  readonly batches: Batch[] = [];
  readonly lat: Float64Array;
  readonly maxBatch: number;
  readonly waitMs: number;
  readonly concurrency: number;
  readonly loadMs: number;
  readonly uses: ResourceMap;
  readonly pricePerS: number;
  readonly billingMinimumS: number;
  readonly label: string;
  readonly tags: Record<string, unknown>;
  /** Nbatch and Wbatch as the batching rule reads them. */
  readonly batchPolicy: BatchPolicy;
  /** What the replica expects a batch to take: its profile × the slowdown it has observed. */
  readonly runTime: RunTimeEstimate;
  readonly expectedMs: (size: number) => number;
  private busyMs = 0;
  /**
   * What this replica's worker reports of it (libs/sim worker-report.ts, as the live executors count):
   * queries it answered, those answered after their SLO, and those shed as late before a batch on it.
   */
  served = 0;
  sloMisses = 0;
  shed = 0;
  private inFlightStartSum = 0;

  constructor(
    readonly id: number,
    readonly queue: Queue,
    readonly machine: Machine | null,
    opts: ReplicaOptions,
    readonly billedFromMs: number,
    /** The simulation's time (the run-time estimate decays while stale). */
    now: () => number,
  ) {
    this.maxBatch = opts.maxBatch ?? queue.maxBatch;
    this.waitMs = opts.waitMs ?? queue.waitMs;
    this.concurrency = opts.concurrency ?? 1;
    this.loadMs = opts.loadMs ?? 0;
    this.uses = { ...(opts.uses ?? {}) };
    this.pricePerS = opts.pricePerS ?? 0;
    this.billingMinimumS = opts.billingMinimumS ?? 0;
    this.label = opts.label ?? queue.name;
    this.tags = { ...(opts.tags ?? {}) };
    this.lat = latencyArray(opts.latencyMs, this.maxBatch);
    this.batchPolicy = { maxBatch: this.maxBatch, batchWaitMs: this.waitMs };
    // (the replica itself as the profile: `latencyMs(b)`, one method for every replica, not a closure each)
    this.runTime = new RunTimeEstimate(this);
    this.expectedMs = (b) => this.runTime.expectedMs(b, now());
  }

  /** Profiled service time of a batch of b (b ≤ maxBatch). */
  latencyMs(b: number): number {
    return this.lat[Math.min(Math.max(1, b), this.maxBatch)] ?? NaN;
  }

  /** Profiled saturation throughput: concurrency × maxBatch / T(maxBatch). */
  peakQps(): number {
    return (this.concurrency * this.maxBatch * 1000) / this.latencyMs(this.maxBatch);
  }

  /** Busy slot-milliseconds so far (in-flight batches count up to nowMs). */
  busyMsAt(nowMs: number): number {
    return this.busyMs + this.inFlight * nowMs - this.inFlightStartSum;
  }

  /** @internal engine bookkeeping */
  _start(b: Batch): void {
    this.inFlight++;
    this.inFlightStartSum += b.startMs;
    this.batches.push(b);
  }

  /** @internal engine bookkeeping */
  _finish(b: Batch, nowMs: number): void {
    this.inFlight--;
    this.inFlightStartSum -= b.startMs;
    this.busyMs += nowMs - b.startMs;
    const i = this.batches.indexOf(b);
    if (i >= 0) {
      this.batches[i] = this.batches[this.batches.length - 1] as Batch;
      this.batches.pop();
    }
  }
}

export interface QueueOptions {
  name: string;
  /** Nbatch default for replicas. @default 1 */
  maxBatch?: number;
  /** Wbatch default for replicas. @default 0 */
  waitMs?: number;
  /**
   * Shed as the executor does (libs/policy `planBatch`): queries that can no longer meet their deadline
   * (arrival + SLO) within the replica's expected run time are handed to the router with cause "late"
   * (overflow or a timeout error) instead of being run. @default false
   */
  shedLate?: boolean;
  tags?: Record<string, unknown>;
}

export class Queue implements BatchQueueView {
  readonly name: string;
  maxBatch: number;
  waitMs: number;
  shedLate: boolean;
  readonly tags: Record<string, unknown>;
  readonly replicas: Replica[] = [];
  /** Bumped whenever a replica of the queue is added or changes state (for callers that cache what they derive from its replicas). */
  replicaVersion = 0;
  /** Replicas that are ready and have a free slot, longest-idle first. */
  readonly avail: Replica[] = [];
  readonly arrivals = new BinCounter();
  readonly served = new BinCounter();
  /** Per second: Σ observed batch time and Σ profiled batch time (for interference detection). */
  readonly observedMs = new BinCounter();
  readonly profiledMs = new BinCounter();
  /** Per second: Σ batch time × its machine's `observedFactor` (the median batch the overflow estimate reads). */
  readonly p50Ms = new BinCounter();
  /** Per second: batches finished. */
  readonly batchesDone = new BinCounter();
  /**
   * The waiting queries, oldest first: a ring of `size` slots from `head` in a buffer whose length is
   * a power of two (`mask` + 1), grown by doubling; a run at steady state allocates nothing for its
   * queues (an array shifted by an index and compacted now and then left a fresh copy behind, and
   * the growing array survived scavenges).
   */
  private ring: Array<Query | undefined> = new Array<Query | undefined>(16).fill(undefined);
  private mask = 15;
  private head = 0;
  private size = 0;
  timerAt = Infinity;

  constructor(
    readonly id: number,
    opts: QueueOptions,
  ) {
    this.name = opts.name;
    this.maxBatch = opts.maxBatch ?? 1;
    this.waitMs = opts.waitMs ?? 0;
    this.shedLate = opts.shedLate ?? false;
    this.tags = { ...(opts.tags ?? {}) };
  }

  get length(): number {
    return this.size;
  }

  queuedAtMs(i: number): number {
    return (this.ring[(this.head + i) & this.mask] as Query).enqueuedMs;
  }

  deadlineMs(i: number): number {
    return queryDeadlineMs(this.ring[(this.head + i) & this.mask] as Query);
  }

  /** The oldest waiting query. */
  peek(): Query | undefined {
    return this.size > 0 ? this.ring[this.head] : undefined;
  }

  /** Ready (serving) replicas, draining ones excluded. */
  readyReplicas(): number {
    let n = 0;
    for (const r of this.replicas) if (r.state === "ready") n++;
    return n;
  }

  /** Σ profiled peak QPS of ready replicas. */
  capacityQps(): number {
    let c = 0;
    for (const r of this.replicas) if (r.state === "ready") c += r.peakQps();
    return c;
  }

  /** Arrival rate into this queue over the last window (complete seconds). */
  rateQps(nowMs: number, windowMs = 1000): number {
    return this.arrivals.rate(nowMs, windowMs);
  }

  /**
   * Estimated time until a query joining now would complete: the work queued ahead drained at the
   * ready capacity, plus one full Wbatch wait and one batch (MArk §4.5's overflow test). Infinity with no
   * ready replica.
   */
  estimateCompletionMs(): number {
    const cap = this.capacityQps();
    if (cap <= 0) return Infinity;
    let svc = Infinity;
    let wait = 0;
    for (const r of this.replicas) {
      if (r.state !== "ready") continue;
      svc = Math.min(svc, r.latencyMs(r.maxBatch));
      wait = Math.max(wait, r.waitMs);
    }
    return (this.length * 1000) / cap + wait + svc;
  }

  /** @internal */
  _push(q: Query): void {
    if (this.size === this.ring.length) this.grow(this.size + 1);
    this.ring[(this.head + this.size) & this.mask] = q;
    this.size++;
  }

  /** @internal */
  _shift(): Query | undefined {
    if (this.size === 0) return undefined;
    const q = this.ring[this.head];
    this.ring[this.head] = undefined;
    this.head = (this.head + 1) & this.mask;
    this.size--;
    return q;
  }

  /** @internal put queries back at the head, in their order (machine killed mid-batch). */
  _unshift(qs: Query[]): void {
    if (this.size + qs.length > this.ring.length) this.grow(this.size + qs.length);
    for (let k = qs.length - 1; k >= 0; k--) {
      this.head = (this.head - 1) & this.mask;
      this.ring[this.head] = qs[k];
      this.size++;
    }
  }

  /** A buffer of at least `min` slots (a power of two) holding the queries in order from index 0. */
  private grow(min: number): void {
    let n = this.ring.length * 2;
    while (n < min) n *= 2;
    const ring = new Array<Query | undefined>(n).fill(undefined);
    for (let i = 0; i < this.size; i++) ring[i] = this.ring[(this.head + i) & this.mask];
    this.ring = ring;
    this.mask = n - 1;
    this.head = 0;
  }
}

export interface FunctionPoolOptions {
  name: string;
  /** Execution time of one query (warm). */
  latencyMs: number | ((q: Query) => number);
  /** Extra time when no warm container is free. @default 0 */
  coldStartMs?: number;
  /** A container stays warm this long after its last use. @default 600_000 (10 min) */
  keepAliveMs?: number;
  /** Memory size; Lambda bills per GB-second. @default 3 (MArk's 3 GB) */
  memoryGb?: number;
  pricing?: LambdaPricing;
  /** Most containers at once (Lambda's concurrency limit); beyond it a query waits for the first
   * container to free up. @default Infinity */
  maxConcurrency?: number;
}

export class FunctionPool {
  readonly name: string;
  readonly latency: number | ((q: Query) => number);
  readonly coldStartMs: number;
  readonly keepAliveMs: number;
  readonly memoryGb: number;
  readonly pricing: LambdaPricing;
  readonly maxConcurrency: number;
  invocations = 0;
  coldStarts = 0;
  costDollars = 0;
  readonly arrivals = new BinCounter();
  /** Per container: busy until, last finished. */
  readonly busyUntil: number[] = [];
  readonly lastUsedMs: number[] = [];

  constructor(
    readonly id: number,
    opts: FunctionPoolOptions,
  ) {
    this.name = opts.name;
    this.latency = opts.latencyMs;
    this.coldStartMs = opts.coldStartMs ?? 0;
    this.keepAliveMs = opts.keepAliveMs ?? 600_000;
    this.memoryGb = opts.memoryGb ?? 3;
    this.pricing = opts.pricing ?? LAMBDA_PRICING;
    this.maxConcurrency = opts.maxConcurrency ?? Infinity;
  }

  /** The containers as the live pool's rules read them (libs/policy function-pool.ts); id = index. */
  containerViews(nowMs: number): FunctionContainerView[] {
    const views: FunctionContainerView[] = [];
    for (let i = 0; i < this.busyUntil.length; i++) {
      views.push({ id: String(i), state: (this.busyUntil[i] ?? 0) > nowMs ? "busy" : "idle", objects: [this.name], lastUsedMs: this.lastUsedMs[i] ?? -Infinity, claimed: false });
    }
    return views;
  }

  /** Takes expired containers out of the pool. */
  retire(indices: readonly number[]): void {
    for (const i of [...indices].sort((a, b) => b - a)) {
      this.busyUntil.splice(i, 1);
      this.lastUsedMs.splice(i, 1);
    }
  }

  /** Containers warm at nowMs (idle or busy). */
  warmContainers(nowMs: number): number {
    let n = 0;
    for (let i = 0; i < this.busyUntil.length; i++) {
      if ((this.busyUntil[i] ?? 0) > nowMs || nowMs - (this.lastUsedMs[i] ?? -Infinity) <= this.keepAliveMs) n++;
    }
    return n;
  }
}
