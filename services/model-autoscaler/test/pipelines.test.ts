import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  ManualClock,
  decodeTensors,
  encodeTensors,
  headers,
  pipelineDecisionSchema,
  pipelineSpecSchema,
  subjects,
  type PipelineDecision,
  type PipelineRecord,
  type PipelineReport,
  type PipelineSpecInput,
  type ScaleCommand,
} from "@sloserve/contracts";
import { connectBus, createLogger, type Bus } from "@sloserve/bus";
import { Catalog, MetadataStore } from "@sloserve/store";
import { startNats, startRedis, type ServerHandle } from "@sloserve/stack";
import { waitFor } from "@sloserve/testing";
import { ModelAutoscalerController } from "../src/controller.js";
import { PipelineController, type PipelineControllerOptions } from "../src/pipelines.js";
import { TestWorker, modelRecord, variantRecord, type VariantSpec } from "./harness.js";

/**
 * The pipeline controller's shell on a real nats-server and redis-server with a manual clock, beside
 * the model autoscaler it hands its floors to: registry events and `metrics.pipeline.<name>` reports
 * come over the bus (the test stands for the dispatchers, and answers the sample run's pipeline
 * queries); test workers obey `scale.model.<worker>` and report what they run; decisions are read
 * back from `decision.pipeline.*`, commands from `scale.model.*`, the plan from Redis.
 */

let nats: ServerHandle;
let redis: ServerHandle;
/** The controllers' connection, and the one of the workers, the test dispatcher and the taps. */
let bus: Bus;
let testBus: Bus;
let store: MetadataStore;
const log = createLogger("pipeline-controller-test", "warn");
const decisions: PipelineDecision[] = [];
const commands: Array<{ worker: string; command: ScaleCommand }> = [];
let taps: Array<ReturnType<Bus["nc"]["subscribe"]>> = [];

beforeAll(async () => {
  nats = await startNats();
  redis = await startRedis();
  bus = await connectBus({ servers: nats.url, name: "pipeline-controller-test", log });
  testBus = await connectBus({ servers: nats.url, name: "pipeline-controller-test-peers", log, ensure: false });
  store = MetadataStore.connect(redis.url);
  taps = [
    testBus.nc.subscribe("decision.pipeline.*", { callback: (_e, m) => void decisions.push(pipelineDecisionSchema.parse(m.json())) }),
    testBus.nc.subscribe("scale.model.*", { callback: (_e, m) => void commands.push({ worker: m.subject.split(".")[2] ?? "", command: m.json() }) }),
  ];
});

afterAll(async () => {
  for (const s of taps) s.unsubscribe();
  await testBus?.close();
  await bus?.close();
  await store?.close();
  await redis?.stop();
  await nats?.stop();
});

const T0 = 1_700_000_000_000;
const sec = (atMs: number): number => (atMs - T0) / 1000;

/** Batch latencies at 1, 2, 4, 8; variants at b1 and b8 (as VARIANT_BATCH_SIZES=1,8). cnn is 4× mlp. */
const MLP = { 1: 0.1, 2: 0.12, 4: 0.16, 8: 0.24 };
const CNN = { 1: 0.4, 2: 0.48, 4: 0.64, 8: 0.96 };
function variants(model: string, latencyMs: Record<number, number>): VariantSpec[] {
  return [1, 8].map((b) => ({ name: `${model}--cpu-fp32-b${b}-t1`, model, app: "digits", maxBatch: b, latencyMs, peakQps: (1000 * b) / latencyMs[b]!, loadLatencyMs: 100 }));
}

interface Setup {
  clock: ManualClock;
  models: ModelAutoscalerController;
  pipelines: PipelineController;
  workers: TestWorker[];
  stop: () => Promise<void>;
}

