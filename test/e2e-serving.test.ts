import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { readFileSync } from "node:fs";
import { connect, headers as natsHeaders, type NatsConnection } from "@nats-io/transport-node";
import { startStack, ocrModels, registerOverHttp, type Stack } from "@sloserve/stack";
import { encodeTensors, decodeTensors, contentTypes, headers, servingStates, subjects, type VariantState } from "@sloserve/contracts";
import { prng, randomFloats, referenceRunner, maxRelativeDiff, postJson } from "./support.js";

/**
 * The first real query end to end: real nats-server, redis-server and services as separate
 * processes; a real ONNX model registered over HTTP; answers checked against onnxruntime run
 * directly in this process on the same inputs. Tolerance 1e-5 (relative): batched and unbatched
 * runs may take different kernels, which round differently.
 */

const model = ocrModels().find((m) => m.name === "ocr-cls")!;
const elements = 3 * 48 * 192;
let stack: Stack;
let nc: NatsConnection;
let reference: Awaited<ReturnType<typeof referenceRunner>>;

beforeAll(async () => {
  stack = await startStack({ cpuWorkers: 1, workerThreads: 2, logLevel: "debug" });
  nc = await connect({ servers: stack.nats.url });
  reference = await referenceRunner(model.path);
  const registered = await registerOverHttp(stack.httpUrl, model);
  expect(registered.status).toBe(201);
});

afterAll(async () => {
  await nc?.close();
  await stack?.stop();
});

async function expected(data: number[], rows: number): Promise<number[]> {
  const [out] = await reference([{ name: "x", datatype: "FP32", shape: [rows, 3, 48, 192], data: Float32Array.from(data) }]);
  return Array.from(out!.data as Float32Array);
}

describe("e2e serving", () => {
  it("serving - 200 concurrent HTTP queries each equal onnxruntime run directly", async () => {
    const rand = prng(42);
    const queries = Array.from({ length: 200 }, (_, i) => {
      const rows = i % 10 === 0 ? 2 : 1; // a few multi-row queries among the single ones
      return { rows, data: randomFloats(rand, rows * elements), id: `q${i}` };
    });
    const answers = await Promise.all(
      queries.map((q) =>
        postJson(`${stack.httpUrl}/v2/models/${model.name}/infer`, { id: q.id, inputs: [{ name: "x", datatype: "FP32", shape: [q.rows, 3, 48, 192], data: q.data }] }),
      ),
    );
    const batchSizes: number[] = [];
    for (const [i, answer] of answers.entries()) {
      const q = queries[i]!;
      expect(answer.status, JSON.stringify(answer.body).slice(0, 300)).toBe(200);
      expect(answer.body.id).toBe(q.id);
      expect(answer.body.model_name).toBe(model.name);
      const outputs = answer.body.outputs as Array<{ name: string; datatype: string; shape: number[]; data: number[] }>;
      expect(outputs[0]!.shape).toEqual([q.rows, 2]);
      expect(maxRelativeDiff(outputs[0]!.data, await expected(q.data, q.rows))).toBeLessThan(1e-5);
      batchSizes.push((answer.body.served_by as { batch_size: number }).batch_size);
    }
    // 200 queries at once on one worker: the executor batched some of them.
    expect(Math.max(...batchSizes)).toBeGreaterThan(1);
  });

  it("serving - NATS clients get the same answers, in binary and in JSON", async () => {
    const rand = prng(7);
    const inputs = Array.from({ length: 40 }, () => randomFloats(rand, elements));
    const binary = await Promise.all(
      inputs.map((data) =>
        nc.request(subjects.inferModel(model.name), encodeTensors([{ name: "x", datatype: "FP32", shape: [1, 3, 48, 192], data: Float32Array.from(data) }]), {
          timeout: 30_000,
          headers: (() => {
            const h = natsHeaders();
            h.set(headers.contentType, contentTypes.wire);
            return h;
          })(),
        }),
      ),
    );
    for (const [i, reply] of binary.entries()) {
      expect(reply.headers?.get(headers.error) ?? "").toBe("");
      const { tensors } = decodeTensors(reply.data);
      expect(maxRelativeDiff(tensors[0]!.data as Float32Array, await expected(inputs[i]!, 1))).toBeLessThan(1e-5);
    }
    const json = await nc.request(subjects.inferModel(model.name), JSON.stringify({ inputs: [{ name: "x", datatype: "FP32", shape: [1, 3, 48, 192], data: inputs[0] }] }), { timeout: 30_000 });
    const body = json.json<{ outputs: Array<{ data: number[] }> }>();
    expect(maxRelativeDiff(body.outputs[0]!.data, await expected(inputs[0]!, 1))).toBeLessThan(1e-5);
  });

  it("logs - one JSON line per event; the caller's request id is in the frontend's, dispatcher's and executor's lines", async () => {
    const requestId = "trace-7f3a";
    const r = await fetch(`${stack.httpUrl}/v2/models/${model.name}/infer`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-request-id": requestId },
      body: JSON.stringify({ inputs: [{ name: "x", datatype: "FP32", shape: [1, 3, 48, 192], data: new Array(elements).fill(0.25) }] }),
    });
    expect(r.status).toBe(200);
    await new Promise((done) => setTimeout(done, 500)); // let the log lines reach the file
    const lines = readFileSync(stack.logPath, "utf8").split("\n").filter((l) => l.startsWith("{")).map((l) => JSON.parse(l) as { service?: string; requestId?: string });
    const services = new Set(lines.filter((l) => l.requestId === requestId).map((l) => l.service));
    expect([...services].sort()).toEqual(["dispatcher", "executor-cpu", "frontend"]);
    expect(lines.every((l) => typeof l.service === "string")).toBe(true);
  });

  it("serving - metadata, readiness and the repository index describe the model", async () => {
    const meta = await (await fetch(`${stack.httpUrl}/v2/models/${model.name}`)).json();
    expect(meta).toMatchObject({ name: "ocr-cls", platform: "onnxruntime_onnx", inputs: [{ name: "x", datatype: "FP32", shape: [-1, 3, -1, -1] }] });
    expect((await fetch(`${stack.httpUrl}/v2/health/live`)).status).toBe(200);
    expect((await fetch(`${stack.httpUrl}/v2/health/ready`)).status).toBe(200);
    expect((await fetch(`${stack.httpUrl}/v2/models/${model.name}/ready`)).status).toBe(200);
    const index = await (await fetch(`${stack.httpUrl}/v2/repository/index`, { method: "POST" })).json();
    expect(index).toEqual([{ name: "ocr-cls", version: "1", state: "READY", reason: "" }]);
    const metrics = await (await fetch(`${stack.httpUrl}/metrics`)).text();
    expect(metrics).toContain("sloserve_http_request_duration_seconds_bucket");
    const dashboard = await fetch(`${stack.httpUrl}/dashboard`);
    expect(dashboard.headers.get("content-type")).toMatch(/text\/html/);
    expect(await dashboard.text()).toContain("/v1/dashboard");
    const status = (await (await fetch(`${stack.httpUrl}/v1/status`)).json()) as { workers: Array<{ hardware: string; variants: Array<{ variant: string; state: string }> }> };
    expect(status.workers).toHaveLength(1);
    // Serving: Active, or Overloaded / Interfered, which still take queries (on this shared machine the
    // executor's batches can run slower than profiled while the test's load runs beside it).
    expect(status.workers[0]!.variants.some((v) => v.variant.startsWith("ocr-cls--") && servingStates.has(v.state as VariantState)), JSON.stringify(status.workers[0]!.variants)).toBe(true);
  });
});
