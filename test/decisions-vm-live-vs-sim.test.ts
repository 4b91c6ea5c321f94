import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ManualClock, type Hardware } from "@sloserve/contracts";
import { connectBus, createLogger, type Bus } from "@sloserve/bus";
import { Catalog, MetadataStore } from "@sloserve/store";
import { startNats, startRedis, type ServerHandle } from "@sloserve/stack";
import { toVariantProfile, type MachineDecision, type MachineKind, type MachinePlanConfig, type ModelAction, type VariantProfile } from "@sloserve/policy";
import type { ProviderEvent, WorkerInstance, WorkerProvider, WorkerSpec } from "@sloserve/providers";
import { Simulator, installInfaas, type ArrivalProcess, type InfaasTraceEvent, type MachineOptions } from "@sloserve/sim";
import { VmAutoscalerController } from "../services/vm-autoscaler/src/controller.js";
import { ModelAutoscalerController } from "../services/model-autoscaler/src/controller.js";
import { modelRecord, variantRecord } from "../services/model-autoscaler/test/harness.js";

/**
 * The VM autoscaler and the model autoscaler, live and simulated, on one stream of worker reports: the simulator's INFaaS system
 * runs a short trace with a burst, a boot and a worker death; its machines send the contract's worker
 * reports and its dispatcher the arrivals reports (libs/sim worker-report.ts), which its VM autoscaler
 * reads through libs/policy `FleetObservation`; its dispatcher and model autoscaler ask for machines with
 * `scale.vm` requests. The test replays that stream, in the simulator's order,
 * into the vm-autoscaler service's shell (its controller, a manual clock, a real nats-server and
 * redis-server, a provider that names the machines it launches as the simulator does) and ticks it
 * where the simulator ticked: every decision, holds included, must be the same, with the same reasons,
 * in the same order. The model autoscaler's shell (its controller, the same servers and clock) is fed
 * the same stream and ticked at the simulator's model ticks: every action the same.
 *
 * The trace: one stack worker (cpu-0, 2 threads, unmanaged) runs v ×1 (one thread, 50 ms a query, 20
 * q/s at most). 8 q/s for 10 s, then 45 q/s, more than the worker's two threads serve: the VM
 * autoscaler (reading two ticks, the live default) launches on utilisation and a placement that fits
 * nowhere (cpu-1 at 16 s, boot 3 s), then on Overloaded variants on every worker (cpu-2 at 20 s). At 35 s cpu-1 dies without a word: its heartbeat stops (last report at 34 s),
 * and at the first tick more than 10 s later (46 s) it is replaced (cpu-3) with what it ran.
 */

const SECONDS = 60;
const MODEL = "vm";
const record = variantRecord({ name: "v", model: MODEL, app: MODEL, latencyMs: { 1: 50 }, peakQps: 20, loadLatencyMs: 500 });
const profiles = [toVariantProfile(record)].filter((p): p is VariantProfile => p !== undefined);
const STACK: MachineOptions = { type: "c5.large", kind: "cpu", pricePerS: 0.085 / 3600, bootMs: 3000, resources: { threads: 2, memoryBytes: 4e9 } };
const PLAN: Partial<MachinePlanConfig> = { cooldownMs: 20_000, billingMinimumMs: 5_000 };
const VM = { maxWorkersPerKind: 3 };

/** `rate(s)` queries in second s, evenly spaced. */
function arrivals(rate: (s: number) => number): ArrivalProcess {
  const times: number[] = [];
  for (let s = 0; s < SECONDS; s++) for (let k = 0, n = rate(s); k < n; k++) times.push(s * 1000 + ((k + 0.5) * 1000) / n);
  let i = 0;
  return { endMs: SECONDS * 1000, next: () => times[i++] ?? null };
}

function simulate(): { events: InfaasTraceEvent[]; launched: string[]; killed: string } {
  const sim = new Simulator({ seed: 1, durationMs: SECONDS * 1000, drainMs: 2000 });
  sim.addStream({ app: MODEL, sloMs: 1000, process: arrivals((s) => (s < 10 ? 8 : 45)) });
  const events: InfaasTraceEvent[] = [];
  installInfaas(sim, {
    mode: "infaas",
    variants: profiles,
    workers: [STACK],
    unmanagedWorkers: true,
    preload: [{ variant: "v", count: 1 }],
    sloMsByModel: { [MODEL]: 1000 },
    sloMonitor: true,
    vmConfig: VM,
    planConfig: PLAN,
    trace: (e) => void events.push(e),
  });
  let killed = "";
  sim.at(35_000, () => {
    const m = sim.machines.find((x) => x.name !== "cpu-0" && x.state === "running");
    if (m) {
      killed = m.name;
      sim.killMachine(m);
    }
  });
  sim.run();
  const launched = sim.machines.filter((m) => m.name !== "cpu-0").map((m) => m.name);
  return { events, launched, killed };
}

/** A provider whose machines are named as the simulator names its own (`cpu-1`, `cpu-2`, …); they never boot: the reports say who runs. */
class MirrorProvider implements WorkerProvider {
  readonly name = "mirror";
  private next = 1;
  private readonly instances: WorkerInstance[] = [];
  constructor(private readonly clock: ManualClock) {}
  launch(spec: WorkerSpec): Promise<WorkerInstance> {
    const workerId = `${spec.kind}-${this.next++}`;
    const i: WorkerInstance = { id: `i-${workerId}`, provider: this.name, workerId, kind: spec.kind as Hardware, instanceType: spec.instanceType, market: spec.market ?? "on-demand", pricePerHour: 0.085, launchedAtMs: this.clock.now(), state: "running", endedAtMs: null };
    this.instances.push(i);
    return Promise.resolve({ ...i });
  }
  terminate(id: string): Promise<void> {
    const i = this.instances.find((x) => x.id === id);
    if (i) Object.assign(i, { state: "terminated", endedAtMs: this.clock.now() });
    return Promise.resolve();
  }
  list(): Promise<WorkerInstance[]> {
    return Promise.resolve(this.instances.map((i) => ({ ...i })));
  }
  onEvent(_listener: (event: ProviderEvent) => void): void {}
  close(): Promise<void> {
    return Promise.resolve();
  }
}

