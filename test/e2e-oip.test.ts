import { afterAll, beforeAll, describe, expect, it } from "vitest";
import * as grpc from "@grpc/grpc-js";
import * as protoLoader from "@grpc/proto-loader";
import { startStack, ocrModels, registerOverHttp, waitForProfiles, type Stack } from "@sloserve/stack";
import { oipGrpcProtoPath, type Tensor } from "@sloserve/contracts";
import { prng, randomFloats, referenceRunner, maxRelativeDiff } from "./support.js";

/**
 * The Open Inference Protocol as standard clients speak it, on the real stack: the HTTP binary tensor
 * extension sent as raw bytes, the gRPC service through a client generated at run time from the
 * .proto, version routes, model-less queries (an app's name as model_name, its requirements as
 * request parameters) over both, Triton's model configuration, statistics and repository index over
 * both, and bad input over both. Answers are checked against onnxruntime run directly in this process.
 */

const cls = ocrModels().find((m) => m.name === "ocr-cls")!;
/** The same network registered again as the only model of app `textdir`: model-less queries name the app. */
const appModel = { ...cls, app: "textdir", name: "textdir-cls" };
const rowShape = [3, 48, 192];
const rowElements = 3 * 48 * 192;
let stack: Stack;
let reference: Awaited<ReturnType<typeof referenceRunner>>;
let outputName: string;
let client: grpc.Client & Record<string, (request: unknown, options: grpc.CallOptions, callback: (err: grpc.ServiceError | null, response: Record<string, unknown>) => void) => void>;
let profiled: Promise<void>;

beforeAll(async () => {
  stack = await startStack({ cpuWorkers: 1, workerThreads: 2, env: { VARIANT_HARDWARE: "cpu", VARIANT_BATCH_SIZES: "1", VARIANT_CPU_THREADS: "1" } });
  reference = await referenceRunner(cls.path);
  for (const m of [cls, appModel]) expect((await registerOverHttp(stack.httpUrl, m)).status).toBe(201);
  profiled = waitForProfiles(stack.httpUrl, appModel.name, "cpu", 180_000); // model-less selection needs a profiled variant
  profiled.catch(() => undefined);
  outputName = ((await (await fetch(`${stack.httpUrl}/v2/models/${cls.name}`)).json()) as { outputs: Array<{ name: string }> }).outputs[0]!.name;
  const definition = grpc.loadPackageDefinition(protoLoader.loadSync(oipGrpcProtoPath, { keepCase: true, longs: Number, defaults: true, oneofs: true }));
  const Service = (definition.inference as grpc.GrpcObject).GRPCInferenceService as grpc.ServiceClientConstructor;
  client = new Service(stack.grpcAddress, grpc.credentials.createInsecure()) as typeof client;
}, 300_000);

afterAll(async () => {
  client?.close();
  await stack?.stop();
});

function call(method: string, request: unknown): Promise<Record<string, unknown>> {
  return new Promise((resolve, reject) => client[method]!(request, { deadline: Date.now() + 60_000 }, (err, response) => (err ? reject(err) : resolve(response))));
}

async function grpcError(method: string, request: unknown): Promise<{ code: number; details: string }> {
  const err = (await call(method, request).then(() => undefined, (e: grpc.ServiceError) => e)) as grpc.ServiceError | undefined;
  expect(err, "the call should have failed").toBeDefined();
  return { code: err!.code, details: err!.details };
}

function rows(seed: number, n: number): Float32Array {
  return Float32Array.from(randomFloats(prng(seed), n * rowElements));
}

async function expected(data: Float32Array, n: number): Promise<Tensor> {
  return (await reference([{ name: "x", datatype: "FP32", shape: [n, ...rowShape], data }]))[0]!;
}

const bytesOf = (a: Float32Array): Buffer => Buffer.from(a.buffer, a.byteOffset, a.byteLength);

/** A request in the binary tensor extension, as raw bytes: JSON header, then the input's bytes. */
function binaryRequest(header: Record<string, unknown>, data: Buffer): { body: Buffer; headerLength: number } {
  const json = Buffer.from(JSON.stringify(header));
  return { body: Buffer.concat([json, data]), headerLength: json.length };
}

