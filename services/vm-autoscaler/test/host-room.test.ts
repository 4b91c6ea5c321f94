import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ManualClock, type WorkerReport } from "@sloserve/contracts";
import { connectBus, createLogger, type Bus } from "@sloserve/bus";
import { Catalog, MetadataStore } from "@sloserve/store";
import { startNats, startRedis, type ServerHandle } from "@sloserve/stack";
import { LocalWorkerProvider } from "@sloserve/providers";
import type { MachineKind } from "@sloserve/policy";
import { VmAutoscalerController } from "../src/controller.js";

/**
 * The vm-autoscaler on one host (PROVIDER=local with the native engines: `host` in its options): a
 * launch waits while one more worker would offer more of the host's cores than it has, counting the
 * workers that report from the host; workers on other machines
 * count for nothing. Over a real nats-server and redis-server, a manual clock, reports applied as the
 * bus delivers them, and the real LocalWorkerProvider whose "VMs" boot for an hour (no executor starts).
 */

const T0 = 1_800_000_000_000;
const GIB = 2 ** 30;
const CPU: MachineKind = { instanceType: "c5.xlarge", pricePerHour: 0.17, bootMs: 5000, resources: { threads: 1, memoryBytes: 4 * GIB }, maxWorkers: 4 };
const HOST = { name: "host-a", cores: 2, memoryBytes: 16 * GIB, kinds: ["cpu"] };

let nats: ServerHandle;
let redis: ServerHandle;
let bus: Bus;
let store: MetadataStore;
let provider: LocalWorkerProvider;
const log = createLogger("vm-host-room-test", "warn");
const clock = new ManualClock(T0);

const report = (worker: string, host: string | undefined, threads: number): WorkerReport => ({
  worker, hardware: "cpu", atMs: clock.now(), startedAtMs: T0, threads, threadsUsed: 0, memoryBytes: 4 * GIB, memoryUsedBytes: 0, rssBytes: 0, ...(host ? { host } : {}),
  // Something loaded: a worker up with nothing on it would take the placement itself.
  variants: [{ variant: "u", state: "active", instances: 1, sloMisses: 0, batchP50Ms: 10, batchSizeP50: 1, arrivals: 0, served: 0, errors: 0, batches: 0, queueLength: 0, latencyP50Ms: 10, latencyP99Ms: 10, utilisation: 0 }],
});

beforeAll(async () => {
  [nats, redis] = await Promise.all([startNats(), startRedis()]);
  bus = await connectBus({ servers: nats.url, name: "vm-host-room-test", log });
  store = MetadataStore.connect(redis.url);
  provider = new LocalWorkerProvider({ natsUrl: nats.url, redisUrl: redis.url, bootDelayMs: 3_600_000, clock, log });
});

afterAll(async () => {
  await provider?.close();
  await bus?.close();
  await store?.close();
  await Promise.all([redis?.stop(), nats?.stop()]);
});

async function controllerWith(host: typeof HOST | undefined): Promise<VmAutoscalerController> {
  const catalog = new Catalog(store);
  await catalog.load();
  return new VmAutoscalerController(bus, store, catalog, provider, log, clock, { kinds: { cpu: CPU }, plan: { cooldownMs: 10_000, billingMinimumMs: 10_000 }, ...(host ? { host } : {}) });
}

describe("vm-autoscaler on one host", () => {
  it("host room - no launch beyond the host's cores; one more fits where a core is free", async () => {
    const controller = await controllerWith(HOST);
    // The stack's worker offers both cores of host-a: a placement that fits nowhere waits, saying why.
    clock.advance(1000);
    controller.applyReport(report("w0", "host-a", 2));
    controller.applyScaleVm({ action: "add", hardware: "cpu", variant: "v", count: 1, reason: "test", atMs: clock.now() });
    let d = await controller.tick();
    expect(d.filter((x) => x.action === "launch")).toEqual([]);
    expect(d.find((x) => x.action === "hold")?.reason).toBe("placement of 1×v fits on no running cpu worker; at the limit of 1 cpu worker(s) (the host's 2 cores: 2 offered by 1 worker(s), a new one offers 1)");

    // It offers one of them: one launch fits.
    clock.advance(2000);
    controller.applyReport(report("w0", "host-a", 1));
    controller.applyScaleVm({ action: "add", hardware: "cpu", variant: "v", count: 1, reason: "test", atMs: clock.now() });
    d = await controller.tick();
    expect(d.filter((x) => x.action === "launch").map((x) => ("count" in x ? x.count : 0))).toEqual([1]);
    await controller.stop();
    for (const i of await provider.list()) await provider.terminate(i.id, "test over");
  });

  it("host room - workers reporting another machine, or none, leave the host's cores free; without a host, only MAX_WORKERS limits", async () => {
    const controller = await controllerWith(HOST);
    clock.advance(1000);
    controller.applyReport(report("w1", "host-b", 2));
    controller.applyReport(report("w2", undefined, 2));
    controller.applyScaleVm({ action: "add", hardware: "cpu", variant: "v", count: 2, reason: "test", atMs: clock.now() });
    const d = await controller.tick();
    expect(d.filter((x) => x.action === "launch").map((x) => ("count" in x ? x.count : 0))).toEqual([1]);
    await controller.stop();
    for (const i of await provider.list()) if (i.state !== "terminated") await provider.terminate(i.id, "test over");

    const unbounded = await controllerWith(undefined);
    clock.advance(1000);
    unbounded.applyReport(report("w3", "host-a", 2));
    unbounded.applyScaleVm({ action: "add", hardware: "cpu", variant: "v", count: 5, reason: "test", atMs: clock.now() });
    const launches = (await unbounded.tick()).filter((x) => x.action === "launch");
    expect(launches.map((x) => ("count" in x ? x.count : 0))).toEqual([1]);
    expect(launches[0]?.reason).not.toMatch(/host/);
    await unbounded.stop();
  });
});
