import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { createInbox, type Msg, type MsgHdrs, type Subscription } from "@nats-io/transport-node";
import { AckPolicy, DeliverPolicy } from "@nats-io/jetstream";
import {
  ManualClock,
  concatParts,
  encodeCoalesced,
  headers,
  queueConsumer,
  streams,
  subjects,
  type ModelRecord,
  type ScaleCommand,
  type StateEvent,
  type VariantRecord,
  type VariantState,
  type WorkerReport,
} from "@sloserve/contracts";
import { connectBus, createLogger, makeHeaders, type Bus } from "@sloserve/bus";
import { Catalog, MetadataStore } from "@sloserve/store";
import { startNats, startRedis, type ServerHandle } from "@sloserve/stack";
import { waitFor } from "@sloserve/testing";
import { ClusterView } from "../src/cluster.js";
import { SelectionView } from "../src/selection-view.js";
import { ArrivalCounter } from "../src/arrivals.js";
import { Dispatcher } from "../src/dispatch.js";
import { followEvents } from "../src/events.js";
import { DispatcherQuotas, SLOT_GRACE_MS } from "../src/quotas.js";
import { QuotaAdmission } from "@sloserve/policy";

/**
 * The dispatcher shell on a real nats-server (JetStream) and redis-server, with a manual clock: its
 * views are fed by the events the services publish, queries arrive on `infer.*`, and what it does is
 * read back from the bus (queries on `q.<variant>`, load commands on `scale.model.<worker>`, error
 * replies on the caller's inbox).
 */

let nats: ServerHandle;
let redis: ServerHandle;
let bus: Bus;
let store: MetadataStore;
const logLines: Array<Record<string, unknown>> = [];
const log = createLogger("dispatcher-test", "debug", { write: (line: string) => void logLines.push(JSON.parse(line) as Record<string, unknown>) });

/** Everything the dispatcher put on the bus, in arrival order. */
const queued: Array<{ variant: string; headers: MsgHdrs | undefined }> = [];
const commands: Array<{ worker: string; command: ScaleCommand }> = [];
let taps: Subscription[] = [];

beforeAll(async () => {
  nats = await startNats();
  redis = await startRedis();
  bus = await connectBus({ servers: nats.url, name: "dispatcher-test", log });
  store = MetadataStore.connect(redis.url);
  taps = [
    bus.nc.subscribe("q.>", { callback: (_e, m) => void queued.push({ variant: m.subject.slice(2), headers: m.headers }) }),
    bus.nc.subscribe("scale.model.*", { callback: (_e, m) => void commands.push({ worker: m.subject.split(".")[2] ?? "", command: m.json() }) }),
  ];
});

afterAll(async () => {
  for (const s of taps) s.unsubscribe();
  await bus?.close();
  await store?.close();
  await redis?.stop();
  await nats?.stop();
});

// ------------------------------------------------------------------ harness

const T0 = 1_700_000_000_000;
let running: { subs: Subscription[] } | undefined;

afterEach(() => {
  for (const s of running?.subs ?? []) s.unsubscribe();
  running = undefined;
});

/** A dispatcher as main.ts wires it, with a manual clock (and apps' quotas with `quotas`). */
function startDispatcher(clock = new ManualClock(T0), quotas?: DispatcherQuotas) {
  const catalog = new Catalog(store);
  const cluster = new ClusterView();
  const selection = new SelectionView();
  const dispatcher = new Dispatcher(bus, catalog, cluster, selection, new ArrivalCounter(clock.now(), "test"), log, clock, undefined, undefined, true, quotas);
  const subs = [
    ...followEvents(bus, { catalog, cluster, selection }, dispatcher, clock, log),
    bus.nc.subscribe("infer.>", { callback: (_e, m) => dispatcher.handle(m) }),
  ];
  running = { subs };
  return { clock, dispatcher, cluster, catalog };
}

/** Publishes an event from this connection; after the flush the dispatcher's callbacks have run. */
async function publish(subject: string, body: unknown): Promise<void> {
  bus.nc.publish(subject, JSON.stringify(body));
  await bus.nc.flush();
}

function model(name: string, app = name): ModelRecord {
  return {
    name,
    app,
    task: "test",
    dataset: "none",
    platform: "onnxruntime_onnx",
    inputs: [{ name: "x", datatype: "FP32", shape: [-1, 2] }],
    outputs: [{ name: "y", datatype: "FP32", shape: [-1, 2] }],
    object: `model/${name}.onnx`,
    sizeBytes: 1,
    sha256: "0",
    registeredAtMs: T0,
    validationObject: null,
    validationCount: 0,
    profileShape: {},
  };
}

