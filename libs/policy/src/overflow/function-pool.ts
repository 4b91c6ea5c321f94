/**
 * Decisions of a pool of function containers (the local function provider; DESIGN §3 "Serverless
 * overflow", MArk §4.1 and §4.5): which container serves an invocation, which idle containers expire,
 * and what a pre-warm starts. Pure: the pool's shell passes a snapshot of its containers and the time.
 *
 * The rules follow what AWS Lambda is observed to do, since the local pool stands for it:
 * - One invocation per container at a time. An invocation takes an idle container that already holds
 *   its model (warm), else an idle one that must load it (the model load is a cold start), else a
 *   container still starting that nobody claimed (a pre-warm in progress: it is ready sooner than a new
 *   one), else starts a new container while fewer than `maxConcurrency` exist, else waits for one to be
 *   released (`whenFull: "queue"`) or is refused (`"reject"`; Lambda's throttling).
 * - Among idle containers the most recently used is taken, so the others stay idle and expire: the
 *   pool shrinks back after a surge (Lambda is observed to do the same).
 * - An idle container expires `keepAliveMs` after its last use. MArk §4.5 cites 45-60 minutes for the
 *   Lambda of 2019; today's Lambda is observed to recycle idle instances after 5-15 minutes, hence the
 *   pool's 10-minute default.
 * - A pre-warm of n (MArk §4.5: "concurrent pings to warm up more instances") makes sure n containers
 *   exist, or n hold the given model: idle containers without the model load it, and new ones are
 *   started for the rest, within `maxConcurrency`. Asking again for the same n starts nothing.
 */

export type FunctionContainerState = "starting" | "idle" | "busy";

export interface FunctionContainerView {
  id: string;
  state: FunctionContainerState;
  /** Model objects loaded in the container, or being loaded into it. */
  objects: readonly string[];
  /** Last time the container finished an invocation (or became ready), epoch ms. */
  lastUsedMs: number;
  /** For a starting container: whether an invocation or a pre-warm already waits on it. */
  claimed: boolean;
}

export interface FunctionPoolLimits {
  maxConcurrency: number;
  whenFull: "queue" | "reject";
}

export type ContainerChoice =
  | { action: "warm"; id: string; reason: string }
  | { action: "load"; id: string; reason: string }
  | { action: "claim"; id: string; reason: string }
  | { action: "start"; reason: string }
  | { action: "wait"; reason: string }
  | { action: "reject"; reason: string };

function mostRecent(containers: readonly FunctionContainerView[]): FunctionContainerView | undefined {
  let best: FunctionContainerView | undefined;
  for (const c of containers) if (!best || c.lastUsedMs > best.lastUsedMs) best = c;
  return best;
}

/** Which container serves an invocation of `object`. */
export function chooseContainer(containers: readonly FunctionContainerView[], object: string, limits: FunctionPoolLimits): ContainerChoice {
  const idle = containers.filter((c) => c.state === "idle");
  const warm = mostRecent(idle.filter((c) => c.objects.includes(object)));
  if (warm) return { action: "warm", id: warm.id, reason: `container ${warm.id} is idle with ${object} loaded` };
  const other = mostRecent(idle);
  if (other) return { action: "load", id: other.id, reason: `container ${other.id} is idle; it loads ${object}` };
  const starting = containers.find((c) => c.state === "starting" && !c.claimed);
  if (starting) return { action: "claim", id: starting.id, reason: `container ${starting.id} is starting and unclaimed` };
  if (containers.length < limits.maxConcurrency) {
    return { action: "start", reason: `every container is busy (${containers.length} of at most ${limits.maxConcurrency}): start one` };
  }
  const why = `all ${containers.length} containers are busy (maxConcurrency ${limits.maxConcurrency})`;
  return limits.whenFull === "queue" ? { action: "wait", reason: `${why}: wait for one` } : { action: "reject", reason: why };
}

/** Idle containers unused for `keepAliveMs` or longer, with the reason each expires. */
export function expiredContainers(containers: readonly FunctionContainerView[], nowMs: number, keepAliveMs: number): Array<{ id: string; reason: string }> {
  return containers
    .filter((c) => c.state === "idle" && nowMs - c.lastUsedMs >= keepAliveMs)
    .map((c) => ({ id: c.id, reason: `idle for ${nowMs - c.lastUsedMs} ms ≥ keep-alive ${keepAliveMs} ms` }));
}

export interface PrewarmPlan {
  /** Idle containers that should load the object. */
  load: string[];
  /** New containers to start (each loads the object when one is given). */
  start: number;
  reason: string;
}

/**
 * What a pre-warm of `n` does: without `object`, start containers until n exist; with `object`, until
 * n containers hold it (counting those loading it), first by loading it into idle containers, then by
 * starting new ones. Never beyond `maxConcurrency`.
 */
export function planPrewarm(containers: readonly FunctionContainerView[], n: number, maxConcurrency: number, object?: string): PrewarmPlan {
  const want = Math.min(Math.max(0, Math.floor(n)), maxConcurrency);
  const room = Math.max(0, maxConcurrency - containers.length);
  if (object === undefined) {
    const start = Math.min(room, Math.max(0, want - containers.length));
    return { load: [], start, reason: `${containers.length} containers exist, ${want} wanted${start > 0 ? `: start ${start}` : ""}` };
  }
  const holding = containers.filter((c) => c.objects.includes(object)).length;
  let missing = Math.max(0, want - holding);
  const load = containers
    .filter((c) => c.state === "idle" && !c.objects.includes(object))
    .sort((a, b) => b.lastUsedMs - a.lastUsedMs)
    .slice(0, missing)
    .map((c) => c.id);
  missing -= load.length;
  const start = Math.min(room, missing);
  const short = missing - start;
  return {
    load,
    start,
    reason:
      `${holding} of ${want} wanted containers hold ${object}` +
      (load.length > 0 ? `; ${load.length} idle load it` : "") +
      (start > 0 ? `; start ${start}` : "") +
      (short > 0 ? `; ${short} short: maxConcurrency ${maxConcurrency} reached or containers busy` : ""),
  };
}
