import { AckPolicy, type ConsumerMessages } from "@nats-io/jetstream";
import {
  profileJobSchema,
  scaleCommandSchema,
  streams,
  subjects,
  type Hardware,
  type ScaleCommand,
  type ScaleResult,
  type StateEvent,
  type VariantState,
  type WorkerReport,
} from "@sloserve/contracts";
import type { Bus, Logger } from "@sloserve/bus";
import type { MetadataStore } from "@sloserve/store";
import type { BackendFactory } from "./backend.js";
import { VariantInstance } from "./instance.js";
import { runProfile } from "./profiler.js";
import { mergeFigures } from "./stats.js";
import { DEFAULT_VARIANT_STATE_CONFIG, nextState, profiledLatencyAt, type VariantStateMemory } from "@sloserve/policy";

/**
 * A worker process ("VM" in INFaaS terms): holds several variant instances, obeys load/unload
 * commands from `scale.model.<worker>`, and every second publishes its report (heartbeat, per-variant
 * metrics) on `metrics.worker.<worker>` and in Redis.
 */

export interface WorkerOptions {
  id: string;
  /** Threads this worker offers to its variants. */
  threads: number;
  /** Report period, ms. @default 1000 */
  reportEveryMs?: number;
  /** Take profiling jobs for this hardware. @default true */
  profile?: boolean;
  /** Memory this worker offers to variant instances, bytes (their profiled memory is reserved). */
  memoryBytes: number;
}

const json = (value: unknown): Uint8Array => new TextEncoder().encode(JSON.stringify(value));

export class Worker {
  private readonly instances = new Map<string, VariantInstance[]>();
  private readonly memories = new Map<string, VariantStateMemory>();
  private readonly states = new Map<string, VariantState>();
  private commands: ConsumerMessages | undefined;
  private profileJobs: ConsumerMessages | undefined;
  private reportTimer: NodeJS.Timeout | undefined;
  private lastReportMs = Date.now();
  private readonly startedAtMs = Date.now();
  private readonly hardware: Hardware;

  constructor(
    private readonly bus: Bus,
    private readonly store: MetadataStore,
    private readonly backends: BackendFactory,
    private readonly options: WorkerOptions,
    private readonly log: Logger,
  ) {
    this.hardware = backends.hardware;
  }

  get id(): string {
    return this.options.id;
  }

  async start(): Promise<void> {
    await this.report();
    const durable = `worker-${this.id}`;
    await this.bus.jsm.consumers.add(streams.scale.name, {
      durable_name: durable,
      filter_subject: subjects.scaleModel(this.id),
      ack_policy: AckPolicy.Explicit,
      ack_wait: 120 * 1e9,
      // A dead worker's consumer goes away by itself.
      inactive_threshold: 120 * 1e9,
    });
    const consumer = await this.bus.js.consumers.get(streams.scale.name, durable);
    this.commands = await consumer.consume({ max_messages: 16 });
    void (async () => {
      for await (const msg of this.commands as ConsumerMessages) {
        let command: ScaleCommand;
        try {
          command = scaleCommandSchema.parse(msg.json());
        } catch (err) {
          this.log.warn({ err }, "ignoring malformed scale command");
          msg.term();
          continue;
        }
        // Loads run concurrently; the command is acked once it has been carried out.
        void this.execute(command).finally(() => msg.ack());
      }
    })();
    if (this.options.profile !== false) await this.startProfiler();
    this.reportTimer = setInterval(() => void this.report().catch((err) => this.log.warn({ err }, "report failed")), this.options.reportEveryMs ?? 1000);
  }

  /**
   * Takes profiling jobs for this worker's hardware, one at a time. All workers of a hardware kind
   * share one durable consumer, so each job goes to one of them.
   */
  private async startProfiler(): Promise<void> {
    const durable = `profiler-${this.hardware}`;
    await this.bus.jsm.consumers
      .add(streams.profile.name, {
        durable_name: durable,
        filter_subject: subjects.profileJob(this.hardware),
        ack_policy: AckPolicy.Explicit,
        ack_wait: 60 * 1e9,
        max_deliver: 2,
      })
      .catch((err: Error) => {
        if (!/already in use|exists/i.test(err.message)) throw err;
      });
    const consumer = await this.bus.js.consumers.get(streams.profile.name, durable);
    this.profileJobs = await consumer.consume({ max_messages: 1 });
    void (async () => {
      for await (const msg of this.profileJobs as ConsumerMessages) {
        const parsed = profileJobSchema.safeParse(msg.json());
        if (!parsed.success) {
          this.log.warn({ issues: parsed.error.issues }, "ignoring malformed profile job");
          msg.term();
          continue;
        }
        const started = Date.now();
        try {
          const updated = await runProfile(parsed.data, { bus: this.bus, store: this.store, backends: this.backends, worker: this.id, log: this.log, keepAlive: () => msg.working() });
          this.log.info({ model: parsed.data.model, variants: updated.length, ms: Date.now() - started }, "profiled");
          msg.ack();
        } catch (err) {
          this.log.error({ err, job: parsed.data.id, model: parsed.data.model }, "profiling failed");
          msg.term();
        }
      }
    })();
  }

