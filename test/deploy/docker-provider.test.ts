import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { randomBytes } from "node:crypto";
import { readFileSync } from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { connect, headers as natsHeaders, type NatsConnection } from "@nats-io/transport-node";
import { startStack, ocrModels, registerOverHttp, waitForProfiles, type Stack } from "@sloserve/stack";
import { contentTypes, decodeTensors, encodeTensors, headers, subjects, type WorkerReport } from "@sloserve/contracts";
import { DOCKER_LABELS } from "@sloserve/providers";
import { waitFor } from "@sloserve/testing";
import { NatsTally } from "../fault-load.js";
import { buildImages, dockerEngine, type DockerEngine } from "./docker-engine.js";

/**
 * PROVIDER=docker on a real Docker engine (docker-engine.ts: the one here, or `dockerd` started without
 * a bridge) with the project's image (scripts/docker-images.sh): the stack's services as processes
 * (real nats-server and redis-server on 127.0.0.1), one executor-cpu of its own with one thread, and
 * the real vm-autoscaler launching containers (host network: they reach NATS and Redis on 127.0.0.1)
 * labelled with an owner of this run's own (the engine may hold other runs' containers).
 *
 * 1. A load ramp on PaddleOCR's text detector saturates the stack's worker: the vm-autoscaler launches
 *    a container, which heartbeats and serves queries of the detector.
 * 2. `docker kill` of that container: the provider reports it lost (exit 137) and it is replaced at
 *    once (no heartbeat timeout), by another container.
 * 3. The vm-autoscaler restarts: the new one finds the running container by its labels, and gives it back
 *    once idle after the cool-down: `docker stop` sends SIGTERM, the executor drains and exits 0 (the
 *    engine's own events say so: no SIGKILL), the container is removed.
 * Every container of this run's owner is removed at the end.
 */

const owner = `test-${randomBytes(3).toString("hex")}`;
const model = ocrModels().find((m) => m.name === "ocr-det")!;
const SIDE = 320;
let engine: DockerEngine | undefined;
let stack: Stack | undefined;
let nc: NatsConnection | undefined;
let watcher: ChildProcess | undefined;
const decisions: Array<{ action: string; kind: string; worker?: string; trigger?: string; reason: string; atMs: number }> = [];
const results: Array<{ action: string; worker?: string; instance?: string; ok: boolean; reason?: string; error?: string; atMs: number }> = [];
const lastReport = new Map<string, { report: WorkerReport; atMs: number }>();
/** The engine's events for this owner's containers (`docker events`): kills with their signal, deaths with their exit code. */
const engineEvents: Array<{ action: string; worker: string; signal?: string; exitCode?: string; atMs: number }> = [];

/** The vm-autoscaler's settings (its first start and its restart). */
let VM_AUTOSCALER_ENV: Record<string, string> = {};
/** The stack's log, its JSON lines. */
function logLines(): Array<Record<string, unknown> & { time: string; msg?: string; id?: string }> {
  return readFileSync(stack!.logPath, "utf8")
    .split("\n")
    .filter((l) => l.startsWith("{"))
    .flatMap((l) => {
      try {
        return [JSON.parse(l) as Record<string, unknown> & { time: string }];
      } catch {
        return [];
      }
    });
}
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
const waiting = (timeoutMs: number) => ({ timeoutMs, intervalMs: 200, detail: () => timeline() });
/** Queries of the detector a worker says it served (its latest report). */
const servedBy = (worker: string): number => lastReport.get(worker)?.report.variants.filter((v) => v.variant.startsWith(`${model.name}--`)).reduce((n, v) => n + v.served, 0) ?? 0;
/** Everything that happened to this run's containers, in order: the vm-autoscaler's decisions and results, the engine's events, the containers' states now. */
function timeline(): string {
  const t0 = Math.min(...[...decisions, ...engineEvents].map((e) => e.atMs), Date.now());
  const lines = [
    ...decisions.map((d) => ({ atMs: d.atMs, text: `decision ${d.action} ${d.worker ?? d.kind}: ${d.reason}` })),
    ...results.map((r) => ({ atMs: r.atMs, text: `result ${r.action} ${r.worker ?? ""} ${r.ok ? "ok" : `failed: ${r.error ?? ""}`} (${r.reason ?? ""})` })),
    ...engineEvents.map((e) => ({ atMs: e.atMs, text: `engine ${e.action} ${e.worker}${e.signal ? ` signal ${e.signal}` : ""}${e.exitCode ? ` exit ${e.exitCode}` : ""}` })),
  ].sort((a, b) => a.atMs - b.atMs);
  const states = [...containers()].map(([w, s]) => `${w} ${s} (served ${servedBy(w)})`).join(", ") || "none";
  return `\n${lines.map((l) => `  +${((l.atMs - t0) / 1000).toFixed(1)} s ${l.text}`).join("\n")}\n  containers now: ${states}`;
}
const live = (worker: string): boolean => Date.now() - (lastReport.get(worker)?.atMs ?? 0) < 3000;
const docker = (...args: string[]) => spawnSync("docker", args, { env: engine!.env, encoding: "utf8", timeout: 30_000 });
/** This owner's containers: worker id → state. */
function containers(): Map<string, string> {
  const listed = docker("ps", "-a", "--filter", `label=${DOCKER_LABELS.launcher}=${owner}`, "--format", `{{.Label "${DOCKER_LABELS.worker}"}} {{.State}}`);
  return new Map(listed.stdout.split("\n").filter((l) => l.trim() !== "").map((l) => l.split(" ") as [string, string]));
}