/** A profiled variant: `latencyMs` at its max batch, `peakQps`, accuracy. */
function variant(name: string, m: ModelRecord, o: { hardware?: VariantRecord["hardware"]; quantization?: VariantRecord["quantization"]; maxBatch?: number; latencyMs?: number; peakQps?: number; accuracy?: number; loadLatencyMs?: number } = {}): VariantRecord {
  const maxBatch = o.maxBatch ?? 1;
  return {
    name,
    model: m.name,
    app: m.app,
    hardware: o.hardware ?? "cpu",
    maxBatch,
    batchWaitMs: 0,
    quantization: o.quantization ?? "fp32",
    threads: 1,
    object: m.object,
    accuracy: o.accuracy ?? 0.9,
    profiled: true,
    profile: {
      loadLatencyMs: o.loadLatencyMs ?? 200,
      latencyMs: { [String(maxBatch)]: o.latencyMs ?? 5 },
      peakQps: o.peakQps ?? 200,
      memoryBytes: 0,
      accuracy: o.accuracy ?? 0.9,
      sampleShape: {},
      worker: "profiler",
      profiledAtMs: T0,
    },
  };
}

async function register(m: ModelRecord, variants: VariantRecord[]): Promise<void> {
  await publish(subjects.modelRegistered(m.name), { model: m, variants });
}

/** A worker's one-second report (its heartbeat), stamped with the clock's time. */
async function report(
  clock: ManualClock,
  worker: string,
  variants: Array<{ variant: string; state: VariantState; arrivals?: number; queueLength?: number; utilisation?: number }>,
  o: { hardware?: WorkerReport["hardware"]; threads?: number; threadsUsed?: number; leaving?: boolean } = {},
): Promise<void> {
  const r: WorkerReport = {
    ...(o.leaving ? { leaving: true } : {}),
    worker,
    hardware: o.hardware ?? "cpu",
    atMs: clock.now(),
    startedAtMs: T0,
    threads: o.threads ?? 4,
    threadsUsed: o.threadsUsed ?? variants.length,
    memoryBytes: 8e9,
    memoryUsedBytes: 0,
    rssBytes: 1e8,
    variants: variants.map((v) => ({
      variant: v.variant,
      state: v.state,
      instances: 1,
      sloMisses: 0,
      batchP50Ms: 0,
      batchSizeP50: 0,
      arrivals: v.arrivals ?? 0,
      served: v.arrivals ?? 0,
      errors: 0,
      batches: 0,
      queueLength: v.queueLength ?? 0,
      latencyP50Ms: 0,
      latencyP99Ms: 0,
      utilisation: v.utilisation ?? 0,
    })),
  };
  await publish(subjects.workerMetrics(worker), r);
}

async function stateEvent(clock: ManualClock, v: VariantRecord, worker: string, state: VariantState, previous: VariantState): Promise<void> {
  const e: StateEvent = { variant: v.name, model: v.model, worker, hardware: v.hardware, state, previous, reason: "test", atMs: clock.now() };
  await publish(subjects.state(v.name, worker), e);
}

const body = (slo?: Record<string, number>) => ({ inputs: [{ name: "x", datatype: "FP32", shape: [1, 2], data: [1, 2] }], ...(slo ? { slo } : {}) });

/** Where a query ended up: the queue it was put on, or the error it was answered with. */
async function ask(subject: string, payload: unknown): Promise<{ variant?: string; headers?: MsgHdrs; error?: { code: string; error: string } }> {
  const inbox = createInbox();
  const replies: Msg[] = [];
  const sub = bus.nc.subscribe(inbox, { callback: (_e, m) => void replies.push(m) });
  bus.nc.publish(subject, JSON.stringify(payload), { reply: inbox });
  try {
    return await waitFor(`the dispatcher to queue or answer a query on ${subject}`, () => {
      const q = queued.find((x) => x.headers?.get(headers.replyTo) === inbox);
      if (q) return { variant: q.variant, headers: q.headers };
      const r = replies[0];
      if (r) return { error: r.json<{ code: string; error: string }>() };
      return undefined;
    });
  } finally {
    sub.unsubscribe();
  }
}

/**
 * Load commands for a variant: once at least `atLeast` have come, and after everything published so
 * far has come back. The dispatcher sends its commands on its own time, and a check that no more (or
 * none) came has no event to wait for: hence the pause after the flush.
 */
