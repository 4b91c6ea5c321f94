import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { connect, headers as natsHeaders, type NatsConnection } from "@nats-io/transport-node";
import {
  startStack,
  digitsModels,
  digitsCascadeSpec,
  registerOverHttp,
  registerPipelineOverHttp,
  waitForProfiles,
  type BundledModel,
  type Stack,
} from "@sloserve/stack";
import { contentTypes, decodeTensors, encodeTensors, headers, pipelineReportSchema, subjects, type PipelineReport } from "@sloserve/contracts";
import { waitFor } from "@sloserve/testing";
import { postJson, referenceRunner } from "./support.js";

/**
 * Pipelines end to end (InferLine on the real stack): nats-server, redis-server and every service as its
 * own process; the two digits models registered over HTTP; the bundled digits-cascade registered over
 * HTTP and queried with real validation digits over HTTP and NATS. Each answer is checked against
 * onnxruntime run directly in this process: the fast model's probabilities when it is sure, the
 * accurate model's otherwise. A late query is answered and flagged; bad specs and queries are refused.
 */

const FAST = "digits-mlp-s";
const ACCURATE = "digits-cnn-m";
let stack: Stack;
let nc: NatsConnection;
let models: BundledModel[];
let inputs: Float32Array;
let labels: Uint8Array;
const reference: Record<string, Awaited<ReturnType<typeof referenceRunner>>> = {};

beforeAll(async () => {
  models = (await digitsModels()).filter((m) => m.name === FAST || m.name === ACCURATE);
  stack = await startStack({ cpuWorkers: 1, workerThreads: 2, env: { VARIANT_HARDWARE: "cpu", VARIANT_BATCH_SIZES: "1,8", VARIANT_CPU_THREADS: "1" } });
  nc = await connect({ servers: stack.nats.url });
  for (const m of models) {
    const r = await registerOverHttp(stack.httpUrl, m);
    expect(r.status, JSON.stringify(r.body)).toBe(201);
    reference[m.name] = await referenceRunner(m.path);
  }
  for (const m of models) await waitForProfiles(stack.httpUrl, m.name, "cpu", 180_000);
  const validation = decodeTensors(models[0]!.validation!).tensors;
  inputs = validation[0]!.data as Float32Array;
  labels = validation[1]!.data as Uint8Array;
}, 300_000);

afterAll(async () => {
  await nc?.close();
  await stack?.stop();
});

const pixels = (i: number): Float32Array => inputs.slice(i * 784, (i + 1) * 784);
const argmax = (p: ArrayLike<number>): number => {
  let best = 0;
  for (let j = 1; j < p.length; j++) if (p[j]! > p[best]!) best = j;
  return best;
};
async function direct(model: string, i: number): Promise<number[]> {
  const [out] = await reference[model]!([{ name: "input", datatype: "FP32", shape: [1, 1, 28, 28], data: pixels(i) }]);
  return Array.from(out!.data as Float32Array);
}
const body = (i: number, parameters?: Record<string, unknown>) => ({ id: `d${i}`, inputs: [{ name: "input", datatype: "FP32", shape: [1, 1, 28, 28], data: Array.from(pixels(i)) }], ...(parameters ? { parameters } : {}) });

interface PipelineAnswer {
  id: string;
  pipeline: string;
  outputs: Array<{ name: string; shape: number[]; data: number[] }>;
  visited: string[];
  output_stages: string[];
  served_by: Record<string, { model: string; variant: string; worker: string }>;
  timing_ms: { total: number; stages: Record<string, number> };
  cost_dollars: number;
  missed_slo: boolean;
  slo_ms: number;
  s_m: Record<string, number>;
}

