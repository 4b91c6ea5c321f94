import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { readFileSync } from "node:fs";
import { connect, headers as natsHeaders, type NatsConnection, type Subscription } from "@nats-io/transport-node";
import { startStack, registerOverHttp, tempDir, waitForProfiles, type Stack } from "@sloserve/stack";
import { arrivalsReportSchema, contentTypes, decodeTensors, encodeTensors, headers, subjects, type Tensor, type WorkerReport } from "@sloserve/contracts";
import { connectBus, createLogger, type Bus } from "@sloserve/bus";
import { MetadataStore } from "@sloserve/store";
import { OnnxRunner } from "@sloserve/runtime";
import { waitFor } from "@sloserve/testing";
import { heavyModel, maxRelativeDiff } from "./support.js";

/**
 * Serverless overflow on the real stack (MArk §4.1, §4.5; DESIGN §3): one CPU worker serving a heavy
 * MLP (one core serves ~70 queries/s, test/support.ts), the dispatcher with OVERFLOW=local (a pool of
 * two real function processes), a surge forecast on `forecast.<app>` (as the forecaster publishes it)
 * that makes the dispatcher pre-warm the pool, then a burst far above what the worker can serve within
 * a tight SLO.
 * The queries whose estimate misses the SLO go to functions at once; every query sent is answered or
 * refused with a clear error, and every answer equals onnxruntime run directly on the variant's own
 * model.
 */

const APP = "heavy";
/** A few queries' worth of the model's profiled latency: the worker can hold only a handful of the burst within it. */
const SLO_MS = 100;
const BURST = 300;
const POOL = 2;

let stack: Stack;
let nc: NatsConnection;
let bus: Bus;
let store: MetadataStore;
const arrivals: Array<{ overflowed: number; overflowFailed: number; overflowCostDollars: number }> = [];
let arrivalsSub: Subscription;

beforeAll(async () => {
  stack = await startStack({
    cpuWorkers: 1,
    workerThreads: 1,
    logLevel: process.env.E2E_LOG_LEVEL ?? "info",
    env: { OVERFLOW: "local", FUNCTION_POOL_SIZE: String(POOL), VARIANT_HARDWARE: "cpu", VARIANT_BATCH_SIZES: "1", VARIANT_CPU_THREADS: "1" },
  });
  const model = heavyModel(tempDir("heavy"));
  const r = await registerOverHttp(stack.httpUrl, model);
  expect(r.status, JSON.stringify(r.body)).toBe(201);
  await waitForProfiles(stack.httpUrl, model.name, "cpu", 180_000);
  nc = await connect({ servers: stack.nats.url });
  bus = await connectBus({ servers: stack.nats.url, name: "e2e-overflow", log: createLogger("e2e-overflow", "warn"), ensure: false });
  store = MetadataStore.connect(stack.redis.url);
  arrivalsSub = nc.subscribe(subjects.arrivals(APP), {
    callback: (_e, m) => {
      const parsed = arrivalsReportSchema.safeParse(m.json());
      if (parsed.success) arrivals.push({ overflowed: parsed.data.overflowed ?? 0, overflowFailed: parsed.data.overflowFailed ?? 0, overflowCostDollars: parsed.data.overflowCostDollars ?? 0 });
    },
  });
}, 300_000);

afterAll(async () => {
  arrivalsSub?.unsubscribe();
  await nc?.close();
  await bus?.close();
  await store?.close();
  await stack?.stop();
});

/** Eight different inputs, [1, 1, 28, 28]. */
const images: Tensor[] = Array.from({ length: 8 }, (_, seed) => {
  const data = new Float32Array(28 * 28);
  for (let i = 0; i < data.length; i++) data[i] = ((i * 7 + seed * 13) % 29) / 29;
  return { name: "input", datatype: "FP32", shape: [1, 1, 28, 28], data };
});

