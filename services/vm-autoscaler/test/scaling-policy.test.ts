import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ManualClock, compileOptions, type VariantRecord, type WorkerReport } from "@sloserve/contracts";
import { connectBus, createLogger, type Bus } from "@sloserve/bus";
import { Catalog, MetadataStore } from "@sloserve/store";
import { startNats, startRedis, type ServerHandle } from "@sloserve/stack";
import { LocalWorkerProvider } from "@sloserve/providers";
import { vmAutoscalerSettings } from "@sloserve/settings";
import type { MachineDecision, MachineKind } from "@sloserve/policy";
import { VmAutoscalerController } from "../src/controller.js";
import { planConfigOf } from "../src/plan-config.js";

/**
 * SCALING_POLICY reaches the machine plan: the settings as the service reads them (`compileOptions`,
 * `planConfigOf`, what main.ts does) given to the controller (a manual clock, a real nats-server and
 * redis-server, the real LocalWorkerProvider whose "VMs" boot for an hour, so no executor starts).
 * One stack worker w0 (not launched by the autoscaler) is 95% busy every second, with late answers and
 * a forecast above what it serves: `combined` launches (INFaaS's utilisation rule, the plan, the SLO
 * monitor); `static` launches nothing and holds nothing about it.
 */

const T0 = 1_800_000_000_000;
const CPU: MachineKind = { instanceType: "c5.xlarge", pricePerHour: 0.17, bootMs: 5000, resources: { threads: 2, memoryBytes: 1e9 }, maxWorkers: 4 };
const variant: VariantRecord = {
  name: "a-cpu", model: "a", app: "a", hardware: "cpu", maxBatch: 1, batchWaitMs: 0, quantization: "fp32", threads: 1,
  object: "model/a.onnx", accuracy: null, profiled: true,
  profile: { loadLatencyMs: 500, latencyMs: { "1": 100 }, peakQps: 10, memoryBytes: 1e8, accuracy: null, sampleShape: { x: [1, 4] }, worker: "test", profiledAtMs: T0 },
};
/** Second s: 95% busy (1 thread of 2 → utilisation 1.9 on the variant), 20 answers, 5 of them late. */
const report = (s: number): WorkerReport => ({
  worker: "w0", hardware: "cpu", atMs: T0 + s * 1000, startedAtMs: T0, threads: 2, threadsUsed: 1, memoryBytes: 1e9, memoryUsedBytes: 1e8, rssBytes: 0,
  variants: [{ variant: variant.name, state: "active", instances: 1, sloMisses: 5, batchP50Ms: 100, batchSizeP50: 1, arrivals: 20, served: 20, errors: 0, batches: 20, queueLength: 0, latencyP50Ms: 100, latencyP99Ms: 100, utilisation: 1.9 }],
});

let nats: ServerHandle;
let redis: ServerHandle;
let bus: Bus;
let store: MetadataStore;
const providers: LocalWorkerProvider[] = [];
const log = createLogger("vm-scaling-policy-test", "warn");

beforeAll(async () => {
  [nats, redis] = await Promise.all([startNats(), startRedis()]);
  bus = await connectBus({ servers: nats.url, name: "vm-scaling-policy-test", log });
  store = MetadataStore.connect(redis.url);
  await store.createModel(
    {
      name: "a", app: "a", task: "test", dataset: "none", platform: "onnxruntime_onnx", inputs: [{ name: "x", datatype: "FP32", shape: [-1, 4] }], outputs: [],
      object: variant.object, sizeBytes: 0, sha256: "", registeredAtMs: T0, validationObject: null, validationCount: 0, profileShape: {},
    },
    [variant],
  );
});

afterAll(async () => {
  for (const p of providers) await p.close();
  await bus?.close();
  await store?.close();
  await Promise.all([redis?.stop(), nats?.stop()]);
});

/** Ten 2 s ticks of the controller under SCALING_POLICY=`policy`, fed w0's reports, a forecast of 40 q/s. */
async function run(policy: string): Promise<MachineDecision[]> {
  const o = compileOptions(vmAutoscalerSettings, { SCALING_POLICY: policy, READING_TICKS: "1", SLO_PERIOD_MS: "2000", PLAN_PERIOD_MS: "2000" }, "vm-autoscaler");
  const clock = new ManualClock(T0);
  const provider = new LocalWorkerProvider({ natsUrl: nats.url, redisUrl: redis.url, bootDelayMs: 3_600_000, clock, log });
  providers.push(provider);
  const catalog = new Catalog(store);
  await catalog.load();
  const controller = new VmAutoscalerController(bus, store, catalog, provider, log, clock, { kinds: { cpu: CPU }, plan: planConfigOf(o) });
  const out: MachineDecision[] = [];
  for (let t = 2; t <= 20; t += 2) {
    for (const s of [t - 1, t]) {
      clock.set(T0 + s * 1000);
      controller.applyReport(report(s));
    }
    controller.applyForecast({ app: "a", atMs: T0 + t * 1000, unitS: 60, sampleS: 5, method: "test", observed: 20, values: new Array<number>(60).fill(40), historyUnits: 60 });
    out.push(...(await controller.tick()));
  }
  return out;
}

describe("vm-autoscaler: SCALING_POLICY reaches the plan", () => {
  it("scaling policy - the settings put the policy's switches in the plan's config", () => {
    const plan = (policy: string) => planConfigOf(compileOptions(vmAutoscalerSettings, policy ? { SCALING_POLICY: policy } : {}, "vm-autoscaler"));
    expect(plan("")).toMatchObject({ infaasAdd: true, infaasRemoveIdle: true, markPlan: true, markSloMonitor: true });
    expect(plan("static")).toMatchObject({ infaasAdd: false, infaasRemoveIdle: false, markPlan: false, markSloMonitor: false });
    expect(plan("mark")).toMatchObject({ infaasAdd: false, infaasRemoveIdle: false, markPlan: true, markSloMonitor: true });
    expect(plan("infaas")).toMatchObject({ infaasAdd: true, infaasRemoveIdle: true, markPlan: false, markSloMonitor: false });
    expect(() => compileOptions(vmAutoscalerSettings, { SCALING_POLICY: "clipper" }, "vm-autoscaler")).toThrow(/SCALING_POLICY/);
  });

  it("scaling policy - static launches nothing on high utilisation, a forecast or late answers; combined does", async () => {
    const combined = await run("combined");
    const launches = combined.filter((d) => d.action === "launch");
    expect(launches.length).toBeGreaterThan(0);
    expect(launches[0]?.reason).toMatch(/INFaaS: utilisation above 80% on all 1 cpu worker\(s\)/);
    expect(combined.some((d) => d.action === "plan")).toBe(true);

    const fixed = await run("static");
    expect(fixed).toEqual([]);
    expect(await providers[1]?.list()).toEqual([]);
  });
});
