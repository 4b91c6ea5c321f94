import { AckPolicy, DeliverPolicy, type Consumer, type JsMsg, type ConsumerMessages } from "@nats-io/jetstream";
import {
  ErrorCode,
  ServeError,
  WireMetaCache,
  alignedTo8,
  decodeCoalesced,
  decodeTensors,
  headers,
  queueConsumer,
  streams,
  subjects,
  type Clock,
  type CoalescedQuery,
  type Tensor,
  type VariantRecord,
} from "@sloserve/contracts";
import { replyError, replyInference, type Bus, type Logger } from "@sloserve/bus";
import { cannotFinishInTime, footprintOf, footprintPricePerSecond, planBatch, profiledLatencyAt, RunTimeEstimate, type BatchPolicy, type BatchQueueView } from "@sloserve/policy";
import type { BackendHealth, ModelBackend } from "./backend.js";
import { WindowStats } from "./stats.js";
import { RecentSequences } from "./redeliveries.js";
import type { QueryMetrics } from "./metrics.js";
import { batchAnswerFields } from "./answer-meta.js";

/**
 * One loaded variant on a worker: pulls queries from the variant's JetStream queue (the durable
 * consumer that every replica shares), forms batches and sheds queries that can no longer meet their
 * deadline (libs/policy `planBatch`, `cannotFinishInTime`, `RunTimeEstimate`: the rule the simulator
 * runs), runs them, replies to each caller's inbox, then acks. An unacked query is redelivered to
 * another replica if this one dies.
 */

/**
 * A message of the variant's queue: one query, or several that the dispatcher coalesced into one
 * (libs/contracts coalesced.ts). It is acked once every query of it is answered (or failed), so that
 * a replica that dies before then leaves all of them to be redelivered.
 */
interface Carrier {
  msg: JsMsg;
  /** Its queries not answered yet. */
  left: number;
  /** Put back (nak'ed, {@link VariantInstance.pause}): its queries answered here since are not acked. */
  dropped: boolean;
}

/** What a query's headers are read with: the message's own, or its entry in a coalesced message. */
interface QueryHeaders {
  get(name: string): string;
}

class FieldHeaders implements QueryHeaders {
  constructor(private readonly fields: Record<string, string>) {}
  get(name: string): string {
    return this.fields[name] ?? "";
  }
}

const NO_HEADERS: QueryHeaders = { get: () => "" };

interface Pending {
  carrier: Carrier;
  headers: QueryHeaders;
  /** Its binary tensor payload (a view of the message). */
  data: Uint8Array;
  queuedAtMs: number;
  receivedAtMs: number;
  deadlineMs: number;
}

/** The queries this instance holds, as the batching rule reads them. */
class PendingQueue implements BatchQueueView {
  items: Pending[] = [];
  get length(): number {
    return this.items.length;
  }
  queuedAtMs(i: number): number {
    return (this.items[i] as Pending).queuedAtMs;
  }
  deadlineMs(i: number): number {
    return (this.items[i] as Pending).deadlineMs;
  }
}

/**
 * How long JetStream waits for an ack before redelivering a query to another replica: what a query
 * whose replica died mid-batch loses (docs/RELIABILITY.md). Short, because the replica holding a query
 * marks it in progress every KEEPALIVE_MS while it waits and runs.
 */
export const ACK_WAIT_MS = 2_000;
/** Queries held longer than this are marked in progress every as often, so they are not redelivered meanwhile (first mark ≤ 2× after arrival < ACK_WAIT_MS). */
const KEEPALIVE_MS = 500;
/**
 * Deliveries of a query before JetStream drops it. A replica that dies leaves its open pulls behind
 * until they expire (PULL_EXPIRES_MS), and JetStream may deliver to them meanwhile: each such delivery
 * costs an ack wait. With 3 (the old value) a query could be dropped that way and time out at its
 * deadline (seen in test/e2e-faults.test.ts; likely the "9 of 1 200 failed with 504" of issue 12); 10
 * outlasts the dead pulls, and a query past its deadline is answered deadline_exceeded by the
 * replica that finally gets it.
 */
