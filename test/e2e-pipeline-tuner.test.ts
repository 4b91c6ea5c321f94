import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { connect, headers as natsHeaders, type NatsConnection } from "@nats-io/transport-node";
import { startStack, digitsModels, digitsCascadeSpec, registerOverHttp, registerPipelineOverHttp, waitForProfiles, type BundledModel, type Stack } from "@sloserve/stack";
import {
  contentTypes,
  decodeTensors,
  encodeTensors,
  headers,
  pipelineDecisionSchema,
  subjects,
  tensorRows,
  type PipelineDecision,
  type Tensor,
  type WorkerReport,
} from "@sloserve/contracts";
import { createRng } from "@sloserve/policy";
import { waitFor } from "@sloserve/testing";
import { ScheduledArrivals, arrivalTimes, concatRates, constantRate, rampRates } from "@sloserve/sim";

/**
 * InferLine's Planner and Tuner live (docs/PIPELINES.md "Planner and tuner, live"): the whole stack
 * (nats-server, redis-server, every service as its own process, two executor-cpu workers); the two
 * digits models registered and profiled; digits-cascade registered with a declared planning rate. The
 * pipeline controller (model-autoscaler) measures s_m with a sample run, plans, and places the plan;
 * then an open-loop Gamma load (real validation digits over NATS) at 10 qps for 30 s ramps to 20 qps
 * within 20 s and stays there. The Tuner must see the change and scale every stage up, and ≥ 99% of
 * the pipeline queries sent after its decision must meet the SLO — a generous 400 ms: two shared cores
 * run the whole stack and the load generator, and the test judges the reaction, not the machine.
 */

const FAST = "digits-mlp-s";
const ACCURATE = "digits-cnn-m";
const SLO_MS = 400;
let stack: Stack;
let nc: NatsConnection;
let models: BundledModel[];
let digits: Tensor;
const decisions: PipelineDecision[] = [];

beforeAll(async () => {
  models = (await digitsModels()).filter((m) => m.name === FAST || m.name === ACCURATE);
  stack = await startStack({
    cpuWorkers: 2,
    workerThreads: 4,
    env: { VARIANT_HARDWARE: "cpu", VARIANT_BATCH_SIZES: "1,8", VARIANT_CPU_THREADS: "1", PIPELINE_SAMPLE_QUERIES: "60", PIPELINE_TRACE_SECONDS: "120" },
  });
  nc = await connect({ servers: stack.nats.url });
  nc.subscribe("decision.pipeline.*", { callback: (_e, m) => void decisions.push(pipelineDecisionSchema.parse(m.json())) });
  for (const m of models) {
    const r = await registerOverHttp(stack.httpUrl, m);
    expect(r.status, JSON.stringify(r.body)).toBe(201);
  }
  for (const m of models) await waitForProfiles(stack.httpUrl, m.name, "cpu", 180_000);
  digits = decodeTensors(models.find((m) => m.name === FAST)!.validation!).tensors[0]!;
}, 300_000);

afterAll(async () => {
  await nc?.close();
  await stack?.stop();
});

/** Ready instances of a variant over the live workers (their one-second reports, as /v1/status shows them). */
async function readyInstances(variant: string): Promise<number> {
  const status = (await (await fetch(`${stack.httpUrl}/v1/status`)).json()) as { workers: WorkerReport[] };
  return status.workers.reduce((n, w) => n + (w.variants.find((v) => v.variant === variant && v.state !== "loading")?.instances ?? 0), 0);
}

interface Sent {
  atMs: number;
  latencyMs: number;
  missed: boolean | undefined;
  error: string | undefined;
}

