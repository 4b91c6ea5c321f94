import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { readFileSync } from "node:fs";
import { createInbox, headers as natsHeaders, type Msg, type MsgHdrs, type Subscription } from "@nats-io/transport-node";
import {
  ManualClock,
  contentTypes,
  decodeTensors,
  encodeTensors,
  headers,
  subjects,
  type ArrivalsReport,
  type ForecastMessage,
  type ModelRecord,
  type Tensor,
  type VariantRecord,
  type VariantState,
  type WorkerReport,
} from "@sloserve/contracts";
import { connectBus, createLogger, type Bus } from "@sloserve/bus";
import { Catalog, MetadataStore } from "@sloserve/store";
import { OnnxRunner, inspectModel } from "@sloserve/runtime";
import { BreakerFunctionProvider, FallbackFunctionProvider, LocalFunctionPool, type FunctionProvider } from "@sloserve/providers";
import { ocrModels, startNats, startRedis, tempDir, type ServerHandle } from "@sloserve/stack";
import { waitFor } from "@sloserve/testing";
import { ClusterView } from "../src/cluster.js";
import { SelectionView } from "../src/selection-view.js";
import { ArrivalCounter } from "../src/arrivals.js";
import { Dispatcher } from "../src/dispatch.js";
import { followEvents } from "../src/events.js";
import { OverflowPath } from "../src/overflow.js";

/**
 * Serverless overflow in the dispatcher shell, on a real nats-server and redis-server with a manual
 * clock, and real function containers: a LocalFunctionPool (processes with a real cold start) running
 * the PaddleOCR direction classifier, read from the model repository (the NATS object store), behind
 * the real opossum breaker. What the dispatcher does is read back from the bus: queries on
 * `q.<variant>`, or the answer (or error) on the caller's inbox.
 */

let nats: ServerHandle;
let redis: ServerHandle;
let bus: Bus;
let store: MetadataStore;
let reference: OnnxRunner;
let signature: { inputs: ModelRecord["inputs"]; outputs: ModelRecord["outputs"] };
/** The shared pool (one container stays warm across tests) and its breaker, as main.ts wires them. */
let pool: LocalFunctionPool;
let functions: BreakerFunctionProvider;
const extraPools: FunctionProvider[] = [];
const logLines: Array<Record<string, unknown>> = [];
const log = createLogger("overflow-test", "debug", { write: (line: string) => void logLines.push(JSON.parse(line) as Record<string, unknown>) });
const OBJECT = "model/ocr-cls.onnx";
const T0 = 1_700_000_000_000;
/** One clock for the dispatchers and the pools: deadlines are read against the same time. */
const clock = new ManualClock(T0);

const queued: Array<{ variant: string; headers: MsgHdrs | undefined }> = [];
let taps: Subscription[] = [];

beforeAll(async () => {
  nats = await startNats();
  redis = await startRedis();
  bus = await connectBus({ servers: nats.url, name: "overflow-test", log });
  store = MetadataStore.connect(redis.url);
  const path = ocrModels().find((m) => m.name === "ocr-cls")?.path as string;
  const bytes = readFileSync(path);
  await bus.models.putBlob({ name: OBJECT }, bytes);
  signature = await inspectModel(bytes);
  reference = await OnnxRunner.load(bytes);
  pool = new LocalFunctionPool({ models: { natsUrl: nats.url }, clock, log, maxConcurrency: 2, sweepIntervalMs: 0 });
  functions = new BreakerFunctionProvider(pool, { clock, log });
  taps = [bus.nc.subscribe("q.>", { callback: (_e, m) => void queued.push({ variant: m.subject.slice(2), headers: m.headers }) })];
});

afterAll(async () => {
  for (const s of taps) s.unsubscribe();
  for (const p of extraPools) await p.close();
  await functions?.close();
  await reference?.release();
  await bus?.close();
  await store?.close();
  await redis?.stop();
  await nats?.stop();
});

// ------------------------------------------------------------------ harness

let running: { subs: Subscription[] } | undefined;
afterEach(() => {
  for (const s of running?.subs ?? []) s.unsubscribe();
  running = undefined;
});