async function commandsFor(variant: string, atLeast = 0): Promise<ScaleCommand[]> {
  const of = () => commands.filter((c) => c.command.variant === variant).map((c) => c.command);
  if (atLeast > 0) await waitFor(`${atLeast} load command(s) for ${variant}`, () => of().length >= atLeast);
  await bus.nc.flush();
  await new Promise((r) => setTimeout(r, 100));
  return of();
}

// ------------------------------------------------------------------ model-specific queries

describe("dispatcher - model queries", () => {
  it("dispatcher - a model query goes to the least-loaded active fp32 variant", async () => {
    const { clock } = startDispatcher();
    const m = model("m1");
    const [a, b, q8] = [variant("m1-a", m), variant("m1-b", m, { maxBatch: 8 }), variant("m1-q8", m, { quantization: "int8" })];
    await register(m, [a, b, q8]);
    // Per instance: a (10 + 0) / 1 = 10; b (2 + 1) / 1 = 3; the int8 variant idles at 0 but is not a candidate.
    await report(clock, "w1", [
      { variant: a.name, state: "active", arrivals: 10 },
      { variant: b.name, state: "active", arrivals: 2, queueLength: 1 },
      { variant: q8.name, state: "active" },
    ]);
    clock.advance(250);
    const r = await ask(subjects.inferModel(m.name), body());
    expect(r.variant).toBe(b.name);
    // The clock stamps the query: enqueued now, deadline now + 30 s (no deadline given).
    expect(Number(r.headers?.get(headers.enqueuedAt))).toBe(T0 + 250);
    expect(Number(r.headers?.get(headers.deadline))).toBe(T0 + 250 + 30_000);
  });

  it("dispatcher - int8 variants are not chosen for a model query: the fp32 one is loaded", async () => {
    const { clock } = startDispatcher();
    const m = model("m2");
    const [fp, q8] = [variant("m2-fp", m), variant("m2-q8", m, { quantization: "int8", peakQps: 2000 })];
    await register(m, [fp, q8]);
    await report(clock, "w1", [{ variant: q8.name, state: "active" }]);
    const r = await ask(subjects.inferModel(m.name), body());
    expect(r.variant).toBe(fp.name);
    expect((await commandsFor(fp.name, 1)).map((c) => c.atMs)).toEqual([T0]);
    expect(await commandsFor(q8.name)).toEqual([]);
  });

  it("dispatcher - a load is asked once within the pending window and again after it", async () => {
    const { clock } = startDispatcher();
    const m = model("m3");
    const a = variant("m3-a", m);
    await register(m, [a]);
    await report(clock, "w1", []);
    const steps: Array<{ advanceMs: number; wantCommands: number[] }> = [
      // t0: nothing runs → load on w1.
      { advanceMs: 0, wantCommands: [T0] },
      // t0 + 30 s: 30 000 < 60 000, the load is pending → the query waits for it, no new command.
      { advanceMs: 30_000, wantCommands: [T0] },
      // t0 + 59.999 s: still pending.
      { advanceMs: 29_999, wantCommands: [T0] },
      // t0 + 60 s: 60 000 − 0 = 60 000, the window is over and no state event came → asked again.
      { advanceMs: 1, wantCommands: [T0, T0 + 60_000] },
      // t0 + 70 s: the second load is pending.
      { advanceMs: 10_000, wantCommands: [T0, T0 + 60_000] },
    ];
    for (const s of steps) {
      clock.advance(s.advanceMs);
      await report(clock, "w1", []); // heartbeat: the worker stays live
      const r = await ask(subjects.inferModel(m.name), body());
      expect(r.variant).toBe(a.name);
      expect((await commandsFor(a.name, s.wantCommands.length)).map((c) => c.atMs)).toEqual(s.wantCommands);
    }
    expect(commands.filter((c) => c.command.variant === a.name).every((c) => c.worker === "w1")).toBe(true);
  });

  it("dispatcher - a state event settles a pending load: the next query may ask again at once", async () => {
    const { clock } = startDispatcher();
    const m = model("m4");
    const a = variant("m4-a", m);
    await register(m, [a]);
    await report(clock, "w1", []);
    await ask(subjects.inferModel(m.name), body());
    clock.advance(1_000);
    // (a load that fails ends Inactive: libs/executor worker.ts)
    await stateEvent(clock, a, "w1", "inactive", "loading");
    await ask(subjects.inferModel(m.name), body());
    expect((await commandsFor(a.name, 2)).map((c) => c.atMs)).toEqual([T0, T0 + 1_000]);
  });

  it("dispatcher - a variant query goes to the variant named, int8 included; none placeable says why", async () => {
    const { clock } = startDispatcher();
    const m = model("m9");
    const [q8, gpu] = [variant("m9-q8", m, { quantization: "int8" }), variant("m9-gpu", m, { hardware: "gpu" })];
    await register(m, [q8, gpu]);
    await report(clock, "w1", [{ variant: q8.name, state: "active" }]);
    expect((await ask(subjects.inferVariant(q8.name), body())).variant).toBe(q8.name);
    expect((await ask(subjects.inferVariant(gpu.name), body())).error).toEqual({ code: "no_capacity", error: "no gpu worker can load m9-gpu: no live gpu worker" });
  });

  it("dispatcher - no live worker of the hardware: no capacity", async () => {
    const { clock } = startDispatcher();
    const m = model("m5");
    await register(m, [variant("m5-gpu", m, { hardware: "gpu" })]);
    await report(clock, "w1", []);
    const r = await ask(subjects.inferModel(m.name), body());
    expect(r.error).toEqual({ code: "no_capacity", error: "model 'm5' cannot be served now: no worker of hardware gpu is running" });
  });

  it("dispatcher - a variant unloaded after its worker's last report may be loaded there again at once", async () => {
    // The worker reports each second; the state event of an unload comes between two reports. Placement
    // read the report alone and refused: "every live cpu worker already runs m10-a" (a live replay lost
    // 6 queries so, in the 0.23 s before the next report).
    const { clock } = startDispatcher();
    const m = model("m10");
    const a = variant("m10-a", m);
    await register(m, [a]);
    await report(clock, "w1", [{ variant: a.name, state: "active" }], { threads: 1, threadsUsed: 1 });
    clock.advance(300);
    await stateEvent(clock, a, "w1", "unloading", "active");
    await stateEvent(clock, a, "w1", "inactive", "unloading");
    const r = await ask(subjects.inferModel(m.name), body());
    expect(r.variant).toBe(a.name);
    expect((await commandsFor(a.name, 1)).map((c) => c.atMs)).toEqual([T0 + 300]);
    expect(commands.filter((c) => c.command.variant === a.name).map((c) => c.worker)).toEqual(["w1"]);
  });

  it("dispatcher - a leaving worker's last report: it is forgotten at once, not after its heartbeat's timeout", async () => {
    const { clock } = startDispatcher();
    const m = model("m11");
    await register(m, [variant("m11-a", m)]);
    await report(clock, "w1", []);
    clock.advance(100);
    await report(clock, "w1", [], { leaving: true });
    const r = await ask(subjects.inferModel(m.name), body());
    expect(r.error).toEqual({ code: "no_capacity", error: "model 'm11' cannot be served now: no worker of hardware cpu is running" });
    expect(await commandsFor("m11-a")).toEqual([]);
  });

  it("dispatcher - a worker whose heartbeat is older than 5 s by the clock does not count", async () => {
    const { clock } = startDispatcher();
    const m = model("m6");
    await register(m, [variant("m6-a", m)]);
    await report(clock, "w1", []);
    clock.advance(5_001);
    const r = await ask(subjects.inferModel(m.name), body());
    expect(r.error?.code).toBe("no_capacity");
  });
});