  private async setState(variant: string, model: string, state: VariantState, reason: string): Promise<void> {
    const previous = this.states.get(variant) ?? "inactive";
    if (state === "inactive") this.states.delete(variant);
    else this.states.set(variant, state);
    const event: StateEvent = { variant, model, worker: this.id, hardware: this.hardware, state, previous, reason, atMs: Date.now() };
    this.log.info({ variant, state, previous, reason }, "variant state");
    await Promise.all([
      this.bus.js.publish(subjects.state(variant, this.id), json(event)),
      this.store.setInstance({ variant, model, worker: this.id, hardware: this.hardware, state, reason, atMs: event.atMs }),
    ]);
  }

  async execute(command: ScaleCommand): Promise<ScaleResult> {
    const started = Date.now();
    let error: string | undefined;
    try {
      if (command.action === "load") await this.load(command.variant, command.reason, 1, true);
      else if (command.action === "add") await this.load(command.variant, command.reason, command.count ?? 1, false);
      else await this.unload(command.variant, command.reason, command.count);
    } catch (err) {
      error = (err as Error).message;
      this.log.error({ err, command }, "scale command failed");
    }
    const result: ScaleResult = { id: command.id, worker: this.id, action: command.action, variant: command.variant, ok: !error, error, durationMs: Date.now() - started, atMs: Date.now() };
    await this.bus.js.publish(subjects.scaleResult(this.id), json(result)).catch(() => undefined);
    return result;
  }

  /**
   * Loads `count` instances of a variant (each its own engine session pulling from the variant's
   * shared queue). With `ensure`, loads only if none is loaded or loading (idempotent on-demand loads).
   */
  async load(variantName: string, reason: string, count: number, ensure: boolean): Promise<void> {
    if (ensure && this.states.has(variantName)) return;
    const variant = await this.store.getVariant(variantName);
    if (!variant) throw new Error(`unknown variant ${variantName}`);
    if (variant.hardware !== this.hardware) throw new Error(`variant ${variantName} needs ${variant.hardware}, this worker is ${this.hardware}`);
    const existing = this.instances.get(variant.name) ?? [];
    const need = (variant.profile?.memoryBytes ?? 0) * count;
    if (this.memoryUsed() + need > this.options.memoryBytes) {
      throw new Error(`not enough memory for ${count} instance(s) of ${variant.name}: needs ${need} bytes, ${Math.max(0, this.options.memoryBytes - this.memoryUsed())} free`);
    }
    if (existing.length === 0) await this.setState(variant.name, variant.model, "loading", reason);
    try {
      const bytes = await this.bus.models.getBlob(variant.object);
      if (!bytes) throw new Error(`model binary ${variant.object} is missing from the repository`);
      for (let i = 0; i < count; i++) {
        const backend = await this.backends.load(bytes, { threads: variant.threads });
        const instance = new VariantInstance(variant, backend, this.bus, { id: this.id, hardware: this.hardware }, this.log.child({ variant: variant.name }));
        await instance.start();
        this.instances.set(variant.name, [...(this.instances.get(variant.name) ?? []), instance]);
      }
      if (existing.length === 0) {
        this.memories.set(variant.name, { state: "active", sinceMs: Date.now(), slowCount: 0 });
        await this.setState(variant.name, variant.model, "active", `loaded: ${reason}`);
      } else this.log.info({ variant: variant.name, instances: this.instances.get(variant.name)?.length, reason }, "instances added");
    } catch (err) {
      if (!this.instances.get(variant.name)?.length) await this.setState(variant.name, variant.model, "inactive", `load failed: ${(err as Error).message}`);
      throw err;
    }
  }

  /** Removes `count` instances of a variant (all when undefined); the last one makes it Inactive. */
  async unload(variantName: string, reason: string, count?: number): Promise<void> {
    const list = this.instances.get(variantName);
    if (!list?.length) return;
    const n = Math.min(count ?? list.length, list.length);
    const model = list[0]?.variant.model ?? "";
    const removing = list.slice(list.length - n);
    const keep = list.slice(0, list.length - n);
    if (keep.length === 0) await this.setState(variantName, model, "unloading", reason);
    this.instances.set(variantName, keep);
    for (const instance of removing) await instance.stop();
    if (keep.length === 0) {
      this.instances.delete(variantName);
      this.memories.delete(variantName);
      await this.setState(variantName, model, "inactive", reason);
    } else this.log.info({ variant: variantName, instances: keep.length, reason }, "instances removed");
  }

