import { INLINE_MIN_BATCHES } from "@sloserve/policy";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import * as grpc from "@grpc/grpc-js";
import * as protoLoader from "@grpc/proto-loader";
import { connect, headers as natsHeaders, type NatsConnection } from "@nats-io/transport-node";
import { startStack, ocrModels, registerOverHttp, tempDir, type Stack } from "@sloserve/stack";
import { contentTypes, headers, oipGrpcProtoPath, subjects } from "@sloserve/contracts";
import { prng, randomFloats, referenceRunner, maxRelativeDiff, postJson } from "./support.js";
import { CHAOS, deadServices, query, settledRss } from "./faults.js";
import { smallModel, smallQuery } from "./fault-load.js";
import { sampleCases, type Case } from "./fuzz-cases.js";

/**
 * Bad input gets a 4xx (or a NATS error reply) with a JSON body naming the problem, and costs the
 * good queries sent alongside nothing: every one of them is answered correctly, and no service dies.
 *
 * Then a fuzz run on the same stack: seeded, generated malformed requests (test/fuzz-cases.ts) over
 * HTTP (JSON and the binary tensor extension), gRPC and the NATS subjects (`infer.*`, registry
 * requests). Each gets a 4xx with a JSON body naming the problem (`error`, `code`), a gRPC status that
 * blames the caller with a message, or a NATS error reply with a code. No service dies, no service's
 * memory (RSS) grows by 10% or more from after a warm-up to the end, and good queries are still
 * answered afterwards. `npm test`: 1 000 cases; `npm run fuzz` or `npm run chaos` (CHAOS=1): 10 000
 * (FUZZ_CASES, FUZZ_SEED override).
 */

const model = ocrModels().find((m) => m.name === "ocr-cls")!;
const shape = [1, 3, 48, 192];
const elements = 3 * 48 * 192;
let stack: Stack;
let nc: NatsConnection;
let reference: Awaited<ReturnType<typeof referenceRunner>>;
const MAX_BODY_BYTES = 2 * 1024 * 1024;
const fuzzModel = smallModel(tempDir("fuzz"), "fuzz", "fuzz-mlp");
let client: grpc.Client & Record<string, (request: unknown, options: grpc.CallOptions, callback: (err: grpc.ServiceError | null, response: unknown) => void) => void>;

beforeAll(async () => {
  stack = await startStack({ cpuWorkers: 1, workerThreads: 1, env: { MAX_BODY_BYTES: String(MAX_BODY_BYTES) } });
  nc = await connect({ servers: stack.nats.url });
  reference = await referenceRunner(model.path);
  expect((await registerOverHttp(stack.httpUrl, model)).status).toBe(201);
  expect((await registerOverHttp(stack.httpUrl, fuzzModel)).status).toBe(201);
  const definition = grpc.loadPackageDefinition(protoLoader.loadSync(oipGrpcProtoPath, { keepCase: true, longs: Number, defaults: true, oneofs: true }));
  const Service = (definition["inference"] as grpc.GrpcObject)["GRPCInferenceService"] as grpc.ServiceClientConstructor;
  client = new Service(stack.grpcAddress, grpc.credentials.createInsecure(), { "grpc.max_send_message_length": 64 * 1024 * 1024 }) as typeof client;
}, 300_000);

afterAll(async () => {
  client?.close();
  await nc?.close();
  await stack?.stop();
});

type Bad = { name: string; send: () => Promise<{ status: number; body: Record<string, unknown> }>; status: number; code: string; message?: RegExp };

const url = (path: string): string => `${stack.httpUrl}${path}`;
const infer = (body: unknown) => postJson(url(`/v2/models/${model.name}/infer`), body);
const good = { name: "x", datatype: "FP32", shape };

async function upload(path: string, bytes: Uint8Array) {
  const r = await fetch(url(path), { method: "POST", headers: { "content-type": "application/octet-stream" }, body: new Uint8Array(bytes) });
  return { status: r.status, body: (await r.json()) as Record<string, unknown> };
}