const MAX_DELIVER = 10;
/** How long one pull for queries stays open (see consume). */
const PULL_EXPIRES_MS = 5_000;

/** An error of the engine itself (unreachable, out of time) rather than of a query's data. */
function isEngineFailure(err: unknown): boolean {
  return err instanceof ServeError && (err.code === ErrorCode.unavailable || err.code === ErrorCode.deadlineExceeded);
}

export class VariantInstance {
  readonly stats = new WindowStats();
  private readonly queue = new PendingQueue();
  private busy = false;
  private timer: NodeJS.Timeout | undefined;
  private keepAlive: NodeJS.Timeout | undefined;
  private inFlight: Pending[] = [];
  /** Queries answered lately (stream sequences): a redelivery of one is dropped, not answered twice. */
  private readonly answered = new RecentSequences();
  private consumer: Consumer | undefined;
  private messages: ConsumerMessages | undefined;
  private stopped = false;
  /** Not taking queries: the engine cannot serve them now (see {@link pause}). */
  private paused = false;
  private running: Promise<void> = Promise.resolve();
  /** Expected run time of a batch (profile × observed slowdown): used for deadline checks. */
  runTime: RunTimeEstimate;
  private readonly expectedMs: (size: number) => number;
  /** Nbatch (the variant's max batch) and Wbatch (its batchWaitMs, re-tuned live by {@link setBatchWaitMs}). */
  private policy: BatchPolicy;
  /** When the last batch finished (the executor has been idle since, unless busy). */
  private idleSinceMs: number;
  /** What this instance costs per second (its share of the hardware), for per-query cost. */
  private readonly pricePerS: number;
  /** The last query meta read (a client's queries of one shape share it): not parsed again. */
  private readonly metaCache = new WireMetaCache();

  /** The variant's record: as loaded, then with the accuracy and profile of {@link takeProfile}. */
  private record: VariantRecord;

  constructor(
    variant: VariantRecord,
    private readonly backend: ModelBackend,
    private readonly bus: Bus,
    private readonly worker: { id: string; hardware: string },
    private readonly log: Logger,
    private readonly clock: Clock,
    /** Its Prometheus series (ExecutorMetrics.forVariant); none: not exported. */
    private readonly metrics?: QueryMetrics,
  ) {
    this.record = variant;
    this.pricePerS = footprintPricePerSecond(footprintOf(variant));
    this.runTime = runTimeEstimateOf(variant);
    this.expectedMs = (b) => this.runTime.expectedMs(b, this.clock.now());
    this.policy = { maxBatch: variant.maxBatch, batchWaitMs: variant.batchWaitMs };
    this.idleSinceMs = clock.now();
  }

  get variant(): VariantRecord {
    return this.record;
  }

  /**
   * The variant's profiled record (`registry.event.profiled.<model>`: an instance loaded before its
   * profiling finished): answers report its accuracy, and deadline checks and interference detection
   * use its profile from the next batch on. Nothing else of the record changes without a reload.
   */
  takeProfile(profiled: VariantRecord): void {
    if (profiled.name !== this.record.name || (profiled.accuracy === this.record.accuracy && JSON.stringify(profiled.profile) === JSON.stringify(this.record.profile))) return;
    this.log.info({ variant: this.record.name, accuracy: profiled.accuracy }, "profile taken");
    this.record = { ...this.record, accuracy: profiled.accuracy, profiled: profiled.profiled, profile: profiled.profile };
    this.runTime = runTimeEstimateOf(this.record);
  }

  get queueLength(): number {
    return this.queue.length;
  }

  /** The Wbatch this instance batches with now, ms. */
  get batchWaitMs(): number {
    return this.policy.batchWaitMs;
  }

