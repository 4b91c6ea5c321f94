import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { startStack, digitsModels, prometheusFileSd, registerOverHttp, waitForProfiles, type Stack, type BundledModel } from "@sloserve/stack";
import { headers, subjects } from "@sloserve/contracts";
import { postJson } from "./support.js";

/**
 * Prometheus metrics on the real stack: every service serves /metrics (libs/stack gives each a free
 * METRICS_PORT), and after a known number of queries each one's counters show them: the frontend's
 * requests, the dispatcher's routed and refused queries, the executor's answers with their latency
 * phases and batch sizes, the arrival reports the model autoscaler, forecaster and registrar read,
 * the registrar's registration, the workers the VM autoscaler and the model autoscaler count.
 */

interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

/** Prometheus' text exposition format, the sample lines (comments skipped). */
function parseMetrics(text: string): Sample[] {
  const out: Sample[] = [];
  for (const line of text.split("\n")) {
    const m = /^([a-zA-Z_:][\w:]*)(?:\{(.*)\})?\s+(\S+)/.exec(line);
    if (!m || line.startsWith("#")) continue;
    const labels: Record<string, string> = {};
    for (const l of (m[2] ?? "").matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)) labels[l[1] as string] = (l[2] as string).replace(/\\(.)/g, (_s, c: string) => (c === "n" ? "\n" : c));
    out.push({ name: m[1] as string, labels, value: Number(m[3]) });
  }
  return out;
}

/** Σ of the samples named `name` whose labels include `match`. */
function sum(samples: readonly Sample[], name: string, match: Record<string, string | RegExp> = {}): number {
  let total = 0;
  for (const s of samples) {
    if (s.name !== name) continue;
    if (Object.entries(match).every(([k, v]) => (typeof v === "string" ? s.labels[k] === v : v.test(s.labels[k] ?? "")))) total += s.value;
  }
  return total;
}

let stack: Stack;
let nc: NatsConnection;
let model: BundledModel;
let generated = 0;

const BY_MODEL = 12;
const MODEL_LESS = 8;
/** Instances that take queries: Active, or Overloaded / Interfered (a shared machine can slow a batch past its profile). */
const SERVING = /^(active|overloaded|interfered)$/;
const UNKNOWN = 3;
const SLO_MS = 5000;

beforeAll(async () => {
  const digits = await digitsModels();
  model = digits.find((m) => m.name === "digits-mlp-s") as BundledModel;
  stack = await startStack({
    cpuWorkers: 1,
    workerThreads: 1,
    env: { VARIANT_HARDWARE: "cpu", VARIANT_BATCH_SIZES: "1,8", VARIANT_CPU_THREADS: "1" },
    vmAutoscalerEnv: { COST_EVERY_MS: "1000" },
  });
  nc = await connect({ servers: stack.nats.url });
  const r = await registerOverHttp(stack.httpUrl, model);
  expect(r.status, JSON.stringify(r.body)).toBe(201);
  generated = (r.body.variants as unknown[]).length;
  await waitForProfiles(stack.httpUrl, model.name, "cpu", 120_000);
}, 300_000);

afterAll(async () => {
  await nc?.close();
  await stack?.stop();
});

const image = (i: number): number[] => Array.from({ length: 784 }, (_, k) => ((k * 7 + i * 13) % 29) / 29);

async function scrape(service: string): Promise<Sample[]> {
  const target = stack.metricsTargets().find((t) => t.service === service);
  if (!target) throw new Error(`${service} has no metrics endpoint: ${JSON.stringify(stack.metricsTargets())}`);
  const response = await fetch(target.url);
  expect(response.status).toBe(200);
  expect(response.headers.get("content-type")).toMatch(/^text\/plain/);
  return parseMetrics(await response.text());
}

