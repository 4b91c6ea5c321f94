import cluster, { type Worker } from "node:cluster";
import client from "prom-client";
import { backoffMs, type Logger } from "@sloserve/bus";

/**
 * Several frontend processes on one port (FRONTEND_PROCESSES > 1), with Node's cluster module (Node 20
 * has no `reusePort`). The primary forks the processes; each runs the whole frontend (main.ts: HTTP and
 * gRPC, its own NATS and Redis connections). Their `listen` calls go through the primary, which holds
 * the ports and hands each new connection to the next process in turn (round-robin, Node's default on
 * Linux); a port of 0 gives every process the same free port. grpc-js binds through the same `listen`
 * (checked by test/e2e-frontend-processes.test.ts). A connection stays with its process: an HTTP
 * keep-alive connection, and a gRPC channel (one HTTP/2 connection), send all their requests to one.
 *
 * The primary runs no frontend. It waits for every process's ready message, then prints the service's
 * ready line (the first process's addresses, every process's pid); forks another process when one dies,
 * saying so, at once or, while processes die young, after a pause doubling from 1 s to 30 s; and on
 * stop (SIGTERM, SIGINT) sends SIGTERM to each process, which stops as a lone frontend does (no new
 * connections, the requests in flight finished), and waits for them.
 *
 * What a process counts is summed for the user through the primary: a process asked for `/metrics` or
 * for Triton's statistics asks the primary to gather every live process's part, its own included, over
 * the cluster's IPC channel, and sums them ({@link SummedRegistry}: prom-client's
 * `AggregatorRegistry.aggregate`; statistics.ts `sumCounts`). A process that has not answered within
 * {@link GATHER_TIMEOUT_MS} is left out (one being forked, or stuck), and a dead one's counts are gone
 * with it; `sloserve_frontend_processes` says how many processes a scrape summed. The dashboard, the
 * catalog, profiling progress and the API-key cache need no summing: each process follows the bus and
 * Redis itself and holds the same view.
 */

/** How long the primary waits for the processes' parts of a gather, ms. */
export const GATHER_TIMEOUT_MS = 2_000;
/** A process that dies within this long of its fork died young: the next fork waits (see {@link reforkDelayMs}). */
const YOUNG_MS = 10_000;
/** The event of a frontend process's own ready line: only the primary's says "ready" (libs/stack waits for that one). */
export const PROCESS_READY_EVENT = "process-ready";

/** Messages between the primary and the processes, all carrying `sloserve`. */
type Message =
  | { sloserve: "ready"; info: Record<string, unknown> }
  | { sloserve: "gather"; id: number; what: string }
  | { sloserve: "collect"; id: number; what: string }
  | { sloserve: "part"; id: number; part: unknown }
  | { sloserve: "gathered"; id: number; parts: unknown[] };

const isMessage = (m: unknown): m is Message => typeof m === "object" && m !== null && typeof (m as { sloserve?: unknown }).sloserve === "string";

/** The pause before forking again after `youngDeaths` processes in a row died young: none after an old one's death, then 1 s doubling to 30 s. */
export function reforkDelayMs(youngDeaths: number): number {
  return youngDeaths === 0 ? 0 : backoffMs(youngDeaths - 1, 1_000, 30_000);
}

export interface Primary {
  info: Record<string, unknown>;
  stop(): Promise<void>;
}

