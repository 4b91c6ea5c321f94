import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { jetstreamManager, type JetStreamManager } from "@nats-io/jetstream";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { startStack, registerOverHttp, tempDir, type Stack } from "@sloserve/stack";
import { MODEL_BUCKET, streams } from "@sloserve/contracts";
import { waitFor } from "@sloserve/testing";
import { smallModel, smallQuery, startLoad, summarize, sleep } from "./fault-load.js";

/**
 * Fault: the stack on a three-node NATS JetStream cluster on loopback (as compose and Nomad run it:
 * JS_REPLICAS=3), the node leading the queries stream SIGKILLed under load and started again on its
 * store. Serving continues, the streams keep three replicas and their consumers, and every query sent is
 * answered or fails clearly by its deadline. docs/RELIABILITY.md has the measured numbers.
 */

let stack: Stack;
let nc: NatsConnection;
let jsm: JetStreamManager;
const model = smallModel(tempDir("fault-nats"), "fault", "fault-mlp-a", 11);
const streamNames = [...Object.values(streams).map((s) => s.name), `OBJ_${MODEL_BUCKET}`];
/**
 * Each query's deadline: longer than what a lost leader costs (nats-server's raft election timeout,
 * 4-9 s, for the stream and then for its consumer, and the executor's next pull), so that every query
 * can be answered: the dispatcher retries its publish until the stream has a leader again.
 */
const DEADLINE_MS = 30_000;

beforeAll(async () => {
  stack = await startStack({
    cpuWorkers: 1,
    workerThreads: 1,
    natsNodes: 3,
    // Generous: on a loaded machine the services take long to start (none of it is measured here).
    startTimeoutMs: 180_000,
    env: { VARIANT_HARDWARE: "cpu", VARIANT_BATCH_SIZES: "1,4", VARIANT_CPU_THREADS: "1" },
  });
  nc = await connect({ servers: stack.env.NATS_URL!.split(","), maxReconnectAttempts: -1, reconnectTimeWait: 250 });
  jsm = await jetstreamManager(nc);
  const registered = await registerOverHttp(stack.httpUrl, model);
  expect(registered.status, JSON.stringify(registered.body)).toBe(201);
}, 400_000);

afterAll(async () => {
  await nc?.close();
  await stack?.stop();
});

/** Each stream's replica count and consumers, and whether every replica is current. */
async function streamState(): Promise<Record<string, { replicas: number; peers: number; current: boolean; consumers: string[] }>> {
  const out: Record<string, { replicas: number; peers: number; current: boolean; consumers: string[] }> = {};
  for (const name of streamNames) {
    const info = await jsm.streams.info(name);
    const consumers: string[] = [];
    for await (const c of jsm.consumers.list(name)) consumers.push(c.name);
    const replicas = info.cluster?.replicas ?? [];
    out[name] = { replicas: info.config.num_replicas, peers: replicas.length + 1, current: replicas.every((r) => r.current && !r.offline), consumers: consumers.sort() };
  }
  return out;
}

/** Waits until every stream has its three peers, all current. */
async function waitForCurrent(timeoutMs: number): Promise<void> {
  let state: Awaited<ReturnType<typeof streamState>> | undefined;
  await waitFor("every stream's three replicas current", async () => {
    state = await streamState();
    return Object.values(state).every((s) => s.current && s.peers === 3);
  }, { timeoutMs, intervalMs: 250, detail: () => `streams: ${JSON.stringify(state)}` });
}

describe("fault: a node of a three-node NATS JetStream cluster killed and restarted", () => {
  it("fault - serving continues, streams and consumers intact, every query answered or failed clearly", async () => {
    const url = `${stack.httpUrl}/v2/models/${model.name}/infer`;
    const warm = await fetch(url, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(smallQuery(0)) });
    expect(warm.status, await warm.text()).toBe(200);
    await waitForCurrent(30_000);
    const before = await streamState();
    for (const name of streamNames) expect(before[name]?.replicas, name).toBe(3);
    expect(before[streams.queries.name]?.consumers.length).toBeGreaterThan(0);

    const leader = (await jsm.streams.info(streams.queries.name)).cluster?.leader ?? "n1";
    const node = Number(leader.replace(/^n/, "")) - 1;
    const load = startLoad(url, smallQuery, { everyMs: 100, timeoutMs: DEADLINE_MS, graceMs: 5000 });
    await sleep(2000);
    const killedAt = Date.now();
    stack.natsCluster!.nodes[node]!.process.kill("SIGKILL");
    // Down until serving has resumed on the two others (a new stream leader, the pulls renewed), at
    // least 5 s.
    await waitFor("serving to resume while the node is down (an answer to a query sent after the kill)", () => load.outcomes.some((o) => o.sentAtMs > killedAt && o.status === 200), {
      timeoutMs: 30_000,
      intervalMs: 100,
      detail: () => `since the kill: ${JSON.stringify(summarize(load.outcomes.filter((o) => o.sentAtMs > killedAt)))}`,
    }).catch(async (err: unknown) => {
      await load.stop(); // its timer would outlive the failed test
      throw err;
    });
    await sleep(Math.max(0, killedAt + 5000 - Date.now()));
    await stack.natsCluster!.restart(node);
    const restartedAt = Date.now();
    await sleep(4000);
    const outcomes = await load.stop();
    const all = summarize(outcomes, { fromMs: killedAt, toMs: restartedAt });
    const after = summarize(outcomes.filter((o) => o.sentAtMs >= restartedAt));
    const firstAnswer = outcomes.find((o) => o.sentAtMs > killedAt && o.status === 200);
    console.log(
      `node ${leader} (queries stream leader) down for ${restartedAt - killedAt} ms under 10 qps; first answer to a query sent after the kill ${firstAnswer ? firstAnswer.doneAtMs - killedAt : "-"} ms after it: ${JSON.stringify(all)}; after the restart: ${after.answered}/${after.sent} answered`,
    );

    expect(all.hung, "queries with no clear answer by their deadline").toBe(0);
    expect(all.sent).toBe(all.answered + all.failedClearly);
    // Every deadline outlasts the election: every query answered (failures would name their code here).
    expect(all.failed, "queries failed although their deadline outlasted the election").toEqual({});
    expect(all.answered).toBe(all.sent);
    expect(all.answeredInWindow, "answered while the node was down").toBeGreaterThan(0);
    expect(after.answered).toBeGreaterThan(0);

    // The restarted node catches up; every stream still has three replicas and the same consumers.
    await waitForCurrent(30_000);
    const afterState = await streamState();
    for (const name of streamNames) {
      expect(afterState[name]?.replicas, name).toBe(3);
      expect(afterState[name]?.consumers, name).toEqual(expect.arrayContaining(before[name]?.consumers ?? []));
    }
    // The model's bytes are still in the replicated bucket: a query to it is answered.
    const answer = await fetch(url, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(smallQuery(1)) });
    expect(answer.status, await answer.text()).toBe(200);
  }, 300_000);
});