let nats: ServerHandle;
let redis: ServerHandle;
let bus: Bus;
let store: MetadataStore;
const log = createLogger("decisions-vm-live-vs-sim", "warn");

beforeAll(async () => {
  [nats, redis] = await Promise.all([startNats(), startRedis()]);
  bus = await connectBus({ servers: nats.url, name: "vm-autoscaler", log });
  store = MetadataStore.connect(redis.url);
  await store.createModel(modelRecord(MODEL, MODEL), [record]);
});

afterAll(async () => {
  await bus?.close();
  await store?.close();
  await Promise.all([redis?.stop(), nats?.stop()]);
});

const brief = (d: MachineDecision): string => `${d.action} ${d.kind}${"worker" in d && d.worker ? ` ${d.worker}` : ""}: ${d.reason}`;

describe("decisions live vs simulated: the VM autoscaler", () => {
  it("decisions live vs sim - the VM autoscaler's shell, fed the simulator's own reports, decides as the simulator did", async () => {
    const { events, launched, killed } = simulate();
    const ticks = events.filter((e): e is Extract<InfaasTraceEvent, { type: "vm-tick" }> => e.type === "vm-tick");
    const simulated = ticks.flatMap((e) => e.decisions.filter((d) => d.action !== "hold").map((d) => `t=${e.atMs / 1000} ${brief(d)}`));
    // The premises: a burst launch, a boot, a death and its replacement all happened in the simulator.
    expect(simulated.some((d) => /launch cpu: INFaaS/.test(d)), simulated.join("\n")).toBe(true);
    expect(killed).toBe("cpu-1");
    expect(simulated.some((d) => /replace cpu cpu-1: .*heartbeat/.test(d)), simulated.join("\n")).toBe(true);
    expect(launched).toEqual(["cpu-1", "cpu-2", "cpu-3"]);

    // The shell, fed the same stream in the same order, ticked where the simulator ticked.
    const clock = new ManualClock(0);
    const catalog = new Catalog(store);
    await catalog.load();
    const kind: MachineKind = { instanceType: STACK.type, pricePerHour: STACK.pricePerS * 3600, bootMs: STACK.bootMs ?? 0, resources: STACK.resources ?? {} };
    const controller = new VmAutoscalerController(bus, store, catalog, new MirrorProvider(clock), log, clock, { kinds: { cpu: kind }, plan: { ...PLAN, vm: VM } });
    const live: string[] = [];
    for (const e of events) {
      clock.set(e.atMs);
      if (e.type === "worker-report") controller.applyReport(e.report);
      else if (e.type === "arrivals") controller.applyArrivals(e.report);
      else if (e.type === "scale-vm") controller.applyScaleVm(e.request);
      else if (e.type === "vm-tick") {
        const got = await controller.tick();
        // Every decision of the tick, holds included, with its reason.
        expect(got.map(brief), `tick at ${e.atMs / 1000} s`).toEqual(e.decisions.map(brief));
        live.push(...got.filter((d) => d.action !== "hold").map((d) => `t=${e.atMs / 1000} ${brief(d)}`));
      }
    }
    expect(live).toEqual(simulated);
  });

  it("decisions live vs sim - the model autoscaler's shell, fed the same reports, acts as the simulator's did", async () => {
    const { events } = simulate();
    const modelTicks = events.filter((e) => e.type === "model-tick");
    const acted = modelTicks.flatMap((e) => e.actions.filter((a) => a.kind !== "decision" || a.decision.action !== "hold").map((a) => `t=${e.atMs / 1000} ${act(a)}`));
    // The premises: it replicated v, asked for machines, and the replacement got v back.
    expect(acted.some((a) => /add v ×\d+ on cpu-0/.test(a)), acted.join("\n")).toBe(true);
    expect(acted.some((a) => /escalate v/.test(a)), acted.join("\n")).toBe(true);

    const clock = new ManualClock(0);
    const catalog = new Catalog(store);
    await catalog.load();
    const controller = new ModelAutoscalerController(bus, catalog, log, clock, { launchableKinds: ["cpu"] });
    const live: string[] = [];
    for (const e of events) {
      clock.set(e.atMs);
      if (e.type === "worker-report") controller.applyReport(e.report);
      else if (e.type === "arrivals") controller.applyArrivals(e.report);
      else if (e.type === "model-tick") {
        const got = await controller.tick();
        // Every action of the tick, holds included, with its reason.
        expect(got.map(act), `model tick at ${e.atMs / 1000} s`).toEqual(e.actions.map(act));
        live.push(...got.filter((a) => a.kind !== "decision" || a.decision.action !== "hold").map((a) => `t=${e.atMs / 1000} ${act(a)}`));
      }
    }
    expect(live).toEqual(acted);
  });
});

/** One model-autoscaler action in words: what, where, and why. */
function act(a: ModelAction): string {
  if (a.kind === "decision") return `decision on ${a.worker}: ${JSON.stringify(a.decision)}`;
  return `${a.kind} ${a.variant} ×${a.count} on ${a.worker}: ${a.reason}`;
}