interface Meta {
  served_by: { hardware: string; variant: string; cold_start?: boolean };
  timing_ms: { inference: number; total: number };
  cost_dollars: number;
}
type Outcome = { kind: "answer"; image: number; meta: Meta; tensors: Tensor[]; latencyMs: number } | { kind: "error"; code: string; message: string } | { kind: "lost"; message: string };

/** A model-less query over NATS, binary encoding, with its latency SLO. */
async function query(image: number, sloMs: number): Promise<Outcome> {
  const h = natsHeaders();
  h.set(headers.contentType, contentTypes.wire);
  h.set(headers.sloLatencyMs, String(sloMs));
  // The SLO counts from when the query is sent, as the frontend does: without it, the dispatcher counts
  // it from when it reads the query, and a burst it reads no faster than the worker serves (a loaded
  // machine) waits in its inbox unseen by the estimate and is all served locally, late.
  h.set(headers.receivedAt, String(Date.now()));
  const sent = performance.now();
  try {
    const m = await nc.request(subjects.inferApp(APP), encodeTensors([images[image] as Tensor]), { timeout: 45_000, headers: h });
    const code = m.headers?.get(headers.error);
    if (code) return { kind: "error", code, message: m.json<{ error: string }>().error };
    const decoded = decodeTensors<Meta>(m.data);
    return { kind: "answer", image, meta: decoded.meta, tensors: decoded.tensors, latencyMs: performance.now() - sent };
  } catch (err) {
    return { kind: "lost", message: (err as Error).message };
  }
}

/** onnxruntime run directly on each variant's own model (from the model repository). */
const references = new Map<string, OnnxRunner>();
async function expected(variant: string, image: number): Promise<Tensor[]> {
  let runner = references.get(variant);
  if (!runner) {
    const record = await store.getVariant(variant);
    if (!record) throw new Error(`variant ${variant} is not in the registry`);
    const bytes = await bus.models.getBlob(record.object);
    if (!bytes) throw new Error(`model object ${record.object} is not in the repository`);
    runner = await OnnxRunner.load(bytes);
    references.set(variant, runner);
  }
  return runner.runOne([images[image] as Tensor]);
}