  /**
   * A re-tuned Wbatch (the registrar's `registry.event.tuned.<model>`), applied without a reload: the
   * next batch decision uses it; a partial batch already waiting is decided again at once (it leaves now
   * if it has waited the new Wbatch, else waits until then).
   */
  setBatchWaitMs(ms: number): void {
    if (!(ms >= 0) || ms === this.policy.batchWaitMs) return;
    this.log.info({ variant: this.variant.name, from: this.policy.batchWaitMs, to: ms }, "Wbatch re-tuned");
    this.policy = { ...this.policy, batchWaitMs: ms };
    if (this.timer) {
      clearTimeout(this.timer);
      this.timer = undefined;
    }
    this.schedule();
  }

  async start(): Promise<void> {
    const durable = queueConsumer(this.variant.name);
    try {
      const info = await this.bus.jsm.consumers.info(streams.queries.name, durable);
      // A consumer made by an older version with another ack wait: bring it to this one.
      if (info.config.ack_wait !== ACK_WAIT_MS * 1e6 || info.config.max_deliver !== MAX_DELIVER) await this.bus.jsm.consumers.update(streams.queries.name, durable, { ack_wait: ACK_WAIT_MS * 1e6, max_deliver: MAX_DELIVER });
    } catch {
      await this.bus.jsm.consumers
        .add(streams.queries.name, {
          durable_name: durable,
          filter_subject: subjects.queue(this.variant.name),
          ack_policy: AckPolicy.Explicit,
          deliver_policy: DeliverPolicy.All,
          // Short, so that queries held by a replica that died (or by a pull cut off by an unload) come
          // back soon; replicas keep the queries they hold alive with working() (see keepAlive).
          ack_wait: ACK_WAIT_MS * 1e6,
          max_deliver: MAX_DELIVER,
          max_ack_pending: 10_000,
        })
        .catch((err: Error) => {
          if (!/already in use|exists/i.test(err.message)) throw err;
        });
    }
    this.consumer = await this.bus.js.consumers.get(streams.queries.name, durable);
    await this.consume();
    this.keepAlive = setInterval(() => {
      const old = this.clock.now() - KEEPALIVE_MS;
      const marked = new Set<Carrier>();
      for (const p of [...this.inFlight, ...this.queue.items]) {
        if (p.receivedAtMs >= old || marked.has(p.carrier)) continue;
        marked.add(p.carrier);
        p.carrier.msg.working();
      }
    }, KEEPALIVE_MS);
  }

  private async consume(): Promise<void> {
    // Pulls for two batches' worth of messages stay open (a message the dispatcher coalesced holds up
    // to maxBatch queries). nats.js pulls again as messages arrive, not as they are run, so this sizes
    // the server's hand-out to this replica, not what it holds: the pump takes every message into
    // the batching queue at once (docs/ARCHITECTURE.md "The query path").
    // Pulls expire after 5 s (heartbeats every 2.5 s) instead of nats.js's 30 s: when the stream's leader
    // moves (a NATS node of a cluster lost, test/fault-nats-cluster.test.ts) the open pull is lost with
    // it, and the client only pulls again once it has missed two heartbeats.
    this.messages = await (this.consumer as Consumer).consume({ max_messages: Math.max(2, this.variant.maxBatch * 2), expires: PULL_EXPIRES_MS });
    void this.pump(this.messages);
  }

  /**
   * Stops taking queries while the engine cannot serve them (executor-inferentia: the remote server is
   * gone): stops pulling from the variant's queue and puts back the queries it holds but has not run,
   * for another replica (or this one once it resumes). A batch already running ends as the engine
   * makes it (a remote engine fails it with `unavailable`).
   */
  async pause(): Promise<void> {
    if (this.paused || this.stopped) return;
    this.paused = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    const messages = this.messages;
    this.messages = undefined;
    await messages?.close().catch((err: unknown) => this.log.warn({ err, variant: this.variant.name }, "closing the query consumer failed"));
    for (const p of this.queue.items.splice(0)) {
      if (p.carrier.dropped) continue;
      // A coalesced message with queries in the batch running is put back whole: those are answered twice.
      p.carrier.dropped = true;
      p.carrier.msg.nak();
    }
  }

