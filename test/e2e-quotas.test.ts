import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { execFile } from "node:child_process";
import { join } from "node:path";
import * as grpc from "@grpc/grpc-js";
import * as protoLoader from "@grpc/proto-loader";
import { connect, headers as natsHeaders, type NatsConnection } from "@nats-io/transport-node";
import { REPO_ROOT, registerOverHttp, startStack, tempDir, type Stack } from "@sloserve/stack";
import { contentTypes, headers, oipGrpcProtoPath, subjects, type ArrivalsReport } from "@sloserve/contracts";
import { waitFor } from "@sloserve/testing";
import { sleep, smallModel, smallQuery, metricsCounter } from "./fault-load.js";

/**
 * Apps' quotas on the real stack (nats-server, redis-server, every service, one CPU worker; issue 30,
 * docs/RELIABILITY.md "Quotas"): the quota routes and their refusals; two apps on the same worker,
 * `alpha` within its quota at a steady rate while `beta` floods far over its own: every one of beta's
 * excess queries is refused at once (429, `Retry-After`), every query is answered or refused clearly,
 * alpha loses nothing, beta is admitted no more than its quota allows, refusals are counted at the
 * frontend only (no double charge) and never as arrivals; NATS callers refused `quota_exceeded` by the
 * dispatcher; gRPC RESOURCE_EXHAUSTED; a concurrency slot given back on an answer, an error and a
 * timeout. Assertions are on counts and codes; the only times are "long before the deadline".
 */

let stack: Stack;
let nc: NatsConnection;
const dir = tempDir("quotas");
const alpha = smallModel(dir, "alpha", "alpha-mlp", 11);
const beta = smallModel(dir, "beta", "beta-mlp", 12);
/** The deadline every query of the flood carries: a refusal must come long before it. */
const TIMEOUT_MS = 20_000;

interface Reply {
  status: number;
  body: Record<string, unknown>;
  retryAfter: string | null;
  ms: number;
}

async function call(method: string, path: string, json?: unknown): Promise<Reply> {
  const started = Date.now();
  const response = await fetch(`${stack.httpUrl}${path}`, { method, ...(json !== undefined ? { headers: { "content-type": "application/json" }, body: JSON.stringify(json) } : {}) });
  const body = (await response.json()) as Record<string, unknown>;
  return { status: response.status, body, retryAfter: response.headers.get("retry-after"), ms: Date.now() - started };
}

const infer = (model: string, i: number, timeoutMs = TIMEOUT_MS): Promise<Reply> => call("POST", `/v2/models/${model}/infer`, { ...(smallQuery(i) as object), parameters: { timeout_ms: timeoutMs } });
const putQuota = (app: string, quota: unknown): Promise<Reply> => call("PUT", `/v1/apps/${app}/quota`, quota);

/** The `sloserve` bin in a child process against this stack. */
function sloserve(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [join(REPO_ROOT, "libs", "cli", "bin", "sloserve.js"), ...args], { env: { ...process.env, SLOSERVE_URL: stack.httpUrl }, timeout: 120_000 }, (err, stdout, stderr) =>
      resolve({ code: err ? (typeof err.code === "number" ? err.code : -1) : 0, stdout, stderr }),
    );
  });
}

/** A counter's value in a service's /metrics, summed over the series whose labels include `labels`. */
const counter = (service: string, name: string, labels: Record<string, string>): Promise<number> => metricsCounter(stack, service, name, labels);

beforeAll(async () => {
  stack = await startStack({ cpuWorkers: 1, workerThreads: 1, env: { VARIANT_HARDWARE: "cpu", VARIANT_BATCH_SIZES: "1,8", VARIANT_CPU_THREADS: "1", PROFILE_ON_REGISTER: "false" } });
  nc = await connect({ servers: stack.nats.url });
  for (const m of [alpha, beta]) expect((await registerOverHttp(stack.httpUrl, m)).status).toBe(201);
  // Both models loaded on the worker before the quotas are tried.
  for (const m of [alpha, beta]) await waitFor(`${m.name} to answer`, async () => (await infer(m.name, 0)).status === 200, { timeoutMs: 60_000, intervalMs: 250 });
}, 300_000);

afterAll(async () => {
  await nc?.close();
  await stack?.stop();
});