describe("e2e overflow", () => {
  it("overflow - a burst above the worker's capacity: the queries that would miss go to functions, every query is answered or clearly refused, answers are right", async () => {
    // Warm-up with a loose SLO: the first query asks for the variant to be loaded on the worker.
    let warm: Outcome | undefined;
    for (let i = 0; i < 20 && !(warm?.kind === "answer" && warm.meta.served_by.hardware === "cpu"); i++) warm = await query(0, 5_000);
    expect(warm?.kind === "answer" && warm.meta.served_by.hardware, JSON.stringify(warm)).toBe("cpu");
    // Let a worker report show the instance active (the dispatcher's view of serving capacity).
    const reports: WorkerReport[] = [];
    const reportsSub = nc.subscribe(subjects.workerMetricsAll, { callback: (_e, m) => void reports.push(m.json<WorkerReport>()) });
    await waitFor("a worker report showing the instance active", () => reports.some((r) => r.variants.some((v) => v.state === "active")), { timeoutMs: 15_000, intervalMs: 100 });
    reportsSub.unsubscribe();

    // A surge is forecast (5 000 q/s next minute against 1 now): the dispatcher pre-warms the pool,
    // whose containers load the variant's model (MArk §4.5). Wait until both are up.
    nc.publish(subjects.forecast(APP), JSON.stringify({ app: APP, atMs: Date.now(), unitS: 60, sampleS: 5, method: "last-value", observed: 1, values: [5000, 5000], historyUnits: 3 }));
    const logLines = (msg: string): Array<Record<string, unknown>> =>
      readFileSync(stack.logPath, "utf8").split("\n").filter((l) => l.includes(`"msg":"${msg}"`)).map((l) => JSON.parse(l) as Record<string, unknown>);
    await waitFor(`${POOL} function containers started`, () => logLines("function container started").length >= POOL, { timeoutMs: 60_000, intervalMs: 200 });
    const prewarm = logLines("pre-warming functions");
    expect(prewarm.length, "the dispatcher did not pre-warm on the forecast").toBe(1);
    expect(prewarm[0]).toMatchObject({ cause: "forecast", app: APP });
    expect(logLines("function container started").length).toBe(POOL);

    // The burst: BURST queries at once, each with a 100 ms SLO: several seconds of the worker's work.
    const outcomes = await Promise.all(Array.from({ length: BURST }, (_, i) => query(i % images.length, SLO_MS)));
    const answers = outcomes.filter((o): o is Extract<Outcome, { kind: "answer" }> => o.kind === "answer");
    const errors = outcomes.filter((o): o is Extract<Outcome, { kind: "error" }> => o.kind === "error");
    const lost = outcomes.filter((o) => o.kind === "lost");
    const byFunction = answers.filter((a) => a.meta.served_by.hardware === "function");
    const byWorker = answers.filter((a) => a.meta.served_by.hardware === "cpu");
    const cold = byFunction.filter((a) => a.meta.served_by.cold_start);
    const warmFn = byFunction.filter((a) => !a.meta.served_by.cold_start);
    const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? NaN;
    const summary = {
      sent: BURST,
      answered: answers.length,
      byFunction: byFunction.length,
      byWorker: byWorker.length,
      errors: Object.entries(errors.reduce<Record<string, number>>((a, e) => ({ ...a, [e.code]: (a[e.code] ?? 0) + 1 }), {})),
      lost: lost.length,
      functionColdStarts: cold.length,
      functionInferenceMsColdMedian: median(cold.map((a) => a.meta.timing_ms.inference)),
      functionInferenceMsWarmMedian: median(warmFn.map((a) => a.meta.timing_ms.inference)),
      functionLatencyMsMedian: median(byFunction.map((a) => a.latencyMs)),
      workerLatencyMsMedian: median(byWorker.map((a) => a.latencyMs)),
      firstError: errors[0]?.message,
    };
    console.log(`e2e-overflow burst: ${JSON.stringify(summary)} (logs: ${stack.logPath})`);

    // Every query sent is answered or refused with a clear error; none is left to time out.
    expect(lost.length, JSON.stringify(summary)).toBe(0);
    expect(answers.length + errors.length).toBe(BURST);
    for (const e of errors) {
      expect(["deadline_exceeded", "overflow_unavailable", "no_capacity"]).toContain(e.code);
      expect(e.message.length).toBeGreaterThan(20);
    }
    // The worker kept serving what it could; the functions took some of what it could not.
    expect(byFunction.length, JSON.stringify(summary)).toBeGreaterThan(0);
    expect(byWorker.length, JSON.stringify(summary)).toBeGreaterThan(0);
    for (const a of byFunction) expect(a.meta.cost_dollars).toBeGreaterThan(0);

    // Every answer equals onnxruntime run directly on the variant's model (relative to the logits' size).
    for (const a of answers) {
      const want = await expected(a.meta.served_by.variant, a.image);
      expect(a.tensors.map((t) => t.name)).toEqual(want.map((t) => t.name));
      for (const [k, w] of want.entries()) {
        const got = a.tensors[k] as Tensor;
        expect(got.shape).toEqual(w.shape);
        expect(maxRelativeDiff(got.data as Float32Array, w.data as Float32Array)).toBeLessThanOrEqual(1e-5);
      }
    }

    // The dispatcher's arrival reports (one a second) account for the overflowed queries and what they cost.
    await waitFor("the arrival reports to account for the overflowed queries", () => {
      const overflowed = arrivals.reduce((s, r) => s + r.overflowed, 0);
      const failed = arrivals.reduce((s, r) => s + r.overflowFailed, 0);
      const cost = arrivals.reduce((s, r) => s + r.overflowCostDollars, 0);
      expect(overflowed - failed).toBe(byFunction.length);
      expect(cost).toBeCloseTo(byFunction.reduce((s, a) => s + a.meta.cost_dollars, 0), 12);
      return true;
    }, { timeoutMs: 15_000, intervalMs: 100 });
  }, 180_000);
});
