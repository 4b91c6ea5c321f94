import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { connect, headers as natsHeaders, type NatsConnection } from "@nats-io/transport-node";
import { registerOverHttp, startStack, tempDir, type BundledModel, type Stack } from "@sloserve/stack";
import { contentTypes, encodeTensors, headers, subjects, type WorkerReport } from "@sloserve/contracts";
import { createRng } from "@sloserve/policy";
import { waitFor } from "@sloserve/testing";
import { Network, exportNetwork } from "@sloserve/zoo";
import { sleep, smallModel, smallQuery } from "./fault-load.js";
import { CHAOS } from "./faults.js";

/**
 * Fair queueing between apps on the real stack (nats-server, redis-server, every service, one CPU
 * worker of one thread; issue 30, libs/policy access/fair-share.ts): app `alpha` (a small MLP) within
 * its quota at a steady 10 q/s beside app `beta` (a convolutional model, some ms of worker time a
 * query) flooding the same worker:
 *
 * 1. beta at 10× its quota over HTTP: its excess refused 429 `quota_exceeded` at once;
 * 2. beta without a quota, over NATS at 150 q/s, past what the worker serves of it (the same flood with
 *    FAIR_SHARE=false has beta's queue grow: its slowest answer 5 s after 12 s): its excess refused
 *    `fair_share_exceeded` at once (an error reply with `x-error-code`; 429 over HTTP).
 *
 * Each case: alpha loses nothing and answers ≥ 99% of its queries within its SLO; sent = answered +
 * refused for beta. The floods last 10-12 s; under CHAOS=1 (`npm run chaos`) 60 s each.
 */

/** How long beta floods in each case, ms. */
const FLOOD_MS = CHAOS ? 60_000 : undefined;

let stack: Stack;
let nc: NatsConnection;
const dir = tempDir("fair-share");
const alpha = smallModel(dir, "alpha", "alpha-mlp", 11);
/** beta's model: conv 64, 128, 256, 256 @3×3 each with a ReLU − maxpool 2 − Gemm 50176×10 (~760 M multiply-adds a query). */
const beta: BundledModel = (() => {
  const network = new Network(
    [
      { type: "conv", filters: 64, kernel: 3, pad: 1 }, { type: "relu" },
      { type: "conv", filters: 128, kernel: 3, pad: 1 }, { type: "relu" },
      { type: "conv", filters: 256, kernel: 3, pad: 1 }, { type: "relu" },
      { type: "conv", filters: 256, kernel: 3, pad: 1 }, { type: "relu" },
      { type: "maxpool", size: 2 }, { type: "flatten" }, { type: "dense", units: 10 },
    ],
    [1, 28, 28],
    createRng(12),
  );
  const path = join(dir, "beta-cnn.onnx");
  writeFileSync(path, exportNetwork(network, "beta-cnn"));
  return { app: "beta", name: "beta-cnn", task: "image-classification", dataset: "none", path };
})();
/** alpha's latency SLO, measured at the client (HTTP round trip). */
const SLO_MS = Number(process.env.FAIR_SLO_MS ?? 1000);
/** The deadline every query carries: a refusal must come long before it, and alpha's queries are not shed. */
const TIMEOUT_MS = 20_000;

interface Reply {
  status: number;
  code: string;
  ms: number;
  /** When it was sent (epoch ms). */
  at: number;
}

async function inferHttp(model: string, i: number): Promise<Reply> {
  const started = Date.now();
  const response = await fetch(`${stack.httpUrl}/v2/models/${model}/infer`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ ...(smallQuery(i) as object), parameters: { timeout_ms: TIMEOUT_MS } }) });
  const body = (await response.json()) as { code?: string };
  return { status: response.status, code: body.code ?? "", ms: Date.now() - started, at: started };
}

