import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { readFileSync } from "node:fs";
import { createInbox, type Msg, type Subscription } from "@nats-io/transport-node";
import {
  ManualClock,
  contentTypes,
  decodeTensors,
  encodeTensors,
  headers,
  pipelineReportSchema,
  subjects,
  type ModelRecord,
  type PipelineReport,
  type PipelineSpecInput,
  type Tensor,
  type VariantRecord,
} from "@sloserve/contracts";
import { connectBus, createLogger, makeHeaders, type Bus } from "@sloserve/bus";
import { Catalog, MetadataStore } from "@sloserve/store";
import { startNats, startRedis, digitsModels, digitsCascadeSpec, type BundledModel, type ServerHandle } from "@sloserve/stack";
import { waitFor } from "@sloserve/testing";
import { Worker, onnxBackend } from "@sloserve/executor";
import { OnnxRunner, inspectModel } from "@sloserve/runtime";
import { ClusterView } from "../src/cluster.js";
import { SelectionView } from "../src/selection-view.js";
import { ArrivalCounter } from "../src/arrivals.js";
import { Dispatcher } from "../src/dispatch.js";
import { followEvents, syncModel } from "../src/events.js";
import { BusStageBackend, PipelineRegistry, PipelineService } from "../src/pipelines.js";
import { PipelineStats } from "../src/pipeline-stats.js";
import { builtinSteps } from "../src/builtin-steps.js";

/**
 * The pipeline executor in the dispatcher, on a real nats-server (JetStream) and redis-server, with a
 * manual clock for the dispatcher, the pipeline service and a real executor worker running the real
 * digits models (onnxruntime). Pipeline queries go in on `infer.pipeline.<name>`; their stages travel as
 * model queries through the dispatcher's routing and the variants' JetStream queues to the worker; the
 * answers are checked against onnxruntime run directly in this process.
 */

const T0 = 1_800_000_000_000;
const clock = new ManualClock(T0);
let nats: ServerHandle;
let redis: ServerHandle;
let bus: Bus;
let store: MetadataStore;
let worker: Worker;
let service: PipelineService;
let subs: Subscription[] = [];
const log = createLogger("pipelines-test", "warn");
let digits: { inputs: Float32Array; labels: Uint8Array; count: number };
const reference: Record<string, OnnxRunner> = {};

const FAST = "digits-mlp-s";
const ACCURATE = "digits-cnn-m";

function variantOf(m: ModelRecord, accuracy: number): VariantRecord {
  return {
    name: `${m.name}--cpu-fp32-b4-t1`, model: m.name, app: m.app, hardware: "cpu", maxBatch: 4, batchWaitMs: 0, quantization: "fp32", threads: 1, object: m.object,
    accuracy, profiled: true,
    profile: { loadLatencyMs: 50, latencyMs: { "1": 0.3, "2": 0.3, "4": 0.4 }, peakQps: 5000, memoryBytes: 0, accuracy, sampleShape: { input: [1, 28, 28] }, worker: "test", profiledAtMs: T0 },
  };
}

async function registerModel(b: BundledModel, accuracy: number): Promise<VariantRecord> {
  const bytes = readFileSync(b.path);
  const signature = await inspectModel(bytes);
  const object = `model/${b.name}.onnx`;
  await bus.models.putBlob({ name: object }, bytes);
  const m: ModelRecord = {
    name: b.name, app: b.app, task: b.task, dataset: b.dataset, platform: "onnxruntime_onnx", inputs: signature.inputs, outputs: signature.outputs, object,
    sizeBytes: bytes.length, sha256: "", registeredAtMs: T0, validationObject: null, validationCount: 0, profileShape: {},
  };
  const v = variantOf(m, accuracy);
  await store.createModel(m, [v]);
  reference[b.name] = await OnnxRunner.load(bytes);
  return v;
}