/** A dispatcher as main.ts wires it with OVERFLOW on (or off when no provider is given). */
function startDispatcher(provider: FunctionProvider | undefined, host?: { name: string; cores: number }) {
  const catalog = new Catalog(store);
  const cluster = new ClusterView();
  const selection = new SelectionView();
  const arrivals = new ArrivalCounter(clock.now(), "test");
  const overflow = provider ? new OverflowPath(provider, bus, cluster, catalog, arrivals, log, clock, undefined, host) : undefined;
  const dispatcher = new Dispatcher(bus, catalog, cluster, selection, arrivals, log, clock, overflow);
  const subs = [...followEvents(bus, { catalog, cluster, selection }, dispatcher, clock, log, overflow), bus.nc.subscribe("infer.>", { callback: (_e, m) => dispatcher.handle(m) })];
  running = { subs };
  return { dispatcher, overflow: overflow as OverflowPath };
}

async function publish(subject: string, body: unknown): Promise<void> {
  bus.nc.publish(subject, JSON.stringify(body));
  await bus.nc.flush();
}

function model(name: string, app = name): ModelRecord {
  return {
    name, app, task: "text-direction", dataset: "paddleocr", platform: "onnxruntime_onnx", inputs: signature.inputs, outputs: signature.outputs,
    object: OBJECT, sizeBytes: 1, sha256: "0", registeredAtMs: T0, validationObject: null, validationCount: 0, profileShape: {},
  };
}

/** A profiled variant of the classifier: T(1) = 7 ms, 140 q/s per instance, loads in 300 ms. */
function variant(m: ModelRecord): VariantRecord {
  return {
    name: `${m.name}-cpu-b1`, model: m.name, app: m.app, hardware: "cpu", maxBatch: 1, batchWaitMs: 0, quantization: "fp32", threads: 1, object: OBJECT, accuracy: 0.9, profiled: true,
    profile: { loadLatencyMs: 300, latencyMs: { "1": 7 }, peakQps: 140, memoryBytes: 0, accuracy: 0.9, sampleShape: {}, worker: "profiler", profiledAtMs: T0 },
  };
}

async function register(name: string, app = name): Promise<VariantRecord> {
  const m = model(name, app);
  const v = variant(m);
  await publish(subjects.modelRegistered(m.name), { model: m, variants: [v] });
  return v;
}

/** A worker's one-second report: the variant's state, its arrivals and the queries it holds. */
async function report(worker: string, variants: Array<{ variant: string; state: VariantState; arrivals?: number; queueLength?: number; instances?: number }>, on?: { host: string; threads: number }): Promise<void> {
  const r: WorkerReport = {
    ...(on ? { host: on.host } : {}),
    worker, hardware: "cpu", atMs: clock.now(), startedAtMs: T0, threads: on?.threads ?? 4, threadsUsed: variants.length, memoryBytes: 8e9, memoryUsedBytes: 0, rssBytes: 1e8,
    variants: variants.map((v) => ({
      variant: v.variant, state: v.state, instances: v.instances ?? 1, sloMisses: 0, batchP50Ms: 0, batchSizeP50: 0, arrivals: v.arrivals ?? 0, served: v.arrivals ?? 0,
      errors: 0, batches: 0, queueLength: v.queueLength ?? 0, latencyP50Ms: 0, latencyP99Ms: 0, utilisation: 0,
    })),
  };
  await publish(subjects.workerMetrics(worker), r);
}

/** A deterministic input image for the classifier, [1, 3, 48, 192]. */
function image(seed: number): Tensor {
  const data = new Float32Array(3 * 48 * 192);
  for (let i = 0; i < data.length; i++) data[i] = ((i * 7 + seed * 13) % 29) / 29 - 0.5;
  return { name: "x", datatype: "FP32", shape: [1, 3, 48, 192], data };
}

const jsonBody = (t: Tensor, slo?: Record<string, number>) => ({ inputs: [{ name: t.name, datatype: t.datatype, shape: t.shape, data: Array.from(t.data as Float32Array) }], ...(slo ? { slo } : {}) });

type Outcome = { queued?: string; reply?: Msg };

