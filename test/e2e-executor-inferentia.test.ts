import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { writeFileSync, type WriteStream } from "node:fs";
import { join } from "node:path";
import { freePort, logFile, registerOverHttp, startNats, startRedis, startService, tempDir, type ServiceHandle } from "@sloserve/stack";
import { createRng } from "@sloserve/policy";
import { waitFor } from "@sloserve/testing";
import { Network, exportNetwork } from "@sloserve/zoo";
import { maxRelativeDiff, postJson, prng, randomFloats, referenceRunner } from "./support.js";

/**
 * executor-inferentia end to end: the cluster (nats-server, redis-server, registrar, dispatcher,
 * frontend, executor-inferentia as processes) serves a model whose batches the executor hands, over
 * the Open Inference Protocol's gRPC API, to a real OIP server standing in for the Neuron server of an
 * Inferentia host: our own frontend's gRPC endpoint in front of a second sloserve that runs the model
 * on CPU. The answers are checked against onnxruntime run directly; then the server goes away (the
 * variants are Failed, queries get clear errors, none outlives its deadline) and comes back (they
 * serve again).
 */

const APP = "tiny";
/** Starting a service takes a few seconds; on a crowded machine much longer. */
const slow = (): { timeoutMs: number; logTo: WriteStream } => ({ timeoutMs: 180_000, logTo: logs });
let logs: WriteStream;
const MODEL = "tiny-mlp";
let dir: string;
let modelPath: string;
/** What was started, to stop in reverse order (whatever failed on the way). */
const started: Array<{ stop(): Promise<void> }> = [];
let httpUrl: string;
let host: NeuronHost;
let reference: Awaited<ReturnType<typeof referenceRunner>>;

/**
 * The stand-in for the Neuron server of an Inferentia host: a second, separate sloserve (its own
 * nats-server, redis-server, registrar, dispatcher, executor-cpu and frontend) serving the same model
 * on CPU, reached through its frontend's Open Inference Protocol gRPC endpoint. Going away and coming
 * back is its frontend process stopping and starting again on the same port.
 */
interface NeuronHost {
  grpcPort: number;
  stopServer(): Promise<void>;
  startServer(): Promise<void>;
}

/** A nats-server, redis-server and services, each stopped at the end. */
async function startSystem(name: string, services: Record<string, Record<string, string>>): Promise<Record<string, string>> {
  const nats = await startNats({ dir: join(dir, `${name}-nats`), logTo: logs });
  started.push(nats);
  const redis = await startRedis({ dir: join(dir, `${name}-redis`), logTo: logs });
  started.push(redis);
  const env = { NATS_URL: nats.url, REDIS_URL: redis.url, LOG_LEVEL: "info" };
  await Promise.all(Object.entries(services).map(async ([service, extra]) => started.push(await startService(service, { ...env, ...extra }, slow()))));
  return env;
}

async function startNeuronHost(): Promise<NeuronHost> {
  const env = await startSystem("host", {
    registrar: { VARIANT_HARDWARE: "cpu", VARIANT_BATCH_SIZES: "1,2,4", VARIANT_CPU_THREADS: "1", PROFILE_ON_REGISTER: "false" },
    dispatcher: { OVERFLOW: "off" },
    "executor-cpu": { WORKER_THREADS: "1" },
  });
  const grpcPort = await freePort();
  let frontend: ServiceHandle | undefined;
  let httpUrl = "";
  const startServer = async (): Promise<void> => {
    frontend = await startService("frontend", { ...env, HTTP_PORT: "0", HTTP_HOST: "127.0.0.1", GRPC_PORT: String(grpcPort) }, slow());
    httpUrl = `http://127.0.0.1:${String(frontend.info.port)}`;
  };
  started.push({ stop: async () => frontend?.stop() });
  await startServer();
  const registered = await registerOverHttp(httpUrl, { app: APP, name: MODEL, task: "image-classification", dataset: "none", path: modelPath });
  expect(registered.status, JSON.stringify(registered.body)).toBe(201);
  // The host's model is ready (ModelReady) once an instance is active: the first query loads one.
  const warm = await postJson(`${httpUrl}/v2/models/${MODEL}/infer`, { inputs: [{ name: "input", datatype: "FP32", shape: [1, 1, 28, 28], data: new Array(784).fill(0) }] });
  expect(warm.status, JSON.stringify(warm.body)).toBe(200);
  return {
    grpcPort,
    startServer,
    async stopServer() {
      await frontend?.stop();
      frontend = undefined;
    },
  };
}