// ------------------------------------------------------------------ model-less queries

describe("dispatcher - model-less queries", () => {
  it("dispatcher - a model-less query whose best variant cannot be placed falls back to a loaded one", async () => {
    const { clock } = startDispatcher();
    // gpu: 8.5e-4 $/s / 10 000 QPS = 8.5e-8 per query, the cheapest; cpu: 4.7e-5 / 100 = 4.7e-7.
    const m = model("a1-m", "a1");
    const gpu = variant("a1-gpu", m, { hardware: "gpu", peakQps: 10_000 });
    const cpu = variant("a1-cpu", m, { peakQps: 100 });
    await register(m, [gpu, cpu]);
    // cpu runs but is Overloaded; no GPU worker exists, so the GPU load cannot be placed.
    await report(clock, "w1", [{ variant: cpu.name, state: "overloaded", arrivals: 150 }]);
    const r = await ask(subjects.inferApp("a1"), body({ latency_ms: 100 }));
    expect(r.variant).toBe(cpu.name);
    expect(await commandsFor(gpu.name)).toEqual([]);
    expect(r.headers?.get(headers.sloLatencyMs)).toBe("100");
  });

  it("dispatcher - nothing loaded and nothing placeable: no capacity, naming the load that failed", async () => {
    const { clock } = startDispatcher();
    const m = model("a2-m", "a2");
    await register(m, [variant("a2-gpu", m, { hardware: "gpu" })]);
    await report(clock, "w1", []);
    const r = await ask(subjects.inferApp("a2"), body({ latency_ms: 1000 }));
    expect(r.error).toEqual({
      code: "no_capacity",
      error: "app 'a2' has variants that meet the requirements, but none is loaded and no worker can load one now: cannot place a2-gpu: no live gpu worker",
    });
  });

  // A relief load (the cpu variant "old" is Overloaded) for the cheaper "new" variant.
  const reliefCases: Array<{ name: string; workers: Array<{ worker: string; utilisation: number; threads: number; threadsUsed: number }>; want: string; wantLoadOn?: string }> = [
    // busy: 1.9 / 2 threads = 95% > 80% → refused; the query queues on the Overloaded variant.
    { name: "only a busy worker: no load, the query queues on the loaded variant", workers: [{ worker: "busy", utilisation: 1.9, threads: 2, threadsUsed: 1 }], want: "old" },
    // idle: 0.2 / 2 = 10%, 1 thread free → the load goes there.
    {
      name: "an idle worker: the load goes there",
      workers: [
        { worker: "busy", utilisation: 1.9, threads: 2, threadsUsed: 1 },
        { worker: "idle", utilisation: 0.2, threads: 2, threadsUsed: 1 },
      ],
      want: "new",
      wantLoadOn: "idle",
    },
    // full: 0.2 / 2 = 10% but 2 of 2 threads used; a relief load may not oversubscribe.
    { name: "an idle worker without free threads: no load", workers: [{ worker: "full", utilisation: 0.2, threads: 2, threadsUsed: 2 }], want: "old" },
    // Exactly 80%: 1.6 / 2 = 0.8 is not over the cap.
    { name: "a worker at exactly 80%: the load goes there", workers: [{ worker: "edge", utilisation: 1.6, threads: 2, threadsUsed: 1 }], want: "new", wantLoadOn: "edge" },
  ];
  reliefCases.forEach((c, i) => {
    it(`dispatcher - relief loads avoid busy workers: ${c.name}`, async () => {
      const { clock } = startDispatcher();
      const app = `r${i}`;
      const m = model(`${app}-m`, app);
      // new: 4.7e-5 / 400 per query beats old: 4.7e-5 / 100.
      const fresh = variant(`${app}-new`, m, { maxBatch: 4, peakQps: 400 });
      const old = variant(`${app}-old`, m, { peakQps: 100 });
      await register(m, [fresh, old]);
      for (const [k, w] of c.workers.entries()) {
        // The Overloaded instance runs on the first worker; the others report their own load.
        await report(clock, w.worker, [{ variant: k === 0 ? old.name : `${app}-other`, state: k === 0 ? "overloaded" : "active", utilisation: w.utilisation }], { threads: w.threads, threadsUsed: w.threadsUsed });
      }
      const r = await ask(subjects.inferApp(app), body({ latency_ms: 100 }));
      expect(r.variant).toBe(`${app}-${c.want}`);
      const loads = await commandsFor(fresh.name, c.wantLoadOn ? 1 : 0);
      expect(loads.length).toBe(c.wantLoadOn ? 1 : 0);
      if (c.wantLoadOn) expect(commands.find((x) => x.command.variant === fresh.name)?.worker).toBe(c.wantLoadOn);
    });
  });

  it("dispatcher - infeasible: the error names the closest variant", async () => {
    const { clock } = startDispatcher();
    const m = model("a3-m", "a3");
    await register(m, [variant("a3-fast", m, { latencyMs: 20, accuracy: 0.8 }), variant("a3-slow", m, { latencyMs: 200, accuracy: 0.8 })]);
    await report(clock, "w1", []);
    // 10 ms: a3-fast is (20 − 10) / 10 = 100% over, a3-slow 1900% → a3-fast is the closest.
    const r = await ask(subjects.inferApp("a3"), body({ latency_ms: 10 }));
    expect(r.error?.code).toBe("infeasible");
    expect(r.error?.error).toMatch(/^no variant of app 'a3' meets the requirements \(.*\); the closest is a3-fast: accuracy 0\.8, latency 20 ms, \$[0-9.e-]+ per query$/);
  });
});