describe("e2e metrics", () => {
  it("metrics - every service serves /metrics on its own port, with the process metrics", async () => {
    const targets = stack.metricsTargets();
    expect(targets.map((t) => t.service).sort()).toEqual(["dispatcher", "executor-cpu", "forecaster", "frontend", "model-autoscaler", "registrar", "vm-autoscaler"]);
    expect(new Set(targets.map((t) => new URL(t.url).port)).size).toBe(targets.length);
    expect(prometheusFileSd(targets)).toContainEqual({ targets: [new URL(targets[0]!.url).host], labels: { job: targets[0]!.service } });
    for (const t of targets) expect(sum(await scrape(t.service), "process_cpu_seconds_total"), t.service).toBeGreaterThan(0);
    const wrong = await fetch(targets.find((t) => t.service === "dispatcher")!.url.replace("/metrics", "/nope"));
    expect(wrong.status).toBe(404);
    expect(((await wrong.json()) as { error: string }).error).toMatch(/GET \/metrics/);
  });

  it("metrics - after a known number of queries, each service's counters show them", async () => {
    for (let i = 0; i < BY_MODEL; i++) {
      const r = await postJson(`${stack.httpUrl}/v2/models/${model.name}/infer`, { inputs: [{ name: "input", datatype: "FP32", shape: [1, 1, 28, 28], data: image(i) }] });
      expect(r.status, JSON.stringify(r.body)).toBe(200);
    }
    for (let i = 0; i < MODEL_LESS; i++) {
      const r = await postJson(`${stack.httpUrl}/v1/apps/digits/infer`, { inputs: [{ name: "input", datatype: "FP32", shape: [1, 1, 28, 28], data: image(i) }], slo: { latency_ms: SLO_MS } });
      expect(r.status, JSON.stringify(r.body)).toBe(200);
    }
    for (let i = 0; i < UNKNOWN; i++) {
      const answer = await nc.request(subjects.inferModel("no-such-model"), JSON.stringify({ inputs: [] }), { timeout: 10_000 });
      expect(answer.headers?.get(headers.error)).toBe("unknown_model");
    }
    const total = BY_MODEL + MODEL_LESS;
    const poll = { timeout: 20_000, interval: 250 };

    // frontend: one 200 per inference request, by route.
    await expect.poll(async () => sum(await scrape("frontend"), "sloserve_http_request_duration_seconds_count", { route: /\/infer$/, status: "200" }), poll).toBe(total);

    // dispatcher: every query routed to the queue of a digits-mlp-s variant; the unknown model refused.
    const d = await scrape("dispatcher");
    expect(sum(d, "sloserve_dispatcher_queries_total", { app: "digits", model: model.name, route: "queue" })).toBe(total);
    expect(sum(d, "sloserve_dispatcher_queries_total", { route: "overflow" })).toBe(0);
    expect(sum(d, "sloserve_dispatcher_refused_total", { kind: "model", code: "unknown_model" })).toBe(UNKNOWN);
    expect(sum(d, "sloserve_load_requests_total", { hardware: "cpu" })).toBeGreaterThanOrEqual(1);
    await expect.poll(async () => sum(await scrape("dispatcher"), "sloserve_slo_target_seconds", { app: "digits", model: model.name }), poll).toBe(SLO_MS / 1000);

    // executor: every query answered, each phase observed once per query, the batches add up to them.
    const e = await scrape("executor-cpu");
    expect(sum(e, "sloserve_executor_queries_total", { model: model.name, outcome: "ok" })).toBe(total);
    expect(sum(e, "sloserve_executor_queries_total", { outcome: /^(error|shed)$/ })).toBe(0);
    for (const phase of ["queue", "batch_wait", "inference", "total"]) expect(sum(e, "sloserve_query_duration_seconds_count", { model: model.name, phase }), phase).toBe(total);
    expect(sum(e, "sloserve_batch_size_sum", { model: model.name })).toBe(total);
    expect(sum(e, "sloserve_slo_queries_total", { model: model.name })).toBe(MODEL_LESS);
    expect(sum(e, "sloserve_worker_threads", { hardware: "cpu" })).toBe(1);
    await expect.poll(async () => sum(await scrape("executor-cpu"), "sloserve_variant_instances", { model: model.name, state: SERVING }), poll).toBeGreaterThanOrEqual(1);

    // The services that read the dispatchers' arrival reports counted every query in them.
    for (const service of ["model-autoscaler", "forecaster", "registrar"]) {
      await expect.poll(async () => sum(await scrape(service), "sloserve_arrivals_observed_total", { app: "digits" }), { ...poll, message: service }).toBe(total);
    }

    // registrar: one registration, the variants it generated.
    const r = await scrape("registrar");
    expect(sum(r, "sloserve_registrations_total", { outcome: "ok" })).toBe(1);
    expect(sum(r, "sloserve_variants_generated_total", { hardware: "cpu" })).toBe(generated);

    // The fleet: one CPU worker, as the VM autoscaler and the model autoscaler see it.
    await expect.poll(async () => sum(await scrape("vm-autoscaler"), "sloserve_workers", { kind: "cpu", state: "running" }), poll).toBe(1);
    const m = await scrape("model-autoscaler");
    expect(sum(m, "sloserve_cluster_workers", { hardware: "cpu" })).toBe(1);
    expect(sum(m, "sloserve_cluster_variant_instances", { state: SERVING })).toBeGreaterThanOrEqual(1);
  });
});