/** The flood's query in the binary tensor encoding, made once: the test machine's CPU goes to the services, not to encoding. */
const wireQuery = encodeTensors([{ name: "input", datatype: "FP32", shape: [1, 1, 28, 28], data: new Float32Array(784).fill(0.5) }]);
async function inferNats(model: string): Promise<Reply> {
  const started = Date.now();
  const h = natsHeaders();
  h.set(headers.contentType, contentTypes.wire);
  h.set(headers.deadline, String(Date.now() + TIMEOUT_MS));
  try {
    const m = await nc.request(subjects.inferModel(model), wireQuery, { timeout: TIMEOUT_MS + 5_000, headers: h });
    const code = m.headers?.get(headers.error) ?? "";
    return { status: code === "" ? 200 : 0, code, ms: Date.now() - started, at: started };
  } catch (err) {
    return { status: -1, code: `no answer: ${(err as Error).message}`, ms: Date.now() - started, at: started };
  }
}

const putQuota = async (app: string, quota: unknown): Promise<number> =>
  (await fetch(`${stack.httpUrl}/v1/apps/${app}/quota`, { method: "PUT", headers: { "content-type": "application/json" }, body: JSON.stringify(quota) })).status;

/** Sends `qps` queries a second for `ms` (in 10 ms steps, as the loaded test machine allows); every reply. */
async function steady(qps: number, ms: number, send: (i: number) => Promise<Reply>): Promise<Reply[]> {
  const out: Array<Promise<Reply>> = [];
  const started = Date.now();
  let i = 0;
  while (Date.now() - started < ms) {
    const due = Math.floor(((Date.now() - started) * qps) / 1000);
    while (i < due) out.push(send(i++));
    await sleep(10);
  }
  return Promise.all(out);
}

/** alpha's figures: every query answered, and the share within its SLO. */
function alphaFigures(a: Reply[]) {
  const sorted = a.map((r) => r.ms).sort((x, y) => x - y);
  return {
    sent: a.length,
    answered: a.filter((r) => r.status === 200).length,
    withinSlo: a.filter((r) => r.status === 200 && r.ms <= SLO_MS).length / Math.max(1, a.length),
    p50Ms: sorted[Math.floor(sorted.length * 0.5)] ?? 0,
    p99Ms: sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * 0.99))] ?? 0,
    /** The late ones: ms after the first query it was sent, and how long it took. */
    late: a.filter((r) => r.ms > SLO_MS).map((r) => [r.at - (a[0]?.at ?? 0), r.ms]),
  };
}

beforeAll(async () => {
  stack = await startStack({ cpuWorkers: 1, workerThreads: 1, env: { VARIANT_HARDWARE: "cpu", VARIANT_BATCH_SIZES: "1,8", VARIANT_CPU_THREADS: "1", PROFILE_ON_REGISTER: "false", FAIR_SHARE: process.env.FAIR_SHARE ?? "true" } });
  nc = await connect({ servers: stack.nats.url });
  for (const m of [alpha, beta]) expect((await registerOverHttp(stack.httpUrl, m)).status).toBe(201);
  for (const m of [alpha, beta]) await waitFor(`${m.name} to answer`, async () => (await inferHttp(m.name, 0)).status === 200, { timeoutMs: 60_000, intervalMs: 250 });
  expect(await putQuota("alpha", { rate_qps: 50, burst: 50, max_concurrency: 50 })).toBe(200);
}, 120_000);

afterAll(async () => {
  await nc?.close();
  await stack?.stop();
});