beforeAll(async () => {
  [nats, redis] = await Promise.all([startNats(), startRedis()]);
  bus = await connectBus({ servers: nats.url, name: "pipelines-test", log });
  store = MetadataStore.connect(redis.url);
  const bundled = await digitsModels();
  const variants = [await registerModel(bundled.find((m) => m.name === FAST)!, 0.9387), await registerModel(bundled.find((m) => m.name === ACCURATE)!, 0.9853)];
  const validation = decodeTensors(bundled.find((m) => m.name === FAST)!.validation!).tensors;
  digits = { inputs: validation[0]!.data as Float32Array, labels: validation[1]!.data as Uint8Array, count: validation[0]!.shape[0]! };

  // The dispatcher as main.ts wires it, with the manual clock.
  const catalog = new Catalog(store);
  const cluster = new ClusterView();
  const selection = new SelectionView();
  const views = { catalog, cluster, selection };
  const dispatcher = new Dispatcher(bus, catalog, cluster, selection, new ArrivalCounter(clock.now(), "test"), log, clock);
  subs = followEvents(bus, views, dispatcher, clock, log);
  await catalog.load();
  for (const m of catalog.models.keys()) syncModel(views, m);
  subs.push(
    bus.nc.subscribe("infer.model.*", { callback: (_e, m) => dispatcher.handle(m) }),
    bus.nc.subscribe("infer.app.*", { callback: (_e, m) => dispatcher.handle(m) }),
  );
  const registry = new PipelineRegistry(store, catalog, builtinSteps());
  service = new PipelineService(bus, store, registry, new PipelineStats(clock.now(), "dispatcher-test"), new BusStageBackend(bus, clock), log, clock);
  subs.push(...service.start({ reportEveryMs: 0 }));

  // A real worker with both variants loaded; its state events and report reach the dispatcher.
  worker = new Worker(bus, store, onnxBackend("cpu", ["cpu"]), { id: "w-pipelines", threads: 4, memoryBytes: 1 << 30, reportEveryMs: 3_600_000, profile: false }, log, clock);
  await worker.start();
  for (const v of variants) expect(await worker.execute({ id: `load-${v.name}`, action: "load", variant: v.name, reason: "test", atMs: clock.now() })).toMatchObject({ ok: true });
  await worker.tick();
  await waitFor("both variants active in the dispatcher's cluster view", () => variants.every((v) => cluster.count(v.name, "active") === 1));
  selection.refreshRuntime(cluster);
});

afterAll(async () => {
  service?.stop();
  for (const s of subs) s.unsubscribe();
  await worker?.stop();
  for (const r of Object.values(reference)) await r.release();
  await bus?.close();
  await store?.close();
  await Promise.all([nats?.stop(), redis?.stop()]);
});

const digit = (i: number, name = "input"): Tensor => ({ name, datatype: "FP32", shape: [1, 1, 28, 28], data: digits.inputs.slice(i * 784, (i + 1) * 784) });

async function direct(model: string, x: Tensor): Promise<Float32Array> {
  const [out] = await reference[model]!.runOne([{ ...x, name: "input" }]);
  return out!.data as Float32Array;
}
const top = (p: ArrayLike<number>): number => Math.max(...Array.from(p));
const argmax = (p: ArrayLike<number>): number => Array.from(p).indexOf(top(p));

/** A registry request; the reply's JSON, or its error code and message. */
async function registry(subject: string, body: unknown): Promise<{ code?: string; body: Record<string, unknown> }> {
  const reply = await bus.nc.request(subject, JSON.stringify(body), { timeout: 10_000 });
  return { code: reply.headers?.get(headers.error) || undefined, body: reply.json<Record<string, unknown>>() };
}

interface Answer {
  code?: string;
  error?: string;
  meta: Record<string, unknown>;
  outputs: Tensor[];
}

/** A pipeline query over NATS in the binary encoding. */
async function query(pipeline: string, inputs: Tensor[], h: Record<string, string | number | undefined> = {}): Promise<Answer> {
  const reply = await bus.nc.request(subjects.inferPipeline(pipeline), encodeTensors(inputs), {
    timeout: 20_000,
    headers: makeHeaders({ [headers.contentType]: contentTypes.wire, [headers.receivedAt]: clock.now(), ...h }),
  });
  const code = reply.headers?.get(headers.error) || undefined;
  if (code) return { code, error: reply.json<{ error: string }>().error, meta: {}, outputs: [] };
  const { meta, tensors } = decodeTensors<Record<string, unknown>>(reply.data);
  return { meta, outputs: tensors };
}

/** Validation digits the fast model is sure of (top probability ≥ 0.9) and unsure of. */
async function pick(): Promise<{ sure: number[]; unsure: number[] }> {
  const sure: number[] = [];
  const unsure: number[] = [];
  for (let i = 0; i < digits.count && (sure.length < 4 || unsure.length < 4); i++) ((top(await direct(FAST, digit(i))) >= 0.9 ? sure : unsure)).push(i);
  return { sure, unsure };
}

const cascade = digitsCascadeSpec({ name: "cascade", slo: { p99_ms: 100 } });