/** Registers the two models (each with a 4-row validation set), starts both controllers as main.ts wires them, and the workers. */
async function setup(prefix: string, options: PipelineControllerOptions, workerNames: string[]): Promise<Setup> {
  const records = [...variants(`${prefix}-mlp`, MLP), ...variants(`${prefix}-cnn`, CNN)].map(variantRecord);
  for (const model of [`${prefix}-mlp`, `${prefix}-cnn`]) {
    // Rows x[0] = 0, 0.25, 0.5, 0.75: the test dispatcher sends x[0] < 0.25 on to the accurate stage.
    const validation = encodeTensors([{ name: "x", datatype: "FP32", shape: [4, 4], data: Float32Array.from({ length: 16 }, (_, i) => (i % 4 === 0 ? i / 16 : 0)) }]);
    await testBus.models.putBlob({ name: `validation/${model}` }, validation);
    await store.createModel({ ...modelRecord(model, "digits"), validationObject: `validation/${model}`, validationCount: 4 }, records.filter((r) => r.model === model));
  }
  const clock = new ManualClock(T0);
  const catalog = new Catalog(store);
  const models = new ModelAutoscalerController(bus, catalog, log, clock);
  const pipelines = new PipelineController(bus, store, catalog, models, log, clock, options);
  const subs = [...models.subscribe(), ...pipelines.subscribe()];
  await catalog.load();
  const byName = new Map(records.map((r) => [r.name, r]));
  const workers = workerNames.map((name) => new TestWorker({ name, threads: 4 }, byName).listen(testBus));
  await testBus.nc.flush();
  return {
    clock, models, pipelines, workers,
    stop: async () => {
      for (const s of subs) s.unsubscribe();
      for (const w of workers) w.stop();
      for (const model of [`${prefix}-mlp`, `${prefix}-cnn`]) await store.deleteModel(model);
    },
  };
}

function cascade(name: string, prefix: string, o: Partial<PipelineSpecInput> = {}): PipelineRecord {
  const spec = pipelineSpecSchema.parse({
    name, slo: { p99_ms: 100 }, params: { threshold: 0.9 },
    stages: [{ name: "fast", model: `${prefix}-mlp` }, { name: "accurate", model: `${prefix}-cnn` }],
    edges: [{ from: "fast", to: "accurate", when: { output: "y", op: "<", value: "$threshold" }, expected_share: 0.5 }],
    ...o,
  });
  return { spec, registeredAtMs: T0 };
}

async function register(record: PipelineRecord): Promise<void> {
  expect(await store.createPipeline(record)).toBe(true);
  await testBus.js.publish(subjects.pipelineRegistered(record.spec.name), JSON.stringify(record));
}

/** Waits (real time) until the controller is done with its sample run and first plan. */
async function settled(pipelines: PipelineController, name: string): Promise<void> {
  await waitFor(`pipeline ${name}'s sample run and first plan`, () => pipelines.view(name)?.busy === false, { timeoutMs: 15_000 });
  await testBus.nc.flush();
  await bus.nc.flush();
}

/** One second: the dispatcher's report (the last second's arrivals) and the workers' reports, then both controllers tick. */
async function second(s: Setup, name: string, queries: number, share: number): Promise<void> {
  const nowMs = s.clock.advance(1000);
  if (queries >= 0) {
    const visits = { fast: queries, accurate: Math.round(queries * share) };
    const report: PipelineReport = {
      pipeline: name, dispatcher: "d1", atMs: nowMs, windowMs: 1000, sloMs: 100, queries, misses: 0, errors: 0, latencyP50Ms: 1, latencyP99Ms: 2,
      visits, items: visits, arrivals: { [String(nowMs - 1000)]: queries }, totalQueries: 0, totalMisses: 0, shares: {}, recentP99Ms: 2,
    };
    testBus.nc.publish(subjects.pipelineMetrics(name), JSON.stringify(report));
  }
  for (const w of s.workers) await w.publishReport(testBus, nowMs);
  await testBus.nc.flush();
  await bus.nc.flush(); // the controllers have the reports
  await s.pipelines.tick();
  await s.models.tick();
  await bus.nc.flush();
  await testBus.nc.flush(); // the workers and the taps have what was published
}

const mine = (name: string): PipelineDecision[] => decisions.filter((d) => d.pipeline === name);
const replicas = (d: PipelineDecision): Record<string, number> => Object.fromEntries(Object.entries(d.stages).map(([s, p]) => [s, p.replicas]));
/** Instances (ready + loading) of a variant over the workers at the clock's time. */
const running = (s: Setup, variant: string): number => s.workers.reduce((n, w) => n + ((r) => (r ? r.ready + r.loading : 0))(w.runs(s.clock.now()).get(variant)), 0);