/** The primary: forks `processes` frontend processes and resolves once all are ready; rejects if one exits before. */
export async function startPrimary(processes: number, log: Logger): Promise<Primary> {
  let stopping = false;
  const slotOf = new Map<Worker, number>();
  const bornAt = new Map<Worker, number>();
  const ready = new Set<Worker>();
  const forkTimers = new Set<NodeJS.Timeout>();
  let youngDeaths = 0;
  let started = false;
  let firstInfo: Record<string, unknown> | undefined;
  let startup: { resolve: () => void; reject: (err: Error) => void } | undefined;

  const fork = (slot: number): Worker => {
    const worker = cluster.fork({ FRONTEND_PROCESS: String(slot) });
    slotOf.set(worker, slot);
    bornAt.set(worker, Date.now());
    return worker;
  };
  const live = (): Worker[] => [...slotOf.keys()].filter((w) => !w.isDead());

  // Gathers in flight: which processes are still to answer, and whom to answer.
  let nextGather = 0;
  const gathers = new Map<number, { requester: Worker; requestId: number; parts: unknown[]; waiting: Set<Worker>; timer: NodeJS.Timeout }>();
  const finishGather = (id: number): void => {
    const g = gathers.get(id);
    if (!g) return;
    clearTimeout(g.timer);
    gathers.delete(id);
    if (g.requester.isConnected()) g.requester.send({ sloserve: "gathered", id: g.requestId, parts: g.parts } satisfies Message);
  };

  cluster.on("message", (worker: Worker, message: unknown) => {
    if (!isMessage(message)) return;
    switch (message.sloserve) {
      case "ready": {
        ready.add(worker);
        firstInfo ??= message.info;
        if (started) log.info({ process: slotOf.get(worker), pid: worker.process.pid }, `frontend process ${String(slotOf.get(worker))} is back (pid ${String(worker.process.pid)})`);
        else if (ready.size === processes) startup?.resolve();
        return;
      }
      case "gather": {
        // Every process that said it is ready, and the one asking (it may serve before its ready message).
        const waiting = new Set([...ready, worker].filter((w) => w.isConnected()));
        const id = nextGather++;
        gathers.set(id, { requester: worker, requestId: message.id, parts: [], waiting, timer: setTimeout(() => finishGather(id), GATHER_TIMEOUT_MS) });
        for (const w of waiting) w.send({ sloserve: "collect", id, what: message.what } satisfies Message);
        return;
      }
      case "part": {
        const g = gathers.get(message.id);
        if (!g?.waiting.delete(worker)) return;
        g.parts.push(message.part);
        if (g.waiting.size === 0) finishGather(message.id);
        return;
      }
      default:
        return;
    }
  });

  cluster.on("exit", (worker: Worker, code: number | null, signal: string | null) => {
    ready.delete(worker);
    const slot = slotOf.get(worker) as number;
    slotOf.delete(worker);
    for (const [id, g] of gathers) if (g.waiting.delete(worker) && g.waiting.size === 0) finishGather(id);
    if (stopping) return;
    if (!started) {
      startup?.reject(new Error(`frontend process ${slot} (pid ${String(worker.process.pid)}) exited (code ${String(code)}, signal ${String(signal)}) before it was ready: its log line says why`));
      return;
    }
    const livedMs = Date.now() - (bornAt.get(worker) ?? 0);
    bornAt.delete(worker);
    youngDeaths = livedMs < YOUNG_MS ? youngDeaths + 1 : 0;
    const delayMs = reforkDelayMs(youngDeaths);
    log.error(
      { process: slot, pid: worker.process.pid, code, signal, livedMs, forkInMs: delayMs },
      `frontend process ${slot} (pid ${String(worker.process.pid)}) died (code ${String(code)}, signal ${String(signal)}): forking another${delayMs > 0 ? ` in ${delayMs / 1000} s` : ""}`,
    );
    const timer = setTimeout(() => {
      forkTimers.delete(timer);
      if (!stopping) fork(slot);
    }, delayMs);
    forkTimers.add(timer);
  });

  const stop = async (): Promise<void> => {
    stopping = true;
    for (const t of forkTimers) clearTimeout(t);
    // Each process drains as a lone frontend does on SIGTERM (libs/bus runService).
    await Promise.all(
      live().map(
        (w) =>
          new Promise<void>((done) => {
            w.once("exit", () => done());
            w.process.kill("SIGTERM");
          }),
      ),
    );
  };

  try {
    await new Promise<void>((resolve, reject) => {
      startup = { resolve, reject };
      for (let slot = 1; slot <= processes; slot++) fork(slot);
    });
  } catch (err) {
    await stop();
    throw err;
  }
  started = true;
  const pids = [...slotOf.entries()].sort((a, b) => a[1] - b[1]).map(([w]) => w.process.pid as number);
  return { info: { ...firstInfo, processes, workerPids: pids }, stop };
}

