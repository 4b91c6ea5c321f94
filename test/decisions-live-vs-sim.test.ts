import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ManualClock, subjects, type ScaleCommand } from "@sloserve/contracts";
import { connectBus, createLogger, type Bus } from "@sloserve/bus";
import { Catalog, MetadataStore } from "@sloserve/store";
import { startNats, startRedis, type ServerHandle } from "@sloserve/stack";
import { toVariantProfile, type VariantProfile } from "@sloserve/policy";
import { Simulator, installInfaas, type ArrivalProcess } from "@sloserve/sim";
import { ModelAutoscalerController } from "../services/model-autoscaler/src/controller.js";
import { TestWorker, modelRecord, variantRecord } from "../services/model-autoscaler/test/harness.js";

/**
 * One short trace, two runs, the same decisions: the live model autoscaler (its shell, with a manual
 * clock, over a real nats-server and redis-server) and the simulator's INFaaS system both call libs/policy
 * `planModelActions`; this test feeds them the same inputs by construction and compares what they decide.
 *
 * - Variants: digits-like CPU variants, batch 1 (50 ms, 20 QPS, 1 thread) and batch 8 (80 ms, 100 QPS,
 *   2 threads, twice the price), both loading in 2.5 s; one registry record each, and the simulator's
 *   profiles are `toVariantProfile` of the same records. One 4-thread CPU worker runs d1 ×1 at 0 s.
 * - Load: queries per second of `TRACE`, evenly spaced within each second (the simulator's arrivals), or
 *   reported as the worker's arrivals of the last second (live). Either way each tick t sees the
 *   arrivals of second t − 1, and the rule averages them over its 5 s window.
 * - Instances: the live test worker obeys the commands it receives (an added instance is ready 2.5 s
 *   later on the manual clock), as the simulator's replicas load in 2.5 s.
 *
 * Expected (λ = 0.1 /s: a new instance costs C·1.25; the arithmetic is in the comments of `WANT`):
 * replicate at 21 s, upgrade to batch 8 at 30 s (the two d1 go at 33 s, once d8 is ready), downgrade
 * back to d1 at 53 s (after T_v = 2.5 s of low load; d8 goes at 56 s).
 */

// Seconds 0-14: 10 QPS; 15-19: 19; 20-23: 20; 24-28: 38; 29-32: 39; 33-44: 60; 45-59: 10.
const TRACE: number[] = [
  ...Array<number>(15).fill(10), ...Array<number>(5).fill(19), ...Array<number>(4).fill(20),
  ...Array<number>(5).fill(38), ...Array<number>(4).fill(39), ...Array<number>(12).fill(60), ...Array<number>(15).fill(10),
];
const SECONDS = TRACE.length; // ticks at 1 … 59 s
const SLO_MS = 1000;

const WANT = [
  // t = 21: load (4·19 + 20) / 5 = 19.2 > 20 / 1.05. Replicate d1 ×1: C·1.25; upgrade d8 ×1: 2C·1.25 − C = 1.5·C.
  "t=21 replicate d1 ×1 on cpu-0",
  // t = 30: load (4·38 + 39) / 5 = 38.2 > 40 / 1.05. Replicate d1 ×1: 1.25·C; upgrade d8 ×1: 2.5·C − 2·C = 0.5·C.
  "t=30 upgrade d8 ×1 on cpu-0",
  // t = 50: load 10 ≤ 19.05: a downgrade to d1 ×1 costs 1.25·C − 2·C < 0; done after T_v = 2.5 s, at 53 s.
  "t=53 downgrade d1 ×1 on cpu-0",
];
const WANT_COMMANDS = ["t=21 add d1 ×1", "t=30 add d8 ×1", "t=33 unload d1 ×2", "t=53 add d1 ×1", "t=56 unload d8 ×1"];

const MODEL = "digits";
const records = [
  variantRecord({ name: "d1", model: MODEL, app: MODEL, latencyMs: { 1: 50 }, peakQps: 20, loadLatencyMs: 2500 }),
  variantRecord({ name: "d8", model: MODEL, app: MODEL, maxBatch: 8, threads: 2, latencyMs: { 1: 40, 8: 80 }, peakQps: 100, loadLatencyMs: 2500 }),
];
const WORKER = { threads: 4, memoryBytes: 8e9 };

/** `counts[s]` queries in second s, evenly spaced in it. */
class ExactArrivals implements ArrivalProcess {
  readonly endMs: number;
  private readonly times: number[] = [];
  private i = 0;
  constructor(counts: readonly number[]) {
    counts.forEach((n, s) => {
      for (let k = 0; k < n; k++) this.times.push(s * 1000 + ((k + 0.5) * 1000) / n);
    });
    this.endMs = counts.length * 1000;
  }
  next(): number | null {
    return this.times[this.i++] ?? null;
  }
}

interface Decision {
  t: number;
  text: string;
}

