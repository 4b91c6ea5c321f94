import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startStack, registerOverHttp, tempDir, type Stack } from "@sloserve/stack";
import { smallModel, smallQuery, startLoad, summarize, sleep } from "./fault-load.js";

/**
 * Fault: redis-server SIGKILLed and started again on the same port and directory (append-only file,
 * as `npm start`, compose and Nomad run it) while queries flow. The registry survives, the services
 * reconnect (a registration afterwards succeeds and serves), and every query sent is answered or
 * fails clearly by its deadline. docs/RELIABILITY.md has the measured numbers.
 */

let stack: Stack;
const dir = tempDir("fault-redis");
const first = smallModel(dir, "fault", "fault-mlp-a", 11);
const second = smallModel(dir, "fault", "fault-mlp-b", 12);

beforeAll(async () => {
  stack = await startStack({
    cpuWorkers: 1,
    workerThreads: 1,
    persistRedis: true,
    // Generous: on a loaded machine the services take long to start (none of it is measured here).
    startTimeoutMs: 180_000,
    env: { VARIANT_HARDWARE: "cpu", VARIANT_BATCH_SIZES: "1,4", VARIANT_CPU_THREADS: "1" },
  });
  const registered = await registerOverHttp(stack.httpUrl, first);
  expect(registered.status, JSON.stringify(registered.body)).toBe(201);
}, 400_000);

afterAll(async () => {
  await stack?.stop();
});

const listed = async (): Promise<string[]> => {
  const response = await fetch(`${stack.httpUrl}/v1/apps/fault/models`);
  if (response.status !== 200) return [];
  return ((await response.json()) as { models: Array<{ name: string }> }).models.map((m) => m.name).sort();
};

describe("fault: redis-server killed and restarted", () => {
  it("fault - the registry survives, services reconnect, every query is answered or fails clearly", async () => {
    const url = `${stack.httpUrl}/v2/models/${first.name}/infer`;
    // Warm: the first answer (the variant is loaded on demand).
    const warm = await fetch(url, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(smallQuery(0)) });
    expect(warm.status, await warm.text()).toBe(200);
    expect(await listed()).toEqual([first.name]);

    const load = startLoad(url, smallQuery, { everyMs: 100, timeoutMs: 3000, graceMs: 5000 });
    await sleep(2000);
    const killedAt = Date.now();
    stack.redis.process.kill("SIGKILL");
    await sleep(3000);
    await stack.restartRedis();
    const restartedAt = Date.now();
    await sleep(4000);
    const outcomes = await load.stop();
    const all = summarize(outcomes, { fromMs: killedAt, toMs: restartedAt });
    const after = summarize(outcomes.filter((o) => o.sentAtMs >= restartedAt));
    console.log(`redis killed for ${restartedAt - killedAt} ms under 10 qps: ${JSON.stringify(all)}; after the restart: ${after.answered}/${after.sent} answered`);

    expect(all.hung, "queries with no clear answer by their deadline").toBe(0);
    expect(all.sent).toBe(all.answered + all.failedClearly);
    // The query path does not wait for Redis: queries sent while it was down were answered.
    expect(all.answeredInWindow).toBeGreaterThan(0);
    expect(after.answered).toBeGreaterThan(0);

    // The registry came back from the append-only file.
    expect(await listed()).toEqual([first.name]);
    // The services reconnected: a registration (registrar and frontend write Redis) succeeds and serves.
    const again = await registerOverHttp(stack.httpUrl, second);
    expect(again.status, JSON.stringify(again.body)).toBe(201);
    expect(await listed()).toEqual([first.name, second.name]);
    const answer = await fetch(`${stack.httpUrl}/v2/models/${second.name}/infer`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(smallQuery(1)) });
    expect(answer.status, await answer.text()).toBe(200);
  }, 60_000);
});