// ------------------------------------------------------------------ rescue

describe("dispatcher - rescue", () => {
  it("dispatcher - rescue routes the queries left in an unloaded variant's queue with the current clock time", async () => {
    const { clock, dispatcher, catalog } = startDispatcher();
    const m = model("m7");
    // b8 is cheaper per query (4.7e-5 / 400 < 4.7e-5 / 100).
    const [a, b8] = [variant("m7-a", m), variant("m7-b8", m, { maxBatch: 8, peakQps: 400 })];
    await register(m, [a, b8]);
    await report(clock, "w1", [{ variant: a.name, state: "active" }]);
    // The queue of m7-a and its consumer, as an executor creates them.
    await bus.jsm.consumers.add(streams.queries.name, {
      durable_name: queueConsumer(a.name),
      filter_subject: subjects.queue(a.name),
      ack_policy: AckPolicy.Explicit,
      deliver_policy: DeliverPolicy.All,
      ack_wait: 6e9,
    });
    // The dispatcher asked for m7-b8 at t0 (pending until t0 + 60 s).
    expect(dispatcher.requestLoad(catalog.variants.get(b8.name) as VariantRecord, "test", clock.now()).outcome).toBe("placed");
    // Two queries sit in m7-a's queue.
    const inboxes = [createInbox(), createInbox()];
    for (const inbox of inboxes) await bus.js.publish(subjects.queue(a.name), new Uint8Array([1]), { headers: makeHeaders({ [headers.replyTo]: inbox }) });
    // At t0 + 59 s, while m7-b8's load is still pending, m7-a's last instance goes away (the worker
    // reports without it) and the state event starts the rescue.
    clock.advance(59_000);
    await report(clock, "w1", []);
    await stateEvent(clock, a, "w1", "inactive", "unloading");
    // The clock moves on while the rescue looks up the queue and fetches from it (network round trips).
    clock.advance(2_000);
    // Rerouted at t0 + 61 s, the time of the reroute, not of the event: 61 000 ≥ 60 000, m7-b8's load
    // is no longer pending, so it is asked for again (once: the second query finds it pending).
    const moved = await waitFor("both queries rerouted to m7-b8", () => {
      const got = queued.filter((q) => q.variant === b8.name && inboxes.includes(q.headers?.get(headers.replyTo) ?? ""));
      return got.length === 2 ? got : undefined;
    });
    expect(moved.length).toBe(2);
    expect((await commandsFor(b8.name, 2)).map((c) => c.atMs)).toEqual([T0, T0 + 61_000]);
    await waitFor("the rescue's log line", () => logLines.some((l) => l["msg"] === "rescued queries from an unloaded variant's queue" && l["variant"] === a.name));
  });

  it("dispatcher - rescue splits a message of coalesced queries and routes each query alone", async () => {
    const { clock, dispatcher } = startDispatcher();
    const m = model("m9");
    const [a, b8] = [variant("m9-a", m), variant("m9-b8", m, { maxBatch: 8, peakQps: 400 })];
    await register(m, [a, b8]);
    await report(clock, "w1", [{ variant: a.name, state: "active" }]);
    await bus.jsm.consumers.add(streams.queries.name, { durable_name: queueConsumer(a.name), filter_subject: subjects.queue(a.name), ack_policy: AckPolicy.Explicit, deliver_policy: DeliverPolicy.All, ack_wait: 6e9 });
    const inboxes = [createInbox(), createInbox(), createInbox()];
    const { parts, byteLength } = encodeCoalesced(inboxes.map((inbox, i) => ({ headers: { [headers.replyTo]: inbox, [headers.requestId]: `r${i}` }, payload: new Uint8Array([i]) })));
    await bus.js.publish(subjects.queue(a.name), concatParts(parts, byteLength), { headers: makeHeaders({ [headers.queries]: inboxes.length }) });
    await report(clock, "w1", []);
    await stateEvent(clock, a, "w1", "inactive", "unloading");
    const moved = await waitFor("the three coalesced queries rerouted one by one", () => {
      const got = queued.filter((q) => q.variant === b8.name && inboxes.includes(q.headers?.get(headers.replyTo) ?? ""));
      return got.length === 3 ? got : undefined;
    });
    expect(moved.map((q) => q.headers?.get(headers.requestId))).toEqual(["r0", "r1", "r2"]);
    expect(moved.every((q) => !q.headers?.get(headers.queries))).toBe(true);
    expect(await dispatcher.rescue(a.name)).toBe(0);
  });

  it("dispatcher - rescue of a variant whose queue was never consumed moves nothing and says why", async () => {
    const { dispatcher } = startDispatcher();
    const m = model("m8");
    const a = variant("m8-a", m);
    await register(m, [a]);
    expect(await dispatcher.rescue(a.name)).toBe(0);
    expect(logLines.some((l) => l["msg"] === "no queue consumer for the unloaded variant: nothing to rescue" && l["variant"] === a.name)).toBe(true);
  });
});