interface StatusBody {
  variants: Array<{ name: string; hardware: string; quantization: string; profiled: boolean }>;
  instances: Array<{ variant: string; worker: string; state: string; reason: string }>;
}

async function status(): Promise<StatusBody> {
  return (await (await fetch(`${httpUrl}/v1/status`)).json()) as StatusBody;
}

/** Waits of this test: polled every 200 ms, up to a minute unless said otherwise. */
const polled = { timeoutMs: 60_000, intervalMs: 200 };

/** The state of the model's inferentia instances, with their reasons. */
async function instanceStates(): Promise<Array<{ variant: string; state: string; reason: string }>> {
  return (await status()).instances.filter((i) => i.variant.startsWith(`${MODEL}--inferentia`));
}

function query(data: number[], timeoutMs = 20_000): Promise<{ status: number; body: Record<string, unknown> }> {
  return postJson(`${httpUrl}/v2/models/${MODEL}/infer`, { inputs: [{ name: "input", datatype: "FP32", shape: [1, 1, 28, 28], data }], parameters: { timeout_ms: timeoutMs } });
}

async function expectAnswered(answer: { status: number; body: Record<string, unknown> }, data: number[]): Promise<void> {
  expect(answer.status, JSON.stringify(answer.body).slice(0, 300)).toBe(200);
  expect((answer.body.served_by as { hardware: string }).hardware).toBe("inferentia");
  const [want] = await reference([{ name: "input", datatype: "FP32", shape: [1, 1, 28, 28], data: Float32Array.from(data) }]);
  const outputs = answer.body.outputs as Array<{ shape: number[]; data: number[] }>;
  expect(outputs[0]!.shape).toEqual([1, 10]);
  expect(maxRelativeDiff(outputs[0]!.data, want!.data as Float32Array)).toBeLessThan(1e-5);
}

beforeAll(async () => {
  dir = tempDir("e2e-inferentia");
  logs = logFile(join(dir, "logs", "services.log"));
  modelPath = join(dir, "tiny.onnx");
  const network = new Network([{ type: "flatten" }, { type: "dense", units: 64 }, { type: "relu" }, { type: "dense", units: 10 }], [1, 28, 28], createRng(11));
  writeFileSync(modelPath, exportNetwork(network, MODEL));
  reference = await referenceRunner(modelPath);
  host = await startNeuronHost();
  const env = await startSystem("cluster", {
    // Variants for Inferentia only, max batch 1, 2 and 4: the executor under test serves every query.
    registrar: { VARIANT_HARDWARE: "inferentia", VARIANT_BATCH_SIZES: "1,2,4" },
    dispatcher: { OVERFLOW: "off" },
    "executor-inferentia": { NEURON_SERVER: `127.0.0.1:${host.grpcPort}`, WORKER_ID: "inf-e2e" },
  });
  const frontend = await startService("frontend", { ...env, HTTP_PORT: "0", HTTP_HOST: "127.0.0.1", GRPC_PORT: "0" }, slow());
  started.push(frontend);
  httpUrl = `http://127.0.0.1:${String(frontend.info.port)}`;
  const registered = await registerOverHttp(httpUrl, { app: APP, name: MODEL, task: "image-classification", dataset: "none", path: modelPath });
  expect(registered.status, JSON.stringify(registered.body)).toBe(201);
}, 400_000);