function runSimulator(): { decisions: Decision[]; commands: string[]; arrivalsPerSecond: number[]; otherLog: string[] } {
  const profiles = records.map((r) => toVariantProfile(r)).filter((p): p is VariantProfile => p !== undefined);
  const sim = new Simulator({ seed: 1, durationMs: SECONDS * 1000, drainMs: 5_000 });
  sim.addStream({ app: MODEL, sloMs: SLO_MS, process: new ExactArrivals(TRACE) });
  const sys = installInfaas(sim, {
    mode: "infaas",
    variants: profiles,
    workers: [{ type: "test-worker", kind: "cpu", pricePerS: 0, resources: { ...WORKER } }],
    preload: [{ variant: "d1", count: 1 }],
    sloMsByModel: { [MODEL]: SLO_MS },
    // One worker: the VM autoscaler may not add another (it would when the worker runs hot).
    vmConfig: { maxWorkersPerKind: 1 },
  });
  sim.run();
  const decisions: Decision[] = [];
  for (const e of sys.log) {
    if (e.source !== "model-autoscaler" || e.tMs >= SECONDS * 1000) continue;
    decisions.push({ t: e.tMs / 1000, text: `t=${e.tMs / 1000} ${e.action}` });
  }
  // The simulator's commands are its replicas: added when created, unloaded when their billing stopped.
  const events = new Map<string, number>();
  for (const r of sim.replicas) {
    if (r.billedFromMs > 0) events.set(`${r.billedFromMs}|add|${r.label}`, (events.get(`${r.billedFromMs}|add|${r.label}`) ?? 0) + 1);
    if (r.billedToMs !== null && r.billedToMs < SECONDS * 1000) events.set(`${r.billedToMs}|unload|${r.label}`, (events.get(`${r.billedToMs}|unload|${r.label}`) ?? 0) + 1);
  }
  const commands = [...events]
    .map(([k, n]) => k.split("|").concat(String(n)))
    .sort((a, b) => Number(a[0]) - Number(b[0]))
    .map(([t, action, variant, n]) => `t=${Number(t) / 1000} ${action} ${variant} ×${n}`);
  const arrivalsPerSecond = TRACE.map((_, s) => profiles.reduce((sum, p) => sum + sys.queueOf(p.name).arrivals.sum(s * 1000, (s + 1) * 1000), 0));
  const otherLog = sys.log.filter((e) => e.source === "dispatcher" || (e.source === "vm-autoscaler" && e.tMs < SECONDS * 1000)).map((e) => `${e.source} ${e.action}`);
  return { decisions, commands, arrivalsPerSecond, otherLog };
}

let nats: ServerHandle;
let redis: ServerHandle;
let bus: Bus;
let workerBus: Bus;
let store: MetadataStore;
const log = createLogger("decisions-live-vs-sim", "warn");

beforeAll(async () => {
  nats = await startNats();
  redis = await startRedis();
  bus = await connectBus({ servers: nats.url, name: "model-autoscaler", log });
  workerBus = await connectBus({ servers: nats.url, name: "test-worker", log, ensure: false });
  store = MetadataStore.connect(redis.url);
});

afterAll(async () => {
  await workerBus?.close();
  await bus?.close();
  await store?.close();
  await redis?.stop();
  await nats?.stop();
});

async function runLive(): Promise<{ decisions: Decision[]; commands: string[] }> {
  const T0 = 1_700_000_000_000;
  await store.createModel(modelRecord(MODEL, MODEL), records);
  const clock = new ManualClock(T0);
  const catalog = new Catalog(store);
  const controller = new ModelAutoscalerController(bus, catalog, log, clock);
  const subs = controller.subscribe();
  await catalog.load();
  const worker = new TestWorker({ name: "cpu-0", hardware: "cpu", ...WORKER }, new Map(records.map((r) => [r.name, r]))).preload("d1", 1, T0).listen(workerBus);
  const decisions: Decision[] = [];
  const commands: Array<{ worker: string; command: ScaleCommand }> = [];
  const taps = [
    workerBus.nc.subscribe("decision.model.*", {
      callback: (_e, m) => {
        const d = m.json<Record<string, unknown>>();
        const t = (Number(d.atMs) - T0) / 1000;
        if (d.action !== "hold") decisions.push({ t, text: `t=${t} ${String(d.action)} ${String(d.variant)} ×${String(d.count)} on ${String(d.worker)}` });
      },
    }),
    workerBus.nc.subscribe("scale.model.*", { callback: (_e, m) => void commands.push({ worker: m.subject.split(".")[2] ?? "", command: m.json() }) }),
  ];
  await workerBus.nc.flush();
  try {
    for (let t = 1; t < SECONDS; t++) {
      clock.set(T0 + t * 1000);
      await worker.publishReport(workerBus, clock.now(), { [MODEL]: TRACE[t - 1] ?? 0 });
      const arrivals = { app: MODEL, dispatcher: "test", atMs: clock.now(), windowMs: 1000, arrivals: TRACE[t - 1] ?? 0, models: { [MODEL]: { queries: TRACE[t - 1] ?? 0, minSloMs: SLO_MS } }, infeasible: 0 };
      await workerBus.js.publish(subjects.arrivals(MODEL), JSON.stringify(arrivals));
      await bus.nc.flush(); // the controller has this second's reports
      await controller.tick();
      await workerBus.nc.flush(); // the worker and the taps have what it published
    }
  } finally {
    for (const s of [...subs, ...taps]) s.unsubscribe();
    worker.stop();
  }
  return { decisions, commands: commands.map(({ command }) => `t=${(command.atMs - T0) / 1000} ${command.action} ${command.variant} ×${String(command.count)}`) };
}

describe("decisions live vs simulated", () => {
  it("decisions live vs sim - the same trace gives the same decisions in the same order", async () => {
    const simulated = runSimulator();
    // The premises: the simulator saw exactly the trace (no query counted twice, none lost), and nothing
    // but the model autoscaler changed what runs (no load from the dispatcher, no machine added).
    expect(simulated.arrivalsPerSecond).toEqual(TRACE);
    expect(simulated.otherLog).toEqual([]);

    const live = await runLive();
    expect(live.decisions.map((d) => d.text)).toEqual(WANT);
    expect(simulated.decisions.map((d) => d.text)).toEqual(live.decisions.map((d) => d.text));
    // And the same commands at the same times: the old instances go once the new ones are ready.
    expect(live.commands).toEqual(WANT_COMMANDS);
    expect(simulated.commands).toEqual(WANT_COMMANDS);
  });
});
