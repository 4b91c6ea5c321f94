import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { ManualClock, costSummarySchema, streams, subjects, type ScaleCommand, type VariantRecord, type WorkerReport } from "@sloserve/contracts";
import { connectBus, createLogger, type Bus } from "@sloserve/bus";
import { Catalog, MetadataStore } from "@sloserve/store";
import { logFile, ocrModels, startNats, startRedis, startService, tempDir, type ServerHandle, type ServiceHandle } from "@sloserve/stack";
import { LocalWorkerProvider, instanceCost } from "@sloserve/providers";
import { waitFor } from "@sloserve/testing";
import type { MachineDecision } from "@sloserve/policy";
import { VmAutoscalerController } from "../src/controller.js";
import { VmMetrics } from "../src/costs.js";

/**
 * The VM autoscaler's shell on a real nats-server and redis-server, acting through the real
 * LocalWorkerProvider, which launches real executor-cpu processes (boot delay 200 ms) that load a real
 * model (PaddleOCR's direction classifier, put in the object store and Redis as the registrar would,
 * with profile figures set by the test). The controller's clock is a ManualClock: the test says what
 * time it is (heartbeat ages, idle time, billing, dollars); the processes run in real time, so after
 * moving the clock the test waits for the live workers' next reports before it ticks.
 */

const T0 = 1_800_000_000_000;
const model = ocrModels().find((m) => m.name === "ocr-cls")!;
const variant: VariantRecord = {
  name: "ocr-cls--cpu-fp32-b4-t1",
  model: "ocr-cls",
  app: "ocr-cls",
  hardware: "cpu",
  maxBatch: 4,
  batchWaitMs: 0,
  quantization: "fp32",
  threads: 1,
  object: "model/ocr-cls.onnx",
  accuracy: null,
  profiled: true,
  profile: { loadLatencyMs: 50, latencyMs: { "1": 2, "2": 3, "4": 5 }, peakQps: 5, memoryBytes: 0, accuracy: null, sampleShape: { x: [3, 48, 192] }, worker: "test", profiledAtMs: T0 },
};

let nats: ServerHandle;
let redis: ServerHandle;
let bus: Bus;
let tap: Bus;
let store: MetadataStore;
let provider: LocalWorkerProvider;
let controller: VmAutoscalerController;
let unmanaged: ServiceHandle | undefined;
const metrics = new VmMetrics();
const clock = new ManualClock(T0);
const dir = tempDir("vm-autoscaler");
const logTo = logFile(join(dir, "executors.log"));
const log = createLogger("vm-autoscaler-test", "warn");
const decisions: Array<MachineDecision & { atMs: number }> = [];
const results: Array<Record<string, unknown>> = [];
const commands: Array<{ worker: string; command: ScaleCommand }> = [];
const reports = new Map<string, WorkerReport>();
let taps: Array<ReturnType<Bus["nc"]["subscribe"]>> = [];

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
/** Worker processes start, load and report: waits of up to 40 s. */
const slow = { timeoutMs: 40_000, intervalMs: 100 };
/**
 * Moves the controller's clock, then waits for every live worker's next report (seen at the new time).
 * A fixed wait (a report period and a bit): a worker that stays silent is the event tested for.
 */
async function advance(ms: number): Promise<void> {
  clock.advance(ms);
  const live = [...reports.keys()];
  const before = new Map(live.map((w) => [w, reports.get(w)?.atMs ?? 0]));
  await sleep(1200);
  for (const w of live) if ((reports.get(w)?.atMs ?? 0) === before.get(w)) reports.delete(w); // silent: dead
}
const activeOn = async (worker: string): Promise<boolean> => (await store.listInstances()).some((i) => i.worker === worker && i.variant === variant.name && i.state === "active");