const badInputs: Bad[] = [
  { name: "unknown model", send: () => postJson(url("/v2/models/no-such-model/infer"), { inputs: [{ ...good, data: [1] }] }), status: 404, code: "unknown_model", message: /no model named 'no-such-model'/ },
  { name: "wrong tensor shape", send: () => infer({ inputs: [{ ...good, shape: [1, 3, 48], data: new Array(3 * 48).fill(0) }] }), status: 400, code: "invalid_shape", message: /shape \[1, 3, 48\]; the model expects \[-1, 3, -1, -1\]/ },
  { name: "wrong datatype", send: () => infer({ inputs: [{ ...good, datatype: "INT32", data: new Array(elements).fill(0) }] }), status: 400, code: "invalid_datatype", message: /datatype INT32; the model expects FP32/ },
  { name: "unknown datatype", send: () => infer({ inputs: [{ ...good, datatype: "FLOAT", data: [0] }] }), status: 400, code: "invalid_datatype" },
  { name: "data length not matching the shape", send: () => infer({ inputs: [{ ...good, data: new Array(elements - 1).fill(0) }] }), status: 400, code: "invalid_data_length", message: /has 27647 elements but its shape \[1, 3, 48, 192\] needs 27648/ },
  { name: "non-numeric data", send: () => infer({ inputs: [{ ...good, data: ["a", ...new Array(elements - 1).fill(0)] }] }), status: 400, code: "invalid_data" },
  { name: "wrong input name", send: () => infer({ inputs: [{ ...good, name: "image", data: new Array(elements).fill(0) }] }), status: 400, code: "unknown_input" },
  { name: "no inputs", send: () => infer({ inputs: [] }), status: 400, code: "bad_request", message: /inputs/ },
  { name: "malformed JSON", send: () => infer('{"inputs": [ {"name": "x", '), status: 400, code: "malformed_json" },
  { name: "body over the size limit", send: () => infer({ inputs: [{ ...good, data: new Array(600_000).fill(0.123456) }] }), status: 413, code: "payload_too_large" },
  { name: "upload that is not an ONNX model", send: () => upload("/v1/apps/ocr/models/not-onnx", new TextEncoder().encode("this is not a model")), status: 400, code: "invalid_model", message: /onnxruntime cannot load the model/ },
  { name: "empty upload", send: () => upload("/v1/apps/ocr/models/empty", new Uint8Array(0)), status: 400, code: "invalid_model", message: /empty/ },
  { name: "model name with path characters", send: () => upload("/v1/apps/ocr/models/..%2F..%2Fetc", new Uint8Array([1, 2, 3])), status: 400, code: "invalid_name" },
  { name: "model name with a dot", send: () => postJson(url("/v2/models/a.b/infer"), { inputs: [] }), status: 400, code: "invalid_name" },
  { name: "app name with path characters", send: () => upload("/v1/apps/..%2Fx/models/m", new Uint8Array([1])), status: 400, code: "invalid_name" },
];