describe("pipelines - registry", () => {
  it("pipelines - register over NATS: stored, listed; a second one of the same name is refused", async () => {
    const r = await registry(subjects.registerPipeline, { spec: cascade });
    expect(r.code).toBeUndefined();
    expect(r.body).toMatchObject({ spec: { name: "cascade", slo: { p99_ms: 100 } }, registeredAtMs: T0 });
    expect((await store.getPipeline("cascade"))?.spec.stages.map((s) => s.model)).toEqual([FAST, ACCURATE]);
    const again = await registry(subjects.registerPipeline, { spec: cascade });
    expect(again).toEqual({ code: "pipeline_exists", body: { code: "pipeline_exists", error: "a pipeline named 'cascade' exists; delete it first" } });
    const list = await registry(subjects.listPipelines, {});
    expect((list.body.pipelines as Array<{ spec: { name: string } }>).map((p) => p.spec.name)).toEqual(["cascade"]);
  });

  const bad: Array<[string, unknown, string, string]> = [
    ["an unknown model", { ...cascade, name: "c1", stages: [{ name: "fast", model: "digits-nope" }, { name: "accurate", model: ACCURATE }] }, "invalid_pipeline", "invalid pipeline c1: stage fast: unknown model 'digits-nope'"],
    ["a cycle", { ...cascade, name: "c2", edges: [...cascade.edges!, { from: "accurate", to: "fast" }] }, "invalid_pipeline", "invalid pipeline c2: the edges form a cycle through stages fast, accurate"],
    ["a condition that names no output", { ...cascade, name: "c3", edges: [{ from: "fast", to: "accurate", when: { output: "logits", op: "<", value: 0.9 } }] }, "invalid_pipeline",
      `invalid pipeline c3: edge fast → accurate: the condition names output 'logits', but stage fast (model ${FAST}) has outputs: probabilities`],
    ["an invalid name", { ...cascade, name: "a.b" }, "invalid_name", "invalid pipeline name \"a.b\": use 1-64 letters, digits, '_' or '-', starting with a letter or digit"],
    ["a spec that is not an object", "cascade", "invalid_pipeline", "a pipeline spec is a JSON object"],
    ["a misspelt field", { ...cascade, name: "c4", stage: [] }, "invalid_pipeline", 'invalid pipeline c4: (body): Unrecognized key: "stage"'],
    // InferLine Algorithm 1 on the profiles: 0.3 + 0.3 ms at batch 1 > 0.5 ms (libs/policy pipelineSloCheck).
    ["an SLO no configuration can meet", { ...cascade, name: "c5", slo: { p99_ms: 0.5 } }, "infeasible",
      `pipeline c5: service time 0.6 ms at batch 1 on the fastest hardware exceeds the SLO of 0.5 ms on the path fast → accurate: the slowest on it is stage fast (model ${FAST}) (0.3 ms on cpu-fp32-t1); the path takes fast 0.3 ms + accurate 0.3 ms`],
  ];
  it.each(bad)("pipelines - a bad spec is refused with a clear error: %s", async (_what, spec, code, message) => {
    const r = await registry(subjects.registerPipeline, { spec });
    expect(r.code).toBe(code);
    expect(r.body.error).toBe(message);
    expect(await store.listPipelines().then((l) => l.map((p) => p.spec.name))).toEqual(["cascade"]);
  });
});

