import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { execFile } from "node:child_process";
import { join } from "node:path";
import * as grpc from "@grpc/grpc-js";
import * as protoLoader from "@grpc/proto-loader";
import { REPO_ROOT, bearer, registerOverHttp, startStack, tempDir, type Stack } from "@sloserve/stack";
import { MetadataStore, QuotaStore } from "@sloserve/store";
import { oipGrpcProtoPath } from "@sloserve/contracts";
import { waitFor } from "@sloserve/testing";
import { sleep, smallModel, smallQuery, metricsCounter } from "./fault-load.js";

/**
 * API keys' quotas on the real stack with access control on (`startStack({ auth: true })`, two frontend
 * processes, so that a quota set through one reaches the other on the bus; docs/RELIABILITY.md
 * "Quotas"): the routes (admin only; 400 naming the field, 404 `unknown_key`, read back, removed, gone
 * with its key) and the CLI's `--key`; two user keys of the same app, one flooding over its own quota:
 * its excess refused at once (429 `quota_exceeded`, `Retry-After`, the message naming the key; gRPC
 * RESOURCE_EXHAUSTED) and counted as `key_rate_qps`, while every query of the other key is answered;
 * a query passes its app's quota too.
 */

let stack: Stack;
let admin = "";
let store: MetadataStore;
const dir = tempDir("key-quotas");
const alpha = smallModel(dir, "alpha", "alpha-mlp", 11);
const keys = { k1: { id: "", key: "" }, k2: { id: "", key: "" } };
/** Well-formed, never made. */
const NO_KEY = "0123456789ab";
const TIMEOUT_MS = 20_000;

interface Reply {
  status: number;
  body: Record<string, unknown>;
  retryAfter: string | null;
  ms: number;
}

async function call(method: string, path: string, key: string, json?: unknown): Promise<Reply> {
  const started = Date.now();
  const response = await fetch(`${stack.httpUrl}${path}`, { method, headers: { ...bearer(key), ...(json !== undefined ? { "content-type": "application/json" } : {}) }, ...(json !== undefined ? { body: JSON.stringify(json) } : {}) });
  const body = (await response.json()) as Record<string, unknown>;
  return { status: response.status, body, retryAfter: response.headers.get("retry-after"), ms: Date.now() - started };
}

const infer = (key: string, i: number): Promise<Reply> => call("POST", `/v2/models/${alpha.name}/infer`, key, { ...(smallQuery(i) as object), parameters: { timeout_ms: TIMEOUT_MS } });
const putQuota = (id: string, quota: unknown, key = admin): Promise<Reply> => call("PUT", `/v1/keys/${id}/quota`, key, quota);
const burst = (key: string, n: number): Promise<Reply[]> => Promise.all(Array.from({ length: n }, (_, i) => infer(key, i)));

function sloserve(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [join(REPO_ROOT, "libs", "cli", "bin", "sloserve.js"), ...args], { env: { ...process.env, SLOSERVE_URL: stack.httpUrl, SLOSERVE_API_KEY: admin }, timeout: 60_000 }, (err, stdout, stderr) =>
      resolve({ code: err ? (typeof err.code === "number" ? err.code : -1) : 0, stdout, stderr }),
    );
  });
}

/** A counter's value in the frontend's /metrics (summed over its processes), over the series whose labels include `labels`. */
const counter = (name: string, labels: Record<string, string>): Promise<number> => metricsCounter(stack, "frontend", name, labels);

beforeAll(async () => {
  stack = await startStack({ auth: true, frontendProcesses: 2, cpuWorkers: 1, workerThreads: 1, env: { VARIANT_HARDWARE: "cpu", VARIANT_BATCH_SIZES: "1,8", VARIANT_CPU_THREADS: "1", PROFILE_ON_REGISTER: "false" } });
  admin = stack.adminKey!;
  store = MetadataStore.connect(stack.redis.url);
  expect((await registerOverHttp(stack.httpUrl, alpha, admin)).status).toBe(201);
  for (const name of ["k1", "k2"] as const) {
    const r = await call("POST", "/v1/keys", admin, { role: "user", apps: ["alpha"], name });
    expect(r.status, JSON.stringify(r.body)).toBe(201);
    keys[name] = { id: r.body.id as string, key: r.body.key as string };
  }
  await waitFor("alpha to answer", async () => (await infer(keys.k1.key, 0)).status === 200, { timeoutMs: 60_000, intervalMs: 250 });
}, 300_000);

afterAll(async () => {
  await store?.close();
  await stack?.stop();
});