describe("dispatcher - the cluster view placement reads", () => {
  const reportOf = (worker: string, variants: Array<{ variant: string; state: VariantState; instances?: number; loading?: number }>, threadsUsed: number, memoryUsedBytes: number): WorkerReport => ({
    worker,
    hardware: "cpu",
    atMs: T0,
    startedAtMs: T0,
    threads: 4,
    threadsUsed,
    memoryBytes: 8e9,
    memoryUsedBytes,
    rssBytes: 1e8,
    variants: variants.map((v) => ({ variant: v.variant, state: v.state, instances: v.instances ?? 1, ...(v.loading !== undefined ? { loading: v.loading } : {}), sloMisses: 0, batchP50Ms: 0, batchSizeP50: 0, arrivals: 0, served: 0, errors: 0, batches: 0, queueLength: 0, latencyP50Ms: 0, latencyP99Ms: 0, utilisation: 0 })),
  });
  const event = (variant: string, worker: string, state: VariantState, previous: VariantState): StateEvent => ({ variant, model: "m", worker, hardware: "cpu", state, previous, reason: "test", atMs: T0 + 1 });
  const footprint = (v: string) => ({ "v-a": { threads: 1, memoryBytes: 100 }, "v-b": { threads: 2, memoryBytes: 300 } })[v];

  it("dispatcher - state events after a report: an unloaded variant gives its instances' threads and memory back, a loading one holds one instance's", () => {
    const c = new ClusterView();
    c.applyReport(reportOf("w1", [{ variant: "v-a", state: "active", instances: 2 }], 2, 200), T0);
    expect(c.workerViews(footprint)[0]).toMatchObject({ variants: ["v-a"], threadsUsed: 2, memoryUsedBytes: 200 });
    c.applyState(event("v-a", "w1", "inactive", "unloading"));
    c.applyState(event("v-b", "w1", "loading", "inactive"));
    expect(c.workerViews(footprint)[0]).toMatchObject({ variants: ["v-b"], threadsUsed: 2, memoryUsedBytes: 300 });
    // Without footprints the report's figures stand; the variants still follow the events.
    expect(c.workerViews()[0]).toMatchObject({ variants: ["v-b"], threadsUsed: 2, memoryUsedBytes: 200 });
    // The next report is the worker's full truth again.
    c.applyReport({ ...reportOf("w1", [{ variant: "v-b", state: "loading", instances: 0, loading: 1 }], 2, 300), atMs: T0 + 1000 }, T0 + 1000);
    expect(c.workerViews(footprint)[0]).toMatchObject({ variants: ["v-b"], threadsUsed: 2, memoryUsedBytes: 300 });
  });

  it("dispatcher - a leaving report forgets the worker and its instances; the load it carried is recomputed", () => {
    const c = new ClusterView();
    c.applyReport(reportOf("w1", [{ variant: "v-a", state: "active" }], 1, 100), T0);
    c.applyReport(reportOf("w2", [{ variant: "v-a", state: "active" }], 1, 100), T0);
    expect(c.servingInstances("v-a")).toBe(2);
    c.applyReport({ ...reportOf("w2", [], 0, 0), atMs: T0 + 500, leaving: true }, T0 + 500);
    expect(c.workerViews().map((w) => w.worker)).toEqual(["w1"]);
    expect(c.servingInstances("v-a")).toBe(1);
    expect(c.hasLiveWorker("cpu", T0 + 500)).toBe(true);
  });
});