  /**
   * The worker's one-second report. Each variant's state follows from what it did this second
   * (INFaaS §4.1, libs/policy variant-state): Overloaded at or above its profiled peak throughput,
   * Interfered when its batches run 20% slower than profiled for 3 s in a row.
   */
  buildReport(): WorkerReport {
    const now = Date.now();
    const windowMs = Math.max(1, now - this.lastReportMs);
    this.lastReportMs = now;
    const transitions: Array<{ variant: string; model: string; state: VariantState; reason: string }> = [];
    const variants = [...this.states.entries()].map(([name, state]) => {
      const list = this.instances.get(name) ?? [];
      const f = mergeFigures(list.map((i) => i.stats.take()));
      const perSecond = 1000 / windowMs;
      const variant = list[0]?.variant;
      let current = state;
      const memory = this.memories.get(name);
      if (variant?.profile && memory && (state === "active" || state === "overloaded" || state === "interfered")) {
        const step = nextState(
          memory,
          {
            loaded: true,
            loading: false,
            qps: f.arrivals * perSecond,
            peakQps: variant.profile.peakQps * list.length,
            // Fewer than 10 batches in a second is too little evidence of interference either way (and
            // at low rates caches go cold between queries, which is no interference).
            observedP50Ms: f.batches >= 10 ? f.batchP50Ms : null,
            profiledMs: profiledLatencyAt(variant.profile.latencyMs, Math.max(1, Math.round(f.batchSizeP50))),
          },
          now,
          // The executor's span (decode, concatenate, run, split) is a little longer than the
          // profiler's (run only): 20% plus 2 ms before a batch counts as slow.
          { ...DEFAULT_VARIANT_STATE_CONFIG, interferenceFloorMs: 2 },
        );
        this.memories.set(name, step.memory);
        if (step.changed) {
          current = step.memory.state;
          transitions.push({ variant: name, model: variant.model, state: current, reason: step.reason });
        }
      }
      return {
        variant: name,
        state: current,
        instances: list.length,
        queueLength: list.reduce((sum, i) => sum + i.queueLength, 0),
        arrivals: Math.round(f.arrivals * perSecond),
        served: Math.round(f.served * perSecond),
        errors: f.errors,
        batches: f.batches,
        sloMisses: f.sloMisses,
        latencyP50Ms: f.latencyP50Ms,
        latencyP99Ms: f.latencyP99Ms,
        batchP50Ms: f.batchP50Ms,
        batchSizeP50: f.batchSizeP50,
        utilisation: f.busyMs / windowMs,
      };
    });
    for (const t of transitions) void this.setState(t.variant, t.model, t.state, t.reason).catch((err) => this.log.warn({ err }, "state publish failed"));
    const threadsUsed = [...this.instances.values()].flat().reduce((sum, i) => sum + i.variant.threads, 0);
    const mem = process.memoryUsage();
    const memoryUsedBytes = this.memoryUsed();
    return {
      worker: this.id,
      hardware: this.hardware,
      atMs: now,
      startedAtMs: this.startedAtMs,
      threads: this.options.threads,
      threadsUsed,
      memoryBytes: this.options.memoryBytes,
      memoryUsedBytes,
      rssBytes: mem.rss,
      variants,
    };
  }

  private async report(): Promise<void> {
    const report = this.buildReport();
    await Promise.all([this.bus.js.publish(subjects.workerMetrics(this.id), json(report)), this.store.putWorker(report, 5_000)]);
  }

  /** Memory reserved by loaded instances: each takes what its profile measured. */
  private memoryUsed(): number {
    return [...this.instances.values()].flat().reduce((sum, i) => sum + (i.variant.profile?.memoryBytes ?? 0), 0);
  }

  /** Unloads everything (queued queries go back to the queue for other replicas) and leaves. */
  async stop(): Promise<void> {
    if (this.reportTimer) clearInterval(this.reportTimer);
    await this.commands?.close().catch(() => undefined);
    await this.profileJobs?.close().catch(() => undefined);
    for (const name of [...this.instances.keys()]) await this.unload(name, "worker stopping").catch(() => undefined);
    await this.store.removeWorker(this.id).catch(() => undefined);
    await this.bus.jsm.consumers.delete(streams.scale.name, `worker-${this.id}`).catch(() => undefined);
  }
}
