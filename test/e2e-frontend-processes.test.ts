import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { readFileSync } from "node:fs";
import { request } from "node:http";
import * as grpc from "@grpc/grpc-js";
import * as protoLoader from "@grpc/proto-loader";
import { oipGrpcProtoPath } from "@sloserve/contracts";
import { digitsModels, registerOverHttp, startStack, type BundledModel, type ServiceHandle, type Stack } from "@sloserve/stack";

/**
 * A frontend of two processes on one port (FRONTEND_PROCESSES=2, services/frontend processes.ts: Node's
 * cluster) on the real stack: queries over HTTP, on new connections (spread over the processes
 * round-robin), and over gRPC channels are all answered; `/metrics` and Triton's statistics, whichever
 * process answers the scrape, show every process's counts summed; a process killed leaves the port
 * serving, the primary says so and forks another; SIGTERM to the primary stops every process.
 */

let stack: Stack;
let model: BundledModel;
let frontend: ServiceHandle;
type Client = grpc.Client & Record<string, (request: unknown, options: grpc.CallOptions, callback: (err: grpc.ServiceError | null, response: Record<string, unknown>) => void) => void>;
let Service: grpc.ServiceClientConstructor;
const clients: Client[] = [];

const image = (i: number): number[] => Array.from({ length: 784 }, (_, k) => ((k * 7 + i * 13) % 29) / 29);
const query = (i: number) => ({ inputs: [{ name: "input", datatype: "FP32", shape: [1, 1, 28, 28], data: image(i) }] });

/** One HTTP request on a connection of its own (no keep-alive agent): the primary hands each new connection to the next process. */
function fresh(method: "GET" | "POST", path: string, body?: unknown): Promise<{ status: number; text: string }> {
  const url = new URL(path, stack.httpUrl);
  const data = body === undefined ? undefined : Buffer.from(JSON.stringify(body));
  return new Promise((resolve, reject) => {
    const req = request({ host: url.hostname, port: url.port, path: url.pathname, method, agent: false, headers: data ? { "content-type": "application/json", "content-length": data.length } : {} }, (res) => {
      const chunks: Buffer[] = [];
      res.on("data", (c: Buffer) => chunks.push(c));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString("utf8") }));
      res.on("error", reject);
    });
    req.on("error", reject);
    req.end(data);
  });
}

/** Σ of a metric's samples whose labels match, in Prometheus' text format. */
function metric(text: string, name: string, labels: Record<string, RegExp> = {}): number {
  let total = 0;
  for (const line of text.split("\n")) {
    const m = /^([a-zA-Z_:][\w:]*)(?:\{(.*)\})?\s+(\S+)/.exec(line);
    if (!m || m[1] !== name) continue;
    const got = Object.fromEntries([...(m[2] ?? "").matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)].map((l) => [l[1], l[2]]));
    if (Object.entries(labels).every(([k, re]) => re.test(got[k] ?? ""))) total += Number(m[3]);
  }
  return total;
}

const inferences = async (): Promise<{ processes: number; http: number }> => {
  const r = await fresh("GET", "/metrics");
  expect(r.status).toBe(200);
  return { processes: metric(r.text, "sloserve_frontend_processes"), http: metric(r.text, "sloserve_http_request_duration_seconds_count", { route: /\/infer$/, status: /^200$/ }) };
};

const successes = async (): Promise<number> => {
  const r = await fresh("GET", `/v2/models/${model.name}/stats`);
  expect(r.status, r.text).toBe(200);
  return (JSON.parse(r.text) as { model_stats: Array<{ inference_stats: { success: { count: number } } }> }).model_stats[0]!.inference_stats.success.count;
};

function grpcClient(): Client {
  const client = new Service(stack.grpcAddress, grpc.credentials.createInsecure()) as Client;
  clients.push(client);
  return client;
}

function call(client: Client, method: string, req: unknown): Promise<Record<string, unknown>> {
  return new Promise((resolve, reject) => client[method]!(req, { deadline: Date.now() + 30_000 }, (err, response) => (err ? reject(err) : resolve(response))));
}

const grpcQuery = (i: number) => ({ model_name: model.name, inputs: [{ name: "input", datatype: "FP32", shape: [1, 1, 28, 28], contents: { fp32_contents: image(i) } }] });

const alive = (pid: number): boolean => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

