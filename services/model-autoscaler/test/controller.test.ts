import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ManualClock, subjects, type ScaleCommand } from "@sloserve/contracts";
import { connectBus, createLogger, type Bus } from "@sloserve/bus";
import { Catalog, MetadataStore } from "@sloserve/store";
import { startNats, startRedis, type ServerHandle } from "@sloserve/stack";
import { pricePerSecond, toVariantProfile, workerRunsFromReport } from "@sloserve/policy";
import { ModelAutoscalerController } from "../src/controller.js";
import { TestWorker, modelRecord, variantRecord, type TestWorkerOptions, type VariantSpec } from "./harness.js";

/**
 * The model autoscaler's shell on a real nats-server and redis-server with a manual clock: test workers
 * report on `metrics.worker.<worker>` and obey `scale.model.<worker>`; what the controller decides is
 * read back from `decision.model.*`, `scale.model.*` and `scale.vm`.
 */

let nats: ServerHandle;
let redis: ServerHandle;
/** The controller's connection, and the one of the workers and of the test's taps. */
let bus: Bus;
let workerBus: Bus;
let store: MetadataStore;
const logLines: Array<Record<string, unknown>> = [];
const log = createLogger("model-autoscaler-test", "debug", { write: (line: string) => void logLines.push(JSON.parse(line) as Record<string, unknown>) });

const decisions: Array<Record<string, unknown>> = [];
const commands: Array<{ worker: string; command: ScaleCommand }> = [];
const vm: Array<Record<string, unknown>> = [];
let taps: Array<ReturnType<Bus["nc"]["subscribe"]>> = [];

beforeAll(async () => {
  nats = await startNats();
  redis = await startRedis();
  bus = await connectBus({ servers: nats.url, name: "model-autoscaler-test", log });
  workerBus = await connectBus({ servers: nats.url, name: "model-autoscaler-test-workers", log, ensure: false });
  store = MetadataStore.connect(redis.url);
  taps = [
    workerBus.nc.subscribe("decision.model.*", { callback: (_e, m) => void decisions.push(m.json()) }),
    workerBus.nc.subscribe("scale.model.*", { callback: (_e, m) => void commands.push({ worker: m.subject.split(".")[2] ?? "", command: m.json() }) }),
    workerBus.nc.subscribe(subjects.scaleVm, { callback: (_e, m) => void vm.push(m.json()) }),
  ];
});

afterAll(async () => {
  for (const s of taps) s.unsubscribe();
  await workerBus?.close();
  await bus?.close();
  await store?.close();
  await redis?.stop();
  await nats?.stop();
});

const T0 = 1_700_000_000_000;
const sec = (atMs: unknown): number => (Number(atMs) - T0) / 1000;

interface Case {
  name: string;
  variants: VariantSpec[];
  workers: Array<TestWorkerOptions & { preload?: Array<[string, number]> }>;
  /** Ticks at t = 1 … seconds. */
  seconds: number;
  /** Queries of the last second by worker and model, at tick t. */
  arrivals: (t: number) => Record<string, Record<string, number>>;
  want: { decisions: string[]; commands: string[]; vm?: Array<Record<string, unknown>> };
}

/** Registers the case's models, starts a controller as main.ts wires it, and runs its ticks. */
async function runCase(c: Case, model: string): Promise<{ controller: ModelAutoscalerController; workers: TestWorker[] }> {
  const app = `app-${model}`;
  const records = c.variants.map((v) => variantRecord({ ...v, model, app }));
  await store.createModel(modelRecord(model, app), records);
  const clock = new ManualClock(T0);
  const catalog = new Catalog(store);
  const controller = new ModelAutoscalerController(bus, catalog, log, clock);
  const subs = controller.subscribe();
  await catalog.load();
  const byName = new Map(records.map((r) => [r.name, r]));
  const workers = c.workers.map((o) => {
    const w = new TestWorker(o, byName).listen(workerBus);
    for (const [v, n] of o.preload ?? []) w.preload(v, n, T0);
    return w;
  });
  await workerBus.nc.flush();
  decisions.length = 0;
  commands.length = 0;
  vm.length = 0;
  try {
    for (let t = 1; t <= c.seconds; t++) {
      clock.set(T0 + t * 1000);
      const arrivals = c.arrivals(t);
      for (const w of workers) await w.publishReport(workerBus, clock.now(), Object.fromEntries(Object.entries(arrivals[w.name] ?? {}).map(([m, n]) => [m === "m" ? model : m, n])));
      await workerBus.js.publish(subjects.arrivals(app), JSON.stringify({ app, dispatcher: "d1", atMs: clock.now(), windowMs: 1000, arrivals: 0, models: { [model]: { queries: 0, minSloMs: 1000 } }, infeasible: 0 }));
      await bus.nc.flush(); // the controller has the reports
      await controller.tick();
      await workerBus.nc.flush(); // the workers and the taps have what it published
    }
  } finally {
    for (const s of subs) s.unsubscribe();
    for (const w of workers) w.stop();
    await store.deleteModel(model); // variant names repeat from case to case
  }
  return { controller, workers };
}