describe("e2e quotas", () => {
  it("quotas - the routes: 400 naming the bad field, 404 for an app without a quota or without models; set, read back, removed; the CLI", async () => {
    const bad: Array<[unknown, RegExp]> = [
      [{ rate_qps: 0, burst: 5, max_concurrency: 2 }, /rate_qps: must be above 0/],
      [{ rate_qps: 5, burst: 1.5, max_concurrency: 2 }, /burst: must be a whole number/],
      [{ rate_qps: 5, burst: 5 }, /max_concurrency: missing/],
      [{ rate_qps: "fast", burst: 5, max_concurrency: 2 }, /rate_qps: must be a number/],
      [{ rate_qps: 5, burst: 5, max_concurrency: 2, rate: 3 }, /"rate"/],
      [{ rate_qps: 5, burst: 2_000_000, max_concurrency: 2 }, /burst: must be at most 1000000/],
    ];
    for (const [body, message] of bad) {
      const r = await putQuota("beta", body);
      expect({ status: r.status, code: r.body.code }, JSON.stringify(body)).toEqual({ status: 400, code: "bad_request" });
      expect(r.body.error).toMatch(message);
    }
    const none = await call("GET", "/v1/apps/beta/quota");
    expect(none.status).toBe(404);
    expect(none.body).toMatchObject({ code: "unknown_quota", error: expect.stringMatching(/^app 'beta' has no quota/) as unknown });
    expect((await call("GET", "/v1/apps/nosuchapp/quota")).body).toMatchObject({ code: "unknown_app", error: "no app named 'nosuchapp' (it has no models)" });
    expect((await putQuota("nosuchapp", { rate_qps: 1, burst: 1, max_concurrency: 1 })).status).toBe(404);
    expect((await call("DELETE", "/v1/apps/beta/quota")).body.code).toBe("unknown_quota");
    expect((await call("GET", "/v1/apps/a.b/quota")).body.code).toBe("invalid_name");

    const set = await putQuota("beta", { rate_qps: 2.5, burst: 3, max_concurrency: 4 });
    expect(set.status).toBe(200);
    expect(set.body).toMatchObject({ app: "beta", rate_qps: 2.5, burst: 3, max_concurrency: 4 });
    expect((await call("GET", "/v1/apps/beta/quota")).body).toEqual(set.body);
    const removed = await call("DELETE", "/v1/apps/beta/quota");
    expect(removed.body).toEqual({ removed: set.body });
    expect((await call("GET", "/v1/apps/beta/quota")).status).toBe(404);

    const cli = await sloserve(["quota", "set", "beta", "--rate", "7", "--burst", "2", "--concurrency", "3", "--json"]);
    expect(cli.code, cli.stderr).toBe(0);
    expect(JSON.parse(cli.stdout)).toMatchObject({ app: "beta", rate_qps: 7, burst: 2, max_concurrency: 3 });
    const got = await sloserve(["quota", "get", "beta"]);
    expect(got.stdout).toMatch(/beta\s+7\s+2\s+3/);
    const missing = await sloserve(["quota", "get", "nosuchapp"]);
    expect({ code: missing.code, stderr: missing.stderr }).toMatchObject({ code: 1, stderr: expect.stringMatching(/HTTP 404: no app named 'nosuchapp'.*\[unknown_app\]/) as unknown });
  }, 120_000);

  it("quotas - beta floods at 10-20× its quota beside alpha at a steady rate: beta's excess refused at once, alpha loses nothing, nothing hangs, no double charge, refusals are no arrivals", async () => {
    const R = 5;
    const B = 5;
    expect((await putQuota("alpha", { rate_qps: 50, burst: 50, max_concurrency: 50 })).status).toBe(200);
    expect((await putQuota("beta", { rate_qps: R, burst: B, max_concurrency: 20 })).status).toBe(200);
    // Arrivals the dispatcher reports for beta (the forecaster's and autoscalers' input) from now on.
    let arrivals = 0;
    const sub = nc.subscribe(subjects.arrivals("beta"), { callback: (_e, m) => void (arrivals += m.json<ArrivalsReport>().arrivals) });
    const replies: Record<"alpha" | "beta", Array<Promise<Reply>>> = { alpha: [], beta: [] };
    const started = Date.now();
    const DURATION_MS = 4_000;
    let i = 0;
    // alpha: 10 q/s; beta: up to 100 q/s (every 10 ms, as the loaded test machine allows), 10-20 times its rate.
    const flood = setInterval(() => {
      i++;
      replies.beta.push(infer(beta.name, i));
      if (i % 10 === 0) replies.alpha.push(infer(alpha.name, i));
    }, 10);
    await sleep(DURATION_MS);
    clearInterval(flood);
    const elapsedS = (Date.now() - started) / 1000;
    const [a, b] = [await Promise.all(replies.alpha), await Promise.all(replies.beta)];

    // alpha: every query answered.
    expect(a.length).toBeGreaterThan(10);
    expect(a.filter((r) => r.status !== 200).map((r) => r.body)).toEqual([]);
    // beta: every query answered or refused with 429 quota_exceeded (sent = answered + refused), each refusal long before its deadline.
    const answered = b.filter((r) => r.status === 200);
    const refused = b.filter((r) => r.status === 429);
    console.log(
      JSON.stringify({ seconds: elapsedS, alpha: { sent: a.length, answered: a.filter((r) => r.status === 200).length }, beta: { sent: b.length, answered: answered.length, refused: refused.length, slowestRefusalMs: Math.max(0, ...refused.map((r) => r.ms)) } }),
    );
    expect(b.filter((r) => r.status !== 200 && r.status !== 429).map((r) => r.body)).toEqual([]);
    expect(answered.length + refused.length).toBe(b.length);
    // A flood: at least twice what the quota admits (the test machine sends what it can, up to 100 q/s).
    expect(b.length).toBeGreaterThan(2 * R * elapsedS);
    expect(refused.length).toBeGreaterThan(0);
    for (const r of refused) {
      expect(r.body).toMatchObject({ code: "quota_exceeded", error: expect.stringMatching(/^app 'beta' /) as unknown, details: { app: "beta", limit: expect.stringMatching(/^(rate_qps|max_concurrency)$/) as unknown } });
      expect(Number(r.retryAfter)).toBeGreaterThanOrEqual(1);
      expect(r.ms).toBeLessThan(TIMEOUT_MS / 2);
    }
    // Admitted no more than the quota allows (libs/policy access/quota.ts): R·T + B + N processes, and R for a rebalance.
    expect(answered.length).toBeLessThanOrEqual(Math.ceil(R * elapsedS + B + 2 + R));
    expect(answered.length).toBeGreaterThan(0);
    // Refused at the frontend only, once: the frontend counted every 429, the dispatcher none of them.
    expect(await counter("frontend", "sloserve_quota_refused_total", { app: "beta" })).toBe(refused.length);
    expect(await counter("dispatcher", "sloserve_quota_refused_total", { app: "beta" })).toBe(0);
    expect(await counter("frontend", "sloserve_quota_refused_total", { app: "alpha" })).toBe(0);
    // The dispatcher's arrival reports count the admitted queries only.
    await waitFor("beta's arrivals to be reported", () => arrivals >= answered.length, { timeoutMs: 10_000 });
    await sleep(1_500);
    sub.unsubscribe();
    expect(arrivals).toBe(answered.length);
  }, 120_000);

  it("quotas - NATS callers are charged at the dispatcher: refused with an error reply carrying quota_exceeded", async () => {
    expect((await putQuota("beta", { rate_qps: 1, burst: 1, max_concurrency: 20 })).status).toBe(200);
    const ask = async (i: number) => {
      const h = natsHeaders();
      h.set(headers.contentType, contentTypes.json);
      const m = await nc.request(subjects.inferModel(beta.name), JSON.stringify(smallQuery(i)), { timeout: TIMEOUT_MS, headers: h });
      return { code: m.headers?.get(headers.error) ?? "", body: m.json<Record<string, unknown>>() };
    };
    // The change reaches the dispatcher on the bus: wait for its first refusal, then a burst of ten.
    await waitFor("the dispatcher to refuse beta over its quota", async () => (await ask(0)).code === "quota_exceeded", { timeoutMs: 10_000, intervalMs: 50 });
    const before = await counter("dispatcher", "sloserve_quota_refused_total", { app: "beta" });
    const replies = await Promise.all(Array.from({ length: 10 }, (_, i) => ask(i + 1)));
    const refused = replies.filter((r) => r.code === "quota_exceeded");
    expect(replies.filter((r) => r.code !== "" && r.code !== "quota_exceeded")).toEqual([]);
    // At most one token (and the second one earned meanwhile) among the ten.
    expect(refused.length).toBeGreaterThanOrEqual(8);
    expect(refused[0]?.body).toMatchObject({ code: "quota_exceeded", details: { app: "beta", limit: "rate_qps", retry_after_s: expect.any(Number) as unknown } });
    expect(await counter("dispatcher", "sloserve_quota_refused_total", { app: "beta", reason: "rate_qps" })).toBe(before + refused.length);
  }, 60_000);

  it("quotas - gRPC ModelInfer over the quota is RESOURCE_EXHAUSTED; the model-less routes refuse too", async () => {
    expect((await putQuota("beta", { rate_qps: 1, burst: 1, max_concurrency: 20 })).status).toBe(200);
    await sleep(1_000); // the frontend's bucket full again: one token
    const Service = (grpc.loadPackageDefinition(protoLoader.loadSync(oipGrpcProtoPath, { keepCase: true, longs: Number, defaults: true, oneofs: true })).inference as grpc.GrpcObject).GRPCInferenceService as grpc.ServiceClientConstructor;
    const client = new Service(stack.grpcAddress, grpc.credentials.createInsecure()) as grpc.Client & Record<string, (r: unknown, o: grpc.CallOptions, cb: (err: grpc.ServiceError | null) => void) => void>;
    try {
      const request = { model_name: beta.name, inputs: [{ name: "input", datatype: "FP32", shape: [1, 1, 28, 28], contents: { fp32_contents: new Array(784).fill(0.5) } }] };
      const calls = await Promise.all(
        Array.from({ length: 6 }, () => new Promise<grpc.ServiceError | null>((resolve) => client.ModelInfer!(request, { deadline: Date.now() + TIMEOUT_MS }, (err) => resolve(err)))),
      );
      const exhausted = calls.filter((e) => e?.code === grpc.status.RESOURCE_EXHAUSTED);
      expect(calls.filter((e) => e !== null && e.code !== grpc.status.RESOURCE_EXHAUSTED).map((e) => e?.details)).toEqual([]);
      expect(exhausted.length).toBeGreaterThanOrEqual(4);
      expect(exhausted[0]?.metadata.get("x-error-code")).toEqual(["quota_exceeded"]);
      expect(exhausted[0]?.details).toMatch(/^app 'beta' is over its quota's rate_qps of 1 queries\/s/);
    } finally {
      client.close();
    }
    // The app's name (model-less, over /v1 and /v2) takes from the same bucket, empty now.
    const appQuery = { ...(smallQuery(1) as object), slo: { latency_ms: 1000 } };
    for (const path of ["/v1/apps/beta/infer", "/v2/models/beta/infer"]) {
      const r = await call("POST", path, appQuery);
      expect({ path, status: r.status, code: r.body.code }).toEqual({ path, status: 429, code: "quota_exceeded" });
    }
  }, 60_000);

  it("quotas - concurrency: queries in flight over max_concurrency refused; the slot comes back on an answer, an error and a timeout", async () => {
    expect((await putQuota("beta", { rate_qps: 1000, burst: 1000, max_concurrency: 1 })).status).toBe(200);
    const parallel = await Promise.all(Array.from({ length: 20 }, (_, i) => infer(beta.name, i)));
    expect(parallel.filter((r) => r.status !== 200 && r.status !== 429)).toEqual([]);
    const busy = parallel.filter((r) => r.status === 429);
    expect(busy.length).toBeGreaterThan(0);
    expect(busy[0]?.body).toMatchObject({ details: { limit: "max_concurrency" } });
    // One at a time: each finds the slot given back by the one before (an answer).
    for (let i = 0; i < 5; i++) expect((await infer(beta.name, i)).status).toBe(200);
    // An error (a wrong shape) and a timeout give it back too.
    const wrong = await call("POST", `/v2/models/${beta.name}/infer`, { inputs: [{ name: "input", datatype: "FP32", shape: [1, 3], data: [1, 2, 3] }] });
    expect(wrong.status).toBe(400);
    expect((await infer(beta.name, 1)).status).toBe(200);
    // A 1 ms deadline is missed (the path takes about 2 ms), but a fast moment can meet it (seen once in
    // CI): sent again until one is missed; a met one gives the slot back as an answer.
    let late = await infer(beta.name, 2, 1);
    for (let i = 0; i < 10 && late.status === 200; i++) late = await infer(beta.name, 2, 1);
    expect(late.body.code).toBe("deadline_exceeded");
    expect((await infer(beta.name, 3)).status).toBe(200);
  }, 60_000);
});