beforeAll(async () => {
  model = (await digitsModels()).find((m) => m.name === "digits-mlp-s") as BundledModel;
  stack = await startStack({ frontendProcesses: 2, cpuWorkers: 1, workerThreads: 1, env: { VARIANT_HARDWARE: "cpu", VARIANT_BATCH_SIZES: "8", VARIANT_CPU_THREADS: "1", PROFILE_ON_REGISTER: "false" } });
  frontend = stack.services.find((s) => s.name === "frontend") as ServiceHandle;
  const registered = await registerOverHttp(stack.httpUrl, model);
  expect(registered.status, JSON.stringify(registered.body)).toBe(201);
  // The variant loads on the first query.
  for (const deadline = Date.now() + 60_000; ; ) {
    const r = await fresh("POST", `/v2/models/${model.name}/infer`, query(0));
    if (r.status === 200) break;
    if (Date.now() > deadline) throw new Error(`no answer within 60 s: ${r.status} ${r.text.slice(0, 300)}`);
    await new Promise((done) => setTimeout(done, 500));
  }
  const definition = grpc.loadPackageDefinition(protoLoader.loadSync(oipGrpcProtoPath, { keepCase: true, longs: Number, defaults: true, oneofs: true }));
  Service = (definition.inference as grpc.GrpcObject).GRPCInferenceService as grpc.ServiceClientConstructor;
}, 300_000);

afterAll(async () => {
  for (const c of clients) c.close();
  await stack?.stop();
});

describe("e2e frontend processes", () => {
  it("frontend processes - one ready line from the primary, once both processes listen on its ports", () => {
    expect(frontend.info).toMatchObject({ processes: 2, port: Number(new URL(stack.httpUrl).port) });
    const pids = frontend.info.workerPids as number[];
    expect(pids).toHaveLength(2);
    expect(new Set([...pids, frontend.process.pid]).size).toBe(3);
    for (const pid of pids) expect(alive(pid), `process ${pid}`).toBe(true);
  });

  it("frontend processes - HTTP on new connections and gRPC channels answered; /metrics and Triton's statistics sum both processes", async () => {
    const before = await inferences();
    const successesBefore = await successes();
    expect(before.processes).toBe(2);
    const http = await Promise.all(Array.from({ length: 40 }, (_, i) => fresh("POST", `/v2/models/${model.name}/infer`, query(i))));
    for (const r of http) expect(r.status, r.text.slice(0, 300)).toBe(200);
    // Two channels, two connections: one to each process (round-robin).
    const channels = [grpcClient(), grpcClient()];
    for (const [c, client] of channels.entries()) {
      for (let i = 0; i < 5; i++) {
        const answer = await call(client, "ModelInfer", grpcQuery(i));
        expect(answer.model_name).toBe(model.name);
        expect((answer.raw_output_contents as Buffer[])[0]!.length, `channel ${c}`).toBe(10 * 4);
      }
    }
    // Whichever process answers the scrape (each on a new connection), the sums are the same.
    for (let scrape = 0; scrape < 4; scrape++) expect(await inferences()).toEqual({ processes: 2, http: before.http + 40 });
    expect(await successes()).toBe(successesBefore + 40 + 10);
    const viaGrpc = (await call(channels[0]!, "ModelStatistics", { name: model.name })).model_stats as Array<{ inference_stats: { success: { count: number } } }>;
    expect(viaGrpc[0]!.inference_stats.success.count).toBe(successesBefore + 50);
  });

  it("frontend processes - a process killed: the port keeps serving, the primary says so and forks another; the dead one's counts are gone", async () => {
    const before = await inferences();
    const [victim, survivor] = frontend.info.workerPids as number[];
    process.kill(victim!, "SIGKILL");
    const died = new RegExp(`frontend process \\d \\(pid ${victim}\\) died \\(code null, signal SIGKILL\\): forking another`);
    await expect.poll(() => died.test(readFileSync(stack.logPath, "utf8")), { timeout: 10_000, interval: 100 }).toBe(true);
    // Before the new process is up, the survivor takes every new connection.
    const http = await Promise.all(Array.from({ length: 10 }, (_, i) => fresh("POST", `/v2/models/${model.name}/infer`, query(i))));
    for (const r of http) expect(r.status, r.text.slice(0, 300)).toBe(200);
    expect(alive(survivor!)).toBe(true);
    expect((await call(grpcClient(), "ModelInfer", grpcQuery(1))).model_name).toBe(model.name);
    // The new process says it is back; then every scrape sums two processes again.
    await expect.poll(() => /frontend process \d is back \(pid \d+\)/.test(readFileSync(stack.logPath, "utf8")), { timeout: 120_000, interval: 500 }).toBe(true);
    await expect.poll(async () => (await inferences()).processes, { timeout: 10_000, interval: 250 }).toBe(2);
    // The killed process had served queries of its own (round-robin): its counts went with it.
    expect((await inferences()).http).toBeLessThan(before.http + 10);
  }, 180_000);

  it("frontend processes - SIGTERM to the primary stops every process; the primary exits cleanly", async () => {
    const back = /frontend process \d is back \(pid (\d+)\)/.exec(readFileSync(stack.logPath, "utf8"));
    const pids = [...(frontend.info.workerPids as number[]), Number(back?.[1])];
    await frontend.stop();
    expect(frontend.process.exitCode).toBe(0);
    for (const pid of pids) expect(alive(pid), `process ${pid}`).toBe(false);
  }, 60_000);
});
