import type { z } from "zod";
import { AckPolicy, type ConsumerMessages } from "@nats-io/jetstream";
import type { Subscription } from "@nats-io/transport-node";
import {
  batchingTunedEventSchema,
  modelProfiledEventSchema,
  describeZodError,
  profileJobSchema,
  scaleCommandSchema,
  streams,
  subjects,
  type Hardware,
  type ScaleCommand,
  type ScaleResult,
  type VariantRecord,
  type Clock,
  type StateEvent,
  type VariantState,
  type WorkerReport,
  workerCommandConsumer,
} from "@sloserve/contracts";
import type { Bus, Logger } from "@sloserve/bus";
import type { MetadataStore } from "@sloserve/store";
import type { BackendFactory } from "./backend.js";
import { VariantInstance } from "./instance.js";
import { runProfile, type ProfileCalibration } from "./profiler.js";
import { mergeFigures } from "./stats.js";
import type { ExecutorMetrics } from "./metrics.js";
import { DEFAULT_TYPE_FOR_KIND, DEFAULT_VARIANT_STATE_CONFIG, footprintOf, GPU_MEMORY_BYTES, heldResources, loadFitsMemory, nextState, observeWindow, windowedArrivalsQps, type VariantStateMemory } from "@sloserve/policy";

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
  /** The machine whose cores it runs on, reported (`host`) for the rules that share one host (libs/policy host-room.ts). @default unreported */
  host?: string;
  /**
   * Accelerators (GPUs, NeuronCores) this worker offers; an Inferentia instance holds the NeuronCores
   * its variant is compiled for, GPU instances share the GPUs by memory footprint (libs/policy
   * accelerator-share.ts). Counted and reported, not enforced (the model autoscaler places by them).
   * @default 0
   */
  accelerators?: number;
  /** GPU workers: memory of each GPU, bytes. @default the GPU of p3.2xlarge (16 GiB) */
  acceleratorMemoryBytes?: number;
  /** Prometheus metrics of its queries, instances and resources (libs/metrics); none: not exported. */
  metrics?: ExecutorMetrics;
  /** The host's calibration (`PROFILE_CALIBRATION`, profiler.ts): the profiler records its timings for the variants it lists. */
  profileCalibration?: ProfileCalibration;
}

const json = (value: unknown): Uint8Array => new TextEncoder().encode(JSON.stringify(value));

export class Worker {
  private readonly instances = new Map<string, VariantInstance[]>();
  private readonly memories = new Map<string, VariantStateMemory>();
  /** Instances being loaded, by variant: they hold their resources already. */
  private readonly loadingNow = new Map<string, { variant: VariantRecord; count: number }>();
  /** Set by `stop`: loads that finish after it are released, not started. */
  private stopping = false;
  private readonly states = new Map<string, VariantState>();
  private commands: ConsumerMessages | undefined;
  private profileJobs: ConsumerMessages | undefined;
  private reportTimer: NodeJS.Timeout | undefined;
  private lastReportMs: number;
  private readonly startedAtMs: number;
  /** Per variant: arrivals of recent report periods, for the load window of the state machine. */
  private readonly arrivalHistory = new Map<string, Array<{ atMs: number; arrivals: number; ms: number }>>();
  private readonly hardware: Hardware;
  /** The latest Wbatch announced per variant (`registry.event.tuned.*`), for instances still loading. */
  private readonly tunedWaits = new Map<string, number>();
  /** The latest profiled record per variant (`registry.event.profiled.*`), for instances still loading. */
  private readonly profiledRecords = new Map<string, VariantRecord>();
  private tunedSub: Subscription | undefined;
  private profiledSub: Subscription | undefined;
  /** A round of engine health checks is running ({@link checkEngines}). */
  private checkingEngines = false;

  constructor(
    private readonly bus: Bus,
    private readonly store: MetadataStore,
    private readonly backends: BackendFactory,
    private readonly options: WorkerOptions,
    private readonly log: Logger,
    private readonly clock: Clock,
  ) {
    this.hardware = backends.hardware;
    this.startedAtMs = clock.now();
    this.lastReportMs = this.startedAtMs;
  }

  get id(): string {
    return this.options.id;
  }

  /** The Wbatch the loaded instances of a variant batch with now, ms (undefined when none is loaded). */
  batchWaitMs(variant: string): number | undefined {
    return this.instances.get(variant)?.[0]?.batchWaitMs;
  }