/** Sends a query; resolves with the queue it was put on or the reply the caller got. */
async function ask(subject: string, body: Uint8Array | object, h: Record<string, string | number> = {}): Promise<Outcome> {
  const inbox = createInbox();
  const replies: Msg[] = [];
  const sub = bus.nc.subscribe(inbox, { callback: (_e, m) => void replies.push(m) });
  const hdrs = natsHeaders();
  for (const [k, v] of Object.entries(h)) hdrs.set(k, String(v));
  if (body instanceof Uint8Array) hdrs.set(headers.contentType, contentTypes.wire);
  bus.nc.publish(subject, body instanceof Uint8Array ? body : JSON.stringify(body), { reply: inbox, headers: hdrs });
  try {
    return await waitFor(`the dispatcher to queue or answer a query on ${subject}`, (): Outcome | undefined => {
      const q = queued.find((x) => x.headers?.get(headers.replyTo) === inbox);
      if (q) return { queued: q.variant };
      const r = replies[0];
      return r ? { reply: r } : undefined;
    }, { timeoutMs: 45_000 });
  } finally {
    sub.unsubscribe();
  }
}

interface JsonAnswer {
  outputs: Array<{ name: string; shape: number[]; data: number[] }>;
  served_by: { hardware: string; variant: string; worker: string; cold_start: boolean };
  timing_ms: { inference: number; total: number };
  cost_dollars: number;
}

function errorOf(o: Outcome): { code: string; error: string } | undefined {
  const code = o.reply?.headers?.get(headers.error);
  return code ? o.reply?.json<{ code: string; error: string }>() : undefined;
}

/** Largest absolute difference from onnxruntime run directly on the same input. */
async function diffFromReference(input: Tensor, outputs: ReadonlyArray<{ name: string; data: ArrayLike<number> }>): Promise<number> {
  const expected = await reference.runOne([input]);
  let worst = 0;
  for (const e of expected) {
    const got = outputs.find((o) => o.name === e.name);
    if (!got || got.data.length !== e.data.length) return Infinity;
    for (let i = 0; i < e.data.length; i++) worst = Math.max(worst, Math.abs(Number(got.data[i]) - Number(e.data[i])));
  }
  return worst;
}

// ------------------------------------------------------------------ the decision