  /** Whether the engine can serve now, for an engine that can tell (a remote one); undefined for a local engine. */
  health(): Promise<BackendHealth> | undefined {
    return this.backend.health?.();
  }

  /** Takes queries again after {@link pause}. */
  async resume(): Promise<void> {
    if (!this.paused || this.stopped) return;
    this.paused = false;
    await this.consume();
  }

  private async pump(messages: ConsumerMessages): Promise<void> {
    try {
      for await (const msg of messages) {
        if (this.paused) {
          msg.nak();
          continue;
        }
        if (msg.info.deliveryCount > 1 && this.redelivered(msg)) continue;
        const now = this.clock.now();
        const h = msg.headers;
        const count = Number(h?.get(headers.queries));
        if (count > 1) {
          // Several queries in one message (libs/contracts coalesced.ts): each joins the batching alone.
          let queries: CoalescedQuery[];
          try {
            // Read from an 8-aligned copy if the message is not: its queries' tensors are views
            // then, instead of one copy (an allocation) per query in decodeTensors.
            queries = decodeCoalesced(alignedTo8(msg.data));
          } catch (err) {
            this.log.error({ err, variant: this.variant.name, seq: msg.seq }, "a coalesced queue message could not be read: dropped");
            msg.term();
            continue;
          }
          const carrier: Carrier = { msg, left: queries.length, dropped: false };
          for (const q of queries) this.take(carrier, new FieldHeaders(q.headers), q.payload, now);
        } else {
          this.take({ msg, left: 1, dropped: false }, h ?? NO_HEADERS, msg.data, now);
        }
        this.schedule();
      }
    } catch (err) {
      if (!this.stopped) this.log.error({ err, variant: this.variant.name }, "query consumer failed");
    }
  }

  /** Queues one query of a message. */
  private take(carrier: Carrier, h: QueryHeaders, data: Uint8Array, nowMs: number): void {
    const enq = Number(h.get(headers.enqueuedAt));
    const deadline = Number(h.get(headers.deadline));
    this.queue.items.push({
      carrier,
      headers: h,
      data,
      queuedAtMs: Number.isFinite(enq) && enq > 0 ? Math.min(enq, nowMs) : nowMs,
      receivedAtMs: nowMs,
      // x-late-ok (a pipeline stage): run it even when late, so it gets no deadline to be shed by.
      deadlineMs: Number.isFinite(deadline) && deadline > 0 && h.get(headers.lateOk) !== "1" ? deadline : Infinity,
    });
    this.stats.arrivals++;
  }

  /**
   * A query JetStream delivered again: one answered here is acked and dropped (its first ack was
   * lost); one still held here takes the new delivery, whose ack the consumer's current leader
   * expects. False: a query new to this instance (another replica's), to be queued.
   */
  private redelivered(msg: JsMsg): boolean {
    if (this.answered.has(msg.seq)) {
      msg.ack();
      return true;
    }
    const held = this.queue.items.find((p) => p.carrier.msg.seq === msg.seq) ?? this.inFlight.find((p) => p.carrier.msg.seq === msg.seq);
    if (held) held.carrier.msg = msg;
    return held !== undefined;
  }

  private schedule(): void {
    if (this.stopped || this.paused) return;
    const now = this.clock.now();
    const { late, decision } = planBatch(this.queue, this.busy, now, this.policy, this.expectedMs);
    for (const p of this.queue.items.splice(0, late)) this.late(p, now);
    if (decision.action === "run") {
      if (this.timer) clearTimeout(this.timer);
      this.timer = undefined;
      const batch = this.queue.items.splice(0, decision.size);
      this.inFlight = batch;
      this.busy = true;
      // The engine is free once the batch's outputs are in: the next batch is decided and handed to
      // it then, so that its inference overlaps this batch's answers being encoded and sent (with
      // the engine in its own thread, bench/README.md "the data path").
      this.running = this.runBatch(batch, () => {
        this.busy = false;
        this.idleSinceMs = this.clock.now();
        this.schedule();
      });
    } else if (decision.action === "wait" && !this.timer) {
      this.timer = setTimeout(() => {
        this.timer = undefined;
        this.schedule();
      }, Math.max(0, decision.untilMs - now));
    }
  }