describe("e2e bad input", () => {
  it("bad input - each gets a clear 4xx while the good queries alongside are all answered", async () => {
    const rand = prng(3);
    const goodData = Array.from({ length: 60 }, () => randomFloats(rand, elements));
    const goodRequests = goodData.map((data) => infer({ inputs: [{ ...good, data }] }));
    const badResults = await Promise.all(badInputs.map((b) => b.send()));
    const goodResults = await Promise.all(goodRequests);

    for (const [i, b] of badInputs.entries()) {
      const r = badResults[i]!;
      expect({ case: b.name, status: r.status, code: r.body.code }).toEqual({ case: b.name, status: b.status, code: b.code });
      expect(typeof r.body.error).toBe("string");
      if (b.message) expect(r.body.error).toMatch(b.message);
    }
    for (const [i, r] of goodResults.entries()) {
      expect(r.status).toBe(200);
      const [ref] = await reference([{ name: "x", datatype: "FP32", shape, data: Float32Array.from(goodData[i]!) }]);
      const out = (r.body.outputs as Array<{ data: number[] }>)[0]!.data;
      expect(maxRelativeDiff(out, ref!.data as Float32Array)).toBeLessThan(1e-5);
    }
  });

  it("bad input - NATS callers get error replies with a code", async () => {
    const malformed = await nc.request(subjects.inferModel(model.name), "{not json", { timeout: 10_000 });
    expect(malformed.headers?.get(headers.error)).toBe("malformed_json");
    expect(malformed.json<{ code: string }>().code).toBe("malformed_json");
    const unknown = await nc.request(subjects.inferModel("nope"), JSON.stringify({ inputs: [{ ...good, data: [1] }] }), { timeout: 10_000 });
    expect(unknown.headers?.get(headers.error)).toBe("unknown_model");
    const shapeErr = await nc.request(subjects.inferModel(model.name), JSON.stringify({ inputs: [{ ...good, shape: [2, 3, 48, 192], data: [1] }] }), { timeout: 10_000 });
    expect(shapeErr.headers?.get(headers.error)).toBe("invalid_data_length");
    const h = natsHeaders();
    h.set(headers.contentType, contentTypes.wire);
    const binaryGarbage = await nc.request(subjects.inferModel(model.name), new Uint8Array([1, 2, 3, 4, 5]), { timeout: 10_000, headers: h });
    expect(binaryGarbage.headers?.get(headers.error)).toBe("bad_request");
    expect(binaryGarbage.json<{ error: string }>().error).toMatch(/malformed binary tensor message/);
  });

  it("bad input - a duplicate registration is refused and the first model keeps serving", async () => {
    const dup = await registerOverHttp(stack.httpUrl, model);
    expect(dup.status).toBe(409);
    expect((dup.body as { code: string }).code).toBe("model_exists");
    const r = await infer({ inputs: [{ ...good, data: new Array(elements).fill(0.5) }] });
    expect(r.status).toBe(200);
    // Every service process is still alive.
    for (const s of stack.services) expect({ service: s.name, exitCode: s.process.exitCode }).toEqual({ service: s.name, exitCode: null });
    expect((await fetch(url("/v2/health/ready"))).status).toBe(200);
  });

  it(`fuzz - ${CASES} malformed requests over HTTP, gRPC and NATS each get a clear refusal; nothing dies or grows`, async () => {
    const cases = sampleCases({ model: fuzzModel.name, app: fuzzModel.app, maxBodyBytes: MAX_BODY_BYTES }, CASES, SEED);
    const problems = new Map<string, { count: number; example: string }>();
    const byKind = new Map<string, number>();
    let next = 0;
    const run = async (upTo: number): Promise<void> => {
      await Promise.all(
        Array.from({ length: CONCURRENCY }, async () => {
          while (next < upTo) {
            const c = cases[next++]!;
            byKind.set(c.kind, (byKind.get(c.kind) ?? 0) + 1);
            const problem = await check(c);
            if (!problem) continue;
            const p = problems.get(c.kind) ?? { count: 0, example: "" };
            p.count++;
            if (!p.example) p.example = `${problem} ← ${JSON.stringify(c).slice(0, 300)}`;
            problems.set(c.kind, p);
          }
        }),
      );
    };
    // 30% first as a warm-up (code paths compiled, pools, caches and V8's heaps grown to the load);
    // memory is measured from there to the end, each time once it has settled (settledRss: an executor's
    // RSS swings by ±20% for seconds after a session is loaded or moved, with or without load).
    await run(Math.floor(CASES * 0.3));
    // And the fuzz model loaded and placed: past INLINE_MIN_BATCHES batches an executor may move a short
    // session to its main thread (libs/policy engine-thread.ts), a one-time step in its memory.
    for (let i = 0; i < INLINE_MIN_BATCHES + 5; i++) {
      expect((await query(`${stack.httpUrl}/v2/models/${fuzzModel.name}/infer`, smallQuery(i) as Record<string, unknown>, 30_000)).kind).toBe("answered");
    }
    const warm = await settledRss(stack);
    await run(CASES);
    const end = await settledRss(stack);
    const growth = Object.fromEntries(Object.entries(warm).map(([name, bytes]) => [name, Math.round((100 * ((end[name] ?? 0) - bytes)) / bytes) / 100]));
    console.log(JSON.stringify({ cases: CASES, seed: SEED, kinds: Object.fromEntries(byKind), rssMbWarm: mb(warm), rssMbEnd: mb(end), growth }));

    expect(Object.fromEntries(problems)).toEqual({});
    expect(deadServices(stack)).toEqual([]);
    for (const [name, g] of Object.entries(growth)) expect({ service: name, growth: g < 0.1 }).toEqual({ service: name, growth: true });
    // Good queries are still answered, over HTTP and NATS alike.
    expect((await query(`${stack.httpUrl}/v2/models/${fuzzModel.name}/infer`, smallQuery(1) as Record<string, unknown>, 30_000)).kind).toBe("answered");
    expect((await fetch(`${stack.httpUrl}/v2/health/ready`)).status).toBe(200);
  }, CHAOS ? 1_800_000 : 300_000);
});