describe("dispatcher overflow - local or function", () => {
  it("dispatcher overflow - a query whose estimate fits its budget is queued", async () => {
    startDispatcher(functions);
    const v = await register("fits");
    // Nothing ahead: 0 + 0 + 7 ms ≤ 20 000 ms.
    await report("w1", [{ variant: v.name, state: "active" }]);
    const o = await ask(subjects.inferModel("fits"), jsonBody(image(1)), { [headers.deadline]: clock.now() + 20_000 });
    expect(o.queued).toBe(v.name);
  });

  it("dispatcher overflow - a query whose estimate exceeds its budget is answered by a function (JSON)", async () => {
    const { overflow } = startDispatcher(functions);
    const v = await register("long-queue");
    // 10 000 queries ahead at 140 q/s: 71 429 + 7 ms > 20 000 ms.
    await report("w1", [{ variant: v.name, state: "active", queueLength: 10_000 }]);
    const input = image(2);
    const o = await ask(subjects.inferModel("long-queue"), jsonBody(input), { [headers.deadline]: clock.now() + 20_000, [headers.requestId]: "r-json" });
    expect(o.queued).toBeUndefined();
    expect(errorOf(o)).toBeUndefined();
    expect(o.reply?.headers?.get(headers.contentType)).toBe(contentTypes.json);
    const answer = o.reply?.json<JsonAnswer>() as JsonAnswer;
    expect(answer.served_by.hardware).toBe("function");
    expect(answer.served_by.variant).toBe(v.name);
    expect(answer.served_by.worker).toBe("local");
    expect(answer.cost_dollars).toBeGreaterThan(0);
    expect(answer.timing_ms.inference).toBeGreaterThan(0);
    expect(await diffFromReference(input, answer.outputs)).toBeLessThanOrEqual(1e-5);
    expect(overflow.totals).toMatchObject({ overflowed: 1, served: 1, failed: 0 });
    expect(overflow.totals.costDollars).toBe(answer.cost_dollars);
    expect(logLines.some((l) => l["msg"] === "function cold start")).toBe(true);
  });

  it("dispatcher overflow - a binary query gets its function answer in the binary encoding", async () => {
    startDispatcher(functions);
    const v = await register("binary");
    await report("w1", [{ variant: v.name, state: "active", queueLength: 10_000 }]);
    const input = image(3);
    const o = await ask(subjects.inferModel("binary"), encodeTensors([input]), { [headers.deadline]: clock.now() + 20_000 });
    expect(errorOf(o)).toBeUndefined();
    expect(o.reply?.headers?.get(headers.contentType)).toBe(contentTypes.wire);
    const decoded = decodeTensors<{ served_by: { hardware: string }; cost_dollars: number }>(o.reply?.data as Uint8Array);
    expect(decoded.meta.served_by.hardware).toBe("function");
    expect(decoded.meta.cost_dollars).toBeGreaterThan(0);
    expect(await diffFromReference(input, decoded.tensors.map((t) => ({ name: t.name, data: t.data as Float32Array })))).toBeLessThanOrEqual(1e-5);
  });

  it("dispatcher overflow - model-less queries are held to their SLO: a long queue overflows a tight one only", async () => {
    startDispatcher(functions);
    const v = await register("ml-m", "ml");
    // 50 ahead at 140 q/s = 357 ms + 7.
    await report("w1", [{ variant: v.name, state: "active", queueLength: 50 }]);
    // SLO 1 000 ms: 364 ≤ 1 000 → queued (the 30 s request deadline plays no part).
    expect((await ask(subjects.inferApp("ml"), jsonBody(image(4), { latency_ms: 1000 }))).queued).toBe(v.name);
    // SLO 100 ms: 364 > 100 → a function answers.
    const o = await ask(subjects.inferApp("ml"), jsonBody(image(5), { latency_ms: 100 }));
    expect(o.reply?.json<JsonAnswer>().served_by.hardware).toBe("function");
  });

  it("dispatcher overflow - the queue ahead includes what the dispatcher queued since the last report", async () => {
    startDispatcher(functions);
    const v = await register("backlog", "backlog");
    await report("w1", [{ variant: v.name, state: "active" }]);
    // The clock stands still: the k-th query (from 0) sees k ahead: k / 140 s + 7 ms ≤ 100 ms while
    // k ≤ 13 (13 → 92.9 + 7 = 99.9); the 15th (k = 14: 100 + 7) overflows, and so do the next ones.
    const outcomes: string[] = [];
    for (let k = 0; k < 17; k++) {
      const o = await ask(subjects.inferApp("backlog"), jsonBody(image(k), { latency_ms: 100 }));
      outcomes.push(o.queued ? "local" : (o.reply?.json<JsonAnswer>().served_by.hardware ?? "error"));
    }
    expect(outcomes).toEqual([...Array<string>(14).fill("local"), ...Array<string>(3).fill("function")]);
    // A second later the estimate has drained (140 queries' worth): queued again.
    clock.advance(1_000);
    await report("w1", [{ variant: v.name, state: "active" }]);
    expect((await ask(subjects.inferApp("backlog"), jsonBody(image(20), { latency_ms: 100 }))).queued).toBe(v.name);
  });

  it("dispatcher overflow - nothing serves yet: a tight query overflows while the instance loads, a patient one waits for it", async () => {
    startDispatcher(functions);
    const v = await register("loading-m", "loading");
    await report("w1", [{ variant: v.name, state: "loading" }]);
    // Loading: up in 300 ms (the profiled load latency), + 7 ms. An SLO of 200 ms → function; 20 s → queue.
    const tight = await ask(subjects.inferApp("loading"), jsonBody(image(6), { latency_ms: 200 }));
    expect(tight.reply?.json<JsonAnswer>().served_by.hardware).toBe("function");
    expect((await ask(subjects.inferApp("loading"), jsonBody(image(7), { latency_ms: 20_000 }))).queued).toBe(v.name);
  });

  it("dispatcher overflow - a query without a deadline never overflows", async () => {
    const { overflow } = startDispatcher(functions);
    const v = await register("no-deadline");
    // A queue that would take 71 s, and for the second model no instance at all (estimate infinite).
    await report("w1", [{ variant: v.name, state: "active", queueLength: 10_000 }]);
    expect((await ask(subjects.inferModel("no-deadline"), jsonBody(image(8)))).queued).toBe(v.name);
    const idle = await register("no-deadline-idle");
    expect((await ask(subjects.inferModel("no-deadline-idle"), jsonBody(image(9)))).queued).toBe(idle.name);
    expect(overflow.totals.overflowed).toBe(0);
  });

  it("dispatcher overflow - a local pool on the workers' own host overflows only onto a core no worker offers", async () => {
    const { overflow } = startDispatcher(functions, { name: "host-a", cores: 2 });
    const v = await register("one-host");
    // The worker on host-a offers both of its cores: a function would only take from it, so the query stays local.
    await report("w1", [{ variant: v.name, state: "active", queueLength: 10_000 }], { host: "host-a", threads: 2 });
    expect((await ask(subjects.inferModel("one-host"), jsonBody(image(11)), { [headers.deadline]: clock.now() + 20_000 })).queued).toBe(v.name);
    expect(overflow.totals.overflowed).toBe(0);
    // It offers one: the other core runs the function.
    clock.advance(1000);
    await report("w1", [{ variant: v.name, state: "active", queueLength: 10_000 }], { host: "host-a", threads: 1 });
    const o = await ask(subjects.inferModel("one-host"), jsonBody(image(12)), { [headers.deadline]: clock.now() + 20_000 });
    expect(o.reply?.json<JsonAnswer>().served_by.hardware).toBe("function");
    // A worker on another machine takes none of host-a's cores.
    clock.advance(1000);
    await report("w1", [{ variant: v.name, state: "active", queueLength: 10_000 }], { host: "host-b", threads: 2 });
    const other = await ask(subjects.inferModel("one-host"), jsonBody(image(13)), { [headers.deadline]: clock.now() + 20_000 });
    expect(other.reply?.json<JsonAnswer>().served_by.hardware).toBe("function");
    expect(overflow.totals.overflowed).toBe(2);
  });

  it("dispatcher overflow - with overflow off a query that would miss is queued", async () => {
    startDispatcher(undefined);
    const v = await register("off");
    await report("w1", [{ variant: v.name, state: "active", queueLength: 10_000 }]);
    expect((await ask(subjects.inferModel("off"), jsonBody(image(10)), { [headers.deadline]: clock.now() + 20_000 })).queued).toBe(v.name);
  });
});

