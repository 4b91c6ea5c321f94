import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ManualClock, type VariantRecord, type WorkerReport } from "@sloserve/contracts";
import { connectBus, createLogger, type Bus } from "@sloserve/bus";
import { Catalog, MetadataStore } from "@sloserve/store";
import { startNats, startRedis, type ServerHandle } from "@sloserve/stack";
import { LocalWorkerProvider } from "@sloserve/providers";
import { emptyMachinePlanState, planMachines, toVariantProfile, type MachineDecision, type MachineKind, type MachinePlanState, type MachineView, type VariantProfile } from "@sloserve/policy";
import { VmAutoscalerController } from "../src/controller.js";

/**
 * One recorded second-by-second input, two deciders, the same decisions: the VM autoscaler's shell (its
 * controller with a manual clock, over a real nats-server and redis-server, launching through the real
 * LocalWorkerProvider) and libs/policy `planMachines` called as the simulator's INFaaS system calls it
 * (libs/sim systems/infaas.ts: the SLO outcomes since the last tick, each machine's busy share over the
 * tick's interval). The shell gets the record as the workers' one-second reports; the plan gets each
 * tick's sums and means. Settings: the live replay's at 144× (docs/ARCHITECTURE.md "Live replay").
 *
 * The record (a stack worker w0, unmanaged, 25 answers/s, 50% busy, forecast 10 q/s = one worker):
 * - seconds 5-6: a machine hiccup, 27 of 38 answers late each second (a recorded live replay showed 54
 *   in 2 s). Tick 6: f = (1 − 0.999⁷⁶) × 54/76 = 5.2% > 2% → one SLO launch; nothing missed since, and
 *   the plan gives it back once the cool-down since its launch is over (tick 12 ≥ 6 + 5.417). From tick 18 (the monitor's 5 periods over) f is still above 2% but nothing
 *   missed: holds, no relaunch (live, before: relaunches every 12 s, each worker given back unbooted).
 * - second 14: 95% busy for one second, 50% the second before: the tick's mean is 72.5%, under 80%, so
 *   no INFaaS launch (live, before: the latest report alone, 95%, launched one the simulator did not).
 * - seconds 21-22: 90% busy → INFaaS launches at tick 22; at tick 28 (≥ 22 + 5.417) the plan gives it back.
 */

const T0 = 1_800_000_000_000;
const TICK_MS = 2000;
const SECONDS = 30;
// (INFaaS's one-tick reading: the record's spikes below are read tick by tick)
const CONFIG = { sloPeriodMs: 69, planPeriodMs: 1000, cooldownMs: 5417, billingMinimumMs: 417, vm: { readingTicks: 1 } };
const CPU: MachineKind = { instanceType: "c5.xlarge", pricePerHour: 0.17, bootMs: 5417, resources: { threads: 2, memoryBytes: 1e9 }, maxWorkers: 4 };

/** Second s (1-based) → answers, late answers, busy share of the worker (1 thread of 2 → variant busy × ½). */
function second(s: number): { served: number; missed: number; busy: number } {
  if (s === 5 || s === 6) return { served: 38, missed: 27, busy: 0.5 };
  if (s === 14) return { served: 25, missed: 0, busy: 0.95 };
  if (s === 21 || s === 22) return { served: 25, missed: 0, busy: 0.9 };
  return { served: 25, missed: 0, busy: 0.5 };
}

const variant: VariantRecord = {
  name: "a-cpu", model: "a", app: "a", hardware: "cpu", maxBatch: 1, batchWaitMs: 0, quantization: "fp32", threads: 1,
  object: "model/a.onnx", accuracy: null, profiled: true,
  profile: { loadLatencyMs: 500, latencyMs: { "1": 100 }, peakQps: 10, memoryBytes: 1e8, accuracy: null, sampleShape: { x: [1, 4] }, worker: "test", profiledAtMs: T0 },
};

const report = (s: number): WorkerReport => {
  const x = second(s);
  return {
    worker: "w0", hardware: "cpu", atMs: T0 + s * 1000, startedAtMs: T0, threads: 2, threadsUsed: 1, memoryBytes: 1e9, memoryUsedBytes: 1e8, rssBytes: 0,
    variants: [{ variant: variant.name, state: "active", instances: 1, sloMisses: x.missed, batchP50Ms: 100, batchSizeP50: 1, arrivals: x.served, served: x.served, errors: 0, batches: x.served, queueLength: 0, latencyP50Ms: 100, latencyP99Ms: 100, utilisation: x.busy * 2 }],
  };
};
const forecast = (atMs: number): { app: string; atMs: number; stepMs: number; values: number[] } => ({ app: "a", atMs, stepMs: 1000, values: new Array<number>(60).fill(10) });

/** Launches and terminations, workers named by launch order. */
function brief(decisions: ReadonlyArray<{ atMs: number; d: MachineDecision }>): string[] {
  const names = new Map<string, string>();
  const out: string[] = [];
  for (const { atMs, d } of decisions) {
    const t = `t=${Math.round((atMs - T0) / 1000)}`;
    if (d.action === "launch") out.push(`${t} launch ${d.trigger}`);
    else if (d.action === "terminate") {
      if (!names.has(d.worker)) names.set(d.worker, `L${names.size + 1}`);
      out.push(`${t} terminate ${names.get(d.worker) ?? ""} ${d.trigger}`);
    }
  }
  return out;
}