async function postBinary(path: string, header: Record<string, unknown>, data: Buffer, extra: Record<string, string> = {}) {
  const { body, headerLength } = binaryRequest(header, data);
  const r = await fetch(`${stack.httpUrl}${path}`, { method: "POST", headers: { "inference-header-content-length": String(headerLength), ...extra }, body });
  return { status: r.status, headers: r.headers, bytes: Buffer.from(await r.arrayBuffer()) };
}

/** An answer in the binary extension: its JSON header and each binary output's bytes as FP32. */
function readBinaryAnswer(bytes: Buffer, headerLength: number): { header: Record<string, unknown>; outputs: Record<string, Float32Array> } {
  const header = JSON.parse(bytes.subarray(0, headerLength).toString("utf8")) as Record<string, unknown>;
  const outputs: Record<string, Float32Array> = {};
  let offset = headerLength;
  for (const o of header.outputs as Array<{ name: string; parameters?: { binary_data_size?: number } }>) {
    const size = o.parameters?.binary_data_size;
    if (size === undefined) continue;
    const copy = Buffer.from(bytes.subarray(offset, offset + size));
    outputs[o.name] = new Float32Array(copy.buffer, copy.byteOffset, size / 4);
    offset += size;
  }
  expect(offset).toBe(bytes.length);
  return { header, outputs };
}