// ------------------------------------------------------------------ the function path down

describe("dispatcher overflow - the function path down", () => {
  /** A real pool whose containers look for models in an empty directory: every invocation fails (internal). */
  function brokenPool(name: string): LocalFunctionPool {
    const p = new LocalFunctionPool({ name, models: { dir: tempDir("no-models") }, clock, log, maxConcurrency: 1, sweepIntervalMs: 0 });
    extraPools.push(p);
    return p;
  }

  it("dispatcher overflow - a failing provider and then its open breaker give a clear 503, and nothing is queued", async () => {
    const broken = new BreakerFunctionProvider(brokenPool("broken"), { clock, log, volumeThreshold: 1, resetTimeoutMs: 60_000 });
    const { overflow } = startDispatcher(broken);
    const v = await register("down");
    await report("w1", [{ variant: v.name, state: "active", queueLength: 10_000 }]);
    const deadline = { [headers.deadline]: clock.now() + 20_000 };
    // First: the function fails (the model is not in its store) and the breaker opens.
    const first = await ask(subjects.inferModel("down"), jsonBody(image(11)), deadline);
    expect(first.queued).toBeUndefined();
    expect(first.reply?.headers?.get(headers.error)).toBe("overflow_unavailable");
    expect(errorOf(first)?.error).toMatch(/^query for down-cpu-b1 would miss its deadline on the local path \(estimated 71435\.6 ms > budget 20000\.0 ms\) and the function path failed: .*model object 'model\/ocr-cls\.onnx' is not in the function's models directory/);
    expect(broken.state).toBe("open");
    // Second: refused at once by the open breaker, still not queued.
    const second = await ask(subjects.inferModel("down"), jsonBody(image(12)), deadline);
    expect(second.queued).toBeUndefined();
    expect(errorOf(second)?.code).toBe("overflow_unavailable");
    expect(errorOf(second)?.error).toMatch(/function provider "broken" is unavailable: its circuit breaker is open/);
    expect(overflow.totals).toMatchObject({ overflowed: 2, served: 0, failed: 2, costDollars: 0 });
  });

  it("dispatcher overflow - with a fallback, the next provider serves while the first one's breaker is open", async () => {
    const broken = new BreakerFunctionProvider(brokenPool("broken2"), { clock, log, volumeThreshold: 1, resetTimeoutMs: 60_000 });
    const fallback = new FallbackFunctionProvider([broken, functions], { clock, log });
    startDispatcher(fallback);
    const v = await register("fallback");
    await report("w1", [{ variant: v.name, state: "active", queueLength: 10_000 }]);
    for (const seed of [13, 14]) {
      const input = image(seed);
      const o = await ask(subjects.inferModel("fallback"), jsonBody(input), { [headers.deadline]: clock.now() + 20_000 });
      const answer = o.reply?.json<JsonAnswer>() as JsonAnswer;
      expect(answer.served_by.hardware).toBe("function");
      expect(await diffFromReference(input, answer.outputs)).toBeLessThanOrEqual(1e-5);
    }
    expect(broken.state).toBe("open");
  });
});

// ------------------------------------------------------------------ accounting and pre-warming

describe("dispatcher overflow - accounting and pre-warming", () => {
  it("dispatcher overflow - the arrivals report counts overflowed queries and their cost", async () => {
    const { dispatcher } = startDispatcher(functions);
    const v = await register("acct", "acct");
    await report("w1", [{ variant: v.name, state: "active", queueLength: 10_000 }]);
    const costs: number[] = [];
    for (const seed of [15, 16]) costs.push((await ask(subjects.inferModel("acct"), jsonBody(image(seed)), { [headers.deadline]: clock.now() + 20_000 })).reply?.json<JsonAnswer>().cost_dollars ?? NaN);
    expect((await ask(subjects.inferModel("acct"), jsonBody(image(17)))).queued).toBe(v.name);
    clock.advance(1_000);
    const reports: ArrivalsReport[] = dispatcher.tick(clock.now()).filter((r) => r.app === "acct");
    expect(reports).toHaveLength(1);
    expect(reports[0]).toMatchObject({ arrivals: 3, overflowed: 2, overflowFailed: 0 });
    expect(reports[0]?.overflowCostDollars).toBeCloseTo((costs[0] ?? NaN) + (costs[1] ?? NaN), 15);
  });

  it("dispatcher overflow - a lost worker's load pre-warms containers by the policy's rule", async () => {
    const fresh = new LocalFunctionPool({ name: "warm-lost", models: { natsUrl: nats.url }, clock, log, maxConcurrency: 4, sweepIntervalMs: 0 });
    extraPools.push(fresh);
    const { dispatcher } = startDispatcher(fresh);
    const v = await register("lost");
    // w-lost carries 400 q/s of the variant: 400 × 7 ms = 2.8 concurrent runs → 3 containers.
    await report("w-lost", [{ variant: v.name, state: "active", arrivals: 400 }]);
    clock.advance(5_001);
    dispatcher.tick(clock.now());
    const line = await waitFor("the pre-warming log line", () => logLines.find((l) => l["msg"] === "pre-warming functions" && l["provider"] === "warm-lost"));
    expect(line).toMatchObject({ containers: 3, variant: v.name, cause: "capacity lost", workers: ["w-lost"] });
    await waitFor("3 idle containers", () => fresh.poolStats().idle === 3, { timeoutMs: 45_000 });
    expect(fresh.poolStats().containers).toBe(3);
  });

  it("dispatcher overflow - a forecast surge above the local capacity pre-warms containers", async () => {
    const fresh = new LocalFunctionPool({ name: "warm-surge", models: { natsUrl: nats.url }, clock, log, maxConcurrency: 4, sweepIntervalMs: 0 });
    extraPools.push(fresh);
    startDispatcher(fresh);
    const v = await register("surge-m", "surge");
    await report("w1", [{ variant: v.name, state: "active" }]);
    const forecast = (values: number[]): ForecastMessage => ({ app: "surge", atMs: clock.now(), unitS: 60, sampleS: 5, method: "last-value", observed: 10, values, historyUnits: 5 });
    // 12 q/s next: below 1.5 × 10 = 15, no surge.
    await publish(subjects.forecast("surge"), forecast([12]));
    // 300 q/s: a surge; 300 − max(10, 140) = 160 q/s × 7 ms = 1.12 → 2 containers.
    await publish(subjects.forecast("surge"), forecast([300, 300]));
    const line = await waitFor("the pre-warming log line", () => logLines.find((l) => l["msg"] === "pre-warming functions" && l["app"] === "surge"));
    expect(line).toMatchObject({ containers: 2, variant: v.name, cause: "forecast" });
    expect(logLines.filter((l) => l["msg"] === "pre-warming functions" && l["app"] === "surge")).toHaveLength(1);
    await waitFor("2 idle containers", () => fresh.poolStats().idle === 2, { timeoutMs: 45_000 });
  });
});