const payload = encodeTensors([{ name: "x", datatype: "FP32", shape: [1, 3, SIDE, SIDE], data: new Float32Array(3 * SIDE * SIDE).fill(0.5) }]);
/** Queries of the detector with a 20 s deadline, one per `send()`, and their outcomes. */
const tally = new NatsTally(() => nc!, subjects.inferModel(model.name), payload);
const inFlight = tally.inFlight;
const send = (): void => tally.send();

beforeAll(async () => {
  engine = await dockerEngine();
  // A cool-down of 20 s: the predictive plan, whose forecast trails the ramp, gives back a worker it
  // does not plan for once its cool-down is over, and a container is up before anything is placed on
  // it (the INFaaS rule reads an idle worker among the busy one): 8 s left a slow machine little time
  // from launch to the first query served there (here about 5 s).
  VM_AUTOSCALER_ENV = { PROVIDER: "docker", DOCKER_HOST: engine.host, DOCKER_OWNER: owner, DOCKER_STOP_TIMEOUT_S: "20", DOCKER_CPUS: "1", DOCKER_MEMORY_MB: "1536", COOLDOWN_MS: "20000", BILLING_MINIMUM_MS: "5000" };
  // Which engine, and how it limits containers (for reading a failure from another machine).
  console.info(`docker engine ${engine.host}${engine.log ? ` (started here, log ${engine.log})` : ""}: ${docker("info", "--format", "{{.ServerVersion}} cgroup v{{.CgroupVersion}} driver {{.CgroupDriver}} storage {{.Driver}} cpus {{.NCPU}}").stdout.trim()}`);
  buildImages(engine);
  watcher = spawn("docker", ["events", "--filter", "type=container", "--filter", `label=${DOCKER_LABELS.launcher}=${owner}`, "--format", "{{json .}}"], { env: engine.env, stdio: ["ignore", "pipe", "ignore"] });
  let partial = "";
  watcher.stdout!.on("data", (chunk: Buffer) => {
    const lines = (partial + chunk.toString()).split("\n");
    partial = lines.pop() ?? "";
    for (const line of lines) {
      try {
        const e = JSON.parse(line) as { Action?: string; Actor?: { Attributes?: Record<string, string> } };
        const a = e.Actor?.Attributes ?? {};
        engineEvents.push({ action: e.Action ?? "", worker: a[DOCKER_LABELS.worker] ?? "", ...(a.signal ? { signal: a.signal } : {}), ...(a.exitCode ? { exitCode: a.exitCode } : {}), atMs: Date.now() });
      } catch {
        // not an event line
      }
    }
  });
  stack = await startStack({
    cpuWorkers: 1,
    workerThreads: 1,
    maxWorkers: 2,
    env: { VARIANT_HARDWARE: "cpu", VARIANT_BATCH_SIZES: "1,4", VARIANT_CPU_THREADS: "1" },
    vmAutoscalerEnv: VM_AUTOSCALER_ENV,
  });
  nc = await connect({ servers: stack.nats.url });
  nc.subscribe("decision.vm.*", { callback: (_e, m) => void decisions.push(m.json()) });
  nc.subscribe("scale.result.vm.*", { callback: (_e, m) => void results.push({ ...m.json<Omit<(typeof results)[number], "atMs">>(), atMs: Date.now() }) });
  nc.subscribe(subjects.workerMetricsAll, {
    callback: (_e, m) => {
      const r = m.json<WorkerReport>();
      lastReport.set(r.worker, { report: r, atMs: Date.now() });
    },
  });
  const registered = await registerOverHttp(stack.httpUrl, model);
  expect(registered.status, JSON.stringify(registered.body)).toBe(201);
  // Profiled, so that the model autoscaler can place replicas of it on a launched worker.
  await waitForProfiles(stack.httpUrl, model.name, "cpu", 180_000);
}, 600_000);

