import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { execFile, execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { request as httpsRequest } from "node:https";
import { join } from "node:path";
import * as grpc from "@grpc/grpc-js";
import * as protoLoader from "@grpc/proto-loader";
import { REPO_ROOT, startStack, tempDir, type Stack } from "@sloserve/stack";
import { oipGrpcProtoPath } from "@sloserve/contracts";
import { smallModel, smallQuery } from "./fault-load.js";

/**
 * Access control on the real stack (`startStack({ auth: true })`, as `npm start -- --auth`), its
 * frontend serving HTTPS and gRPC over TLS with a self-signed certificate made here by openssl. Two
 * apps (alpha, beta), a model each; keys made by the bootstrap admin key: a user and an app-admin of
 * alpha, a user of beta. Every forbidden path is tried over HTTP and gRPC (no key, unknown key, the
 * other app's key, a user registering, non-admins on cluster routes or setting a quota) and refused with 401/403
 * (UNAUTHENTICATED / PERMISSION_DENIED) and a JSON body naming the problem; every allowed path
 * works; a revoked key is refused; no key reaches the logs.
 */

/** Upload limits, low here so that a test body just over them stays small. */
const MAX_MODEL_BYTES = 150_000;
const MAX_BODY_BYTES = 64 * 1024;
let stack: Stack;
let cert: Buffer;
let admin = "";
const dir = tempDir("auth");
const alpha = smallModel(dir, "alpha", "alpha-mlp", 11);
const beta = smallModel(dir, "beta", "beta-mlp", 12);
const keys: Record<"alphaUser" | "alphaAdmin" | "betaUser", { id: string; key: string }> = { alphaUser: { id: "", key: "" }, alphaAdmin: { id: "", key: "" }, betaUser: { id: "", key: "" } };
/** Well-formed but never made: refused as unknown. */
const unknownKey = `sls_0123456789ab_${"A".repeat(43)}`;

interface Answer {
  status: number;
  body: Record<string, unknown>;
}

/** One HTTPS request to the frontend (trusting the test's certificate), with `key` as a Bearer token. */
function call(method: string, path: string, options: { key?: string; headers?: Record<string, string>; json?: unknown; body?: Buffer } = {}): Promise<Answer> {
  const body = options.json !== undefined ? Buffer.from(JSON.stringify(options.json)) : options.body;
  const headers: Record<string, string> = { ...(options.json !== undefined ? { "content-type": "application/json" } : {}), ...(options.key ? { authorization: `Bearer ${options.key}` } : {}), ...options.headers };
  return new Promise((resolve, reject) => {
    const req = httpsRequest(`${stack.httpUrl}${path}`, { method, headers, ca: cert, servername: "localhost" }, (res) => {
      const chunks: Buffer[] = [];
      res.on("data", (c: Buffer) => chunks.push(c));
      res.on("end", () => {
        const text = Buffer.concat(chunks).toString("utf8");
        let parsed: Record<string, unknown>;
        try {
          parsed = JSON.parse(text) as Record<string, unknown>;
        } catch {
          parsed = { text };
        }
        resolve({ status: res.statusCode ?? 0, body: parsed });
      });
    });
    req.on("error", reject);
    req.end(body);
  });
}

/** Registers a model (the ONNX file as the body; a few bytes where the request is to be refused before its body is read). */
const register = (app: string, name: string, key: string | undefined, body: Buffer = readFileSync(alpha.path)): Promise<Answer> =>
  call("POST", `/v1/apps/${app}/models/${name}?task=image-classification&dataset=none`, { ...(key ? { key } : {}), headers: { "content-type": "application/octet-stream" }, body });
const refusedUpload = Buffer.from("refused before it is read");
const infer = (model: string, key?: string): Promise<Answer> => call("POST", `/v2/models/${model}/infer`, { ...(key ? { key } : {}), json: smallQuery(1) });
const pipelineSpec = (name: string, models: string[]) => ({ slo: { p99_ms: 5000 }, stages: models.map((m, i) => ({ name: `s${i}`, model: m })), ...(models.length > 1 ? { edges: [{ from: "s0", to: "s1" }] } : {}), name });

/** The `sloserve` bin in a child process, trusting the test's certificate: its exit code and output. */
function sloserve(args: string[], env: Record<string, string>): Promise<{ code: number; stdout: string; stderr: string }> {
  const bin = join(REPO_ROOT, "libs", "cli", "bin", "sloserve.js");
  return new Promise((resolve) => {
    execFile(process.execPath, [bin, ...args], { env: { ...process.env, SLOSERVE_URL: stack.httpUrl, NODE_EXTRA_CA_CERTS: join(dir, "cert.pem"), ...env }, timeout: 120_000 }, (err, stdout, stderr) =>
      resolve({ code: err ? (typeof err.code === "number" ? err.code : -1) : 0, stdout, stderr }),
    );
  });
}

type GrpcClient = grpc.Client & Record<string, (request: unknown, metadata: grpc.Metadata, options: grpc.CallOptions, callback: (err: grpc.ServiceError | null, response: Record<string, unknown>) => void) => void>;
let client: GrpcClient;

function grpcCall(method: string, request: unknown, key?: string): Promise<{ code: number; details: string; response?: Record<string, unknown> }> {
  const metadata = new grpc.Metadata();
  if (key) metadata.set("authorization", `Bearer ${key}`);
  return new Promise((resolve) =>
    client[method]!(request, metadata, { deadline: Date.now() + 60_000 }, (err, response) => resolve(err ? { code: err.code, details: err.details } : { code: grpc.status.OK, details: "", response })),
  );
}
const grpcInfer = (model: string, key?: string) =>
  grpcCall("ModelInfer", { model_name: model, inputs: [{ name: "input", datatype: "FP32", shape: [1, 1, 28, 28], contents: { fp32_contents: new Array(784).fill(0.5) } }] }, key);

beforeAll(async () => {
  execFileSync("openssl", ["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", join(dir, "key.pem"), "-out", join(dir, "cert.pem"), "-days", "1", "-subj", "/CN=localhost", "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"], { stdio: "ignore" });
  cert = readFileSync(join(dir, "cert.pem"));
  stack = await startStack({
    auth: true,
    cpuWorkers: 1,
    workerThreads: 1,
    logLevel: "debug",
    env: { MAX_MODEL_BYTES: String(MAX_MODEL_BYTES), MAX_BODY_BYTES: String(MAX_BODY_BYTES), TLS_CERT_FILE: join(dir, "cert.pem"), TLS_KEY_FILE: join(dir, "key.pem"), VARIANT_HARDWARE: "cpu", VARIANT_BATCH_SIZES: "1", VARIANT_CPU_THREADS: "1", PROFILE_ON_REGISTER: "false" },
  });
  admin = stack.adminKey!;
  for (const m of [alpha, beta]) {
    const r = await register(m.app, m.name, admin, readFileSync(m.path));
    expect(r.status, JSON.stringify(r.body)).toBe(201);
  }
  for (const [name, role, apps] of [["alphaUser", "user", ["alpha"]], ["alphaAdmin", "app-admin", ["alpha"]], ["betaUser", "user", ["beta"]]] as const) {
    const r = await call("POST", "/v1/keys", { key: admin, json: { role, apps, name } });
    expect(r.status, JSON.stringify(r.body)).toBe(201);
    keys[name] = { id: r.body.id as string, key: r.body.key as string };
  }
  const Service = (grpc.loadPackageDefinition(protoLoader.loadSync(oipGrpcProtoPath, { keepCase: true, longs: Number, defaults: true, oneofs: true })).inference as grpc.GrpcObject).GRPCInferenceService as grpc.ServiceClientConstructor;
  client = new Service(stack.grpcAddress, grpc.credentials.createSsl(cert), { "grpc.ssl_target_name_override": "localhost" }) as GrpcClient;
}, 300_000);

afterAll(async () => {
  client?.close();
  await stack?.stop();
});

describe("e2e auth", () => {
  it("auth - health, server metadata and metrics stay open; everything else needs a key (401, JSON naming the problem)", async () => {
    expect(stack.httpUrl).toMatch(/^https:/);
    for (const path of ["/v2/health/live", "/v2/health/ready", "/v2", "/metrics"]) expect((await call("GET", path)).status, path).toBe(200);
    const refusals: Array<[string, Promise<Answer>]> = [
      ["no key: query", infer(alpha.name)],
      ["no key: list", call("GET", "/v1/apps/alpha/models")],
      ["no key: register", register("alpha", "sneaky", undefined, refusedUpload)],
      ["no key: status", call("GET", "/v1/status")],
      ["unknown key", infer(alpha.name, unknownKey)],
      ["garbage key", infer(alpha.name, "not-a-key")],
      ["x-api-key unknown", call("GET", "/v1/apps/alpha/models", { headers: { "x-api-key": unknownKey } })],
      ["not Bearer", call("GET", "/v1/apps/alpha/models", { headers: { authorization: `Basic ${Buffer.from("a:b").toString("base64")}` } })],
    ];
    for (const [name, pending] of refusals) {
      const r = await pending;
      expect(r.status, name).toBe(401);
      expect(r.body.code, name).toBe("unauthenticated");
      expect(r.body.error, name).toMatch(/API key|Bearer/);
    }
    const none = await infer(alpha.name);
    expect(none.body.error).toContain("Authorization: Bearer <key>");
  });

  it("auth - another app's key, a user registering, non-admins on cluster routes: 403 naming the problem", async () => {
    const { alphaUser, alphaAdmin, betaUser } = keys;
    const forbidden: Array<[string, Promise<Answer>]> = [
      ["beta user queries alpha's model", infer(alpha.name, betaUser.key)],
      ["beta user queries alpha model-less", call("POST", "/v1/apps/alpha/infer", { key: betaUser.key, json: { ...(smallQuery(2) as object), slo: { latency_ms: 500 } } })],
      ["beta user reads alpha's model", call("GET", `/v2/models/${alpha.name}`, { key: betaUser.key })],
      ["beta user lists alpha", call("GET", "/v1/apps/alpha/models", { key: betaUser.key })],
      ["beta user reads alpha's profile", call("GET", `/v1/models/${alpha.name}/profile`, { key: betaUser.key })],
      ["beta user queries a name that is nothing", infer("no-such-model", betaUser.key)],
      ["alpha user registers into alpha", register("alpha", "user-made", alphaUser.key, refusedUpload)],
      ["alpha user deletes alpha's model", call("DELETE", `/v1/models/${alpha.name}`, { key: alphaUser.key })],
      ["alpha user registers a pipeline", call("POST", "/v1/pipelines/user-pipe", { key: alphaUser.key, json: pipelineSpec("user-pipe", [alpha.name]) })],
      ["alpha app-admin registers into beta", register("beta", "intruder", alphaAdmin.key, refusedUpload)],
      ["alpha app-admin deletes beta's model", call("DELETE", `/v1/models/${beta.name}`, { key: alphaAdmin.key })],
      ["alpha app-admin registers a pipeline reaching into beta", call("POST", "/v1/pipelines/span", { key: alphaAdmin.key, json: pipelineSpec("span", [alpha.name, beta.name]) })],
      ...["/v1/status", "/v1/decisions", "/v1/cost", "/v1/dashboard", "/v1/keys"].map((path): [string, Promise<Answer>] => [`app-admin on ${path}`, call("GET", path, { key: alphaAdmin.key })]),
      ["user makes a key", call("POST", "/v1/keys", { key: alphaUser.key, json: { role: "admin" } })],
      ["app-admin revokes a key", call("DELETE", `/v1/keys/${betaUser.id}`, { key: alphaAdmin.key })],
      // An app's quota: set and removed by admins only (a tenant does not lift its own limits), read by the app's keys.
      ["alpha app-admin sets alpha's quota", call("PUT", "/v1/apps/alpha/quota", { key: alphaAdmin.key, json: { rate_qps: 1000, burst: 1000, max_concurrency: 100 } })],
      ["alpha user removes alpha's quota", call("DELETE", "/v1/apps/alpha/quota", { key: alphaUser.key })],
      ["beta user reads alpha's quota", call("GET", "/v1/apps/alpha/quota", { key: betaUser.key })],
    ];
    for (const [name, pending] of forbidden) {
      const r = await pending;
      expect(r.status, `${name}: ${JSON.stringify(r.body)}`).toBe(403);
      expect(r.body.code, name).toBe("forbidden");
      expect(r.body.error, name).toMatch(/^key [0-9a-f]{12} \(\w+\) (is for app\(s\) \w+: .+ is not in them|has role [\w-]+, which may not .+: that needs role)/);
    }
    // Nothing was registered or deleted by them.
    const listed = await call("POST", "/v2/repository/index", { key: admin });
    expect((listed.body as unknown as Array<{ name: string }>).map((m) => m.name).sort()).toEqual([alpha.name, beta.name]);
  });

  it("auth - over gRPC: no key and unknown keys UNAUTHENTICATED, another app's key PERMISSION_DENIED, its own key served", async () => {
    expect((await grpcCall("ServerLive", {})).code).toBe(grpc.status.OK);
    const noKey = await grpcInfer(alpha.name);
    expect(noKey.code).toBe(grpc.status.UNAUTHENTICATED);
    expect(noKey.details).toContain("API key");
    expect((await grpcInfer(alpha.name, unknownKey)).code).toBe(grpc.status.UNAUTHENTICATED);
    const other = await grpcInfer(alpha.name, keys.betaUser.key);
    expect(other.code).toBe(grpc.status.PERMISSION_DENIED);
    expect(other.details).toMatch(/is for app\(s\) beta: model 'alpha-mlp' is not in them/);
    expect((await grpcCall("ModelMetadata", { name: alpha.name }, keys.betaUser.key)).code).toBe(grpc.status.PERMISSION_DENIED);
    expect((await grpcCall("ModelReady", { name: alpha.name }, keys.betaUser.key)).code).toBe(grpc.status.PERMISSION_DENIED);
    const own = await grpcInfer(alpha.name, keys.alphaUser.key);
    expect(own.code, own.details).toBe(grpc.status.OK);
    expect((own.response?.outputs as Array<{ shape: number[] }>)[0]?.shape).toEqual([1, 10]);
    expect((await grpcCall("ModelMetadata", { name: beta.name }, keys.betaUser.key)).code).toBe(grpc.status.OK);
  });

  it("auth - allowed paths work: queries, filtered listings, app-admin registering and deleting in its app, admin everywhere", async () => {
    const { alphaUser, alphaAdmin } = keys;
    const answered = await infer(alpha.name, alphaUser.key);
    expect(answered.status, JSON.stringify(answered.body)).toBe(200);
    expect((answered.body.outputs as Array<{ shape: number[] }>)[0]?.shape).toEqual([1, 10]);
    expect((await infer(beta.name, admin)).status).toBe(200);
    // Model-less: access control lets it through to selection (whatever selection then says).
    const modelLess = await call("POST", "/v1/apps/alpha/infer", { key: alphaUser.key, json: { ...(smallQuery(3) as object), slo: { latency_ms: 2000 } } });
    expect([401, 403]).not.toContain(modelLess.status);
    expect((await call("GET", "/v1/apps/alpha/models", { key: alphaUser.key })).status).toBe(200);
    const index = (await call("POST", "/v2/repository/index", { key: alphaUser.key })).body as unknown as Array<{ name: string }>;
    expect(index.map((m) => m.name)).toEqual([alpha.name]);
    // app-admin: a model and a pipeline in its app, queried by its user, listed to alpha only, then deleted.
    const made = await register("alpha", "alpha-extra", alphaAdmin.key);
    expect(made.status, JSON.stringify(made.body)).toBe(201);
    const pipe = await call("POST", "/v1/pipelines/alpha-pipe", { key: alphaAdmin.key, json: pipelineSpec("alpha-pipe", [alpha.name]) });
    expect(pipe.status, JSON.stringify(pipe.body)).toBe(201);
    expect((await call("POST", "/v1/pipelines/beta-pipe", { key: admin, json: pipelineSpec("beta-pipe", [beta.name]) })).status).toBe(201);
    const pipelines = (await call("GET", "/v1/pipelines", { key: alphaUser.key })).body.pipelines as Array<{ name: string }>;
    expect(pipelines.map((p) => p.name)).toEqual(["alpha-pipe"]);
    expect((await call("GET", "/v1/pipelines/beta-pipe", { key: alphaUser.key })).status).toBe(403);
    expect((await call("POST", "/v1/pipelines/beta-pipe/infer", { key: alphaUser.key, json: smallQuery(4) })).status).toBe(403);
    const viaPipe = await call("POST", "/v1/pipelines/alpha-pipe/infer", { key: alphaUser.key, json: smallQuery(5) });
    expect(viaPipe.status, JSON.stringify(viaPipe.body)).toBe(200);
    expect((await call("DELETE", "/v1/pipelines/alpha-pipe", { key: alphaUser.key })).status).toBe(403);
    expect((await call("DELETE", "/v1/pipelines/alpha-pipe", { key: alphaAdmin.key })).status).toBe(200);
    expect((await call("DELETE", "/v1/models/alpha-extra", { key: alphaAdmin.key })).status).toBe(200);
    // admin: an app's quota, read back by the app's user.
    const quota = { rate_qps: 1000, burst: 1000, max_concurrency: 100 };
    expect((await call("PUT", "/v1/apps/alpha/quota", { key: admin, json: quota })).status).toBe(200);
    expect((await call("GET", "/v1/apps/alpha/quota", { key: alphaUser.key })).body).toMatchObject({ app: "alpha", ...quota });
    expect((await call("DELETE", "/v1/apps/alpha/quota", { key: admin })).status).toBe(200);
    // admin: cluster routes.
    for (const path of ["/v1/status", "/v1/dashboard", "/v1/keys", "/v1/decisions"]) expect((await call("GET", path, { key: admin })).status, path).toBe(200);
    const listedKeys = (await call("GET", "/v1/keys", { key: admin })).body.keys as Array<Record<string, unknown>>;
    expect(listedKeys.map((k) => k.id).sort()).toEqual(Object.values(keys).map((k) => k.id).sort());
    expect(JSON.stringify(listedKeys)).not.toMatch(/sls_|sha256/);
  });

  it("auth - the CLI sends --api-key / SLOSERVE_API_KEY; without one it says how to give it", async () => {
    // Three bins at once (each compiles the CLI with tsx: seconds on a loaded machine).
    const [without, withKey, other] = await Promise.all([
      sloserve(["models", "alpha"], {}),
      sloserve(["--json", "models", "alpha"], { SLOSERVE_API_KEY: keys.alphaUser.key }),
      sloserve(["--api-key", keys.betaUser.key, "models", "alpha"], {}),
    ]);
    expect(without.code).toBe(1);
    expect(without.stderr).toContain("requires an API key: give --api-key or set SLOSERVE_API_KEY");
    expect(withKey.code, withKey.stderr).toBe(0);
    expect(withKey.stdout).toContain(alpha.name);
    expect(other.code).toBe(1);
    expect(other.stderr).toContain("HTTP 403");
  });

  it("auth - a revoked key is refused at once; bad key requests are clear", async () => {
    expect((await call("POST", "/v1/keys", { key: admin, json: { role: "user" } })).body).toMatchObject({ code: "bad_request" });
    expect((await call("POST", "/v1/keys", { key: admin, json: { role: "admin", apps: ["alpha"] } })).body.error).toContain("an admin key is for every app");
    expect((await call("DELETE", "/v1/keys/0123456789ab", { key: admin })).status).toBe(404);
    expect((await call("DELETE", "/v1/keys/..%2Fetc", { key: admin })).status).toBe(400);
    expect((await infer(alpha.name, keys.alphaUser.key)).status).toBe(200);
    const revoked = await call("DELETE", `/v1/keys/${keys.alphaUser.id}`, { key: admin });
    expect(revoked.status, JSON.stringify(revoked.body)).toBe(200);
    const after = await infer(alpha.name, keys.alphaUser.key);
    expect(after.status).toBe(401);
    expect(after.body.error).toContain("unknown API key");
    expect((await grpcInfer(alpha.name, keys.alphaUser.key)).code).toBe(grpc.status.UNAUTHENTICATED);
  });

  it("auth - bodies over the upload limits: 413 naming the limit and its variable", async () => {
    const big = Buffer.alloc(MAX_MODEL_BYTES + 10_000, 1);
    const raw = await register("alpha", "too-big", admin, big);
    expect(raw.status, JSON.stringify(raw.body)).toBe(413);
    expect(raw.body).toEqual({ code: "payload_too_large", error: `the model upload is larger than this frontend's limit of ${MAX_MODEL_BYTES} bytes (MAX_MODEL_BYTES)` });
    const boundary = "sloserve-test-boundary";
    const form = Buffer.concat([Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="model"; filename="m.onnx"\r\nContent-Type: application/octet-stream\r\n\r\n`), big, Buffer.from(`\r\n--${boundary}--\r\n`)]);
    const multipart = await call("POST", "/v1/apps/alpha/models/too-big", { key: admin, headers: { "content-type": `multipart/form-data; boundary=${boundary}` }, body: form });
    expect(multipart.status, JSON.stringify(multipart.body)).toBe(413);
    expect(multipart.body.error).toBe(`an uploaded file is larger than this frontend's limit of ${MAX_MODEL_BYTES} bytes (MAX_MODEL_BYTES)`);
    const query = await call("POST", `/v2/models/${alpha.name}/infer`, { key: admin, json: { inputs: [{ name: "input", datatype: "FP32", shape: [1, 1, 28, 28], data: new Array(784).fill(0.123456789) }], pad: "x".repeat(MAX_BODY_BYTES) } });
    expect(query.status).toBe(413);
    expect(query.body.error).toBe(`the request body is larger than this frontend's limit of ${MAX_BODY_BYTES} bytes (MAX_BODY_BYTES)`);
    expect((await call("POST", "/v2/repository/index", { key: admin })).body).not.toContainEqual(expect.objectContaining({ name: "too-big" }));
  });

  it("auth - plain HTTP to the TLS port gets no answer", async () => {
    const plain = await fetch(stack.httpUrl.replace(/^https:/, "http:") + "/v2/health/live", { signal: AbortSignal.timeout(10_000) }).then(
      (r) => r.status,
      () => "refused",
    );
    expect(plain).not.toBe(200);
  });

  it("auth - no key reaches the logs", async () => {
    // Every service logs at debug level here; the frontend logged each refusal above. (A pause for the
    // services' last lines to reach the file: a key in them would be written with no event to wait for.)
    await new Promise((r) => setTimeout(r, 500));
    const logs = readFileSync(stack.logPath, "utf8");
    expect(logs).toContain("request refused");
    for (const secret of [admin, unknownKey, ...Object.values(keys).map((k) => k.key)]) expect(logs.includes(secret), "a key in the logs").toBe(false);
    expect(logs).toContain("API key created");
  });
});