beforeAll(async () => {
  [nats, redis] = await Promise.all([startNats(), startRedis()]);
  bus = await connectBus({ servers: nats.url, name: "vm-autoscaler-test", log });
  tap = await connectBus({ servers: nats.url, name: "vm-autoscaler-test-tap", log, ensure: false });
  store = MetadataStore.connect(redis.url);
  await bus.models.putBlob({ name: variant.object }, readFileSync(model.path));
  await store.createModel(
    {
      name: "ocr-cls", app: "ocr-cls", task: "text-direction", dataset: "paddleocr", platform: "onnxruntime_onnx",
      inputs: [{ name: "x", datatype: "FP32", shape: [-1, 3, 48, 192] }], outputs: [], object: variant.object,
      sizeBytes: 0, sha256: "", registeredAtMs: T0, validationObject: null, validationCount: 0, profileShape: {},
    },
    [variant],
  );
  taps = [
    tap.nc.subscribe("decision.vm.*", { callback: (_e, m) => void decisions.push(m.json()) }),
    tap.nc.subscribe("scale.result.vm.*", { callback: (_e, m) => void results.push(m.json()) }),
    tap.nc.subscribe("scale.model.*", { callback: (_e, m) => void commands.push({ worker: m.subject.split(".")[2] ?? "", command: m.json() }) }),
    tap.nc.subscribe(subjects.workerMetricsAll, {
      callback: (_e, m) => {
        const r = m.json<WorkerReport>();
        reports.set(r.worker, r);
      },
    }),
  ];
  provider = new LocalWorkerProvider({ natsUrl: nats.url, redisUrl: redis.url, bootDelayMs: 200, stopTimeoutMs: 10_000, kindEnv: { cpu: { WORKER_THREADS: "1", WORKER_MEMORY_MB: "512" } }, logTo, clock, log });
  const catalog = new Catalog(store);
  controller = new VmAutoscalerController(bus, store, catalog, provider, log, clock, {
    kinds: { cpu: { instanceType: "c5.xlarge", pricePerHour: 0.17, bootMs: 3000, resources: { threads: 1, memoryBytes: 512 * 1048576 }, minWorkers: 0, maxWorkers: 3 } },
    // Cool-down 10 s, shorter than EC2's 60 s billing minimum: the billing minimum decides.
    plan: { cooldownMs: 10_000, billingMinimumMs: 60_000 },
    metrics,
  });
  await controller.start();
  await catalog.load();
});

afterAll(async () => {
  await unmanaged?.stop();
  await controller?.stop();
  await provider?.close();
  for (const s of taps) s.unsubscribe();
  await tap?.close();
  await bus?.close();
  await store?.close();
  await Promise.all([redis?.stop(), nats?.stop()]);
  logTo.end();
});