afterAll(async () => {
  await nc?.close();
  if (engine) {
    // Every container this run's vm-autoscaler made, whatever state it is in.
    const ids = docker("ps", "-aq", "--filter", `label=${DOCKER_LABELS.launcher}=${owner}`).stdout.split("\n").filter((l) => l.trim() !== "");
    if (ids.length > 0) docker("rm", "-f", ...ids);
  }
  watcher?.kill();
  await stack?.stop();
  await engine?.stop();
}, 120_000);

describe("PROVIDER=docker", () => {
  let first = "";
  let second = "";

  it("launches a worker container on a load ramp; it heartbeats and serves the detector", async () => {
    send();
    await waitFor("the first answer", () => tally.ok + tally.noReply + tally.errors.size >= 1, waiting(60_000));
    expect(tally.ok).toBe(1);
    // The detector's run time here (the executor's own measure, queries one at a time): the ramp is set
    // against it, from half the worker's capacity up by a quarter of it every 3 s (at most 3 ×), until
    // the container serves the detector.
    const soloMs: number[] = [];
    for (let i = 0; i < 4; i++) {
      const h = natsHeaders();
      h.set(headers.contentType, contentTypes.wire);
      h.set(headers.deadline, String(Date.now() + 20_000));
      const reply = await nc!.request(subjects.inferModel(model.name), payload, { timeout: 60_000, headers: h });
      soloMs.push(decodeTensors<{ timing_ms: { inference: number } }>(reply.data).meta.timing_ms.inference);
    }
    const capacity = 1000 / Math.max(1, [...soloMs].sort((a, b) => a - b)[1]!);
    const started = Date.now();
    let owed = 0;
    let served = 0;
    let rate = 0;
    while (Date.now() - started < 90_000) {
      rate = capacity * Math.min(3, 0.5 + 0.25 * Math.floor((Date.now() - started) / 3000));
      owed += rate / 4;
      for (; owed >= 1; owed--) send();
      await sleep(250);
      // The launched container that serves the detector (on a slow machine an earlier launch may have
      // been given back or replaced before the model autoscaler placed anything on it: the timeline says).
      const launched = results.filter((r) => r.action === "launch" && r.ok && r.worker).map((r) => r.worker!);
      first = launched.find((w) => servedBy(w) > 0) ?? launched[0] ?? "";
      served = servedBy(first);
      if (served > 0) break;
    }
    const detail = `at up to ${rate.toFixed(1)} queries/s (one query: ${soloMs.map((m) => m.toFixed(1)).join(", ")} ms); ${timeline()}`;
    expect(first, `a launch ${detail}`).toMatch(/^cpu-docker-[0-9a-f]{8}$/);
    expect(decisions.find((d) => d.action === "launch")?.reason).toMatch(/utilisation above 80%|interfered|overloaded|placement|SLO monitor/);
    expect(served, `the containers launched served no query of the detector in 90 s: ${detail}`).toBeGreaterThan(0);
    console.info(`docker-provider: the container ${first} served the detector ${detail}`);
    expect(containers().get(first), detail).toBe("running");
    // Limited as a VM of 1 CPU and 1.5 GiB without swap; its executor offers variants 80% of that.
    expect(docker("inspect", "--format", "{{.HostConfig.NanoCpus}} {{.HostConfig.Memory}} {{.HostConfig.MemorySwap}}", first).stdout.trim()).toBe(`1000000000 ${1536 * 1048576} ${1536 * 1048576}`);
    expect(lastReport.get(first)?.report.memoryBytes).toBe(Math.floor(1536 * 0.8) * 1048576);
    await waitFor("every query answered", () => inFlight.size === 0, waiting(60_000));
    expect(tally.noReply, JSON.stringify({ ...tally, errors: Object.fromEntries(tally.errors) })).toBe(0);
  }, 180_000);

  it("docker kill: the container is reported lost and replaced at once", async () => {
    expect(first).not.toBe("");
    const killedAt = Date.now();
    expect(docker("kill", first).status).toBe(0);
    const replaced = await waitFor("the replacement", () => decisions.find((d) => d.action === "replace" && d.worker === first), waiting(15_000));
    // Reported by the provider (the container's exit), not a heartbeat timeout.
    expect(replaced.reason).toMatch(/container exited with code 137 \(SIGKILL\)/);
    expect(Date.now() - killedAt).toBeLessThan(8000);
    second = await waitFor("the replacement's launch", () => results.find((r) => r.action === "launch" && r.ok && r.reason?.startsWith(`replace ${first}:`))?.worker, waiting(10_000));
    expect(second).toMatch(/^cpu-docker-/);
    await waitFor("the replacement's heartbeat", () => live(second), waiting(60_000));
    expect(engineEvents.some((e) => e.worker === first && e.action === "die" && e.exitCode === "137")).toBe(true);
    // The lost container is removed; the replacement runs.
    await waitFor("the lost container removed", () => !containers().has(first), waiting(10_000));
    expect(containers().get(second)).toBe("running");
  }, 90_000);

  it("a restarted vm-autoscaler finds its container by label and gives it back idle: SIGTERM, exit 0, removed", async () => {
    expect(second).not.toBe("");
    // The vm-autoscaler stops (its containers keep running) and starts again with the same settings.
    const old = stack!.services.find((s) => s.name === "vm-autoscaler")!;
    await old.stop();
    stack!.services.splice(stack!.services.indexOf(old), 1);
    expect(containers().get(second)).toBe("running");
    const restartedAt = new Date().toISOString();
    await stack!.startService("vm-autoscaler", { ...VM_AUTOSCALER_ENV, MIN_WORKERS: "1", MAX_WORKERS: "2", WORKER_THREADS: "1", EXECUTOR_LOG_FILE: stack!.logPath });
    const found = await waitFor("the container found again", () => logLines().find((l) => l.time >= restartedAt && l.msg === "found a worker container of ours" && l.id === second), waiting(60_000));
    expect(found.provider).toBe("docker");
    const terminated = await waitFor("the termination", () => decisions.find((d) => d.action === "terminate" && d.worker === second), waiting(120_000));
    // Given back by INFaaS's idle rule or by MArk's predictive plan, whichever comes first: both after the cool-down.
    expect(terminated.reason).toMatch(/^no active variant for \d+ s \(≥ 20 s\)|^not in the predictive plan for 20 s/);
    await waitFor("the termination's result", () => results.find((r) => r.action === "terminate" && r.worker === second), waiting(40_000));
    expect(results.find((r) => r.action === "terminate" && r.worker === second)?.ok).toBe(true);
    const mine = engineEvents.filter((e) => e.worker === second);
    expect(mine.filter((e) => e.action === "kill").map((e) => e.signal), JSON.stringify(mine)).toEqual(["15"]);
    expect(mine.find((e) => e.action === "die")?.exitCode, JSON.stringify(mine)).toBe("0");
    await waitFor("the container removed", () => !containers().has(second), waiting(30_000));
    // The stack's worker is left and answers.
    send();
    await waitFor("the last answer", () => inFlight.size === 0, waiting(60_000));
    expect(tally.noReply).toBe(0);
  }, 300_000);
});