describe("e2e key quotas", () => {
  it("key quotas - the routes: admin only, 400 naming the bad field, 404 unknown_key, read back; the CLI's --key", async () => {
    const { id } = keys.k1;
    const bad: Array<[unknown, RegExp]> = [
      [{ rate_qps: 0, burst: 5, max_concurrency: 2 }, /rate_qps: must be above 0/],
      [{ rate_qps: 5, burst: 1.5, max_concurrency: 2 }, /burst: must be a whole number/],
      [{ rate_qps: 5, burst: 5 }, /max_concurrency: missing: give the key's queries in flight/],
      [{ rate_qps: 5, burst: 5, max_concurrency: 2, rate: 3 }, /"rate"/],
    ];
    for (const [body, message] of bad) {
      const r = await putQuota(id, body);
      expect({ status: r.status, code: r.body.code }, JSON.stringify(body)).toEqual({ status: 400, code: "bad_request" });
      expect(r.body.error).toMatch(message);
    }
    const quota = { rate_qps: 1, burst: 1, max_concurrency: 1 };
    for (const method of ["GET", "PUT", "DELETE"]) {
      const r = await call(method, `/v1/keys/${NO_KEY}/quota`, admin, method === "PUT" ? quota : undefined);
      expect({ method, status: r.status, code: r.body.code, error: r.body.error }).toEqual({ method, status: 404, code: "unknown_key", error: `no API key with id ${NO_KEY} (GET /v1/keys lists them)` });
    }
    expect((await call("GET", "/v1/keys/bootstrap/quota", admin)).body.code).toBe("bad_request");
    // A user key may neither set nor read a key's quota, not even its own.
    expect((await putQuota(id, quota, keys.k1.key)).status).toBe(403);
    expect((await call("GET", `/v1/keys/${id}/quota`, keys.k1.key)).status).toBe(403);
    const none = await call("GET", `/v1/keys/${id}/quota`, admin);
    expect(none.body).toMatchObject({ code: "unknown_quota", error: expect.stringMatching(new RegExp(`^API key '${id}' has no quota`)) as unknown });

    const set = await putQuota(id, { rate_qps: 2.5, burst: 3, max_concurrency: 4 });
    expect(set.status).toBe(200);
    expect(set.body).toMatchObject({ key: id, rate_qps: 2.5, burst: 3, max_concurrency: 4 });
    expect((await call("GET", `/v1/keys/${id}/quota`, admin)).body).toEqual(set.body);
    expect((await call("DELETE", `/v1/keys/${id}/quota`, admin)).body).toEqual({ removed: set.body });
    expect((await call("GET", `/v1/keys/${id}/quota`, admin)).body.code).toBe("unknown_quota");

    const cli = await sloserve(["quota", "set", "--key", id, "--rate", "7", "--burst", "2", "--concurrency", "3", "--json"]);
    expect(cli.code, cli.stderr).toBe(0);
    expect(JSON.parse(cli.stdout)).toMatchObject({ key: id, rate_qps: 7, burst: 2, max_concurrency: 3 });
    const got = await sloserve(["quota", "get", "--key", id]);
    expect(got.stdout).toMatch(new RegExp(`${id}\\s+7\\s+2\\s+3`));
    const removed = await sloserve(["quota", "delete", "--key", id]);
    expect(removed.stdout).toMatch(new RegExp(`removed the quota of API key ${id}`));
    const missing = await sloserve(["quota", "get", "--key", NO_KEY]);
    expect({ code: missing.code, stderr: missing.stderr }).toMatchObject({ code: 1, stderr: expect.stringMatching(/HTTP 404: no API key with id 0123456789ab.*\[unknown_key\]/) as unknown });
  }, 60_000);

  it("key quotas - k1 floods over its own quota: its excess refused at once and counted; every query of k2, same app, answered; gRPC too; deleted, the limit goes", async () => {
    const { id } = keys.k1;
    expect((await putQuota(id, { rate_qps: 1, burst: 4, max_concurrency: 50 })).status).toBe(200);
    await sleep(500); // the change reaches the other frontend process on the bus
    const before = await counter("sloserve_quota_refused_total", { app: "alpha", reason: "key_rate_qps" });
    const [k1, k2] = await Promise.all([burst(keys.k1.key, 20), burst(keys.k2.key, 20)]);
    expect(k2.filter((r) => r.status !== 200).map((r) => r.body)).toEqual([]);
    const answered = k1.filter((r) => r.status === 200);
    const refused = k1.filter((r) => r.status === 429);
    console.log(JSON.stringify({ k1: { answered: answered.length, refused: refused.length, slowestRefusalMs: Math.max(0, ...refused.map((r) => r.ms)) }, k2: { answered: k2.length } }));
    expect(k1.filter((r) => r.status !== 200 && r.status !== 429).map((r) => r.body)).toEqual([]);
    // B + N processes, and a token or two earned meanwhile.
    expect(answered.length).toBeGreaterThan(0);
    expect(answered.length).toBeLessThanOrEqual(4 + 2 + 2);
    for (const r of refused) {
      expect(r.body).toMatchObject({ code: "quota_exceeded", error: expect.stringMatching(new RegExp(`^API key '${id}' is over its quota's rate_qps of 1 queries/s`)) as unknown, details: { key: id, app: "alpha", limit: "rate_qps" } });
      expect(Number(r.retryAfter)).toBeGreaterThanOrEqual(1);
      expect(r.ms).toBeLessThan(TIMEOUT_MS / 2);
    }
    expect(await counter("sloserve_quota_refused_total", { app: "alpha", reason: "key_rate_qps" })).toBe(before + refused.length);

    // gRPC: the key's bucket is empty.
    const Service = (grpc.loadPackageDefinition(protoLoader.loadSync(oipGrpcProtoPath, { keepCase: true, longs: Number, defaults: true, oneofs: true })).inference as grpc.GrpcObject).GRPCInferenceService as grpc.ServiceClientConstructor;
    const client = new Service(stack.grpcAddress, grpc.credentials.createInsecure()) as grpc.Client & Record<string, (r: unknown, m: grpc.Metadata, o: grpc.CallOptions, cb: (err: grpc.ServiceError | null) => void) => void>;
    try {
      const request = { model_name: alpha.name, inputs: [{ name: "input", datatype: "FP32", shape: [1, 1, 28, 28], contents: { fp32_contents: new Array(784).fill(0.5) } }] };
      const grpcCall = (key: string) =>
        new Promise<grpc.ServiceError | null>((resolve) => {
          const metadata = new grpc.Metadata();
          metadata.set("authorization", `Bearer ${key}`);
          client.ModelInfer!(request, metadata, { deadline: Date.now() + TIMEOUT_MS }, (err) => resolve(err));
        });
      const calls = await Promise.all(Array.from({ length: 6 }, () => grpcCall(keys.k1.key)));
      const exhausted = calls.filter((e) => e?.code === grpc.status.RESOURCE_EXHAUSTED);
      expect(calls.filter((e) => e !== null && e.code !== grpc.status.RESOURCE_EXHAUSTED).map((e) => e?.details)).toEqual([]);
      expect(exhausted.length).toBeGreaterThanOrEqual(3);
      expect(exhausted[0]?.metadata.get("x-error-code")).toEqual(["quota_exceeded"]);
      expect(exhausted[0]?.details).toMatch(new RegExp(`^API key '${id}' is over its quota's rate_qps`));
      expect(await grpcCall(keys.k2.key)).toBeNull();
    } finally {
      client.close();
    }

    // Deleted: k1's queries are limited no more.
    expect((await call("DELETE", `/v1/keys/${id}/quota`, admin)).status).toBe(200);
    await sleep(500);
    const after = await burst(keys.k1.key, 12);
    expect(after.filter((r) => r.status !== 200).map((r) => r.body)).toEqual([]);
  }, 90_000);

  it("key quotas - a query passes its app's quota too; a revoked key's quota is removed with it", async () => {
    // The app's quota refuses k2, which has none of its own: the refusal names the app.
    expect((await call("PUT", "/v1/apps/alpha/quota", admin, { rate_qps: 1, burst: 2, max_concurrency: 50 })).status).toBe(200);
    await sleep(500);
    const replies = await burst(keys.k2.key, 12);
    const refused = replies.filter((r) => r.status === 429);
    expect(replies.filter((r) => r.status !== 200 && r.status !== 429)).toEqual([]);
    expect(refused.length).toBeGreaterThanOrEqual(6);
    expect(refused[0]?.body).toMatchObject({ code: "quota_exceeded", error: expect.stringMatching(/^app 'alpha' is over its quota's rate_qps/) as unknown, details: { app: "alpha", limit: "rate_qps" } });
    expect((refused[0]?.body.details as Record<string, unknown>).key).toBeUndefined();
    expect((await call("DELETE", "/v1/apps/alpha/quota", admin)).status).toBe(200);

    const { id } = keys.k2;
    expect((await putQuota(id, { rate_qps: 3, burst: 3, max_concurrency: 3 })).status).toBe(200);
    const quotas = new QuotaStore(store.redis);
    expect(await quotas.getKey(id)).toMatchObject({ key: id, rate_qps: 3 });
    expect((await call("DELETE", `/v1/keys/${id}`, admin)).status).toBe(200);
    expect(await quotas.getKey(id)).toBeUndefined();
    expect((await quotas.listKeys()).map((q) => q.key)).not.toContain(id);
    expect((await call("GET", `/v1/keys/${id}/quota`, admin)).body.code).toBe("unknown_key");
  }, 60_000);
});