  /** The record a running instance of `variant` serves with (as loaded, or profiled since). */
  variantRecord(variant: string): VariantRecord | undefined {
    return this.instances.get(variant)?.[0]?.variant;
  }

  async start(): Promise<void> {
    this.followTuning();
    await this.tick();
    const durable = workerCommandConsumer(this.id);
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
    this.reportTimer = setInterval(() => {
      void this.tick().catch((err: unknown) => this.log.warn({ err }, "report failed"));
      void this.checkEngines().catch((err: unknown) => this.log.warn({ err }, "engine health check failed"));
    }, this.options.reportEveryMs ?? 1000);
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
        const started = this.clock.now();
        try {
          const updated = await runProfile(parsed.data, { bus: this.bus, store: this.store, backends: this.backends, worker: this.id, log: this.log, clock: this.clock, keepAlive: () => msg.working(), ...(this.options.profileCalibration ? { calibrated: this.options.profileCalibration } : {}) });
          this.log.info({ model: parsed.data.model, variants: updated.length, ms: this.clock.now() - started }, "profiled");
          msg.ack();
        } catch (err) {
          this.log.error({ err, job: parsed.data.id, model: parsed.data.model }, "profiling failed");
          msg.term();
        }
      }
    })();
  }

  /**
   * Re-tuned batching (the registrar's `registry.event.tuned.<model>`, MArk §4.3): running instances of
   * the variants take the new Wbatch at once, without a reload; instances loading meanwhile take it once
   * they run (the value they read from Redis at load may be older than the event).
   */
  private followTuning(): void {
    this.tunedSub = this.followVariantEvents(subjects.batchingTunedAll, "tuned-batching", batchingTunedEventSchema, (v) => {
      this.tunedWaits.set(v.name, v.batchWaitMs);
      for (const instance of this.instances.get(v.name) ?? []) instance.setBatchWaitMs(v.batchWaitMs);
    });
    // A variant loaded before its profiling finished takes its accuracy and profile when they come.
    this.profiledSub = this.followVariantEvents(subjects.modelProfiled("*"), "profiled", modelProfiledEventSchema, (v) => {
      this.profiledRecords.set(v.name, v);
      for (const instance of this.instances.get(v.name) ?? []) instance.takeProfile(v);
    });
  }

  /** Applies each variant record of this worker's hardware in the events on `subject`; malformed ones are logged and ignored. */
  private followVariantEvents(subject: string, what: string, schema: z.ZodType<{ variants: VariantRecord[] }>, apply: (v: VariantRecord) => void): Subscription {
    return this.bus.nc.subscribe(subject, {
      callback: (err, msg) => {
        if (err) return this.log.warn({ err }, `${what} subscription failed`);
        let parsed;
        try {
          parsed = schema.safeParse(msg.json());
        } catch (e) {
          return this.log.warn({ err: e, subject: msg.subject }, `ignoring a ${what} event that is not JSON`);
        }
        if (!parsed.success) return this.log.warn({ subject: msg.subject, error: describeZodError(parsed.error) }, `ignoring a malformed ${what} event`);
        for (const v of parsed.data.variants) if (v.hardware === this.hardware) apply(v);
      },
    });
  }


  private async setState(variant: string, model: string, state: VariantState, reason: string): Promise<void> {
    const previous = this.states.get(variant) ?? "inactive";
    if (state === "inactive") this.states.delete(variant);
    else this.states.set(variant, state);
    const event: StateEvent = { variant, model, worker: this.id, hardware: this.hardware, state, previous, reason, atMs: this.clock.now() };
    this.log.info({ variant, state, previous, reason }, "variant state");
    await Promise.all([
      this.bus.js.publish(subjects.state(variant, this.id), json(event)),
      this.store.setInstance({ variant, model, worker: this.id, hardware: this.hardware, state, reason, atMs: event.atMs }),
    ]);
  }

  async execute(command: ScaleCommand): Promise<ScaleResult> {
    const started = this.clock.now();
    let error: string | undefined;
    try {
      if (command.action === "load") await this.load(command.variant, command.reason, 1, true);
      else if (command.action === "add") await this.load(command.variant, command.reason, command.count ?? 1, false);
      else await this.unload(command.variant, command.reason, command.count, command.oldest === true);
    } catch (err) {
      error = (err as Error).message;
      this.log.error({ err, command }, "scale command failed");
    }
    const result: ScaleResult = { id: command.id, worker: this.id, action: command.action, variant: command.variant, ok: !error, error, durationMs: this.clock.now() - started, atMs: this.clock.now() };
    await this.bus.js.publish(subjects.scaleResult(this.id), json(result)).catch((err: unknown) => this.log.warn({ err, command: command.id, variant: command.variant }, "could not publish the scale result"));
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
    if (!loadFitsMemory(need, this.options.memoryBytes - this.memoryUsed())) {
      throw new Error(`not enough memory for ${count} instance(s) of ${variant.name}: needs ${need} bytes, ${Math.max(0, this.options.memoryBytes - this.memoryUsed())} free`);
    }
    if (existing.length === 0) await this.setState(variant.name, variant.model, "loading", reason);
    let pending = count;
    this.reserve(variant, pending);
    try {
      const [bytes, model] = await Promise.all([this.bus.models.getBlob(variant.object), this.backends.needsOutputs ? this.store.getModel(variant.model) : undefined]);
      if (!bytes) throw new Error(`model binary ${variant.object} is missing from the repository`);
      for (let i = 0; i < count; i++) {
        const backend = await this.backends.load(bytes, {
          threads: variant.threads,
          model: variant.model,
          quantization: variant.quantization,
          variant: variant.name,
          maxBatch: variant.maxBatch,
          ...(variant.settings ? { settings: variant.settings } : {}),
          ...(model ? { outputs: model.outputs } : {}),
          profile: this.profiledRecords.get(variant.name)?.profile ?? variant.profile,
        });
        if (this.stopping) {
          // Stopped while this session loaded: it would pull queries from a worker that is leaving.
          await backend.release().catch((err: unknown) => this.log.warn({ err, variant: variant.name }, "while stopping: releasing a session loaded after the stop failed"));
          throw new Error("worker stopping");
        }
        if (backend.priorityRefused) this.log.info({ variant: variant.name, why: backend.priorityRefused }, "inference thread runs at the process's priority");
        const instance = new VariantInstance(variant, backend, this.bus, { id: this.id, hardware: this.hardware }, this.log.child({ variant: variant.name }), this.clock, this.options.metrics?.forVariant(variant));
        await instance.start();
        this.instances.set(variant.name, [...(this.instances.get(variant.name) ?? []), instance]);
        const tuned = this.tunedWaits.get(variant.name);
        if (tuned !== undefined) instance.setBatchWaitMs(tuned);
        const profiled = this.profiledRecords.get(variant.name);
        if (profiled) instance.takeProfile(profiled);
        this.reserve(variant, -1);
        pending--;
      }
      if (existing.length === 0) {
        this.memories.set(variant.name, { state: "active", sinceMs: this.clock.now(), slowCount: 0 });
        await this.setState(variant.name, variant.model, "active", `loaded: ${reason}`);
      } else this.log.info({ variant: variant.name, instances: this.instances.get(variant.name)?.length, reason }, "instances added");
    } catch (err) {
      // (a stopping worker has said so already, and has left the store: no record may come back)
      if (!this.stopping && !this.instances.get(variant.name)?.length) await this.setState(variant.name, variant.model, "inactive", `load failed: ${(err as Error).message}`);
      throw err;
    } finally {
      this.reserve(variant, -pending);
    }
  }

  /**
   * Removes `count` instances of a variant (all when undefined): the newest, or with `oldest` those
   * loaded first (a move of Interfered instances: the new ones stay). The last one makes it Inactive.
   */
  async unload(variantName: string, reason: string, count?: number, oldest = false): Promise<void> {
    const list = this.instances.get(variantName);
    if (!list?.length) return;
    const n = Math.min(count ?? list.length, list.length);
    const model = list[0]?.variant.model ?? "";
    const removing = oldest ? list.slice(0, n) : list.slice(list.length - n);
    const keep = oldest ? list.slice(n) : list.slice(0, list.length - n);
    if (keep.length === 0) await this.setState(variantName, model, "unloading", reason);
    this.instances.set(variantName, keep);
    for (const instance of removing) await instance.stop();
    if (keep.length === 0) {
      this.instances.delete(variantName);
      this.memories.delete(variantName);
      this.arrivalHistory.delete(variantName);
      await this.setState(variantName, model, "inactive", reason);
    } else this.log.info({ variant: variantName, instances: keep.length, reason }, "instances removed");
  }

  /**
   * The worker's one-second report, and the variant state transitions it implies (INFaaS §4.1): each
   * variant's observation is built by libs/policy `observeWindow` from what it did (arrivals over the
   * load window; batches with their observed and profiled times this period) and stepped by
   * `nextState`, the rule the simulator's monitor runs. Decides only: `tick` publishes.
   */
  buildReport(nowMs: number): { report: WorkerReport; transitions: Array<{ variant: string; model: string; state: VariantState; reason: string }>; memories: Map<string, VariantStateMemory> } {
    const windowMs = Math.max(1, nowMs - this.lastReportMs);
    const transitions: Array<{ variant: string; model: string; state: VariantState; reason: string }> = [];
    const memories = new Map<string, VariantStateMemory>();
    const cfg = DEFAULT_VARIANT_STATE_CONFIG;
    const variants = [...this.states.entries()].map(([name, state]) => {
      const list = this.instances.get(name) ?? [];
      const f = mergeFigures(list.map((i) => i.stats.take()));
      const perSecond = 1000 / windowMs;
      const variant = list[0]?.variant;
      // Arrivals over the load window (the periods that end within it, this one included).
      const history = (this.arrivalHistory.get(name) ?? []).filter((h) => h.atMs > nowMs - cfg.loadWindowMs);
      history.push({ atMs: nowMs, arrivals: f.arrivals, ms: windowMs });
      this.arrivalHistory.set(name, history);
      let current = state;
      const memory = this.memories.get(name);
      if (variant?.profile && memory && (state === "active" || state === "overloaded" || state === "interfered")) {
        const samples = history.map((h) => ({ atMs: h.atMs, seenAtMs: h.atMs, ms: h.ms, qps: { [name]: (h.arrivals * 1000) / Math.max(1, h.ms) } }));
        const obs = observeWindow(
          {
            instances: list.length,
            loading: 0,
            qps: windowedArrivalsQps(samples)[name] ?? 0,
            peakQpsPerInstance: variant.profile.peakQps,
            batches: f.batches,
            observedBatchMs: f.observedBatchMs,
            profiledBatchMs: f.profiledBatchMs,
          },
          cfg,
        );
        const step = nextState(memory, obs, nowMs, cfg);
        memories.set(name, step.memory);
        if (step.changed) {
          current = step.memory.state;
          transitions.push({ variant: name, model: variant.model, state: current, reason: step.reason });
        }
      }
      return {
        variant: name,
        state: current,
        instances: list.length,
        loading: this.loadingNow.get(name)?.count ?? 0,
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
        profiledUtilisation: f.profiledBatchMs / windowMs,
      };
    });
    const held = this.held();
    const threadsUsed = held.threads;
    const mem = process.memoryUsage();
    const memoryUsedBytes = this.memoryUsed();
    const report: WorkerReport = {
      worker: this.id,
      hardware: this.hardware,
      atMs: nowMs,
      startedAtMs: this.startedAtMs,
      threads: this.options.threads,
      threadsUsed,
      memoryBytes: this.options.memoryBytes,
      memoryUsedBytes,
      accelerators: this.options.accelerators ?? 0,
      acceleratorsUsed: held.accelerators,
      ...(this.hardware === "gpu" ? { acceleratorMemoryBytes: this.options.acceleratorMemoryBytes ?? GPU_MEMORY_BYTES[DEFAULT_TYPE_FOR_KIND.gpu], acceleratorMemoryUsedBytes: held.acceleratorMemoryBytes } : {}),
      rssBytes: mem.rss,
      ...(this.options.host ? { host: this.options.host } : {}),
      variants,
    };
    return { report, transitions, memories };
  }

  /** One report period: decide (buildReport), then keep the new state memories and publish. */
  async tick(): Promise<WorkerReport> {
    const nowMs = this.clock.now();
    const { report, transitions, memories } = this.buildReport(nowMs);
    this.lastReportMs = nowMs;
    for (const [name, m] of memories) this.memories.set(name, m);
    this.options.metrics?.report(report, (variant) => this.instances.get(variant)?.[0]?.variant.model ?? this.loadingNow.get(variant)?.variant.model ?? "");
    await Promise.all([
      ...transitions.map((t) => this.setState(t.variant, t.model, t.state, t.reason).catch((err: unknown) => this.log.warn({ err, variant: t.variant, state: t.state }, "state publish failed"))),
      this.bus.js.publish(subjects.workerMetrics(this.id), json(report)),
      this.store.putWorker(report, 5_000),
    ]);
    return report;
  }

  /**
   * For engines behind a network (executor-inferentia's remote server; `ModelBackend.health`), once a
   * report period: a serving variant whose engine cannot serve becomes Failed, its instances stop
   * taking queries (they put back those they hold) and the dispatcher routes around it; once the
   * engine can serve again the instances take queries again and the variant is Active. Local engines
   * have no health to ask. One round at a time; a round that outlasts the period delays the next.
   */
  async checkEngines(): Promise<void> {
    if (this.checkingEngines) return;
    this.checkingEngines = true;
    try {
      await Promise.all(
        [...this.instances.entries()].map(async ([name, list]) => {
          const first = list[0];
          const health = first?.health();
          if (!first || !health) return;
          const result = await health;
          const state = this.states.get(name);
          // Unloaded, reloaded or loading meanwhile: the next round looks again.
          if (this.instances.get(name) !== list) return;
          const model = first.variant.model;
          if (!result.ok && (state === "active" || state === "overloaded" || state === "interfered")) {
            await Promise.all(list.map((i) => i.pause()));
            await this.setState(name, model, "failed", `engine cannot serve: ${result.reason}`);
          } else if (result.ok && state === "failed") {
            await Promise.all(list.map((i) => i.resume()));
            this.memories.set(name, { state: "active", sinceMs: this.clock.now(), slowCount: 0 });
            await this.setState(name, model, "active", "engine serves again");
          }
        }),
      );
    } finally {
      this.checkingEngines = false;
    }
  }

  /** Memory reserved by loaded and loading instances: each takes what its profile measured. */
  private memoryUsed(): number {
    return this.held().memoryBytes;
  }

  /**
   * What loaded and loading instances hold (libs/policy `heldResources`, the rule the model autoscaler
   * plans with): threads, memory (profiled), the NeuronCores of Inferentia variants, the GPU memory of GPU variants.
   */
  private held(): ReturnType<typeof heldResources> {
    const all = [...[...this.instances.values()].flat().map((i) => ({ variant: i.variant, count: 1 })), ...this.loadingNow.values()];
    return heldResources(all.map(({ variant, count }) => ({ footprint: footprintOf(variant), count })));
  }

  private reserve(variant: VariantRecord, n: number): void {
    const count = (this.loadingNow.get(variant.name)?.count ?? 0) + n;
    if (count > 0) this.loadingNow.set(variant.name, { variant, count });
    else this.loadingNow.delete(variant.name);
  }

  /** Unloads everything (queued queries go back to the queue for other replicas) and leaves. */
  async stop(): Promise<void> {
    this.stopping = true;
    const loading = [...this.loadingNow];
    if (this.reportTimer) clearInterval(this.reportTimer);
    this.tunedSub?.unsubscribe();
    this.profiledSub?.unsubscribe();
    // Stopping goes on past each failure, logging it: what is left is cleaned up by TTLs and timeouts.
    const warn = (what: string, extra: Record<string, unknown> = {}) => (err: unknown): void => this.log.warn({ err, worker: this.id, ...extra }, `while stopping: ${what} failed`);
    await this.commands?.close().catch(warn("closing the command consumer"));
    await this.profileJobs?.close().catch(warn("closing the profile-job consumer"));
    for (const name of [...this.instances.keys()]) await this.unload(name, "worker stopping").catch(warn("unloading", { variant: name }));
    // A load under way ends with the worker: say so, or the dispatchers would count the variant as
    // loading (and queue its queries) until this worker's heartbeat is declared lost.
    for (const [name, { variant }] of loading) {
      if (!this.instances.get(name)?.length) await this.setState(name, variant.model, "inactive", "worker stopping: load abandoned").catch(warn("reporting an abandoned load", { variant: name }));
    }
    // The last report says it leaves: the dispatchers and the model autoscaler forget it now. Until
    // its heartbeat's timeout they would otherwise offer it loads that it never takes, or refuse one
    // elsewhere because it seemed to run the variant still.
    await this.bus.js.publish(subjects.workerMetrics(this.id), json({ ...this.buildReport(this.clock.now()).report, leaving: true })).catch(warn("publishing the leaving report"));
    await this.store.removeWorker(this.id).catch(warn("removing the worker from the store"));
    await this.bus.jsm.consumers.delete(streams.scale.name, workerCommandConsumer(this.id)).catch(warn("deleting the command consumer"));
  }
}