describe("e2e pipeline tuner", () => {
  it("pipeline tuner - an SLO no configuration can meet is refused at registration, naming the stage", async () => {
    const r = await registerPipelineOverHttp(stack.httpUrl, digitsCascadeSpec({ name: "digits-cascade-impossible", slo: { p99_ms: 0.01 } }));
    expect(r.status).toBe(422);
    expect(r.body.code).toBe("infeasible");
    expect(String(r.body.error)).toMatch(/^pipeline digits-cascade-impossible: service time \d+\.\d ms at batch 1 on the fastest hardware exceeds the SLO of 0\.01 ms on the path fast → accurate: stage (fast \(model digits-mlp-s\)|accurate \(model digits-cnn-m\)) cannot fit: it alone takes/);
  });

  it("pipeline tuner - a 2× rate change within a minute: the Tuner scales every stage up live; ≥ 99% of the queries after its decision meet the SLO", async () => {
    const r = await registerPipelineOverHttp(stack.httpUrl, digitsCascadeSpec({ slo: { p99_ms: SLO_MS }, planning: { rate_qps: 12, cv: 1 } }));
    expect(r.status, JSON.stringify(r.body)).toBe(201);
    // The plan: after the sample run (s_m measured), one variant and a replica count per stage.
    const plan = await waitFor("the plan", () => decisions.find((d) => d.pipeline === "digits-cascade" && d.decision === "plan"), { timeoutMs: 90_000, intervalMs: 250 });
    expect(plan.reason).toContain("scale factors from sample");
    expect(Object.keys(plan.stages).sort()).toEqual(["accurate", "fast"]);
    const shown = (await (await fetch(`${stack.httpUrl}/v1/pipelines/digits-cascade`)).json()) as { plan: { state: string; stages: Record<string, { variant: string }> } };
    expect(shown.plan).toMatchObject({ state: "planned", stages: { fast: { variant: plan.stages.fast!.variant }, accurate: { variant: plan.stages.accurate!.variant } } });
    // Placed: the planned replicas of each stage's variant run.
    for (const p of Object.values(plan.stages)) await waitFor(`${p.replicas} × ${p.variant} ready`, async () => (await readyInstances(p.variant)) >= p.replicas, { timeoutMs: 60_000, intervalMs: 250 });

    // The open-loop load: 10 qps (CV 1) for 30 s, a ramp to 20 qps over 20 s, 20 qps for 40 s.
    const schedule = concatRates(constantRate(10, 30), rampRates(10, 20, 20), constantRate(20, 40));
    const times = arrivalTimes(new ScheduledArrivals(schedule, 1), createRng(20_240));
    const rows = digits.shape[0]!;
    const sent: Sent[] = [];
    const pending: Array<Promise<void>> = [];
    const t0 = Date.now();
    const changeAtMs = t0 + 30_000;
    for (let i = 0; i < times.length; i++) {
      // Open loop: each query is stamped with its scheduled time (a late send by this busy process counts
      // against the latency, not as a burst), as the frontend stamps x-received-ms: the arrival process
      // the Tuner counts, and where the SLO's clock starts.
      const atMs = t0 + times[i]!;
      const wait = atMs - Date.now();
      if (wait > 0) await new Promise((res) => setTimeout(res, wait));
      const h = natsHeaders();
      h.set(headers.contentType, contentTypes.wire);
      h.set(headers.receivedAt, String(atMs));
      pending.push(
        nc.request(subjects.inferPipeline("digits-cascade"), encodeTensors([tensorRows(digits, i % rows, 1)]), { timeout: 30_000, headers: h }).then(
          (reply) => {
            const code = reply.headers?.get(headers.error) || undefined;
            const meta = code ? undefined : decodeTensors<{ missed_slo: boolean }>(reply.data).meta;
            sent.push({ atMs, latencyMs: Date.now() - atMs, missed: meta?.missed_slo, error: code });
          },
          (err: unknown) => void sent.push({ atMs, latencyMs: Date.now() - atMs, missed: undefined, error: (err as Error).message }),
        ),
      );
    }
    await Promise.all(pending);

    const tuner = decisions.filter((d) => d.pipeline === "digits-cascade" && d.source === "tuner");
    // Scale-ups by the end of the ramp + 20 s: the one seen after the rate began to rise, or the last
    // before it (a Poisson burst at 10 qps can already exceed the plan's envelope and provision for more).
    const ups = tuner.filter((d) => d.decision === "scale-up" && d.atMs < changeAtMs + 60_000);
    const up = ups.find((d) => d.atMs > changeAtMs) ?? ups.at(-1);
    expect(up, `tuner decisions: ${JSON.stringify(tuner)}`).toBeDefined();
    expect(up!.reason).toMatch(/^envelope at \d+\.\d{3} s: \d+\.\d qps > planned \d+\.\d; provision for \d+\.\d qps: fast \d+→\d+, accurate \d+→\d+$/);
    for (const [stage, p] of Object.entries(up!.stages)) expect(p.replicas, stage).toBeGreaterThan(up!.previous[stage] ?? 0);
    // Carried out: the new replica counts run.
    for (const p of Object.values(up!.stages)) await waitFor(`${p.replicas} × ${p.variant} ready`, async () => (await readyInstances(p.variant)) >= p.replicas, { timeoutMs: 60_000, intervalMs: 250 });

    const after = sent.filter((q) => q.atMs >= up!.atMs);
    const met = after.filter((q) => q.error === undefined && q.missed === false).length;
    const clientMet = after.filter((q) => q.error === undefined && q.latencyMs <= SLO_MS).length;
    const before = sent.filter((q) => q.atMs < changeAtMs);
    const p99 = (xs: number[]): number => Math.round([...xs].sort((a, b) => a - b)[Math.max(0, Math.ceil(0.99 * xs.length) - 1)] ?? NaN);
    console.info(
      `pipeline tuner e2e: plan ${Object.entries(plan.stages).map(([s, p]) => `${s} ${p.replicas}×${p.variant}`).join(", ")}; ` +
        `scale-up ${((up!.atMs - changeAtMs) / 1000).toFixed(1)} s after the ramp began: ${up!.reason}; ` +
        `${sent.length} queries (${sent.filter((q) => q.error).length} failed); after the decision ${met}/${after.length} within the SLO by the dispatcher (${clientMet} by the client), ` +
        `client P99 ${p99(before.map((q) => q.latencyMs))} ms before the change, ${p99(after.map((q) => q.latencyMs))} ms after the decision`,
    );
    expect(after.length).toBeGreaterThan(300);
    expect(met / after.length).toBeGreaterThanOrEqual(0.99);
  }, 300_000);
});