  /** A query that cannot finish by its deadline is answered with a clear error, not run late. */
  private late(p: Pending, nowMs: number): void {
    const h = p.headers;
    this.fail(p, h.get(headers.replyTo) || undefined, new ServeError(ErrorCode.deadlineExceeded, `query could not finish before its deadline (waited ${nowMs - p.queuedAtMs} ms in the queue of ${this.variant.name})`), h.get(headers.requestId) || undefined, "shed");
  }

  /** Runs a batch and answers its queries; `engineFree` is called once, as soon as the engine is done with it. */
  private async runBatch(batch: Pending[], engineFree?: () => void): Promise<void> {
    let freed = false;
    const free = (): void => {
      if (freed) return;
      freed = true;
      // Starting the next batch must not cost this one its answers.
      try {
        engineFree?.();
      } catch (err) {
        this.log.error({ err, variant: this.variant.name }, "starting the next batch failed");
      }
    };
    try {
      await this.runAndAnswer(batch, free);
    } finally {
      free();
    }
  }

  private async runAndAnswer(batch: Pending[], engineFree: () => void): Promise<void> {
    const started = this.clock.now();
    // Read now: engineFree() moves it to this batch's end before the answers' timings are written.
    const idleSinceMs = this.idleSinceMs;
    const startedPrecise = performance.now();
    const expected = this.runTime.expectedMs(batch.length, this.clock.now());
    const live: Array<{ p: Pending; inputs: Tensor[]; requestId: string | undefined; id: string | undefined }> = [];
    for (const p of batch) {
      const h = p.headers;
      const requestId = h.get(headers.requestId) || undefined;
      const replyTo = h.get(headers.replyTo) || undefined;
      if (cannotFinishInTime(p.deadlineMs, started, expected)) {
        this.late(p, started);
        continue;
      }
      try {
        const decoded = decodeTensors<{ id?: string }>(p.data, this.metaCache);
        live.push({ p, inputs: decoded.tensors, requestId, id: typeof decoded.meta.id === "string" ? decoded.meta.id : requestId });
      } catch (err) {
        this.fail(p, replyTo, err, requestId);
      }
    }
    if (live.length === 0) return;
    let outputs: Array<Tensor[] | Error>;
    // A remote engine gives up at the latest deadline of the batch.
    const deadlines = live.map((l) => l.p.deadlineMs).filter(Number.isFinite);
    const options = deadlines.length === live.length ? { deadlineMs: Math.max(...deadlines) } : {};
    try {
      outputs = await this.backend.runBatch(live.map((l) => l.inputs), options);
    } catch (err) {
      // One bad query must not sink its neighbours: run them one by one; but an engine that is
      // unreachable or out of time fails them all alike.
      if (live.length === 1 || isEngineFailure(err)) outputs = live.map(() => err as Error);
      else {
        this.log.warn({ err, variant: this.variant.name, size: live.length }, "batch failed; retrying queries one by one");
        outputs = [];
        for (const l of live) outputs.push(await this.backend.runBatch([l.inputs], options).then((o) => o[0] as Tensor[], (e: Error) => e));
      }
    }
    const finished = this.clock.now();
    const runMs = performance.now() - startedPrecise;
    engineFree();
    this.runTime.observe(live.length, runMs, finished);
    const profiled = this.variant.profile?.latencyMs;
    this.stats.recordBatch(runMs, live.length, profiled ? profiledLatencyAt(profiled, live.length) : runMs);
    const m = this.metrics;
    m?.batchSize.observe(live.length);
    const inferenceMs = Math.round(runMs * 1000) / 1000;
    const v = this.variant;
    const answerFields = batchAnswerFields({ model: v.model, variant: v.name, hardware: this.worker.hardware, accuracy: v.accuracy, worker: this.worker.id, batchSize: live.length, inferenceMs, costDollars: (this.pricePerS * runMs) / 1000 / live.length, ...(this.backend.emulated ? { backend: "emulated" } : {}) });
    live.forEach((l, i) => {
      const out = outputs[i];
      const h = l.p.headers;
      const replyTo = h.get(headers.replyTo) || undefined;
      if (!out || out instanceof Error) {
        this.fail(l.p, replyTo, out instanceof ServeError ? out : new ServeError(ErrorCode.invalidData, `inference failed: ${out?.message ?? "no output"}`), l.requestId);
        return;
      }
      const receivedAt = Number(h.get(headers.receivedAt)) || l.p.queuedAtMs;
      // batch_wait: the time this query waited while the executor was idle, i.e. for its batch to
      // fill (Wbatch); queue: the rest of its wait, behind batches that ran before it.
      const batchWait = Math.max(0, started - Math.max(l.p.queuedAtMs, idleSinceMs));
      const timing = {
        queue: Math.max(0, started - l.p.queuedAtMs - batchWait),
        batch_wait: batchWait,
        inference: inferenceMs,
        total: finished - receivedAt,
      };
      const slo = Number(h.get(headers.sloLatencyMs));
      if (slo > 0 && timing.total > slo) this.stats.sloMisses++;
      if (m) {
        m.ok.inc();
        m.queue.observe(timing.queue / 1000);
        m.batchWait.observe(timing.batch_wait / 1000);
        m.inference.observe(runMs / 1000);
        m.total.observe(timing.total / 1000);
        if (slo > 0) (timing.total > slo ? m.sloMissed : m.sloMet).inc();
      }
      // served_by.deliveries: 1, or more when JetStream redelivered the query (a replica holding it died or stalled past the ack wait).
      if (replyTo) replyInference(this.bus.nc, replyTo, out, answerFields(l.id, l.p.carrier.msg.info.deliveryCount, timing), { json: h.get(headers.accept) === "json", requestId: l.requestId });
      this.settle(l.p);
      this.stats.served++;
      if (this.log.isLevelEnabled("debug")) this.log.debug({ requestId: l.requestId, batch: live.length, timing }, "query served");
      this.stats.recordLatency(finished - l.p.queuedAtMs);
    });
  }