describe("e2e pipelines", () => {
  it("pipelines - digits-cascade registers over HTTP and is listed", async () => {
    const r = await registerPipelineOverHttp(stack.httpUrl, digitsCascadeSpec());
    expect(r.status, JSON.stringify(r.body)).toBe(201);
    expect(r.body).toMatchObject({ name: "digits-cascade", slo: { p99_ms: 200 }, inputs: [{ name: "input", datatype: "FP32", shape: [-1, 1, 28, 28] }] });
    const list = (await (await fetch(`${stack.httpUrl}/v1/pipelines`)).json()) as { pipelines: Array<{ name: string }> };
    expect(list.pipelines.map((p) => p.name)).toEqual(["digits-cascade"]);
    expect((await fetch(`${stack.httpUrl}/v1/pipelines/digits-cascade`)).status).toBe(200);
  });

  it("pipelines - 60 real digits over HTTP: each answer equals onnxruntime's for the route taken; s_m counted live", async () => {
    let reached = 0;
    let right = 0;
    let cost = 0;
    for (let i = 0; i < 60; i++) {
      const r = await postJson(`${stack.httpUrl}/v1/pipelines/digits-cascade/infer`, body(i));
      expect(r.status, JSON.stringify(r.body).slice(0, 300)).toBe(200);
      const a = r.body as unknown as PipelineAnswer;
      const fast = await direct(FAST, i);
      const sure = Math.max(...fast) >= 0.9;
      if (!sure) reached++;
      expect(a.id).toBe(`d${i}`);
      expect(a.visited).toEqual(sure ? ["fast"] : ["fast", "accurate"]);
      expect(a.served_by.fast?.model).toBe(FAST);
      if (!sure) expect(a.served_by.accurate?.model).toBe(ACCURATE);
      const expected = sure ? fast : await direct(ACCURATE, i);
      expect(a.outputs[0]!.name).toBe("probabilities");
      expect(a.outputs[0]!.data.every((v, j) => Math.abs(v - expected[j]!) < 1e-5), `digit ${i}`).toBe(true);
      if (argmax(a.outputs[0]!.data) === labels[i]) right++;
      expect(a.slo_ms).toBe(200);
      expect(typeof a.missed_slo).toBe("boolean");
      expect(a.timing_ms.total).toBeGreaterThanOrEqual(0);
      expect(Object.keys(a.timing_ms.stages)).toEqual(a.visited);
      expect(a.cost_dollars).toBeGreaterThan(0);
      cost += a.cost_dollars;
      // The dispatcher's live count: the share of this pipeline's queries that reached each stage so far.
      expect(a.s_m.fast).toBe(1);
      expect(a.s_m.accurate ?? 0).toBeCloseTo(reached / (i + 1), 12);
    }
    expect(reached).toBeGreaterThan(0);
    expect(reached).toBeLessThan(60);
    expect(right).toBeGreaterThanOrEqual(55);
    console.info(`digits-cascade live: ${right}/60 right, s_m ${(reached / 60).toFixed(3)}, $${(cost / 60).toExponential(3)} per query`);
  });

  it("pipelines - NATS clients query in binary; the answer carries the same route and outputs", async () => {
    const h = natsHeaders();
    h.set(headers.contentType, contentTypes.wire);
    const reply = await nc.request(subjects.inferPipeline("digits-cascade"), encodeTensors([{ name: "input", datatype: "FP32", shape: [1, 1, 28, 28], data: pixels(7) }]), { timeout: 30_000, headers: h });
    expect(reply.headers?.get(headers.error) || undefined).toBeUndefined();
    const { meta, tensors } = decodeTensors<{ visited: string[]; missed_slo: boolean }>(reply.data);
    const fast = await direct(FAST, 7);
    const expected = Math.max(...fast) >= 0.9 ? fast : await direct(ACCURATE, 7);
    expect(meta.visited).toEqual(Math.max(...fast) >= 0.9 ? ["fast"] : ["fast", "accurate"]);
    expect(Array.from(tensors[0]!.data as Float32Array).every((v, j) => Math.abs(v - expected[j]!) < 1e-5)).toBe(true);
  });

  it("pipelines - metrics.pipeline.digits-cascade reports queries and the measured s_m every second", async () => {
    const reports: PipelineReport[] = [];
    const sub = nc.subscribe(subjects.pipelineMetrics("digits-cascade"), { callback: (_e, m) => void reports.push(pipelineReportSchema.parse(m.json())) });
    try {
      await waitFor("a pipeline report", () => reports.length > 0, { timeoutMs: 10_000, intervalMs: 100 });
    } finally {
      sub.unsubscribe();
    }
    const r = reports[0]!;
    expect(r.totalQueries).toBe(61);
    expect(r.shares.fast).toBe(1);
    expect(r.shares.accurate).toBeGreaterThan(0);
    expect(r.recentP99Ms).toBeGreaterThan(0);
  });

  it("pipelines - a late query is still answered, flagged missed_slo (its stages ran late, not shed)", async () => {
    // Find an unsure digit: it must pass through both models.
    let i = 0;
    while (Math.max(...(await direct(FAST, i))) >= 0.9) i++;
    // An SLO that no configuration can meet is refused at registration (InferLine Algorithm 1 on the
    // profiles: the longest path at batch 1 on the fastest variants), naming the stage.
    const impossible = await registerPipelineOverHttp(stack.httpUrl, digitsCascadeSpec({ name: "digits-cascade-tight", slo: { p99_ms: 0.001 } }));
    expect(impossible.status, JSON.stringify(impossible.body)).toBe(422);
    expect(impossible.body).toMatchObject({ code: "infeasible", error: expect.stringMatching(/^pipeline digits-cascade-tight: service time .* exceeds the SLO of 0\.001 ms on the path fast → accurate: stage (fast|accurate) \(model digits-[a-z-]+\) cannot fit/) });
    // Just above that service time: accepted, and missed end to end (the NATS hops and queues the profiles leave out).
    const serviceMs = (impossible.body.details as { service_time_ms: number }).service_time_ms;
    const tight = await registerPipelineOverHttp(stack.httpUrl, digitsCascadeSpec({ name: "digits-cascade-tight", slo: { p99_ms: Math.ceil(serviceMs * 1050) / 1000 } }));
    expect(tight.status, JSON.stringify(tight.body)).toBe(201);
    const r = await postJson(`${stack.httpUrl}/v1/pipelines/digits-cascade-tight/infer`, body(i));
    expect(r.status, JSON.stringify(r.body).slice(0, 300)).toBe(200);
    const a = r.body as unknown as PipelineAnswer;
    expect(a.missed_slo).toBe(true);
    expect(a.visited).toEqual(["fast", "accurate"]);
    const expected = await direct(ACCURATE, i);
    expect(a.outputs[0]!.data.every((v, j) => Math.abs(v - expected[j]!) < 1e-5)).toBe(true);
  });

  const badSpecs: Array<[string, Record<string, unknown>, number, string, string]> = [
    ["an unknown model", { ...digitsCascadeSpec({ name: "b1" }), stages: [{ name: "fast", model: "digits-nope" }, { name: "accurate", model: ACCURATE }] }, 400, "invalid_pipeline", "invalid pipeline b1: stage fast: unknown model 'digits-nope'"],
    ["a cycle", { ...digitsCascadeSpec({ name: "b2" }), edges: [{ from: "fast", to: "accurate" }, { from: "accurate", to: "fast" }] }, 400, "invalid_pipeline", "invalid pipeline b2: the edges form a cycle through stages fast, accurate"],
    ["a condition that names no output", { ...digitsCascadeSpec({ name: "b3" }), edges: [{ from: "fast", to: "accurate", when: { output: "logits", op: "<", value: 0.9 } }] }, 400, "invalid_pipeline",
      `invalid pipeline b3: edge fast → accurate: the condition names output 'logits', but stage fast (model ${FAST}) has outputs: probabilities`],
    ["a name already taken", digitsCascadeSpec(), 409, "pipeline_exists", "a pipeline named 'digits-cascade' exists; delete it first"],
  ];
  it.each(badSpecs)("pipelines - a bad spec over HTTP is refused: %s", async (_what, spec, status, code, error) => {
    const r = await postJson(`${stack.httpUrl}/v1/pipelines/${String(spec.name)}`, spec);
    expect(r).toEqual({ status, body: expect.objectContaining({ code, error }) });
  });

  it("pipelines - invalid names, mismatched names, bad queries: clear 4xx", async () => {
    expect(await postJson(`${stack.httpUrl}/v1/pipelines/a.b`, digitsCascadeSpec({ name: "a.b" }))).toMatchObject({ status: 400, body: { code: "invalid_name" } });
    expect(await postJson(`${stack.httpUrl}/v1/pipelines/other`, digitsCascadeSpec())).toMatchObject({
      status: 400,
      body: { code: "invalid_pipeline", error: "the spec names pipeline \"digits-cascade\" but the path names 'other'" },
    });
    expect(await postJson(`${stack.httpUrl}/v1/pipelines/nope/infer`, body(0))).toMatchObject({ status: 404, body: { code: "unknown_pipeline", error: "no pipeline named 'nope'" } });
    expect(await postJson(`${stack.httpUrl}/v1/pipelines/digits-cascade/infer`, { inputs: [{ name: "input", datatype: "FP32", shape: [1, 784], data: Array.from(pixels(0)) }] })).toMatchObject({
      status: 400,
      body: { code: "invalid_shape" },
    });
    expect(await postJson(`${stack.httpUrl}/v1/pipelines/digits-cascade/infer`, body(0, { thresh: 0.5 }))).toMatchObject({
      status: 400,
      body: { code: "bad_request", error: "pipeline digits-cascade: unknown parameter 'thresh'; the pipeline's parameters are: threshold" },
    });
    // A query's own parameter: at threshold 1 every digit goes on to the accurate model.
    const all = await postJson(`${stack.httpUrl}/v1/pipelines/digits-cascade/infer`, body(0, { threshold: 1.01 }));
    expect((all.body as unknown as PipelineAnswer).visited).toEqual(["fast", "accurate"]);
  });

  it("pipelines - delete: gone from the list and from queries; deleting again is a 404", async () => {
    const del = await fetch(`${stack.httpUrl}/v1/pipelines/digits-cascade-tight`, { method: "DELETE" });
    expect(del.status).toBe(200);
    expect(await del.json()).toEqual({ pipeline: "digits-cascade-tight", deleted: true });
    expect((await fetch(`${stack.httpUrl}/v1/pipelines/digits-cascade-tight`)).status).toBe(404);
    expect(await postJson(`${stack.httpUrl}/v1/pipelines/digits-cascade-tight/infer`, body(0))).toMatchObject({ status: 404, body: { code: "unknown_pipeline" } });
    const again = await fetch(`${stack.httpUrl}/v1/pipelines/digits-cascade-tight`, { method: "DELETE" });
    expect(again.status).toBe(404);
    const list = (await (await fetch(`${stack.httpUrl}/v1/pipelines`)).json()) as { pipelines: Array<{ name: string }> };
    expect(list.pipelines.map((p) => p.name)).toEqual(["digits-cascade"]);
  });

  it("pipelines - cost: the cascade's measured dollars per query against digits-cnn-m alone (recorded, not asserted)", async () => {
    let cascade = 0;
    let alone = 0;
    const n = 100;
    for (let i = 100; i < 100 + n; i++) {
      cascade += ((await postJson(`${stack.httpUrl}/v1/pipelines/digits-cascade/infer`, body(i))).body as unknown as PipelineAnswer).cost_dollars;
      alone += ((await postJson(`${stack.httpUrl}/v2/models/${ACCURATE}/infer`, body(i))).body as { cost_dollars: number }).cost_dollars;
    }
    console.info(`measured per query over ${n} digits: digits-cascade $${(cascade / n).toExponential(3)}, ${ACCURATE} alone $${(alone / n).toExponential(3)}`);
    expect(cascade).toBeGreaterThan(0);
    expect(alone).toBeGreaterThan(0);
  });
});