describe("e2e fair share", () => {
  it("fair share - beta floods at 10× its quota beside alpha at a steady rate: alpha keeps its SLO and loses nothing, beta's excess refused 429 at once", async () => {
    expect(await putQuota("beta", { rate_qps: 10, burst: 10, max_concurrency: 50 })).toBe(200);
    await sleep(500); // the change reaches every frontend and dispatcher on the bus
    const [a, b] = await Promise.all([steady(10, FLOOD_MS ?? 10_000, (i) => inferHttp(alpha.name, i)), steady(100, FLOOD_MS ?? 10_000, (i) => inferHttp(beta.name, i))]);
    const answered = b.filter((r) => r.status === 200);
    const refused = b.filter((r) => r.status === 429);
    const figures = { alpha: alphaFigures(a), beta: { sent: b.length, answered: answered.length, refused: refused.length, codes: [...new Set(refused.map((r) => r.code))], slowestRefusalMs: Math.max(0, ...refused.map((r) => r.ms)) } };
    console.log(JSON.stringify({ case: "quota", sloMs: SLO_MS, ...figures }));
    expect(figures.alpha.answered).toBe(a.length);
    expect(figures.alpha.withinSlo).toBeGreaterThanOrEqual(0.99);
    expect(answered.length + refused.length).toBe(b.length);
    expect(refused.length).toBeGreaterThan(b.length / 2);
    expect(figures.beta.codes).toEqual(["quota_exceeded"]);
    expect(figures.beta.slowestRefusalMs).toBeLessThan(2_000);
  }, CHAOS ? 150_000 : 60_000);

  it("fair share - beta without a quota floods past the worker's capacity: alpha keeps its SLO and loses nothing, beta's excess refused fair_share_exceeded at once", async () => {
    // No quota for beta (the case above set one).
    expect([200, 404]).toContain((await fetch(`${stack.httpUrl}/v1/apps/beta/quota`, { method: "DELETE" })).status);
    await sleep(500);
    const BETA_QPS = Number(process.env.FAIR_BETA_QPS ?? 150);
    // What the worker serves of beta per second of busy time (its one-second reports), for the log.
    const capacity: number[] = [];
    const sub = nc.subscribe(subjects.workerMetricsAll, {
      callback: (_e, m) => {
        const v = m.json<WorkerReport>().variants.find((x) => x.variant.startsWith(`${beta.name}-`) && x.served > 0 && x.utilisation > 0);
        if (v) capacity.push(v.served / v.utilisation);
      },
    });
    const http: Array<Promise<Response>> = [];
    const [a, b] = await Promise.all([
      steady(10, FLOOD_MS ?? 12_000, (i) => inferHttp(alpha.name, i)),
      steady(BETA_QPS, FLOOD_MS ?? 12_000, () => inferNats(beta.name)),
      // beta over HTTP too while it floods: refused 429 with Retry-After, or answered.
      (async () => {
        await sleep(4_000);
        for (let i = 0; i < 20; i++) http.push(fetch(`${stack.httpUrl}/v2/models/${beta.name}/infer`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(smallQuery(i)) }));
      })(),
    ]);
    sub.unsubscribe();
    const overHttp = await Promise.all(http.map(async (p) => { const r = await p; return { status: r.status, retryAfter: r.headers.get("retry-after"), code: ((await r.json()) as { code?: string }).code }; }));
    const capacityQps = capacity.sort((x, y) => x - y)[Math.floor(capacity.length / 2)] ?? 0;
    const answered = b.filter((r) => r.status === 200);
    const refused = b.filter((r) => r.code === "fair_share_exceeded");
    const figures = { alpha: alphaFigures(a), beta: { sent: b.length, answered: answered.length, answeredQps: answered.length / ((FLOOD_MS ?? 12_000) / 1000), refused: refused.length, other: [...new Set(b.filter((r) => r.status !== 200 && r.code !== "fair_share_exceeded").map((r) => r.code))], slowestRefusalMs: Math.max(0, ...refused.map((r) => r.ms)), slowestAnswerMs: Math.max(0, ...answered.map((r) => r.ms)) } };
    console.log(JSON.stringify({ case: "no quota, past capacity", sloMs: SLO_MS, betaQps: BETA_QPS, betaServedPerBusyS: Math.round(capacityQps), ...figures, betaOverHttp: overHttp.map((r) => r.code ?? r.status) }));
    expect(figures.alpha.answered).toBe(a.length);
    expect(figures.alpha.withinSlo).toBeGreaterThanOrEqual(0.99);
    expect(figures.beta.other).toEqual([]);
    expect(answered.length + refused.length).toBe(b.length);
    expect(refused.length).toBeGreaterThan(0);
    expect(figures.beta.slowestRefusalMs).toBeLessThan(2_000);
    expect(overHttp.filter((r) => r.status !== 200 && !(r.status === 429 && r.code === "fair_share_exceeded" && Number(r.retryAfter) >= 1))).toEqual([]);
    expect(overHttp.some((r) => r.status === 429)).toBe(true);
  }, CHAOS ? 150_000 : 60_000);
});