  private fail(p: Pending, replyTo: string | undefined, err: unknown, requestId: string | undefined, outcome: "error" | "shed" = "error"): void {
    replyError(this.bus.nc, replyTo, err, requestId);
    this.settle(p);
    this.stats.errors++;
    this.metrics?.[outcome].inc();
  }

  /** A query answered: its message is acked once all of its queries are. */
  private settle(p: Pending): void {
    const c = p.carrier;
    if (--c.left > 0 || c.dropped) return;
    c.msg.ack();
    this.answered.add(c.msg.seq);
  }

  /**
   * Stops pulling, finishes the batch in flight and then the queries it already holds (so that an
   * unload loses nothing), and releases the engine.
   */
  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    await this.messages?.close().catch((err: unknown) => this.log.warn({ err, variant: this.variant.name }, "closing the query consumer failed"));
    await this.running;
    while (this.queue.length > 0) {
      this.inFlight = this.queue.items.splice(0, this.variant.maxBatch);
      await this.runBatch(this.inFlight);
    }
    if (this.keepAlive) clearInterval(this.keepAlive);
    await this.backend.release();
  }
}

/** A variant's run-time estimate: its profile's T(b) × the observed slowdown, or the observed average when unprofiled. */
function runTimeEstimateOf(variant: VariantRecord): RunTimeEstimate {
  const profiled = variant.profile?.latencyMs;
  return new RunTimeEstimate(profiled && Object.keys(profiled).length > 0 ? (b) => profiledLatencyAt(profiled, b) : undefined);
}
