import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { connect, headers as natsHeaders, type NatsConnection } from "@nats-io/transport-node";
import { startStack, ocrModels, registerOverHttp, type Stack } from "@sloserve/stack";
import { contentTypes, headers, subjects } from "@sloserve/contracts";
import { prng, randomFloats, referenceRunner, maxRelativeDiff, postJson } from "./support.js";

/**
 * Bad input gets a 4xx (or a NATS error reply) with a JSON body naming the problem, and costs the
 * good queries sent alongside nothing: every one of them is answered correctly, and no service dies.
 */

const model = ocrModels().find((m) => m.name === "ocr-cls")!;
const shape = [1, 3, 48, 192];
const elements = 3 * 48 * 192;
let stack: Stack;
let nc: NatsConnection;
let reference: Awaited<ReturnType<typeof referenceRunner>>;

beforeAll(async () => {
  stack = await startStack({ cpuWorkers: 1, workerThreads: 1, env: { MAX_BODY_BYTES: String(2 * 1024 * 1024) } });
  nc = await connect({ servers: stack.nats.url });
  reference = await referenceRunner(model.path);
  expect((await registerOverHttp(stack.httpUrl, model)).status).toBe(201);
});

afterAll(async () => {
  await nc?.close();
  await stack?.stop();
});

type Bad = { name: string; send: () => Promise<{ status: number; body: Record<string, unknown> }>; status: number; code: string; message?: RegExp };

const url = (path: string): string => `${stack.httpUrl}${path}`;
const infer = (body: unknown) => postJson(url(`/v2/models/${model.name}/infer`), body);
const good = { name: "x", datatype: "FP32", shape };

async function upload(path: string, bytes: Uint8Array) {
  const r = await fetch(url(path), { method: "POST", headers: { "content-type": "application/octet-stream" }, body: bytes });
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
});