describe("vm-autoscaler controller", () => {
  let first = ""; // the worker launched on the scale.vm request
  let second = ""; // its replacement

  it("controller - a scale.vm request launches a worker", async () => {
    const atMs = clock.now();
    const published = await bus.js.publish(subjects.scaleVm, JSON.stringify({ action: "add", hardware: "cpu", variant: variant.name, count: 1, reason: "test: no worker can take it", atMs }));
    // The request reaches the controller's consumer, which acks it once it holds it for the next tick.
    await waitFor("the scale.vm request acked by the controller", async () => (await bus.jsm.consumers.info(streams.scale.name, "vm-autoscaler")).ack_floor.stream_seq >= published.seq);
    const d = await controller.tick();
    expect(d.map((x) => x.action)).toEqual(["launch"]);
    expect(d[0]).toMatchObject({ kind: "cpu", count: 1, trigger: "infaas", market: "on-demand" });
    expect(d[0]?.reason).toBe(`INFaaS: placement of 1×${variant.name} fits on no running cpu worker`);
    const [instance] = await provider.list();
    first = instance!.workerId;
    expect(instance).toMatchObject({ provider: "local", kind: "cpu", instanceType: "c5.xlarge", launchedAtMs: atMs });
    await waitFor("the launched worker's heartbeat", () => reports.has(first), slow);
    await waitFor("the decision and the result on the bus", () => decisions.length >= 1 && results.some((r) => r.worker === first), slow);
    expect(decisions[0]).toMatchObject({ action: "launch", kind: "cpu", atMs });
    expect(results.find((r) => r.worker === first)).toMatchObject({ action: "launch", ok: true, instance: first, pricePerHour: 0.17 });
    // It heartbeats: the next tick holds nothing and launches nothing.
    await advance(2000);
    expect((await controller.tick()).filter((x) => x.action !== "hold")).toEqual([]);
  });

  it("controller - a launched worker killed under it is replaced at once and its variants reloaded on the new one", async () => {
    await bus.js.publish(subjects.scaleModel(first), JSON.stringify({ id: "load-1", action: "load", variant: variant.name, reason: "test", atMs: clock.now() } satisfies ScaleCommand));
    await waitFor("the variant active on the first worker", () => activeOn(first), slow);
    process.kill(provider.pid(first)!, "SIGKILL");
    await waitFor("the provider to see the loss", async () => (await provider.list()).find((i) => i.id === first)?.state === "terminated", slow);
    await advance(2000);
    const d = await controller.tick();
    const replace = d.find((x) => x.action === "replace");
    expect(replace).toMatchObject({ worker: first, kind: "cpu", restore: [variant.name] });
    expect(replace?.reason).toMatch(/^the provider reports it lost \(executor killed by SIGKILL; last output: .*\): replace it and restore 1 variant\(s\)$/);
    second = (await provider.list()).find((i) => i.state !== "terminated")!.workerId;
    // The lost worker's records are gone from Redis; the reload waits for the replacement's heartbeat.
    expect((await store.listInstances()).filter((i) => i.worker === first)).toEqual([]);
    await waitFor("the replacement's heartbeat", () => reports.has(second), slow);
    await advance(1000);
    await controller.tick();
    await waitFor("the reload command", () => commands.find((c) => c.worker === second), slow);
    expect(commands.find((c) => c.worker === second)?.command).toMatchObject({ action: "load", variant: variant.name });
    await waitFor("the variant active on the replacement", () => activeOn(second), slow);
  });

  it("controller - a worker it did not launch is replaced when its heartbeat stops, with its variants", async () => {
    unmanaged = await startService("executor-cpu", { NATS_URL: nats.url, REDIS_URL: redis.url, WORKER_THREADS: "1", WORKER_MEMORY_MB: "512", LOG_LEVEL: "info", WORKER_ID: "cpu-stack-1" }, { logTo });
    await bus.js.publish(subjects.scaleModel("cpu-stack-1"), JSON.stringify({ id: "load-2", action: "load", variant: variant.name, reason: "test", atMs: clock.now() } satisfies ScaleCommand));
    await waitFor("the variant active on the unmanaged worker", () => activeOn("cpu-stack-1"), slow);
    await advance(1000);
    await controller.tick();
    unmanaged.process.kill("SIGKILL");
    await sleep(300); // a report in flight at the kill is seen before the clock moves (none may be: no event to wait for)
    // 6 s of silence: not yet lost (10 s).
    await advance(6000);
    expect((await controller.tick()).filter((x) => x.action === "replace")).toEqual([]);
    // 12 s > 10 s: replaced, with what Redis says it ran.
    await advance(6000);
    const d = await controller.tick();
    const replace = d.find((x) => x.action === "replace");
    expect(replace).toMatchObject({ worker: "cpu-stack-1", restore: [variant.name] });
    expect(replace?.reason).toBe("heartbeat lost for 12 s (> 10 s): replace it and restore 1 variant(s)");
    const third = (await provider.list()).find((i) => i.state !== "terminated" && i.workerId !== second)!.workerId;
    await waitFor("the replacement's heartbeat", () => reports.has(third), slow);
    await advance(1000);
    await controller.tick();
    await waitFor("the variant active on the replacement", () => activeOn(third), slow);
    // Never replaced twice.
    await advance(2000);
    expect((await controller.tick()).filter((x) => x.action === "replace" || x.action === "launch")).toEqual([]);
  });

  it("controller - a worker it did not launch that stops cleanly has left: nothing is replaced", async () => {
    const other = await startService("executor-cpu", { NATS_URL: nats.url, REDIS_URL: redis.url, WORKER_THREADS: "1", WORKER_MEMORY_MB: "512", LOG_LEVEL: "info", WORKER_ID: "cpu-stack-2" }, { logTo });
    await waitFor("its heartbeat", () => reports.has("cpu-stack-2"), slow);
    await advance(1000);
    await controller.tick();
    await other.stop(); // SIGTERM: it drains, removes its records and its command consumer
    await advance(12_000);
    const d = await controller.tick();
    expect(d.filter((x) => x.action === "replace" || x.action === "launch")).toEqual([]);
  });

  it("controller - an idle extra worker is terminated after the cool-down, never inside the billing minimum", async () => {
    const launched = (await provider.list()).filter((i) => i.state !== "terminated");
    expect(launched.length).toBe(2);
    // Both are idle (no arrivals): the 10 s cool-down passes long before their 60 s billing minimum.
    const terminatedAt = new Map<string, number>();
    for (let step = 0; step < 12 && terminatedAt.size < 2; step++) {
      const d = await controller.tick();
      for (const x of d) if (x.action === "terminate") terminatedAt.set(x.worker, clock.now());
      await advance(step < 2 ? 6000 : 10_000);
    }
    expect([...terminatedAt.keys()].sort()).toEqual(launched.map((i) => i.workerId).sort());
    for (const i of launched) {
      const at = terminatedAt.get(i.workerId)!;
      expect(at - i.launchedAtMs).toBeGreaterThanOrEqual(60_000);
      // Before that it was held, naming the billing minimum.
      expect(decisions.some((x) => x.action === "hold" && x.worker === i.workerId && x.atMs < at && / inside the 60 s billing minimum$/.test(x.reason))).toBe(true);
    }
    await waitFor("both drained", async () => (await provider.list()).every((i) => i.state === "terminated"), { ...slow, timeoutMs: 30_000 });
    const r = decisions.find((x) => x.action === "terminate");
    expect(r?.reason).toMatch(/^no active variant for \d+ s \(≥ 10 s\) and the other \d+ cpu worker\(s\) offer [\d.]+ QPS ≥ 1.2 × forecast 0 QPS$/);
  });

  it("controller - costs: per second from launch, 60 s minimum, exported", async () => {
    await advance(1000);
    await controller.tick();
    const all = await provider.list();
    const summary = controller.costs!;
    const expected = all.reduce((s, i) => s + instanceCost(i, clock.now()), 0);
    expect(summary.totalDollars).toBeCloseTo(expected, 12);
    // The first worker was killed seconds after its launch: billed the 60 s minimum, 60 × 0.17 / 3600.
    expect(summary.instances.find((i) => i.worker === first)?.dollars).toBeCloseTo((60 * 0.17) / 3600, 12);
    expect(summary.dollarsPerHour).toBe(0);
    expect(summary.byMarket).toEqual([{ provider: "local", market: "on-demand", dollars: summary.totalDollars, dollarsPerHour: 0, running: 0 }]);
    const text = await metrics.registry.metrics();
    const counter = Number(/sloserve_cost_dollars_total\{provider="local",market="on-demand"\} ([\d.e-]+)/.exec(text)?.[1]);
    expect(counter).toBeCloseTo(summary.totalDollars, 9);
    expect(text).toMatch(/sloserve_vm_decisions_total\{action="launch",trigger="infaas"\} 1/);
    expect(text).toMatch(/sloserve_vm_decisions_total\{action="replace",trigger="lost"\} 2/);
    expect(text).toMatch(/sloserve_vm_decisions_total\{action="terminate",trigger="idle"\} 2/);
    const got = new Promise<unknown>((resolve) => tap.nc.subscribe(subjects.costSummary, { max: 1, callback: (_e, m) => resolve(m.json()) }));
    await tap.nc.flush(); // the subscription is in place at the server
    await controller.publishCosts();
    expect(costSummarySchema.parse(await got).totalDollars).toBeCloseTo(summary.totalDollars, 12);
  });
});