// Digits-like CPU variants (batch 1: 20 QPS, 1 thread; batch 8: 100 QPS, 2 threads: twice the price),
// a GPU and an Inferentia variant; load latencies 2.5 s. λ = 0.1 /s: a new instance costs C·1.25.
const D1: VariantSpec = { name: "d1", model: "", app: "", latencyMs: { 1: 50 }, peakQps: 20, loadLatencyMs: 2500 };
const D8: VariantSpec = { name: "d8", model: "", app: "", maxBatch: 8, threads: 2, latencyMs: { 1: 40, 8: 80 }, peakQps: 100, loadLatencyMs: 2500 };
const G8: VariantSpec = { name: "g8", model: "", app: "", hardware: "gpu", maxBatch: 8, latencyMs: { 1: 5, 8: 10 }, peakQps: 800, loadLatencyMs: 2500 };
const N1: VariantSpec = { name: "n1", model: "", app: "", hardware: "inferentia", latencyMs: { 1: 20 }, peakQps: 100, loadLatencyMs: 2500 };

const brief = (d: Record<string, unknown>): string => `t=${sec(d.atMs)} ${String(d.action)} ${String(d.variant)} ×${String(d.count)} on ${String(d.worker)}`;

describe("model-autoscaler controller", () => {
  const cases: Case[] = [
    {
      // 900 QPS on one g8 (800): replicate g8 ×1. The GPU worker offers 2 accelerators, one held.
      name: "an accelerator variant is replicated on a GPU worker",
      variants: [G8],
      workers: [{ name: "gpu-1", hardware: "gpu", accelerators: 2, preload: [["g8", 1]] }],
      seconds: 1,
      arrivals: () => ({ "gpu-1": { m: 900 } }),
      want: { decisions: ["t=1 replicate g8 ×1 on gpu-1"], commands: ["t=1 add g8 ×1 on gpu-1"] },
    },
    {
      // 150 QPS on one n1 (100 QPS, one NeuronCore of four): replicate n1 ×1.
      name: "an accelerator variant is replicated on an Inferentia worker",
      variants: [N1],
      workers: [{ name: "inf-1", hardware: "inferentia", accelerators: 4, preload: [["n1", 1]] }],
      seconds: 1,
      arrivals: () => ({ "inf-1": { m: 150 } }),
      want: { decisions: ["t=1 replicate n1 ×1 on inf-1"], commands: ["t=1 add n1 ×1 on inf-1"] },
    },
    {
      // GPU instances share a GPU by memory footprint (libs/policy accelerator-share.ts): one GPU of
      // 16 GB runs g8 (6 GB); a second g8 needs 6 GB more, 12 GB ≤ 16 GB → replicated on the same GPU
      // (had an instance held the GPU whole, it would have gone to scale.vm as in the next case).
      name: "two GPU instances whose footprints fit share one GPU",
      variants: [{ ...G8, acceleratorMemoryBytes: 6e9 }],
      workers: [{ name: "gpu-3", hardware: "gpu", accelerators: 1, preload: [["g8", 1]] }],
      seconds: 1,
      arrivals: () => ({ "gpu-3": { m: 900 } }),
      want: { decisions: ["t=1 replicate g8 ×1 on gpu-3"], commands: ["t=1 add g8 ×1 on gpu-3"] },
    },
    {
      // A GPU worker whose one GPU (16 GB) holds g8 (10 GB): a second one (10 GB) does not fit; the
      // replica goes elsewhere; no GPU worker can take it → the VM autoscaler is asked for a GPU worker.
      name: "a GPU variant whose footprint no GPU has room for escalates to scale.vm",
      variants: [{ ...G8, acceleratorMemoryBytes: 10e9 }],
      workers: [{ name: "gpu-2", hardware: "gpu", accelerators: 1, preload: [["g8", 1]] }],
      seconds: 1,
      arrivals: () => ({ "gpu-2": { m: 900 } }),
      want: {
        decisions: ["t=1 place-elsewhere g8 ×1 on gpu-2", "t=1 escalate g8 ×1 on gpu-2"],
        commands: [],
        vm: [{ action: "add", hardware: "gpu", variant: "g8", count: 1 }],
      },
    },
    {
      // Two d1 at 39 QPS: target 40.95 > 40. Replicate d1 costs 1.25·C; upgrade to d8 ×1 costs
      // 2C·1.25 − 2C = 0.5·C → upgrade at 1 s. d8 loads in 2.5 s: it reports loading at 2 and 3 s, ready
      // at 4 s, and only then are the two d1 unloaded.
      name: "an upgrade unloads the old instances only after the new ones report ready",
      variants: [D1, D8],
      workers: [{ name: "cpu-1", threads: 4, preload: [["d1", 2]] }],
      seconds: 6,
      arrivals: () => ({ "cpu-1": { m: 39 } }),
      want: { decisions: ["t=1 upgrade d8 ×1 on cpu-1"], commands: ["t=1 add d8 ×1 on cpu-1", "t=4 unload d1 ×2 on cpu-1"] },
    },
    {
      // cpu-2 has no free thread: replicate d1 does not fit (an upgrade to d8 would need 2 threads, with
      // d1's one freed) → place it on the least busy CPU worker with room: cpu-4 (cpu-3 is full).
      name: "place-elsewhere puts the replica on another worker",
      variants: [D1, D8],
      workers: [
        { name: "cpu-2", threads: 1, preload: [["d1", 1]] },
        { name: "cpu-3", threads: 1, preload: [["d1", 1]] },
        { name: "cpu-4", threads: 4 },
      ],
      seconds: 1,
      arrivals: () => ({ "cpu-2": { m: 30 } }),
      want: { decisions: ["t=1 place-elsewhere d1 ×1 on cpu-2"], commands: ["t=1 add d1 ×1 on cpu-4"] },
    },
    {
      // The only CPU worker is full: escalate, asking scale.vm for a CPU worker.
      name: "place-elsewhere with no worker escalates to scale.vm",
      variants: [D1],
      workers: [{ name: "cpu-5", threads: 1, preload: [["d1", 1]] }],
      seconds: 1,
      arrivals: () => ({ "cpu-5": { m: 30 } }),
      want: {
        decisions: ["t=1 place-elsewhere d1 ×1 on cpu-5", "t=1 escalate d1 ×1 on cpu-5"],
        commands: [],
        vm: [{ action: "add", hardware: "cpu", variant: "d1", count: 1 }],
      },
    },
  ];

  cases.forEach((c, i) => {
    it(`model-autoscaler controller - ${c.name}`, async () => {
      const model = `m${i}`;
      await runCase(c, model);
      const nonHold = decisions.filter((d) => d.action !== "hold");
      expect(nonHold.map(brief)).toEqual(c.want.decisions);
      // Every decision names the model and says why.
      for (const d of nonHold) {
        expect(d.model).toBe(model);
        expect(String(d.reason).length).toBeGreaterThan(10);
      }
      expect(commands.map(({ worker, command }) => `t=${sec(command.atMs)} ${command.action} ${command.variant} ×${String(command.count)} on ${worker}`)).toEqual(c.want.commands);
      expect(vm.map((r) => ({ action: r.action, hardware: r.hardware, variant: r.variant, count: r.count }))).toEqual(c.want.vm ?? []);
    });
  });

  it("model-autoscaler controller - a hold is published when its reason changes, not every second", async () => {
    await runCase(
      {
        name: "hold",
        variants: [D1, D8],
        workers: [{ name: "cpu-6", threads: 4, preload: [["d1", 2]] }],
        seconds: 3,
        arrivals: () => ({ "cpu-6": { m: 39 } }),
        want: { decisions: [], commands: [] },
      },
      "mhold",
    );
    // Upgrade at 1 s; the swap holds the model at 2 and 3 s with the same reason: published once.
    expect(decisions.map((d) => `t=${sec(d.atMs)} ${String(d.action)}`)).toEqual(["t=1 upgrade", "t=2 hold"]);
    expect(decisions[1]?.reason).toBe("upgrade to d8 ×1: waiting for the new d8 (cpu-6 ×1) to be ready before unloading d1 ×2");
  });

  it("model-autoscaler controller - a worker's report becomes what it runs", () => {
    const w = new TestWorker({ name: "g", hardware: "gpu", threads: 4, memoryBytes: 1e9, accelerators: 2 }, new Map([["g8", variantRecord({ ...G8, model: "m", app: "a" })]]));
    w.preload("g8", 1, 0);
    w.apply({ id: "1", action: "add", variant: "g8", count: 1, reason: "test", atMs: 0 });
    const runs = workerRunsFromReport(w.report(1000, { m: 7 }), 1100, new Map());
    // One ready, one loading (2.5 s): both hold 1e8 bytes of host memory and 1e8 of GPU memory (their
    // footprint), no GPU whole: 2 × 16e9 − 2e8 of GPU memory is free.
    expect(runs).toEqual({ name: "g", kind: "gpu", atMs: 1000, seenAtMs: 1100, utilisation: 0, free: { threads: 2, memoryBytes: 8e8, accelerators: 2, acceleratorMemoryBytes: 31.8e9 }, variants: { g8: { ready: 1, loading: 1, arrivalsQps: 7 } } });
  });

  it("model-autoscaler controller - a leaving worker's last report: it is forgotten at once (no move or replica goes to it)", () => {
    const controller = new ModelAutoscalerController(bus, new Catalog(store), log, new ManualClock(T0));
    const w = new TestWorker({ name: "leaver", hardware: "cpu", threads: 2, memoryBytes: 1e9 }, new Map());
    controller.applyReport(w.report(T0, {}));
    expect(controller.workerRuns().map((r) => r.name)).toEqual(["leaver"]);
    controller.applyReport({ ...w.report(T0 + 500, {}), leaving: true });
    expect(controller.workerRuns()).toEqual([]);
  });

  it("model-autoscaler controller - two GPU variants share one GPU during an upgrade, each priced by its footprint", async () => {
    // g1: batch 1, 200 QPS, 6 GB of GPU memory; g8: 800 QPS, 5 GB. One GPU of 16 GB. At 300 QPS
    // (target 315): replicate g1 ×1 costs 1.25·C1; upgrade to g8 costs 1.25·C8 − C1 = 1.25·(5/6)·C1 − C1
    // ≈ 0.04·C1 → upgrade. While g8 loads (ready at 3.5 s) both variants are on the one GPU: 11 GB.
    const G1S: VariantSpec = { name: "g1", model: "", app: "", hardware: "gpu", latencyMs: { 1: 5 }, peakQps: 200, loadLatencyMs: 2500, acceleratorMemoryBytes: 6e9 };
    const G8S: VariantSpec = { ...G8, acceleratorMemoryBytes: 5e9 };
    const { workers } = await runCase(
      {
        name: "share",
        variants: [G1S, G8S],
        workers: [{ name: "gpu-4", hardware: "gpu", accelerators: 1, preload: [["g1", 1]] }],
        seconds: 2,
        arrivals: () => ({ "gpu-4": { m: 300 } }),
        want: { decisions: [], commands: [] },
      },
      "mshare",
    );
    expect(decisions.filter((d) => d.action !== "hold").map(brief)).toEqual(["t=1 upgrade g8 ×1 on gpu-4"]);
    const report = (workers[0] as TestWorker).report(T0 + 2000);
    expect(report.variants.map((v) => `${v.variant} ${v.state}`)).toEqual(["g1 active", "g8 loading"]);
    expect({ accelerators: report.accelerators, acceleratorsUsed: report.acceleratorsUsed, gpuMemoryUsed: report.acceleratorMemoryUsedBytes }).toEqual({ accelerators: 1, acceleratorsUsed: 0, gpuMemoryUsed: 11e9 });
    expect(workerRunsFromReport(report, T0 + 2000, new Map()).free.acceleratorMemoryBytes).toBe(5e9);
    // The price split: each pays its share of p3.2xlarge's GPU (16 GiB) by footprint, not a whole GPU.
    const perS = pricePerSecond("p3.2xlarge");
    const priceOf = (spec: VariantSpec): number => toVariantProfile(variantRecord({ ...spec, model: "m", app: "a" }))?.pricePerS ?? NaN;
    expect(priceOf(G1S)).toBeCloseTo((perS * 6e9) / (16 * 1024 ** 3), 12);
    expect(priceOf(G8S)).toBeCloseTo((perS * 5e9) / (16 * 1024 ** 3), 12);
    expect(priceOf(G1S) + priceOf(G8S)).toBeLessThan(perS);
  });

  // INFaaS §4.1: d1 (one thread, 2.5 s to load) reported Interfered. cpu-i1 has room: a second d1 on it,
  // then its oldest (interfered) one goes; cpu-i2's one thread is taken: a d1 on the least-loaded
  // other worker with room (cpu-i4; cpu-i3 is 50% busy), then the one on cpu-i2 goes. Unloads wait for
  // the new instance's report of ready (4 s).
  const moves: Array<{ name: string; workers: Array<TestWorkerOptions & { preload?: Array<[string, number]> }>; arrivals: Record<string, Record<string, number>>; decisions: string[]; commands: string[]; after: Record<string, string[]> }> = [
    {
      name: "to free threads on its own worker",
      workers: [{ name: "cpu-i1", threads: 4, interfered: ["d1"], preload: [["d1", 1]] }],
      arrivals: { "cpu-i1": { m: 10 } },
      decisions: ["t=1 migrate d1 ×1 on cpu-i1 to cpu-i1"],
      commands: ["t=1 add d1 ×1 on cpu-i1", "t=4 unload d1 ×1 on cpu-i1 (oldest)"],
      after: { "cpu-i1": ["d1 ready at 3.5 s"] },
    },
    {
      name: "to the least-loaded other worker",
      workers: [
        { name: "cpu-i2", threads: 1, interfered: ["d1"], preload: [["d1", 1]] },
        { name: "cpu-i3", threads: 4, busy: 0.5, preload: [["d1", 1]] },
        { name: "cpu-i4", threads: 4 },
      ],
      arrivals: { "cpu-i2": { m: 10 } },
      decisions: ["t=1 migrate d1 ×1 on cpu-i2 to cpu-i4"],
      commands: ["t=1 add d1 ×1 on cpu-i4", "t=4 unload d1 ×1 on cpu-i2 (oldest)"],
      after: { "cpu-i2": [], "cpu-i3": ["d1 ready at 0 s"], "cpu-i4": ["d1 ready at 3.5 s"] },
    },
  ];
  moves.forEach((c, i) => {
    it(`model-autoscaler controller - an Interfered variant is moved ${c.name}, the old instance unloaded once the new one serves`, async () => {
      const { workers } = await runCase({ name: c.name, variants: [D1, D8], workers: c.workers, seconds: 5, arrivals: () => c.arrivals, want: { decisions: [], commands: [] } }, `mi${i}`);
      const moved = decisions.filter((d) => d.action === "migrate");
      expect(moved.map((d) => `${brief(d)} to ${String(d.to)}`)).toEqual(c.decisions);
      expect(String(moved[0]?.reason)).toContain("d1 Interfered on");
      expect(decisions.filter((d) => d.action !== "hold" && d.action !== "migrate")).toEqual([]);
      expect(commands.map(({ worker, command }) => `t=${sec(command.atMs)} ${command.action} ${command.variant} ×${String(command.count)} on ${worker}${command.oldest ? " (oldest)" : ""}`)).toEqual(c.commands);
      // What the workers run once the commands are carried out: the new instance only.
      const after = Object.fromEntries(workers.map((w) => [w.name, w.instances.map((x) => `${x.variant.name} ready at ${sec(x.readyAtMs)} s`)]));
      expect(after).toEqual(c.after);
    });
  });
});
