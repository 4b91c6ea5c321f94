import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { join } from "node:path";
import { readFileSync } from "node:fs";
import type { Subscription } from "@nats-io/transport-node";
import { ManualClock, subjects, workerReportSchema, type WorkerReport } from "@sloserve/contracts";
import { connectBus, createLogger, type Bus } from "@sloserve/bus";
import { logFile, startNats, startRedis, tempDir, type ServerHandle } from "@sloserve/stack";
import { LocalWorkerProvider, fleetCost, instanceCost, type ProviderEvent } from "@sloserve/providers";
import { waitFor } from "@sloserve/testing";
import { memoryLogger } from "./support.js";

/**
 * The local provider on a real nats-server and redis-server, launching real executor-cpu processes:
 * boot delay, heartbeats on `metrics.worker.<workerId>`, a drained termination, a SIGKILL seen as a
 * loss, an executor that refuses to start, and the bill. The clock is a ManualClock: the test says
 * what time it is, so the dollars are exact.
 */

const T0 = 1_800_000_000_000;
let nats: ServerHandle;
let redis: ServerHandle;
let bus: Bus;
const reports = new Map<string, WorkerReport[]>();
let sub: Subscription;
const dir = tempDir("local-workers");
const logTo = logFile(join(dir, "executors.log"));
const clock = new ManualClock(T0);
const { log, lines } = memoryLogger("local-workers-test");
let provider: LocalWorkerProvider;
const events: ProviderEvent[] = [];

beforeAll(async () => {
  [nats, redis] = await Promise.all([startNats(), startRedis()]);
  bus = await connectBus({ servers: nats.url, name: "local-workers-test", log: createLogger("local-workers-test", "warn") });
  sub = bus.nc.subscribe(subjects.workerMetricsAll, {
    callback: (_err, msg) => {
      const report = workerReportSchema.parse(msg.json());
      reports.set(report.worker, [...(reports.get(report.worker) ?? []), report]);
    },
  });
  provider = new LocalWorkerProvider({
    natsUrl: nats.url,
    redisUrl: redis.url,
    bootDelayMs: 400,
    stopTimeoutMs: 20_000,
    kindEnv: { cpu: { WORKER_THREADS: "1", WORKER_MEMORY_MB: "512" } },
    logTo,
    clock,
    log,
  });
  provider.onEvent((e) => events.push(e));
});

afterAll(async () => {
  await provider?.close();
  sub?.unsubscribe();
  await bus?.close();
  await Promise.all([nats?.stop(), redis?.stop()]);
  logTo.end();
});

const heartbeats = (workerId: string): WorkerReport[] => reports.get(workerId) ?? [];