const CASES = Number(process.env["FUZZ_CASES"] ?? (CHAOS ? 10_000 : 1_000));
const SEED = Number(process.env["FUZZ_SEED"] ?? 1207);
const CONCURRENCY = 8;

/** The gRPC statuses that say the request was wrong (not the server). */
const CALLER_STATUSES = new Set([grpc.status.INVALID_ARGUMENT, grpc.status.NOT_FOUND, grpc.status.FAILED_PRECONDITION, grpc.status.OUT_OF_RANGE, grpc.status.RESOURCE_EXHAUSTED]);

/** What went wrong with one case's answer; undefined: a clear refusal, as it should be. */
async function check(c: Case): Promise<string | undefined> {
  if (c.via === "http") {
    let response: Response;
    try {
      response = await fetch(`${stack.httpUrl}${c.path}`, { method: c.method, headers: c.headers, ...(c.body !== undefined ? { body: c.body } : {}), signal: AbortSignal.timeout(60_000) });
    } catch (err) {
      // A body over the limit is answered 413 at once and the connection closed: a client still writing
      // it may see the close (ECONNRESET, EPIPE) before the answer. It is refused either way.
      const code = (err as { cause?: { code?: string } }).cause?.code;
      if (c.kind === "oversized body" && (code === "ECONNRESET" || code === "EPIPE" || code === "UND_ERR_SOCKET")) return undefined;
      return `no HTTP answer: ${(err as Error).message} (${code})`;
    }
    const text = await response.text();
    let body: { error?: unknown; code?: unknown };
    try {
      body = JSON.parse(text) as typeof body;
    } catch {
      return `HTTP ${response.status} with a body that is not JSON: ${text.slice(0, 120)}`;
    }
    if (response.status < 400 || response.status > 499) return `HTTP ${response.status} ${text.slice(0, 200)}`;
    if (typeof body.error !== "string" || body.error.length === 0 || typeof body.code !== "string") return `HTTP ${response.status} without {error, code}: ${text.slice(0, 200)}`;
    return undefined;
  }
  if (c.via === "nats") {
    const h = natsHeaders();
    for (const [k, v] of Object.entries(c.headers)) h.set(k, v);
    try {
      const reply = await nc.request(c.subject, c.body, { timeout: 30_000, headers: h });
      const code = reply.headers?.get(headers.error);
      if (!code) return `NATS reply without an error code: ${new TextDecoder().decode(reply.data).slice(0, 200)}`;
      if (code === "internal") return `NATS internal error: ${new TextDecoder().decode(reply.data).slice(0, 200)}`;
      const body = reply.json<{ error?: unknown }>();
      if (typeof body.error !== "string" || body.error.length === 0) return `NATS error reply without a message (${code})`;
      return undefined;
    } catch (err) {
      return `no NATS reply: ${(err as Error).message}`;
    }
  }
  const err = await new Promise<grpc.ServiceError | null>((resolve) => {
    client[c.method]!(c.request, { deadline: Date.now() + 60_000 }, (e) => resolve(e));
  });
  if (!err) return `gRPC ${c.method} succeeded`;
  if (!CALLER_STATUSES.has(err.code)) return `gRPC status ${grpc.status[err.code]}: ${err.details}`;
  if (!err.details) return `gRPC status ${grpc.status[err.code]} without a message`;
  return undefined;
}

const mb = (r: Record<string, number>): Record<string, number> => Object.fromEntries(Object.entries(r).map(([k, v]) => [k, Math.round(v / 1048576)]));
