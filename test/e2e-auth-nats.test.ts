import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { createRng } from "@sloserve/policy";
import { Network, exportNetwork } from "@sloserve/zoo";
import { contentTypes, headers, subjects } from "@sloserve/contracts";
import { connectBus, createLogger, makeHeaders, type Bus } from "@sloserve/bus";
import { bearer, startStack, type Stack } from "@sloserve/stack";
import { waitFor } from "@sloserve/testing";

/**
 * The whole stack with NATS users on (`startStack({ auth: true })`, as `npm start -- --auth`): every
 * service connects as its own user with the permissions of libs/contracts nats-permissions.ts. A model
 * is registered over NATS by the `client` user (object store upload + registry request), profiled by
 * the executor, queried over HTTP (frontend → dispatcher → executor) and over NATS; nats-server, which
 * logs every refused publish, subscription and login, logged none: each service's user can do what it
 * needs.
 */

const APP = "authapp";
const MODEL = "auth-mlp";
let stack: Stack;
let client: Bus;

beforeAll(async () => {
  stack = await startStack({ auth: true, cpuWorkers: 1, workerThreads: 1 });
  const users = stack.natsUsers;
  if (!users) throw new Error("startStack({ auth: true }) returned no NATS users");
  client = await connectBus({ servers: stack.env.NATS_URL as string, name: "e2e-auth client", log: createLogger("e2e-auth", "warn"), ensure: false, env: { NATS_USER: users.client.user, NATS_PASSWORD: users.client.password } });
}, 300_000);

afterAll(async () => {
  await client?.close();
  await stack?.stop();
});

describe("e2e nats auth", () => {
  it("auth - every role has its own password, in no shared environment and in no log", () => {
    const users = stack.natsUsers!;
    expect(Object.keys(users).sort()).toEqual(["admin", "client", "dispatcher", "executor", "forecaster", "frontend", "function", "model-autoscaler", "registrar", "vm-autoscaler"]);
    expect(new Set(Object.values(users).map((u) => u.password)).size).toBe(10);
    // The stack's shared environment has no password; each service got its own.
    expect(Object.keys(stack.env).filter((k) => k.includes("PASSWORD"))).toEqual([]);
    // Nothing logged a password.
    const logged = readFileSync(stack.logPath, "utf8");
    for (const u of Object.values(users)) expect(logged).not.toContain(u.password);
  });

  it("auth - a model registered over NATS by the client user is profiled and serves over HTTP and NATS", async () => {
    const network = new Network([{ type: "flatten" }, { type: "dense", units: 16 }, { type: "relu" }, { type: "dense", units: 10 }], [1, 28, 28], createRng(3));
    const path = join(stack.dir, `${MODEL}.onnx`);
    writeFileSync(path, exportNetwork(network, MODEL));
    const upload = `upload/${MODEL}.onnx`;
    await client.models.putBlob({ name: upload }, readFileSync(path));
    const answer = await client.nc.request(subjects.registerModel, JSON.stringify({ model: MODEL, app: APP, task: "image-classification", upload }), { timeout: 60_000 });
    expect(answer.headers?.get(headers.error) ?? "", answer.string()).toBe("");

    const input = { name: "input", datatype: "FP32", shape: [1, 1, 28, 28], data: Array.from({ length: 784 }, (_, i) => (i % 7) / 7) };
    const url = `${stack.httpUrl}/v2/models/${MODEL}/infer`;
    let http = { status: 0, body: {} as Record<string, unknown> };
    // The first query waits for its variant to be loaded; a generous deadline, no timing asserted.
    for (let i = 0; i < 20 && http.status !== 200; i++) {
      const response = await fetch(url, { method: "POST", headers: { "content-type": "application/json", ...bearer(stack.adminKey) }, body: JSON.stringify({ inputs: [input], parameters: { timeout_ms: 30_000 } }) });
      http = { status: response.status, body: (await response.json()) as Record<string, unknown> };
    }
    expect(http.status, JSON.stringify(http.body).slice(0, 300)).toBe(200);
    expect((http.body.outputs as Array<{ shape: number[] }>)[0]?.shape).toEqual([1, 10]);

    const overNats = await client.nc.request(subjects.inferModel(MODEL), JSON.stringify({ inputs: [input] }), {
      timeout: 30_000,
      headers: makeHeaders({ [headers.contentType]: contentTypes.json, [headers.deadline]: Date.now() + 30_000 }),
    });
    expect(overNats.headers?.get(headers.error) ?? "", overNats.string().slice(0, 300)).toBe("");
    expect((overNats.json<{ outputs: Array<{ shape: number[] }> }>().outputs)[0]?.shape).toEqual([1, 10]);

    // The executor took a profiling job and published its profiles; the registrar stored them.
    const profiled = await waitFor("a cpu profile stored", async () => {
      const progress = (await (await fetch(`${stack.httpUrl}/v1/models/${MODEL}/profile`, { headers: bearer(stack.adminKey) })).json()) as { by_hardware?: Record<string, { profiled: number }> };
      return progress.by_hardware?.cpu?.profiled ?? 0;
    }, { timeoutMs: 100_000, intervalMs: 500 });
    expect(profiled).toBeGreaterThanOrEqual(1);
    // The frontend reads decisions from the EVENTS stream (a consumer of its own).
    const decisions = await fetch(`${stack.httpUrl}/v1/decisions?limit=5`, { headers: bearer(stack.adminKey) });
    expect(decisions.status).toBe(200);
  }, 300_000);

  it("auth - nats-server refused nothing the services did", async () => {
    // A model-less query too: the dispatcher's arrivals reach the forecaster and the autoscalers.
    const modelless = await fetch(`${stack.httpUrl}/v1/apps/${APP}/infer`, {
      method: "POST",
      headers: { "content-type": "application/json", ...bearer(stack.adminKey) },
      body: JSON.stringify({ inputs: [{ name: "input", datatype: "FP32", shape: [1, 1, 28, 28], data: Array.from({ length: 784 }, () => 0) }], slo: { latency_ms: 5000 } }),
    });
    expect(modelless.status, await modelless.text()).toBe(200);
    // Let the periodic reports (metrics, arrivals, forecasts, costs) run a few rounds under the users
    // (a fixed time: what is checked is that no refusal comes, which no event announces).
    await new Promise((r) => setTimeout(r, 3000));
    const refusals = readFileSync(stack.logPath, "utf8")
      .split("\n")
      .filter((l) => /Violation|authentication error/.test(l));
    expect(refusals).toEqual([]);
  });
});