// ------------------------------------------------------------------ quotas

describe("dispatcher - quotas", () => {
  /** A dispatcher alone with its quotas (the whole quota is its share), an app `quota-app` with one active variant. */
  async function quotaSetUp(app: string, quota: { rate_qps: number; burst: number; max_concurrency: number }) {
    const clock = new ManualClock(T0);
    const quotas = new DispatcherQuotas(new QuotaAdmission("dispatcher-test", "dispatcher", T0), bus.nc);
    quotas.admission.setQuota(app, quota, T0);
    const { dispatcher } = startDispatcher(clock, quotas);
    const m = model(`${app}-m`, app);
    const v = variant(`${app}-v`, m);
    await register(m, [v]);
    await report(clock, "w1", [{ variant: v.name, state: "active" }]);
    return { clock, quotas, dispatcher, m, v };
  }

  it("dispatcher - a NATS caller over its app's rate is refused at once with quota_exceeded; refused queries are no arrivals; a frontend's admitted queries are not charged again", async () => {
    const { clock, dispatcher, m, v } = await quotaSetUp("qrate", { rate_qps: 1, burst: 1, max_concurrency: 100 });
    expect((await ask(subjects.inferModel(m.name), body())).variant).toBe(v.name);
    const refused = await ask(subjects.inferModel(m.name), body());
    expect(refused.error?.code).toBe("quota_exceeded");
    expect(refused.error?.error).toBe("app 'qrate' is over its quota's rate_qps of 1 queries/s (quota: 1 queries/s with bursts of 1, 100 in flight): retry after 1 s");
    expect((refused.error as unknown as { details: Record<string, unknown> }).details).toMatchObject({ app: "qrate", limit: "rate_qps", retry_after_s: 1 });
    // The same app model-less, and the variant itself: the same bucket.
    expect((await ask(subjects.inferApp("qrate"), body({ latency_ms: 100 }))).error?.code).toBe("quota_exceeded");
    expect((await ask(subjects.inferVariant(v.name), body())).error?.code).toBe("quota_exceeded");
    // A query a frontend admitted comes on the admitted subject: routed, not charged.
    expect((await ask(subjects.admitted(subjects.inferModel(m.name)), body())).variant).toBe(v.name);
    expect((await ask(subjects.admitted(subjects.inferApp("qrate")), body({ latency_ms: 100 }))).variant).toBe(v.name);
    // Arrivals (the autoscalers' and the forecaster's input): the three routed queries, none of the refused ones.
    clock.advance(1000);
    expect(dispatcher.tick(clock.now()).find((r) => r.app === "qrate")?.arrivals).toBe(3);
    // A second later the bucket has a token again.
    expect((await ask(subjects.inferModel(m.name), body())).variant).toBe(v.name);
  });

  it("dispatcher - concurrency: a slot is held until a message reaches the caller's inbox, or until the query's deadline has passed", async () => {
    const { clock, quotas, dispatcher, m, v } = await quotaSetUp("qconc", { rate_qps: 1000, burst: 1000, max_concurrency: 1 });
    const first = await ask(subjects.inferModel(m.name), body());
    expect(first.variant).toBe(v.name);
    const refused = await ask(subjects.inferModel(m.name), body());
    expect(refused.error?.code).toBe("quota_exceeded");
    expect(refused.error?.error).toMatch(/^app 'qconc' has 1 queries in flight, its quota's max_concurrency/);
    // The executor answers the first query's caller: the slot comes back.
    bus.nc.publish(first.headers?.get(headers.replyTo) ?? "", "answer");
    await bus.nc.flush();
    expect(quotas.holding).toBe(0);
    const second = await ask(subjects.inferModel(m.name), body());
    expect(second.variant).toBe(v.name);
    expect((await ask(subjects.inferModel(m.name), body())).error?.code).toBe("quota_exceeded");
    // The second query's answer never comes: its slot comes back once its deadline (30 s, none given) has passed by the grace.
    clock.advance(30_000 + SLOT_GRACE_MS - 1);
    dispatcher.tick(clock.now());
    expect(quotas.holding).toBe(1);
    clock.advance(1);
    dispatcher.tick(clock.now());
    expect(quotas.holding).toBe(0);
    await report(clock, "w1", [{ variant: v.name, state: "active" }]);
    expect((await ask(subjects.inferModel(m.name), body())).variant).toBe(v.name);
  });

  it("dispatcher - an error reply to an admitted query gives its slot back", async () => {
    const { quotas, m } = await quotaSetUp("qerr", { rate_qps: 1000, burst: 1000, max_concurrency: 1 });
    // Admitted, then refused for its input: the dispatcher's own error reply reaches the inbox.
    const bad = await ask(subjects.inferModel(m.name), { inputs: [{ name: "x", datatype: "FP32", shape: [1, 3], data: [1, 2, 3] }] });
    expect(bad.error?.code).toBe("invalid_shape");
    await bus.nc.flush();
    expect(quotas.holding).toBe(0);
    expect((await ask(subjects.inferModel(m.name), body())).variant).toBeDefined();
  });
});