describe("pipeline controller", () => {
  it("pipelines - registration: the sample run measures s_m, the Planner plans, the floors are placed, the plan is stored", async () => {
    const s = await setup("reg", { sampleQueries: 40, traceSeconds: 60 }, ["w1", "w2"]);
    // The dispatcher, for the sample run: x[0] < 0.25 goes on to `accurate` (1 row in 4).
    const sample: Array<{ profiling: string | undefined; x0: number }> = [];
    const dispatcher = testBus.nc.subscribe(subjects.inferPipeline("cascade-reg"), {
      callback: (_e, m) => {
        const x = decodeTensors(m.data).tensors[0]!.data as Float32Array;
        sample.push({ profiling: m.headers?.get(headers.profiling) || undefined, x0: x[0]! });
        m.respond(encodeTensors([], { visits: x[0]! < 0.25 ? { fast: 1, accurate: 1 } : { fast: 1 } }));
      },
    });
    try {
      await register(cascade("cascade-reg", "reg", { planning: { rate_qps: 20, cv: 1 } }));
      await settled(s.pipelines, "cascade-reg");
      // 40 queries over the 4 validation rows, each marked as profiling.
      expect(sample.length).toBe(40);
      expect(sample.every((q) => q.profiling === "1")).toBe(true);
      expect(sample.filter((q) => q.x0 < 0.25).length).toBe(10);
      const [plan] = mine("cascade-reg");
      expect(plan).toMatchObject({ source: "planner", decision: "plan", atMs: T0 });
      // Sub-millisecond stages at 20 qps: one replica each; IncreaseBatch keeps the cost: b1 → b8.
      expect(plan!.stages).toEqual({
        fast: { model: "reg-mlp", variant: "reg-mlp--cpu-fp32-b8-t1", hardware: "cpu-fp32-t1", maxBatch: 8, replicas: 1, scaleFactor: 1 },
        accurate: { model: "reg-cnn", variant: "reg-cnn--cpu-fp32-b8-t1", hardware: "cpu-fp32-t1", maxBatch: 8, replicas: 1, scaleFactor: 0.25 },
      });
      expect(plan!.reason).toMatch(/^registration: planned for \d+\.\d qps: fast 1× reg-mlp--cpu-fp32-b8-t1, accurate 1× reg-cnn--cpu-fp32-b8-t1; estimated P99 \d\.\d+ ms ≤ SLO 100 ms/);
      // The measured share (10 of 40), not the spec's 0.5.
      expect(plan!.reason).toContain("scale factors from sample (fast 1.000, accurate 0.250); declared trace 20.0 qps CV 1 over 60 s");
      // The model autoscaler places the floors: one instance each, on the least busy worker with the
      // fewest variants (cnn: w1 by name; then mlp: w2, which runs nothing yet).
      for (let t = 0; t < 2; t++) await second(s, "cascade-reg", 0, 0);
      expect(commands.filter((c) => c.command.variant.startsWith("reg-")).map((c) => `${c.command.action} ${c.command.variant} ×${c.command.count} on ${c.worker}: ${c.command.reason}`)).toEqual([
        "add reg-cnn--cpu-fp32-b8-t1 ×1 on w1: pipeline cascade-reg stage accurate: plan, 1 replica: 0 of 1 reg-cnn--cpu-fp32-b8-t1 running; placed on w1: lowest-utilised cpu worker (0% busy, 0 variants)",
        "add reg-mlp--cpu-fp32-b8-t1 ×1 on w2: pipeline cascade-reg stage fast: plan, 1 replica: 0 of 1 reg-mlp--cpu-fp32-b8-t1 running; placed on w2: lowest-utilised cpu worker (0% busy, 0 variants)",
      ]);
      expect(running(s, "reg-mlp--cpu-fp32-b8-t1")).toBe(1);
      expect(await store.getPipelinePlan("cascade-reg")).toMatchObject({ state: "planned", scaleFactorSource: "sample", trace: { source: "declared", qps: 20, cv: 1, seconds: 60 }, stages: plan!.stages, unplanned: {} });
      // Unregistered: the floors are lifted (the instances go), the plan leaves Redis.
      await testBus.js.publish(subjects.pipelineUnregistered("cascade-reg"), JSON.stringify({ pipeline: "cascade-reg" }));
      await testBus.nc.flush();
      await bus.nc.flush();
      expect(s.models.currentFloors()).toEqual([]);
      await second(s, "cascade-reg", -1, 0);
      expect(running(s, "reg-mlp--cpu-fp32-b8-t1")).toBe(0);
      await waitFor("the removed decision", () => mine("cascade-reg").at(-1)?.decision === "removed");
      expect(mine("cascade-reg").at(-1)).toMatchObject({ decision: "removed" });
      expect(await store.getPipelinePlan("cascade-reg")).toBeUndefined();
    } finally {
      dispatcher.unsubscribe();
      await s.stop();
    }
  });

  it("pipelines - the Tuner: a rate step scales every stage up at the next tick; once the quiet period, the 30 s look-back and the envelope's windows have passed, down", async () => {
    const s = await setup("tune", { sampleQueries: 0, traceSeconds: 60 }, ["w1", "w2"]);
    try {
      // Planned for 20 qps; the dispatcher reports 16 q/s for 20 s, 40 q/s for 20 s, then 16 q/s; a
      // quarter of the queries reach `accurate` (the spec says 0.25).
      await register(cascade("cascade-tune", "tune", { planning: { rate_qps: 20, cv: 1 }, edges: [{ from: "fast", to: "accurate", when: { output: "y", op: "<", value: "$threshold" }, expected_share: 0.25 }] }));
      await settled(s.pipelines, "cascade-tune");
      const rate = (t: number): number => (t > 20 && t <= 40 ? 40 : 16);
      for (let t = 1; t <= 90; t++) await second(s, "cascade-tune", rate(t), 0.25);
      const tuner = mine("cascade-tune").filter((d) => d.source === "tuner");
      // No change while the rate stays below the plan's.
      expect(tuner.every((d) => sec(d.atMs) > 20)).toBe(true);
      const up = tuner[0]!;
      // The step is seen at the first report after it: t = 21.
      expect(up).toMatchObject({ decision: "scale-up", atMs: T0 + 21_000, previous: { fast: 1, accurate: 1 } });
      expect(up.reason).toMatch(/^envelope at \d+\.\d{3} s: \d+\.\d qps > planned \d+\.\d; provision for \d+\.\d qps: fast 1→\d+, accurate 1→\d+$/);
      // k = ⌈r_max·s_m / (μ_m·ρ_m)⌉ with μ_m·ρ_m = λ_plan·s_m / k_plan: ⌈r_max / λ_plan⌉ for both stages
      // (r_max ≥ 40 against λ_plan ≈ 20: at least 2; the same for both: cnn is 4× slower and sees a quarter
      // of the queries, so both have the same ρ).
      const k = replicas(up).fast!;
      expect(k).toBeGreaterThanOrEqual(2);
      expect(replicas(up)).toEqual({ fast: k, accurate: k });
      // Scale-down, once: after 15 s without change, with λ_new (largest 5 s rate of the last 30 s) back
      // to 16 (t ≥ 70) and the burst older than the envelope's longest window (2^15 · T_s ≈ 39 s: t ≥ 80),
      // k = ⌈16·s_m / (μ_m·ρ_min)⌉ = ⌈16 / 20⌉ = 1 for both stages.
      expect(tuner.map((d) => d.decision)).toEqual(["scale-up", "scale-down"]);
      const down = tuner[1]!;
      expect(sec(down.atMs)).toBeGreaterThanOrEqual(79);
      expect(replicas(down)).toEqual({ fast: 1, accurate: 1 });
      expect(down.reason).toMatch(/^λ_new 16\.0 qps: fast \d+→1, accurate \d+→1$/);
      // The floors followed: up to k instances of each variant, spread over both workers, then back to 1.
      const adds = commands.filter((c) => c.command.variant === "tune-mlp--cpu-fp32-b8-t1" && c.command.action === "add");
      expect(new Set(adds.map((c) => c.worker))).toEqual(new Set(["w1", "w2"]));
      expect(running(s, "tune-mlp--cpu-fp32-b8-t1")).toBe(1);
      expect(running(s, "tune-cnn--cpu-fp32-b8-t1")).toBe(1);
      expect(await store.getPipelinePlan("cascade-tune")).toMatchObject({ state: "planned", reason: `tuner: ${down.reason}` });
    } finally {
      await s.stop();
    }
  }, 60_000);

  it("pipelines - an infeasible SLO: the decision and the stored plan name the stage that cannot fit", async () => {
    const s = await setup("slow", { sampleQueries: 0, traceSeconds: 60 }, ["w1"]);
    try {
      // cnn alone takes 0.4 ms at batch 1: over a 0.3 ms SLO.
      await register(cascade("cascade-slow", "slow", { slo: { p99_ms: 0.3 } }));
      await settled(s.pipelines, "cascade-slow");
      const reason = "pipeline cascade-slow: service time 0.5 ms at batch 1 on the fastest hardware exceeds the SLO of 0.3 ms on the path fast → accurate: stage accurate (model slow-cnn) cannot fit: it alone takes 0.4 ms on cpu-fp32-t1, its fastest hardware at batch 1";
      expect(mine("cascade-slow")).toEqual([{ pipeline: "cascade-slow", source: "planner", decision: "infeasible", reason, stages: {}, previous: {}, atMs: T0 }]);
      expect(await store.getPipelinePlan("cascade-slow")).toMatchObject({ state: "infeasible", reason, stages: {}, estimatedP99Ms: null });
      // Said once, not every tick; nothing placed.
      for (let t = 0; t < 3; t++) await second(s, "cascade-slow", 0, 0);
      expect(mine("cascade-slow").length).toBe(1);
      expect(s.models.currentFloors()).toEqual([]);
    } finally {
      await s.stop();
    }
  });
});