describe("local worker provider", () => {
  it("local - launch boots an executor after the boot delay; it heartbeats; terminate drains it; the bill is exact", async () => {
    const instance = await provider.launch({ kind: "cpu", instanceType: "c5.xlarge", reason: "test: one more cpu worker" });
    expect(instance).toEqual({
      id: instance.workerId,
      provider: "local",
      workerId: expect.stringMatching(/^cpu-local-[0-9a-f]{8}$/) as string,
      kind: "cpu",
      instanceType: "c5.xlarge",
      market: "on-demand",
      pricePerHour: 0.17,
      launchedAtMs: T0,
      state: "booting",
      endedAtMs: null,
    });
    // Booting: no process yet.
    expect(provider.pid(instance.id)).toBeUndefined();
    await waitFor("the executor process", () => provider.pid(instance.id), { timeoutMs: 30_000 });
    // Its heartbeat, with the kind's environment applied.
    const first = await waitFor("a heartbeat", () => heartbeats(instance.workerId)[0], { timeoutMs: 60_000 });
    expect(first).toMatchObject({ worker: instance.workerId, hardware: "cpu", threads: 1, memoryBytes: 512 * 1048576 });
    await waitFor("the ready line", async () => (await provider.list()).find((i) => i.id === instance.id)?.state === "running", { timeoutMs: 30_000 });

    clock.advance(90_000);
    const pid = provider.pid(instance.id)!;
    await provider.terminate(instance.id, "test: idle");
    const [ended] = await provider.list();
    expect(ended).toEqual({ ...instance, state: "terminated", endedAtMs: T0 + 90_000 });
    expect(provider.pid(instance.id)).toBeUndefined();
    expect(() => process.kill(pid, 0)).toThrow();
    // It drained and said goodbye (runService's "stopped" line after Worker.stop), and was no loss.
    const executorLog = readFileSync(join(dir, "executors.log"), "utf8").split("\n").filter((l) => l.includes(`"pid":${pid},`));
    expect(executorLog.some((l) => l.includes('"msg":"stopping"') && l.includes('"signal":"SIGTERM"'))).toBe(true);
    expect(executorLog.some((l) => l.includes('"msg":"stopped"'))).toBe(true);
    expect(events).toEqual([]);
    // No more heartbeats (a pause of 1.5 heartbeat periods: no event says "none came").
    const count = heartbeats(instance.workerId).length;
    await new Promise((r) => setTimeout(r, 1_500));
    expect(heartbeats(instance.workerId).length).toBe(count);
    // 90 s at $0.17/h = 90 × 0.17 / 3600 = $0.00425 (over EC2's 60 s minimum).
    expect(instanceCost(ended!, clock.now())).toBeCloseTo(0.00425, 12);
  });

  it("local - a SIGKILLed executor is lost, with the reason", async () => {
    const instance = await provider.launch({ kind: "cpu", instanceType: "c5.large", market: "spot", reason: "test: to be killed" });
    expect(instance.pricePerHour).toBe(0.03);
    await waitFor("the ready line", async () => (await provider.list()).find((i) => i.id === instance.id)?.state === "running", { timeoutMs: 60_000 });
    clock.advance(30_000);
    process.kill(provider.pid(instance.id)!, "SIGKILL");
    await waitFor("the lost event", () => events.length > 0, { timeoutMs: 30_000 });
    expect(events).toEqual([{ type: "lost", id: instance.id, atMs: clock.now(), reason: expect.stringMatching(/^executor killed by SIGKILL; last output: [a-z]/) as string }]);
    expect((await provider.list()).find((i) => i.id === instance.id)).toMatchObject({ state: "terminated", endedAtMs: clock.now() });
    events.length = 0;
  });

  it("local - an executor that refuses to start is lost before it was ready, saying why", async () => {
    const instance = await provider.launch({ kind: "cpu", instanceType: "c5.xlarge", reason: "test: bad env", env: { WORKER_THREADS: "0" } });
    await waitFor("the lost event", () => events.length > 0, { timeoutMs: 60_000 });
    expect(events[0]).toMatchObject({ type: "lost", id: instance.id });
    expect(events[0]?.type === "lost" && events[0].reason).toBe(
      "executor exited with code 1 before it was ready; last output: failed to start: invalid configuration for executor-cpu: WORKER_THREADS: Too small: expected number to be >=1",
    );
    events.length = 0;
  });

  it("local - terminated while booting: the executor never starts", async () => {
    const instance = await provider.launch({ kind: "cpu", instanceType: "c5.xlarge", reason: "test: changed my mind" });
    await provider.terminate(instance.id, "test: not needed after all");
    await new Promise((r) => setTimeout(r, 600)); // time for a process that should not start to show up: there is no event for "it did not"
    expect(provider.pid(instance.id)).toBeUndefined();
    expect((await provider.list()).find((i) => i.id === instance.id)).toMatchObject({ state: "terminated", endedAtMs: clock.now() });
    expect(heartbeats(instance.workerId)).toEqual([]);
    expect(events).toEqual([]);
  });

  it("local - refuses what it cannot launch, and unknown ids", async () => {
    // A kind whose executor the repository lacks.
    const bare = new LocalWorkerProvider({ natsUrl: nats.url, redisUrl: redis.url, bootDelayMs: 0, root: tempDir("no-executors"), clock, log });
    await expect(bare.launch({ kind: "inferentia", instanceType: "inf1.xlarge", reason: "r" })).rejects.toThrow(
      "no executor for inferentia workers: services/executor-inferentia/src/main.ts does not exist in this repository",
    );
    await bare.close();
    await expect(provider.launch({ kind: "cpu", instanceType: "p3.2xlarge", reason: "r" })).rejects.toThrow("invalid worker spec: instance type p3.2xlarge is gpu hardware, not cpu");
    await expect(provider.terminate("cpu-local-nope", "r")).rejects.toThrow('local: no worker "cpu-local-nope"');
    expect(() => new LocalWorkerProvider({ natsUrl: "", redisUrl: "redis://x", bootDelayMs: -1, clock, log })).toThrow(
      "invalid local worker provider options: natsUrl is required; bootDelayMs must be a number ≥ 0, got -1",
    );
  });

  it("local - close terminates every worker it started; list keeps the ended ones with their bill", async () => {
    const a = await provider.launch({ kind: "cpu", instanceType: "c5.xlarge", reason: "test: close" });
    await waitFor("a heartbeat", () => heartbeats(a.workerId)[0], { timeoutMs: 60_000 });
    const pid = provider.pid(a.id)!;
    await provider.close();
    expect(() => process.kill(pid, 0)).toThrow();
    const all = await provider.list();
    expect(all.every((i) => i.state === "terminated" && i.endedAtMs !== null)).toBe(true);
    expect(all.map((i) => i.id)).toContain(a.id);
    expect(events).toEqual([]);
    await expect(provider.launch({ kind: "cpu", instanceType: "c5.xlarge", reason: "r" })).rejects.toThrow("local worker provider is closed");
    // Per second from launch to end, at least EC2's minute: the first worker ran 90 s at $0.17/h, the
    // killed one 30 s at $0.03/h (billed 60 s); the others ran no fake time (billed 60 s each).
    expect(all.map((i) => [i.pricePerHour, (i.endedAtMs! - i.launchedAtMs) / 1000])).toEqual([[0.17, 90], [0.03, 30], [0.17, 0], [0.17, 0], [0.17, 0]]);
    expect(fleetCost(all, clock.now())).toBeCloseTo((90 * 0.17 + 60 * 0.03 + 3 * 60 * 0.17) / 3600, 12);
    expect(lines.some((l) => l.msg === "terminating worker" && l.reason === "provider closing" && l.id === a.id)).toBe(true);
  });
});