describe("pipelines - queries", () => {
  it("pipelines - cascade: a sure digit is answered by the fast model alone, an unsure one by the accurate model; both equal onnxruntime", async () => {
    const { sure, unsure } = await pick();
    const a = await query("cascade", [digit(sure[0]!)], { [headers.requestId]: "q-sure" });
    expect(a.code, a.error).toBeUndefined();
    expect(a.meta).toMatchObject({ pipeline: "cascade", visited: ["fast"], output_stages: ["fast"], missed_slo: false, slo_ms: 100, s_m: { fast: 1 } });
    expect((a.meta.served_by as Record<string, { model: string }>)["fast"]?.model).toBe(FAST);
    expect(a.outputs[0]!.name).toBe("probabilities");
    expect(Array.from(a.outputs[0]!.data as Float32Array)).toEqual(Array.from(await direct(FAST, digit(sure[0]!))));
    expect(a.meta.cost_dollars).toBeGreaterThan(0);

    const b = await query("cascade", [digit(unsure[0]!)]);
    expect(b.meta).toMatchObject({ visited: ["fast", "accurate"], output_stages: ["accurate"], missed_slo: false });
    expect((b.meta.served_by as Record<string, { model: string }>)["accurate"]?.model).toBe(ACCURATE);
    const expected = await direct(ACCURATE, digit(unsure[0]!));
    const got = b.outputs[0]!.data as Float32Array;
    expect(Array.from(got).every((v, i) => Math.abs(v - expected[i]!) < 1e-6)).toBe(true);
    // Measured s_m: 1 of the 2 queries so far reached the accurate model.
    expect(b.meta.s_m).toEqual({ fast: 1, accurate: 0.5 });
    // Timing per stage and in total, on the injected clock (which did not move).
    expect(b.meta.timing_ms).toEqual({ total: 0, stages: { fast: 0, accurate: 0 } });

    // The query's parameters: at threshold 0.9999 the sure digit is not sure enough any more.
    const strict = await query("cascade", [digit(sure[0]!)], { [headers.pipelineParams]: JSON.stringify({ threshold: 0.9999 }) });
    expect(strict.meta.visited).toEqual(["fast", "accurate"]);
  });

  it("pipelines - a late query still runs every stage and is answered, counted as a miss (x-late-ok)", async () => {
    const { unsure } = await pick();
    // It entered the system 250 ms ago; the SLO is 100 ms: its deadline has passed before the first stage.
    const late = await query("cascade", [digit(unsure[1]!)], { [headers.receivedAt]: clock.now() - 250 });
    expect(late.code, late.error).toBeUndefined();
    expect(late.meta).toMatchObject({ visited: ["fast", "accurate"], missed_slo: true, timing_ms: { total: 250 } });
    expect(argmax(late.outputs[0]!.data as Float32Array)).toBe(argmax(await direct(ACCURATE, digit(unsure[1]!))));
    // The same stage query without x-late-ok is shed by the executor (the shared batching rule).
    const reply = await bus.nc.request(subjects.inferModel(FAST), encodeTensors([digit(unsure[1]!)]), {
      timeout: 10_000,
      headers: makeHeaders({ [headers.contentType]: contentTypes.wire, [headers.deadline]: clock.now() - 150 }),
    });
    expect(reply.headers?.get(headers.error)).toBe("deadline_exceeded");
  });

  it("pipelines - independent stages run in parallel; a step joins them (an ensemble)", async () => {
    const ensemble: PipelineSpecInput = {
      name: "ensemble",
      slo: { p99_ms: 100 },
      stages: [{ name: "a", model: FAST }, { name: "b", model: ACCURATE }, { name: "avg", step: "mean", inputs: { a: "a.probabilities", b: "b.probabilities" } }],
      edges: [{ from: "a", to: "avg" }, { from: "b", to: "avg" }],
    };
    expect((await registry(subjects.registerPipeline, { spec: ensemble })).code).toBeUndefined();
    // Everything on the bus in order: both stage queries leave before either is answered.
    const seen: string[] = [];
    const replyTo = new Map<string, string>();
    const taps = [
      bus.nc.subscribe("infer.model.*", { callback: (_e, m) => { seen.push(m.subject); if (m.reply) replyTo.set(m.reply, m.subject); } }),
      bus.nc.subscribe("_INBOX.>", { callback: (_e, m) => void seen.push(m.subject) }),
    ];
    await bus.nc.flush();
    const a = await query("ensemble", [digit(3)]);
    for (const t of taps) t.unsubscribe();
    const stageEvents = seen.map((s) => (s.startsWith("infer.model.") ? s : replyTo.has(s) ? "answer" : undefined)).filter((s) => s !== undefined);
    expect(stageEvents).toEqual([subjects.inferModel(FAST), subjects.inferModel(ACCURATE), "answer", "answer"]);
    expect(a.meta).toMatchObject({ visited: ["a", "b", "avg"], output_stages: ["avg"], served_by: { avg: { step: "mean" } } });
    const [pa, pb] = [await direct(FAST, digit(3)), await direct(ACCURATE, digit(3))];
    const y = a.outputs[0]!;
    expect(y.name).toBe("y");
    expect(Array.from(y.data as Float32Array).every((v, i) => Math.abs(v - (pa[i]! + pb[i]!) / 2) < 1e-6)).toBe(true);
  });

  it("pipelines - fan-out: one query of 4 digits, each item through its own cascade, joined in order", async () => {
    const perItem: PipelineSpecInput = {
      name: "per-item",
      slo: { p99_ms: 100 },
      params: { threshold: 0.9 },
      inputs: [{ name: "batch", datatype: "FP32", shape: [-1, 1, 28, 28] }],
      stages: [
        { name: "split", step: "split-rows", inputs: { x: "input.batch" } },
        { name: "fast", model: FAST, inputs: { input: "split.x" } },
        { name: "accurate", model: ACCURATE, inputs: { input: "split.x" } },
        { name: "join", step: "concat-rows", inputs: { x: ["accurate.probabilities", "fast.probabilities"] } },
      ],
      edges: [
        { from: "split", to: "fast" },
        { from: "fast", to: "accurate", when: { output: "probabilities", reduce: "max", op: "<", value: "$threshold" } },
        { from: "fast", to: "join" },
        { from: "accurate", to: "join" },
      ],
      outputs: { probabilities: "join.x" },
    };
    expect((await registry(subjects.registerPipeline, { spec: perItem })).code).toBeUndefined();
    const { sure, unsure } = await pick();
    const rows = [sure[1]!, unsure[2]!, sure[2]!, unsure[3]!];
    const batch: Tensor = { name: "batch", datatype: "FP32", shape: [4, 1, 28, 28], data: Float32Array.from(rows.flatMap((i) => Array.from(digit(i).data as Float32Array))) };
    const a = await query("per-item", [batch]);
    expect(a.code, a.error).toBeUndefined();
    expect(a.meta.visits).toEqual({ split: 1, fast: 4, accurate: 2, join: 1 });
    expect((a.meta.served_by as Record<string, unknown[]>)["accurate"]?.map((s) => (s as { model: string } | null)?.model ?? null)).toEqual([null, ACCURATE, null, ACCURATE]);
    const out = a.outputs[0]!;
    expect(out.shape).toEqual([4, 10]);
    for (const [k, i] of rows.entries()) {
      const expected = k % 2 === 0 ? await direct(FAST, digit(i)) : await direct(ACCURATE, digit(i));
      expect(Array.from((out.data as Float32Array).slice(k * 10, k * 10 + 10)).every((v, j) => Math.abs(v - expected[j]!) < 1e-6), `row ${k}`).toBe(true);
    }
  });

  it("pipelines - a step's objects (not tensors) come back as JSON at the top of the answer; a condition may read them", async () => {
    const words: PipelineSpecInput = {
      name: "words",
      slo: { p99_ms: 100 },
      stages: [
        { name: "fast", model: FAST },
        { name: "name", step: "label", inputs: { x: "fast.probabilities" }, params: { labels: ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine"] } },
        { name: "accurate", model: ACCURATE },
      ],
      edges: [{ from: "fast", to: "name" }, { from: "name", to: "accurate", when: { output: "score", op: "<", value: 0.9 } }],
      outputs: { label: "name.label", score: "name.score" },
    };
    expect((await registry(subjects.registerPipeline, { spec: words })).code).toBeUndefined();
    const { sure, unsure } = await pick();
    const names = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine"];
    for (const i of [sure[3]!, unsure[3]!]) {
      const p = await direct(FAST, digit(i));
      const a = await query("words", [digit(i)]);
      expect(a.code, a.error).toBeUndefined();
      expect(a.outputs).toEqual([]);
      expect(a.meta.label).toBe(names[argmax(p)]);
      expect(a.meta.score).toBeCloseTo(top(p), 6);
      expect(a.meta.values).toBeUndefined();
      expect(a.meta.visited).toEqual(top(p) >= 0.9 ? ["fast", "name"] : ["fast", "name", "accurate"]);
    }
    // An object output named like a field of the answer comes under `values` instead.
    expect((await registry(subjects.registerPipeline, { spec: { ...words, name: "words-id", outputs: { label: "name.label", id: "name.score" } } })).code).toBeUndefined();
    const b = await query("words-id", [digit(sure[0]!)]);
    expect(b.meta.label).toBe(names[argmax(await direct(FAST, digit(sure[0]!)))]);
    expect(b.meta.values).toEqual({ id: expect.closeTo(top(await direct(FAST, digit(sure[0]!))), 6) });
  });

  it("pipelines - an app stage is a model-less query; its error comes back naming the stage", async () => {
    const strictApp: PipelineSpecInput = { name: "strict-app", slo: { p99_ms: 100 }, stages: [{ name: "any", app: "digits", requirements: { min_accuracy: 0.999 } }] };
    expect((await registry(subjects.registerPipeline, { spec: strictApp })).code).toBeUndefined();
    const a = await query("strict-app", [digit(0)]);
    expect(a.code).toBe("infeasible");
    expect(a.error).toMatch(/^stage any \(app digits\): no variant of app 'digits' meets the requirements/);
    const easyApp: PipelineSpecInput = { name: "easy-app", slo: { p99_ms: 100 }, stages: [{ name: "any", app: "digits", requirements: { min_accuracy: 0.98 } }] };
    expect((await registry(subjects.registerPipeline, { spec: easyApp })).code).toBeUndefined();
    const b = await query("easy-app", [digit(0)]);
    expect((b.meta.served_by as Record<string, { model: string }>)["any"]?.model).toBe(ACCURATE);
  });

  it("pipelines - bad queries get a clear error and lose nothing else", async () => {
    expect(await query("nope", [digit(0)])).toMatchObject({ code: "unknown_pipeline", error: "no pipeline named 'nope'" });
    expect(await query("cascade", [{ ...digit(0), shape: [1, 784] }])).toMatchObject({ code: "invalid_shape", error: "input 'input' has shape [1, 784]; the model expects [-1, 1, 28, 28] (-1 = any size)" });
    expect(await query("cascade", [digit(0)], { [headers.pipelineParams]: JSON.stringify({ thresh: 1 }) })).toMatchObject({
      code: "bad_request",
      error: "pipeline cascade: unknown parameter 'thresh'; the pipeline's parameters are: threshold",
    });
    expect(await query("cascade", [digit(0)], { [headers.pipelineParams]: "{" })).toMatchObject({ code: "bad_request", error: "header x-pipeline-params is not valid JSON" });
    // A JSON query from a NATS client works too, and answers in JSON.
    const inbox = createInbox();
    const replies: Msg[] = [];
    const sub = bus.nc.subscribe(inbox, { callback: (_e, m) => void replies.push(m) });
    bus.nc.publish(subjects.inferPipeline("cascade"), JSON.stringify({ id: "j1", inputs: [{ name: "input", datatype: "FP32", shape: [1, 1, 28, 28], data: Array.from(digit(5).data as Float32Array) }] }), { reply: inbox });
    await waitFor("the JSON answer", () => replies.length === 1);
    sub.unsubscribe();
    const body = replies[0]!.json<{ id: string; outputs: Array<{ name: string; data: number[] }> }>();
    expect(body.id).toBe("j1");
    expect(body.outputs[0]!.name).toBe("probabilities");
  });

  it("pipelines - metrics.pipeline.<name>: queries, misses, p99 and the measured s_m", async () => {
    const reports: PipelineReport[] = [];
    const tap = bus.nc.subscribe(subjects.pipelineMetrics("cascade"), { callback: (_e, m) => void reports.push(pipelineReportSchema.parse(m.json())) });
    await bus.nc.flush();
    clock.advance(1000);
    service.tick(clock.now());
    await waitFor("the pipeline report", () => reports.length === 1);
    tap.unsubscribe();
    const r = reports[0]!;
    // Answered on cascade so far: sure, unsure, strict (first test), the late one, the JSON one: 5, one of them late
    // (250 ms, the others 0 on the manual clock). The refused ones never ran: not counted.
    expect(r).toMatchObject({ pipeline: "cascade", dispatcher: "dispatcher-test", sloMs: 100, queries: 5, totalQueries: 5, misses: 1, totalMisses: 1, errors: 0, latencyP99Ms: 250, recentP99Ms: 250 });
    expect(r.shares.fast).toBe(1);
    expect(r.shares.accurate).toBeCloseTo(r.visits.accurate! / r.queries, 12);
    // The arrival process for the Tuner: the same 5, by the second they arrived in (x-received-ms);
    // items per stage: one per visit (no fan-out here).
    expect(Object.values(r.arrivals ?? {}).reduce((a, b) => a + b, 0)).toBe(5);
    expect(Object.keys(r.arrivals ?? {}).every((k) => Number(k) % 1000 === 0)).toBe(true);
    expect(r.items).toEqual(r.visits);
  });

  it("pipelines - unregister: gone from Redis and from queries; a second delete says so", async () => {
    expect(await registry(subjects.unregisterPipeline, { pipeline: "ensemble" })).toEqual({ code: undefined, body: { pipeline: "ensemble", deleted: true } });
    expect(await store.getPipeline("ensemble")).toBeUndefined();
    expect(await query("ensemble", [digit(0)])).toMatchObject({ code: "unknown_pipeline" });
    expect(await registry(subjects.unregisterPipeline, { pipeline: "ensemble" })).toMatchObject({ code: "unknown_pipeline", body: { error: "no pipeline named 'ensemble'" } });
  });
});
