/**
 * An InferLine pipeline as a simulated system (papers/inferline.txt §3-5): a pipeline configuration
 * (per model: hardware, max batch, replicas; pipeline.ts) mapped onto the engine, the same serving
 * model as the Estimator (estimator.ts), which is the engine's fast path for pipelines.
 *
 * - One engine queue per model, shared by all of its replicas (InferLine's centralized batched queue);
 *   Wbatch = 0, so an idle replica takes min(queue length, max batch) at once; no shedding (the
 *   Estimator never sheds: a late query is served late and counts as a miss).
 * - A replica is a replica with no machine, billed at the profile's price per hour from the moment it
 *   is added (a scale-up is billed from the decision) to its removal; its batch of b takes the profile's
 *   interpolated T(b) (pipeline.ts `latencyFn`, as in the Estimator).
 * - Routing: each query's conditional-edge outcomes come from `routes` (the Estimator's
 *   `sampleRoutes`), one mask per query in arrival order; `pipelineRoute` (pipeline.ts, the rule the
 *   Estimator follows too) gives the models it visits, where it goes after each model (fan-out) and
 *   how many parents a model waits for (joins). The query completes when every visited model has.
 * - Scaling ({@link PipelineSystem.setReplicas}): a scale-up adds replicas that start serving after
 *   `activationMs`; a scale-down removes replicas still activating first, then idle ones, then busy
 *   ones in the order their batches finish (each busy one retires when its batch completes) — the
 *   Estimator's replica schedule.
 */
import {
  findProfile, latencyFn, pipelineRoute, rootModels, topologicalOrder, validatePipeline,
  type Pipeline, type PipelineConfig, type PipelineRoute, type ProfileSet,
} from "@sloserve/policy";
import { drop, type Simulator } from "../engine.js";
import type { Query, Queue, Replica } from "../entities.js";
import { ReplayArrivals } from "@sloserve/policy";

export interface PipelineSystemOptions {
  pipeline: Pipeline;
  profiles: ProfileSet;
  config: PipelineConfig;
  /** Arrival times at the pipeline, ms, non-decreasing (one stream replays them). */
  arrivalsMs: ArrayLike<number>;
  /** Per query (arrival order), the conditional edges taken (sampleRoutes). Required with conditional edges. */
  routes?: ArrayLike<number>;
  sloMs: number;
  /** Called when a query completes (every model it visits has finished), with its latency. */
  onComplete?: (query: Query, latencyMs: number) => void;
}

export interface PipelineSystem {
  /** The queue of each model. */
  readonly queues: Readonly<Record<string, Queue>>;
  /** Replicas of a model that are serving, activating or busy but not retiring. */
  replicas(model: string): number;
  /** Scale a model to `count` replicas now; new ones serve after `activationMs` (billed from now). */
  setReplicas(model: string, count: number, activationMs?: number): void;
}

interface QueryRoute {
  route: PipelineRoute;
  /** Per model with more than one visited parent, the parents still to finish (copied per query). */
  waits: Record<string, number> | null;
}

export function installPipeline(sim: Simulator, opts: PipelineSystemOptions): PipelineSystem {
  const { pipeline: p, profiles, config } = opts;
  const problems = validatePipeline(p, profiles);
  if (problems.length > 0) throw new Error(`pipeline system: ${problems.join("; ")}`);
  const conditional = p.edges.some((e) => (e.probability ?? 1) < 1);
  if (conditional && (!opts.routes || opts.routes.length < opts.arrivalsMs.length)) {
    throw new Error("pipeline system: the pipeline has conditional edges; pass routes (sampleRoutes) for every query");
  }

  const queues: Record<string, Queue> = {};
  const live: Record<string, Replica[]> = {};
  const replicaOptions: Record<string, Parameters<Simulator["addReplica"]>[2]> = {};
  for (const m of topologicalOrder(p)) {
    const c = config[m];
    if (!c) throw new Error(`pipeline system: configuration has no entry for model ${m}`);
    const h = findProfile(profiles, m, c.hardware);
    queues[m] = sim.addQueue({ name: m, maxBatch: c.maxBatch, waitMs: 0, shedLate: false });
    replicaOptions[m] = { latencyMs: latencyFn(h), maxBatch: c.maxBatch, waitMs: 0, pricePerS: h.pricePerHour / 3600, label: `${m}-${c.hardware}-b${c.maxBatch}` };
    live[m] = [];
  }

  const setReplicas = (model: string, count: number, activationMs = 0): void => {
    const q = queues[model];
    const mine = live[model];
    if (!q || !mine) throw new Error(`pipeline system: unknown model ${model}`);
    for (let i = mine.length; i < count; i++) {
      const r = sim.addReplica(q, null, { ...replicaOptions[model]!, loadMs: activationMs });
      if (r) mine.push(r);
    }
    if (mine.length <= count) return;
    // Retire: still activating, then idle, then busy by the end of their batch (first to finish first).
    const rank = (r: Replica): number => (r.state === "loading" ? -Infinity : r.inFlight === 0 ? -1e300 : Math.min(...r.batches.map((b) => b.endMs)));
    const order = [...mine].sort((a, b) => rank(a) - rank(b));
    const going = new Set(order.slice(0, mine.length - count));
    for (const r of going) sim.removeReplica(r);
    live[model] = mine.filter((r) => !going.has(r));
  };
  for (const m of p.models) setReplicas(m, config[m]!.replicas);

  // Route classes, one per distinct mask, shared by the queries that take them.
  const classes = new Map<number, QueryRoute>();
  const classOf = (mask: number): QueryRoute => {
    let c = classes.get(mask);
    if (!c) {
      const route = pipelineRoute(p, mask);
      const joins = Object.entries(route.parents).filter(([, n]) => n > 1);
      c = { route, waits: joins.length > 0 ? Object.fromEntries(joins) : null };
      classes.set(mask, c);
    }
    return c;
  };
  const rootQueues = rootModels(p).map((m) => queues[m]!);
  const rootRoute = rootQueues.length === 1 ? rootQueues[0]! : rootQueues;
  const childQueues = (q: QueryRoute, from: string): Queue[] => {
    const out: Queue[] = [];
    for (const c of q.route.children[from] ?? []) {
      if (q.waits && q.waits[c] !== undefined && --q.waits[c]! > 0) continue;
      out.push(queues[c]!);
    }
    return out;
  };

  const onComplete = opts.onComplete;
  let nextIndex = 0;
  const routes = opts.routes;
  sim.addStream({
    app: p.name,
    sloMs: opts.sloMs,
    process: new ReplayArrivals(opts.arrivalsMs),
    init: (q: Query) => {
      const c = classOf(routes ? (routes[nextIndex] ?? 0) : 0);
      nextIndex++;
      q.data = c.waits ? { route: c.route, waits: { ...c.waits } } : c;
    },
  });
  sim.setRouter((q, from, cause) => {
    if (cause === "arrival") return rootRoute;
    if (cause !== "served" || from === null) return drop(`pipeline system: unexpected ${cause}`);
    const next = childQueues(q.data as QueryRoute, from.name);
    if (next.length === 0) {
      // This branch ends; the query completes with its last outstanding branch.
      if (q.outstanding === 1) onComplete?.(q, sim.nowMs - q.arrivalMs);
      return null;
    }
    return next.length === 1 ? next[0]! : next;
  });

  return {
    queues,
    replicas: (model) => live[model]?.length ?? 0,
    setReplicas,
  };
}