afterAll(async () => {
  for (const s of started.reverse()) await s.stop().catch((err: unknown) => console.error("while stopping:", err));
});

describe("e2e executor-inferentia", () => {
  it("executor-inferentia - profiles its variants through the server and answers queries as onnxruntime does", async () => {
    // The fp32 variants are profiled by the executor, through the server (int8 ones need a model of
    // their own on the server, which this one does not have).
    const profiled = await waitFor("the inferentia fp32 variants' profiles", async () => {
      const v = (await status()).variants.filter((x) => x.hardware === "inferentia" && x.quantization === "fp32");
      return v.length > 0 && v.every((x) => x.profiled) && v;
    }, { ...polled, timeoutMs: 150_000 });
    expect(profiled.map((v) => v.name).sort()).toEqual([`${MODEL}--inferentia-fp32-b1-t1`, `${MODEL}--inferentia-fp32-b2-t1`, `${MODEL}--inferentia-fp32-b4-t1`]);
    const rand = prng(5);
    const inputs = Array.from({ length: 24 }, () => randomFloats(rand, 784));
    const answers = await Promise.all(inputs.map((data) => query(data)));
    for (const [i, answer] of answers.entries()) await expectAnswered(answer, inputs[i]!);
    const states = await instanceStates();
    expect(states.length).toBeGreaterThan(0);
    expect(states.every((i) => i.state === "active")).toBe(true);
  }, 200_000);

  it("executor-inferentia - the server goes away: Failed, clear errors, nothing outlives its deadline; it comes back: serves again", async () => {
    const rand = prng(9);
    // A burst in flight while the server goes away: each query is answered right or refused with a
    // clear code, by its deadline.
    const timeoutMs = 8_000;
    const burst = Array.from({ length: 16 }, () => randomFloats(rand, 784));
    const sentAt = Date.now();
    const pending = burst.map((data) => query(data, timeoutMs).then((a) => ({ a, atMs: Date.now() })));
    await host.stopServer();
    const outcomes = await Promise.all(pending);
    for (const [i, { a, atMs }] of outcomes.entries()) {
      if (a.status === 200) await expectAnswered(a, burst[i]!);
      else expect(["unavailable", "deadline_exceeded"], JSON.stringify(a.body)).toContain(a.body.code);
      expect(atMs - sentAt).toBeLessThan(timeoutMs + 5_000);
    }

    const failed = await waitFor("the variant to be Failed", async () => {
      const states = await instanceStates();
      return states.length > 0 && states.every((s) => s.state === "failed") && states;
    }, polled);
    expect(failed[0]!.reason).toMatch(new RegExp(`Neuron server at 127\\.0\\.0\\.1:${host.grpcPort} is unavailable`));

    // While it is away, a query that only its variants could serve is refused at once, saying why, as
    // soon as the dispatcher has the state (a query routed just before gets deadline_exceeded).
    const refused = await waitFor("the dispatcher to refuse", async () => {
      const answer = await query(randomFloats(rand, 784), 2_000);
      return answer.body.code !== "deadline_exceeded" && answer;
    }, polled);
    expect(refused.body.code, JSON.stringify(refused.body)).toBe("unavailable");
    expect(refused.status).toBe(503);
    expect(refused.body.error).toMatch(/^tiny-mlp--inferentia-fp32-b\d-t1 cannot serve now: the worker that holds it reports it failed/);

    // Back on the same address: Active again, and answers as before.
    await host.startServer();
    await waitFor("the variant to be Active again", async () => {
      const states = await instanceStates();
      return states.length > 0 && states.every((s) => s.state === "active");
    }, polled);
    const again = Array.from({ length: 8 }, () => randomFloats(rand, 784));
    const answers = await Promise.all(again.map((data) => query(data)));
    for (const [i, answer] of answers.entries()) await expectAnswered(answer, again[i]!);
  }, 120_000);
});