let nats: ServerHandle;
let redis: ServerHandle;
let bus: Bus;
let store: MetadataStore;
let provider: LocalWorkerProvider;
const log = createLogger("vm-shell-vs-plan-test", "warn");
const clock = new ManualClock(T0);

beforeAll(async () => {
  [nats, redis] = await Promise.all([startNats(), startRedis()]);
  bus = await connectBus({ servers: nats.url, name: "vm-shell-vs-plan-test", log });
  store = MetadataStore.connect(redis.url);
  await store.createModel(
    {
      name: "a", app: "a", task: "test", dataset: "none", platform: "onnxruntime_onnx", inputs: [{ name: "x", datatype: "FP32", shape: [-1, 4] }], outputs: [],
      object: variant.object, sizeBytes: 0, sha256: "", registeredAtMs: T0, validationObject: null, validationCount: 0, profileShape: {},
    },
    [variant],
  );
  // The launched workers' "VMs" boot for an hour: none starts an executor within the test; a
  // termination of a booting one cancels it (the provider's own rule).
  provider = new LocalWorkerProvider({ natsUrl: nats.url, redisUrl: redis.url, bootDelayMs: 3_600_000, clock, log });
});

afterAll(async () => {
  await provider?.close();
  await bus?.close();
  await store?.close();
  await Promise.all([redis?.stop(), nats?.stop()]);
});

describe("vm-autoscaler: the shell decides as the plan on the same record", () => {
  it("shell vs plan - an SLO hiccup and utilisation spikes: the same launches and terminations", async () => {
    // The shell.
    const catalog = new Catalog(store);
    await catalog.load();
    const controller = new VmAutoscalerController(bus, store, catalog, provider, log, clock, { kinds: { cpu: CPU }, plan: CONFIG });
    const shell: Array<{ atMs: number; d: MachineDecision }> = [];
    for (let t = TICK_MS; t <= SECONDS * 1000; t += TICK_MS) {
      for (let s = t / 1000 - 1; s <= t / 1000; s++) {
        clock.set(T0 + s * 1000);
        controller.applyReport(report(s));
      }
      controller.applyForecast({ app: "a", atMs: T0 + t, unitS: 1, sampleS: 1, method: "test", observed: 10, values: forecast(T0 + t).values, historyUnits: 60 });
      for (const d of await controller.tick()) shell.push({ atMs: T0 + t, d });
    }

    // The plan, fed as the simulator feeds it.
    const catalogProfiles = [toVariantProfile(variant)].filter((p): p is VariantProfile => p !== undefined);
    let state: MachinePlanState = emptyMachinePlanState();
    let launched: MachineView[] = [];
    const plan: Array<{ atMs: number; d: MachineDecision }> = [];
    for (let t = TICK_MS; t <= SECONDS * 1000; t += TICK_MS) {
      const nowMs = T0 + t;
      const [a, b] = [second(t / 1000 - 1), second(t / 1000)];
      const w0: MachineView = {
        name: "w0", kind: "cpu", booting: false, utilization: (a.busy + b.busy) / 2, interfered: false, overloaded: false, serving: true,
        capacityQps: 10, lastHeartbeatMs: nowMs, variants: [variant.name], apps: ["a"], managed: false,
      };
      const slo = [{ app: "a", total: a.served + b.served, missed: a.missed + b.missed }];
      const r = planMachines({ nowMs, workers: [w0, ...launched], kinds: { cpu: CPU }, forecasts: [forecast(nowMs)], slo, catalog: catalogProfiles, sloMsByApp: {}, loadQpsByKind: { cpu: (a.served + b.served) / 2 }, config: CONFIG, state });
      state = r.state;
      for (const d of r.decisions) {
        plan.push({ atMs: nowMs, d });
        if (d.action === "launch") launched = [...launched, { name: `p${plan.length}`, kind: "cpu", booting: true, utilization: 0, interfered: false, overloaded: false, serving: false, capacityQps: 0, lastHeartbeatMs: nowMs, variants: [], apps: [], managed: true, launchedAtMs: nowMs }];
        if (d.action === "terminate") launched = launched.filter((w) => w.name !== d.worker);
      }
    }

    const want = ["t=6 launch slo", "t=12 terminate L1 predictive", "t=22 launch infaas", "t=28 terminate L2 predictive"];
    expect(brief(plan)).toEqual(want);
    expect(brief(shell)).toEqual(want);
    // After the monitor's cool-down, f is still above 2% but nothing missed: it holds instead of relaunching.
    const stale = (xs: typeof shell): number[] => xs.filter(({ d }) => d.action === "hold" && /the misses have stopped/.test(d.reason)).map(({ atMs }) => (atMs - T0) / 1000);
    expect(stale(plan)).toEqual([18, 20, 22, 24, 26, 28, 30]);
    expect(stale(shell)).toEqual(stale(plan));
  });
});