/**
 * A frontend process's side: its ready message, and gathers of every process's part of something
 * (`Parts`: what each part is, by name) through the primary. Outside a cluster, or when the primary
 * does not answer within `timeoutMs`, a gather has this process's part alone.
 */
export class ProcessPeer<Parts extends Record<string, unknown>> {
  private readonly providers = new Map<string, () => unknown>();
  private readonly waiting = new Map<number, (parts: unknown[]) => void>();
  private nextId = 0;
  private readonly onMessage = (message: unknown): void => {
    if (!isMessage(message)) return;
    if (message.sloserve === "collect") {
      const provide = this.providers.get(message.what);
      void Promise.resolve(provide ? provide() : null)
        .catch(() => null)
        .then((part) => this.send({ sloserve: "part", id: message.id, part }));
    } else if (message.sloserve === "gathered") {
      this.waiting.get(message.id)?.(message.parts);
    }
  };

  constructor(private readonly timeoutMs = GATHER_TIMEOUT_MS * 2) {
    process.on("message", this.onMessage);
  }

  /** What this process answers when its part of `what` is gathered. */
  provide<K extends keyof Parts & string>(what: K, part: () => Parts[K] | Promise<Parts[K]>): void {
    this.providers.set(what, part);
  }

  /** Tells the primary this process is ready, with its ready line's fields. */
  ready(info: Record<string, unknown>): void {
    this.send({ sloserve: "ready", info });
  }

  /** Every live process's part of `what`, this one's included (processes that did not answer in time are left out). */
  async gather<K extends keyof Parts & string>(what: K): Promise<Array<Parts[K]>> {
    const own = async (): Promise<Array<Parts[K]>> => [(await this.providers.get(what)?.()) as Parts[K]];
    if (!cluster.isWorker || !process.connected) return own();
    const id = this.nextId++;
    const parts = await new Promise<unknown[] | undefined>((resolve) => {
      const timer = setTimeout(() => resolve(undefined), this.timeoutMs);
      this.waiting.set(id, (p) => {
        clearTimeout(timer);
        resolve(p);
      });
      this.send({ sloserve: "gather", id, what });
    });
    this.waiting.delete(id);
    return parts ? (parts.filter((p) => p !== null && p !== undefined) as Array<Parts[K]>) : own();
  }

  close(): void {
    process.off("message", this.onMessage);
  }

  private send(message: Message): void {
    // Only a cluster's process talks to its primary (a process started otherwise may have an IPC channel to someone else).
    if (!cluster.isWorker || !process.send || !process.connected) return;
    // The channel may close under us (the primary gone): the process is about to exit anyway.
    process.send(message, undefined, undefined, () => undefined);
  }
}

/** The metrics of one process, as prom-client's `getMetricsAsJSON` gives them (a part of a gather). */
export type MetricsPart = Awaited<ReturnType<client.Registry["getMetricsAsJSON"]>>;

/**
 * A registry whose text (`metrics()`, what `/metrics` serves) is every frontend process's metrics
 * summed, each metric by its aggregator (counters and histograms summed; prom-client's process metrics
 * each as prom-client says); the metrics registered in it are this process's.
 */
export class SummedRegistry extends client.Registry {
  constructor(private readonly gather: () => Promise<MetricsPart[]>) {
    super();
  }

  override async metrics(): Promise<string> {
    return client.AggregatorRegistry.aggregate(await this.gather()).metrics();
  }
}

/** `sloserve_frontend_processes`: 1 in each process, so a scrape's sum is how many processes it summed. */
export function countProcess(registry: client.Registry): void {
  new client.Gauge({
    name: "sloserve_frontend_processes",
    help: "Frontend processes whose metrics this scrape sums (FRONTEND_PROCESSES; fewer while one is being replaced)",
    aggregator: "sum",
    registers: [registry],
  }).set(1);
}