describe("e2e open inference protocol", () => {
  it("oip http - the binary tensor extension in raw bytes, answered in binary, equals onnxruntime", async () => {
    const data = rows(1, 2);
    const header = { id: "bin-1", inputs: [{ name: "x", datatype: "FP32", shape: [2, ...rowShape], parameters: { binary_data_size: data.byteLength } }], outputs: [{ name: outputName, parameters: { binary_data: true } }] };
    const answer = await postBinary(`/v2/models/${cls.name}/infer`, header, bytesOf(data), { "content-type": "application/octet-stream", "x-request-id": "req-bin-1" });
    expect(answer.status, answer.bytes.subarray(0, 300).toString()).toBe(200);
    expect(answer.headers.get("content-type")).toContain("application/octet-stream");
    expect(answer.headers.get("x-request-id")).toBe("req-bin-1");
    const { header: got, outputs } = readBinaryAnswer(answer.bytes, Number(answer.headers.get("inference-header-content-length")));
    expect(got.id).toBe("bin-1");
    expect(got.model_name).toBe(cls.name);
    const want = await expected(data, 2);
    expect((got.outputs as Array<{ shape: number[] }>)[0]!.shape).toEqual(want.shape);
    expect(maxRelativeDiff(outputs[outputName]!, want.data as Float32Array)).toBeLessThan(1e-5);
  });

  it("oip http - binary_data_output with no content type (Triton's client) and JSON outputs when not asked for binary", async () => {
    const data = rows(2, 1);
    const input = { name: "x", datatype: "FP32", shape: [1, ...rowShape], parameters: { binary_data_size: data.byteLength } };
    const want = await expected(data, 1);
    const binary = await postBinary(`/v2/models/${cls.name}/versions/1/infer`, { inputs: [input], parameters: { binary_data_output: true } }, bytesOf(data));
    expect(binary.status).toBe(200);
    const { outputs } = readBinaryAnswer(binary.bytes, Number(binary.headers.get("inference-header-content-length")));
    expect(maxRelativeDiff(outputs[outputName]!, want.data as Float32Array)).toBeLessThan(1e-5);
    const json = await postBinary(`/v2/models/${cls.name}/infer`, { inputs: [input] }, bytesOf(data));
    expect(json.headers.get("inference-header-content-length")).toBeNull();
    const body = JSON.parse(json.bytes.toString("utf8")) as { outputs: Array<{ name: string; data: number[] }> };
    expect(maxRelativeDiff(body.outputs[0]!.data, want.data as Float32Array)).toBeLessThan(1e-5);
  });

  it("oip http - version routes: metadata, readiness and inference of version 1; other versions are 404", async () => {
    const meta = await fetch(`${stack.httpUrl}/v2/models/${cls.name}/versions/1`);
    expect(meta.status).toBe(200);
    expect(((await meta.json()) as { versions: string[] }).versions).toEqual(["1"]);
    const ready = await fetch(`${stack.httpUrl}/v2/models/${cls.name}/versions/1/ready`);
    expect([200, 503]).toContain(ready.status);
    expect(((await ready.json()) as { ready: boolean }).ready).toBe(ready.status === 200);
    const other = await fetch(`${stack.httpUrl}/v2/models/${cls.name}/versions/2`);
    expect(other.status).toBe(404);
    expect(((await other.json()) as { error: string }).error).toBe(`model '${cls.name}' has no version '2'; its only version is "1"`);
    const data = rows(3, 1);
    const r = await fetch(`${stack.httpUrl}/v2/models/${cls.name}/versions/1/infer`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ id: "v1", inputs: [{ name: "x", datatype: "FP32", shape: [1, ...rowShape], data: Array.from(data) }] }),
    });
    const body = (await r.json()) as { id: string; model_version: string; outputs: Array<{ data: number[] }> };
    expect(r.status).toBe(200);
    expect([body.id, body.model_version]).toEqual(["v1", "1"]);
    expect(maxRelativeDiff(body.outputs[0]!.data, (await expected(data, 1)).data as Float32Array)).toBeLessThan(1e-5);
  });

  it("oip grpc - health, metadata and readiness through a client generated from the .proto", async () => {
    expect(await call("ServerLive", {})).toEqual({ live: true });
    expect(await call("ServerReady", {})).toEqual({ ready: true });
    const server = await call("ServerMetadata", {});
    expect(server.name).toBe("sloserve");
    expect(server.extensions).toContain("binary_tensor_data");
    const meta = await call("ModelMetadata", { name: cls.name, version: "1" });
    expect(meta.versions).toEqual(["1"]);
    const overHttp = (await (await fetch(`${stack.httpUrl}/v2/models/${cls.name}`)).json()) as { inputs: unknown; outputs: unknown };
    expect([meta.inputs, meta.outputs]).toEqual([overHttp.inputs, overHttp.outputs]);
    expect(typeof (await call("ModelReady", { name: cls.name })).ready).toBe("boolean");
  });

  it("oip grpc - ModelInfer with raw_input_contents and with typed contents equals onnxruntime", async () => {
    const data = rows(4, 2);
    const want = await expected(data, 2);
    const raw = await call("ModelInfer", { model_name: cls.name, id: "g1", inputs: [{ name: "x", datatype: "FP32", shape: [2, ...rowShape] }], raw_input_contents: [bytesOf(data)] });
    expect(raw.id).toBe("g1");
    expect(raw.model_name).toBe(cls.name);
    const outputs = raw.outputs as Array<{ name: string; datatype: string; shape: number[] }>;
    expect(outputs.map((o) => [o.name, o.datatype, o.shape])).toEqual([[outputName, "FP32", want.shape]]);
    const bytes = Buffer.from((raw.raw_output_contents as Buffer[])[0]!);
    expect(maxRelativeDiff(new Float32Array(bytes.buffer, bytes.byteOffset, bytes.length / 4), want.data as Float32Array)).toBeLessThan(1e-5);
    const one = data.subarray(0, rowElements);
    const typed = await call("ModelInfer", { model_name: cls.name, model_version: "1", inputs: [{ name: "x", datatype: "FP32", shape: [1, ...rowShape], contents: { fp32_contents: Array.from(one) } }], outputs: [{ name: outputName }] });
    const typedBytes = Buffer.from((typed.raw_output_contents as Buffer[])[0]!);
    expect(maxRelativeDiff(new Float32Array(typedBytes.buffer, typedBytes.byteOffset, typedBytes.length / 4), (await expected(Float32Array.from(one), 1)).data as Float32Array)).toBeLessThan(1e-5);
  });

  it("oip model-less - an app's name as model_name with its requirements as parameters, over HTTP and gRPC", async () => {
    await profiled;
    const data = rows(5, 1);
    const want = (await expected(data, 1)).data as Float32Array;
    const input = { name: "x", datatype: "FP32", shape: [1, ...rowShape], parameters: { binary_data_size: data.byteLength } };
    const http = await postBinary(`/v2/models/${appModel.app}/infer`, { inputs: [input], parameters: { slo_latency_ms: 10_000, min_accuracy: 0, binary_data_output: true } }, bytesOf(data));
    expect(http.status, http.bytes.subarray(0, 300).toString()).toBe(200);
    const { header, outputs } = readBinaryAnswer(http.bytes, Number(http.headers.get("inference-header-content-length")));
    expect((header.served_by as { model: string }).model).toBe(appModel.name);
    expect(maxRelativeDiff(outputs[outputName]!, want)).toBeLessThan(1e-5);
    const viaGrpc = await call("ModelInfer", {
      model_name: appModel.app,
      parameters: { slo_latency_ms: { int64_param: 10_000 }, min_accuracy: { double_param: 0 } },
      inputs: [{ name: "x", datatype: "FP32", shape: [1, ...rowShape] }],
      raw_input_contents: [bytesOf(data)],
    });
    expect(JSON.parse((viaGrpc.parameters as Record<string, { string_param: string }>).served_by!.string_param).model).toBe(appModel.name);
    const bytes = Buffer.from((viaGrpc.raw_output_contents as Buffer[])[0]!);
    expect(maxRelativeDiff(new Float32Array(bytes.buffer, bytes.byteOffset, bytes.length / 4), want)).toBeLessThan(1e-5);
  });

  it("oip triton - model configuration, statistics and repository index over HTTP and gRPC, as tritonclient calls them", async () => {
    const get = async (path: string, init?: RequestInit) => {
      const r = await fetch(`${stack.httpUrl}${path}`, init);
      return { status: r.status, body: (await r.json()) as Record<string, unknown> & Array<Record<string, unknown>> };
    };
    type Stats = { name: string; version: string; last_inference: number; inference_count: number; execution_count: number; inference_stats: Record<string, { count: number; ns: number }> };
    const statsOf = async (name: string): Promise<Stats> => {
      const r = await get(`/v2/models/${name}/stats`);
      expect(r.status).toBe(200);
      return (r.body.model_stats as Stats[])[0]!;
    };

    // Configuration: the record the metadata reports, in Triton's terms; max_batch_size is the largest
    // variant batch (VARIANT_BATCH_SIZES=1 here), so dims leave out the batch dimension.
    const meta = (await get(`/v2/models/${cls.name}`)).body as unknown as { inputs: Array<{ shape: number[] }>; outputs: Array<{ name: string; shape: number[] }> };
    const config = await get(`/v2/models/${cls.name}/config`);
    expect(config.status).toBe(200);
    expect(config.body).toEqual({
      name: cls.name,
      platform: "onnxruntime_onnx",
      backend: "onnxruntime",
      max_batch_size: 1,
      input: [{ name: "x", data_type: "TYPE_FP32", format: "FORMAT_NONE", dims: [3, -1, -1] }],
      output: [{ name: outputName, data_type: "TYPE_FP32", dims: meta.outputs[0]!.shape.slice(1) }],
    });
    expect((await get(`/v2/models/${cls.name}/versions/1/config`)).body).toEqual(config.body);
    expect(await get("/v2/models/nope/config")).toEqual({ status: 404, body: { error: "no model named 'nope' (nor an app)", code: "unknown_model" } });
    const viaGrpc = (await call("ModelConfig", { name: cls.name, version: "1" })).config as Record<string, unknown>;
    // The test's client decodes enums as numbers: 11 is TYPE_FP32 in Triton's DataType.
    expect(viaGrpc).toEqual({ name: cls.name, platform: "onnxruntime_onnx", backend: "onnxruntime", max_batch_size: 1, input: [{ name: "x", data_type: 11, format: 0, dims: [3, -1, -1] }], output: [{ name: outputName, data_type: 11, dims: meta.outputs[0]!.shape.slice(1) }] });
    expect(await grpcError("ModelConfig", { name: "nope" })).toEqual({ code: grpc.status.NOT_FOUND, details: "no model named 'nope' (nor an app)" });

    // Statistics move with the queries this frontend serves: 2 rows over HTTP, 1 over gRPC, 1 refused after the model was found.
    const before = await statsOf(cls.name);
    const startedAt = Date.now();
    const data = rows(7, 2);
    const http = await postBinary(`/v2/models/${cls.name}/infer`, { inputs: [{ name: "x", datatype: "FP32", shape: [2, ...rowShape], parameters: { binary_data_size: data.byteLength } }] }, bytesOf(data));
    expect(http.status).toBe(200);
    await call("ModelInfer", { model_name: cls.name, inputs: [{ name: "x", datatype: "FP32", shape: [1, ...rowShape] }], raw_input_contents: [bytesOf(data.subarray(0, rowElements))] });
    expect((await grpcError("ModelInfer", { model_name: cls.name, inputs: [{ name: "x", datatype: "FP32", shape: [1, 4, 48, 192] }], raw_input_contents: [bytesOf(data.subarray(0, rowElements))] })).code).toBe(grpc.status.INVALID_ARGUMENT);
    const after = await statsOf(cls.name);
    const s = after.inference_stats;
    const b = before.inference_stats;
    expect([after.name, after.version]).toEqual([cls.name, "1"]);
    expect([s.success!.count - b.success!.count, s.fail!.count - b.fail!.count, after.inference_count - before.inference_count, after.execution_count - before.execution_count]).toEqual([2, 1, 3, 2]);
    expect(after.last_inference).toBeGreaterThanOrEqual(startedAt);
    expect(after.last_inference).toBeLessThanOrEqual(Date.now());
    for (const phase of ["success", "fail", "compute_infer"]) expect(s[phase]!.ns, phase).toBeGreaterThan(b[phase]!.ns);
    for (const phase of ["queue", "compute_input", "compute_infer", "compute_output"]) expect(s[phase]!.count, phase).toBe(s.success!.count);
    expect((await get(`/v2/models/${cls.name}/versions/1/stats`)).body.model_stats).toEqual([after]);
    expect(await get("/v2/models/nope/stats")).toEqual({ status: 404, body: { error: "no model named 'nope' (nor an app)", code: "unknown_model" } });
    const all = (await get("/v2/models/stats")).body.model_stats as Stats[];
    expect(all.map((x) => x.name)).toEqual(expect.arrayContaining([cls.name, appModel.name]));
    expect(all.find((x) => x.name === cls.name)).toEqual(after);
    const grpcStats = (await call("ModelStatistics", { name: cls.name })).model_stats as Stats[];
    expect(grpcStats).toHaveLength(1);
    expect(grpcStats[0]!.inference_stats.success).toEqual(s.success);
    expect([grpcStats[0]!.inference_count, grpcStats[0]!.last_inference]).toEqual([after.inference_count, after.last_inference]);
    expect(((await call("ModelStatistics", {})).model_stats as Stats[]).map((x) => x.name)).toEqual(all.map((x) => x.name));
    expect((await grpcError("ModelStatistics", { name: "nope" })).code).toBe(grpc.status.NOT_FOUND);

    // The repository index: the model just queried has a serving instance.
    const index = await get("/v2/repository/index", { method: "POST" });
    expect(index.status).toBe(200);
    expect(index.body).toContainEqual({ name: cls.name, version: "1", state: "READY", reason: "" });
    expect(index.body.map((e) => e.name).sort()).toEqual([appModel.name, cls.name].sort());
    // tritonclient's request: an empty body, here with a JSON content type; and {"ready": true}.
    expect((await get("/v2/repository/index", { method: "POST", headers: { "content-type": "application/json" } })).body).toEqual(index.body);
    const ready = await get("/v2/repository/index", { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ ready: true }) });
    expect(ready.body).toEqual(index.body.filter((e) => e.state === "READY"));
    expect((await get("/v2/repository/index", { method: "POST", body: JSON.stringify({ ready: "yes" }) })).status).toBe(400);
    const grpcIndex = (await call("RepositoryIndex", {})).models as Array<Record<string, unknown>>;
    expect(grpcIndex).toEqual(index.body);
    expect((await call("RepositoryIndex", { ready: true })).models).toEqual(ready.body);
    expect((await call("ServerMetadata", {})).extensions).toEqual(expect.arrayContaining(["model_repository", "model_configuration", "statistics"]));
  });

  it("oip bad input - HTTP answers 4xx naming the problem, gRPC the matching status; good queries still pass", async () => {
    const data = rows(6, 1);
    const input = { name: "x", datatype: "FP32", shape: [1, ...rowShape], parameters: { binary_data_size: data.byteLength } };
    const post = async (path: string, header: Record<string, unknown>, bytes: Buffer, headerLength?: number) => {
      const r = binaryRequest(header, bytes);
      const answer = await fetch(`${stack.httpUrl}${path}`, { method: "POST", headers: { "inference-header-content-length": String(headerLength ?? r.headerLength) }, body: r.body });
      return { status: answer.status, body: (await answer.json()) as { error: string; code: string } };
    };
    const path = `/v2/models/${cls.name}/infer`;
    const short = await post(path, { inputs: [input] }, bytesOf(data).subarray(8));
    expect([short.status, short.body.code]).toEqual([400, "invalid_data_length"]);
    expect(short.body.error).toMatch(/binary_data_size 110592 runs past the end of the body/);
    const header = await post(path, { inputs: [input] }, bytesOf(data), 10);
    expect([header.status, header.body.code]).toEqual([400, "malformed_json"]);
    const wrongShape = await post(path, { inputs: [{ ...input, shape: [2, ...rowShape] }] }, bytesOf(data));
    expect([wrongShape.status, wrongShape.body.code, wrongShape.body.error]).toEqual([400, "invalid_data_length", "input 'x' has 27648 elements but its shape [2, 3, 48, 192] needs 55296"]);
    const output = await post(path, { inputs: [input], outputs: [{ name: "nope" }] }, bytesOf(data));
    expect([output.status, output.body.error]).toEqual([400, `model '${cls.name}' has no output named 'nope'; its outputs are: ${outputName}`]);
    const app = await post(`/v2/models/${appModel.app}/infer`, { inputs: [input] }, bytesOf(data));
    expect([app.status, app.body.code]).toEqual([400, "bad_request"]);
    expect(app.body.error).toMatch(/'textdir' is an app: a model-less query needs the request parameter slo_latency_ms/);
    expect((await post("/v2/models/nope/infer", { inputs: [input] }, bytesOf(data))).status).toBe(404);

    const x = { name: "x", datatype: "FP32", shape: [1, ...rowShape] };
    expect(await grpcError("ModelInfer", { model_name: "nope", inputs: [x], raw_input_contents: [bytesOf(data)] })).toEqual({ code: grpc.status.NOT_FOUND, details: "no model named 'nope' (nor an app)" });
    expect((await grpcError("ModelMetadata", { name: cls.name, version: "7" })).code).toBe(grpc.status.NOT_FOUND);
    expect(await grpcError("ModelInfer", { model_name: cls.name, inputs: [{ ...x, shape: [1, 4, 48, 192] }], raw_input_contents: [bytesOf(data)] })).toEqual({
      code: grpc.status.INVALID_ARGUMENT,
      details: "input 'x' has shape [1, 4, 48, 192]; the model expects [-1, 3, -1, -1] (-1 = any size)",
    });
    expect((await grpcError("ModelInfer", { model_name: cls.name, inputs: [x], raw_input_contents: [bytesOf(data), bytesOf(data)] })).details).toBe("raw_input_contents has 2 entries for 1 inputs; send one per input, in the order of inputs");
    expect((await grpcError("ModelInfer", { model_name: appModel.app, inputs: [x], raw_input_contents: [bytesOf(data)] })).code).toBe(grpc.status.INVALID_ARGUMENT);

    const good = await call("ModelInfer", { model_name: cls.name, inputs: [x], raw_input_contents: [bytesOf(data)] });
    const bytes = Buffer.from((good.raw_output_contents as Buffer[])[0]!);
    expect(maxRelativeDiff(new Float32Array(bytes.buffer, bytes.byteOffset, bytes.length / 4), (await expected(data, 1)).data as Float32Array)).toBeLessThan(1e-5);
  });
});
