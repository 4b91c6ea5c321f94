import { describe, expect, it } from "vitest";
import {
  emptyMachinePlanState,
  forecastAt,
  planMachines,
  returnedWorkerDecision,
  workerCapacityForApp,
  type AppForecast,
  type MachineDecision,
  type MachineKind,
  type MachinePlanContext,
  type MachinePlanState,
  type MachineView,
  type VariantProfile,
} from "../../src/index.js";

/**
 * The machine plan (machine-plan.ts): hand-built contexts, the state carried through loops of ticks,
 * the arithmetic in comments.
 *
 * Fixture: app "a" has one CPU variant, 10 QPS peak, 1 thread, 100 MB; a CPU worker offers 2 threads and
 * 1 GB, so 2 instances fit (threads: 2 / 1 = 2; memory: 1e9 / 1e8 = 10) → C(a, cpu) = 2 × 10 = 20 QPS.
 */

const variant = (o: Partial<VariantProfile> = {}): VariantProfile => ({
  name: "a-cpu",
  model: "a",
  app: "a",
  hardware: "cpu",
  batchSize: 1,
  accuracy: 0.9,
  latencyMs: { 1: 100 },
  peakQps: 10,
  loadLatencyMs: 500,
  pricePerS: 0.0001,
  profiled: true,
  resources: { threads: 1, memoryBytes: 1e8 },
  ...o,
});
const catalog: VariantProfile[] = [variant()];
const CPU: MachineKind = { instanceType: "c5.xlarge", pricePerHour: 0.17, bootMs: 2000, resources: { threads: 2, memoryBytes: 1e9 } };

/** A managed, serving CPU worker launched at 0 that has just sent a heartbeat (NaN → now). */
function w(name: string, o: Partial<MachineView> = {}): MachineView {
  return { name, kind: "cpu", booting: false, utilization: 0.5, interfered: false, overloaded: false, serving: true, capacityQps: 20, lastHeartbeatMs: NaN, variants: ["a-cpu"], apps: ["a"], managed: true, launchedAtMs: 0, ...o };
}

const brief = (d: MachineDecision): string => {
  switch (d.action) {
    case "launch":
      return `launch ${d.kind} ×${d.count} ${d.trigger}${d.market === "spot" ? " spot" : ""}`;
    case "replace":
      return `replace ${d.worker} [${d.restore.join(",")}]`;
    case "terminate":
      return `terminate ${d.worker} ${d.trigger}`;
    case "hold":
      return `hold ${d.worker ?? d.kind}`;
    case "plan":
      return `plan ${d.kind} ${d.workers}`;
  }
};

/** Runs ticks, carrying the state; each tick's context comes from `at(nowMs)`. */
function ticks(times: number[], at: (nowMs: number) => Omit<MachinePlanContext, "nowMs" | "state" | "kinds"> & { kinds?: MachinePlanContext["kinds"] }, state: MachinePlanState = emptyMachinePlanState()): { out: string[][]; last: MachineDecision[]; state: MachinePlanState } {
  const out: string[][] = [];
  let last: MachineDecision[] = [];
  for (const nowMs of times) {
    const c = at(nowMs);
    const r = planMachines({ kinds: { cpu: CPU }, ...c, workers: c.workers.map((x) => (Number.isNaN(x.lastHeartbeatMs) ? { ...x, lastHeartbeatMs: nowMs } : x)), nowMs, state });
    state = r.state;
    last = r.decisions;
    out.push(r.decisions.map(brief));
  }
  return { out, last, state };
}

const forecast = (values: number[], atMs = 0, stepMs = 60_000): AppForecast => ({ app: "a", atMs, stepMs, values });

describe("machine-plan", () => {
  it("machine-plan - capacity of a worker for an app, and the forecast at a time", () => {
    expect(workerCapacityForApp(catalog, "a", "cpu", CPU.resources)).toEqual({ variant: "a-cpu", instances: 2, qps: 20 });
    // A 4-thread variant fits 0 times in 2 threads; a variant slower than the SLO does not count.
    expect(workerCapacityForApp([variant({ resources: { threads: 4, memoryBytes: 1 } })], "a", "cpu", CPU.resources)).toBeUndefined();
    expect(workerCapacityForApp(catalog, "a", "cpu", CPU.resources, 50)).toBeUndefined(); // 100 ms > 50 ms
    // A batch-8 variant (T(8) = 40 ms, 200 QPS) beats it per worker: 2 × 200 = 400 QPS.
    expect(workerCapacityForApp([...catalog, variant({ name: "a-b8", batchSize: 8, latencyMs: { 8: 40 }, peakQps: 200 })], "a", "cpu", CPU.resources)?.qps).toBe(400);
    // values[i] covers [atMs + i·step, atMs + (i+1)·step); past the end, the last value.
    const f = forecast([10, 20, 30], 1000);
    expect([forecastAt(f, 1000), forecastAt(f, 61_000), forecastAt(f, 130_000), forecastAt(f, 999_000), forecastAt(f, 0)]).toEqual([10, 20, 30, 30, 10]);
  });

  it("machine-plan - with an SLO, a worker's capacity is MArk's tuned throughput μ*, not the profiled peak", () => {
    // T(b) = 40 + 10b profiled at 1, 2, 4, 8; peak = 8 / T(8) = 8000 / 120 = 66.7 QPS. Under a 200 ms SLO the
    // tuned Nbatch is 6 (Wbatch 83.3 + T(6) 100 = 183.3 ≤ 200; b = 7 gives 204.3): μ* = 6000 / 100 = 60 QPS.
    const b8 = variant({ name: "a-b8", batchSize: 8, latencyMs: { 1: 50, 2: 60, 4: 80, 8: 120 }, peakQps: 8000 / 120 });
    expect(workerCapacityForApp([b8], "a", "cpu", CPU.resources)?.qps).toBeCloseTo(2 * (8000 / 120), 9); // no SLO: the peak
    expect(workerCapacityForApp([b8], "a", "cpu", CPU.resources, 200)).toEqual({ variant: "a-b8", instances: 2, qps: 120 });
    // A loose SLO lets Nbatch reach 8: μ* is the peak again.
    expect(workerCapacityForApp([b8], "a", "cpu", CPU.resources, 1000)?.qps).toBeCloseTo(2 * (8000 / 120), 9);
  });

  const cases: Array<{ name: string; workers: MachineView[]; extra?: Partial<MachinePlanContext>; want: string[] }> = [
    // (a) INFaaS rules, through vmAutoscale.
    { name: "utilisation above 80% on every worker launches one", workers: [w("c1", { utilization: 0.85 }), w("c2", { utilization: 0.9 })], want: ["launch cpu ×1 infaas"] },
    { name: "more than 80% of workers overloaded launches one", workers: [w("c1", { overloaded: true })], want: ["launch cpu ×1 infaas"] },
    { name: "a scale.vm request launches one", workers: [w("c1")], extra: { pending: [{ kind: "cpu", variant: "a-cpu", count: 1 }] }, want: ["launch cpu ×1 infaas"] },
    { name: "spot where allowed", workers: [w("c1")], extra: { pending: [{ kind: "cpu", variant: "a-cpu", count: 1 }], kinds: { cpu: { ...CPU, spot: true } } }, want: ["launch cpu ×1 infaas spot"] },
    { name: "a booting worker holds", workers: [w("c1", { utilization: 0.95 }), w("c2", { booting: true })], want: ["hold cpu"] },
    { name: "the kind's limit holds", workers: [w("c1", { utilization: 0.95 })], extra: { kinds: { cpu: { ...CPU, maxWorkers: 1 } } }, want: ["hold cpu"] },
    { name: "a kind without an instance type holds", workers: [w("g1", { kind: "gpu", utilization: 0.95 })], want: ["hold gpu"] },
    // Heartbeat 15 s old > 10 s: replaced with its variants.
    { name: "a lost heartbeat replaces the worker", workers: [w("c1", { lastHeartbeatMs: -15_000, variants: ["x", "y"] })], want: ["replace c1 [x,y]"] },
    // The provider says so: at once, whatever the heartbeat.
    { name: "a worker the provider reports lost is replaced at once", workers: [w("c1", { lostReason: "killed by SIGKILL" })], want: ["replace c1 [a-cpu]"] },
  ];
  for (const c of cases) {
    it(`machine-plan - ${c.name}`, () => {
      expect(ticks([0], () => ({ workers: c.workers, ...(c.extra ?? {}) })).out[0]).toEqual(c.want);
    });
  }

  it("machine-plan - a worker lost before its first heartbeat failed to boot: a back-off, no replacement", () => {
    const failed = w("c2", { booting: true, lostReason: "executor exited with code 1 before it was ready", launchedAtMs: 0 });
    // At 2 s: hold, no replacement. At 30 s a scale.vm request is held (30 s < 60 s); at 62 s it launches.
    const r = ticks([2_000, 30_000, 62_000], (t) => ({ workers: t === 2_000 ? [w("c1"), failed] : [w("c1")], pending: t > 2_000 ? [{ kind: "cpu", variant: "a-cpu", count: 1 }] : [] }));
    expect(r.out).toEqual([["hold c2"], ["hold cpu"], ["launch cpu ×1 infaas"]]);
  });

  it("machine-plan - a lost worker is replaced once while it is still listed", () => {
    const lost = w("c1", { lastHeartbeatMs: 0 });
    // 12 s > 10 s at the first tick; the next ticks see it again and do nothing.
    const r = ticks([12_000, 14_000, 16_000], () => ({ workers: [lost, w("c2", { booting: true, launchedAtMs: 12_000 })] }));
    expect(r.out).toEqual([["replace c1 [a-cpu]"], [], []]);
    expect(r.state.replaced).toEqual({ c1: 12_000 });
    // Once the caller stops listing it, the plan forgets it.
    expect(ticks([18_000], () => ({ workers: [w("c2")] }), r.state).state.replaced).toEqual({});
  });

  it("machine-plan - an idle worker goes after the cool-down, never inside the billing minimum", () => {
    // Cool-down 10 s < billing minimum 60 s: idle from 0, launched at 0. At 10 s idle ≥ 10 s, but it has
    // run 10 s < 60 s → hold; at 60 s it has run 60 s → terminate (c0 is not ours: never).
    const at = () => ({ workers: [w("c0", { managed: false, launchedAtMs: undefined, capacityQps: 20 }), w("c1", { serving: false, capacityQps: 0 })], config: { cooldownMs: 10_000 } });
    const r = ticks([0, 8_000, 10_000, 58_000, 60_000], at);
    expect(r.out).toEqual([[], [], ["hold c1"], ["hold c1"], ["terminate c1 idle"]]);
    const hold = ticks([0, 10_000], at).last[0];
    expect(hold?.reason).toBe("idle for 10 s (≥ 10 s), but c1 has run 10 s, inside the 60 s billing minimum");
  });

  it("machine-plan - a worker not launched by the autoscaler is never terminated", () => {
    const r = ticks([0, 400_000, 800_000], () => ({ workers: [w("c0", { managed: false, serving: false, launchedAtMs: undefined }), w("c1")] }));
    expect(r.out).toEqual([[], [], []]);
  });

  it("machine-plan - a cool-down longer than the billing minimum: terminated after the cool-down", () => {
    // Cool-down 120 s: idle from 0; at 118 s nothing; at 120 s, 120 s ≥ 120 s and 120 s ≥ 60 s → terminate.
    const r = ticks([0, 60_000, 118_000, 120_000], () => ({ workers: [w("c1", { serving: false, capacityQps: 0 })], config: { cooldownMs: 120_000 } }));
    expect(r.out).toEqual([[], [], [], ["terminate c1 idle"]]);
  });

  it("machine-plan - the predictive plan launches for the forecast at now + boot", () => {
    // Forecast from 0: 10 qps in minute 0, 30 qps in minutes 1-59. Now = 59 s, boot 2 s → t = 61 s is in
    // minute 1 → 30 qps / 20 qps per worker = 1.5 workers; at 80%: 0.8 + 0.8 = 1.6 ≥ 1.5 → 2 workers.
    // One runs (serving, ours): launch 1.
    const f = forecast([10, ...new Array<number>(59).fill(30)]);
    const r = ticks([59_000], () => ({ workers: [w("c1")], forecasts: [f], catalog }));
    expect(r.out[0]).toEqual(["plan cpu 2", "launch cpu ×1 predictive"]);
    const plan = r.last[0];
    expect(plan?.reason).toContain("a 30 qps / 20 qps per worker (a-cpu) = 1.5 worker(s) at 80% → plan 2 cpu worker(s), 1 running");
    // The plan runs once a minute: 2 s later nothing new is planned.
    expect(ticks([61_000], () => ({ workers: [w("c1"), w("c2", { booting: true, launchedAtMs: 59_000 })], forecasts: [f], catalog }), r.state).out[0]).toEqual([]);
  });

  it("machine-plan - the largest ask wins, with every reason kept", () => {
    // INFaaS asks 1 (utilisation 90% on c1), the plan 2 (50 qps / 20 = 2.5 workers → 4 at 80%: 3.2 ≥ 2.5;
    // 3 × 0.8 = 2.4 < 2.5; 1 running → launch 3) → launch 3, trigger predictive, both reasons.
    // (INFaaS's one-tick reading: the live default reads two, over which one tick's 90% is its own)
    const r = ticks([0], () => ({ workers: [w("c1", { utilization: 0.9 })], forecasts: [forecast(new Array<number>(60).fill(50))], catalog, config: { vm: { readingTicks: 1 } } }));
    expect(r.out[0]).toEqual(["plan cpu 4", "launch cpu ×3 predictive"]);
    const launch = r.last[1];
    expect(launch?.reason).toMatch(/^INFaaS: utilisation above 80% on all 1 cpu worker\(s\) \(min 90%\); predictive plan: 3 more worker\(s\) for the forecast$/);
    // Within a limit of 2 workers: 1 of 3.
    const limited = ticks([0], () => ({ workers: [w("c1")], forecasts: [forecast(new Array<number>(60).fill(50))], catalog, kinds: { cpu: { ...CPU, maxWorkers: 2 } } }));
    expect(limited.out[0]).toEqual(["plan cpu 4", "launch cpu ×1 predictive"]);
  });

  it("machine-plan - the plan gives workers back only after the cool-down", () => {
    // Cool-down 180 s, a plan a minute → the plan keeps the largest of its last 180/60 + 1 = 4 plans.
    // Three serving workers of ours (launched long ago) while the forecast says 30 qps (plan 2), then 0.
    const workers = [w("c1", { launchedAtMs: -600_000 }), w("c2", { launchedAtMs: -600_000 }), w("c3", { launchedAtMs: -600_000 })];
    const state: MachinePlanState = { ...emptyMachinePlanState(), provisioning: { cpu: { recentPlans: [{ cpu: 3 }] } } };
    let alive = [...workers];
    const out: string[][] = [];
    let s = state;
    for (let minute = 0; minute < 6; minute++) {
      const nowMs = minute * 60_000;
      const f = forecast(new Array<number>(60).fill(minute === 0 ? 30 : 0), nowMs);
      const r = ticks([nowMs], () => ({ workers: alive, forecasts: [f], catalog, config: { cooldownMs: 180_000 } }), s);
      s = r.state;
      out.push(r.out[0] ?? []);
      const gone = new Set(r.last.flatMap((d) => (d.action === "terminate" ? [d.worker] : [])));
      alive = alive.filter((x) => !gone.has(x.name));
    }
    // minute 0: plan 2, history [3, 2] keeps 3; minutes 1-2: plan 0, history keeps 3;
    // minute 3: history [2, 0, 0, 0] keeps 2 → one goes; minute 4: [0, 0, 0, 0] → the other two go.
    expect(out).toEqual([["plan cpu 2"], ["plan cpu 0"], ["plan cpu 0"], ["plan cpu 0", "terminate c3 predictive"], ["plan cpu 0", "terminate c2 predictive", "terminate c1 predictive"], ["plan cpu 0"]]);
  });

  it("machine-plan - no predictive destroy while an app on the kind has no forecast", () => {
    const state: MachinePlanState = { ...emptyMachinePlanState(), provisioning: { cpu: { recentPlans: [] } } };
    const r = ticks([0], () => ({ workers: [w("c1", { launchedAtMs: -600_000, apps: ["a", "b"] })], forecasts: [forecast(new Array<number>(60).fill(0))], catalog, config: { cooldownMs: 60_000 } }), state);
    expect(r.out[0]).toEqual(["plan cpu 0", "hold cpu"]);
    expect(r.last[1]?.reason).toBe("the predictive plan would give back 1 cpu worker(s), but app(s) b on them have no forecast yet");
  });

  it("machine-plan - the SLO monitor launches when more than 1 − SLmin of recent queries missed", () => {
    // 1000 queries, 50 missed: f = (1 − 0.999¹⁰⁰⁰) × 50/1000 = 0.632 × 0.05 = 0.0316 > 0.02 → launch one.
    const slo = [{ app: "a", total: 1000, missed: 50 }];
    const r = ticks([0, 10_000, 20_000, 30_000, 40_000, 50_000, 60_000], (t) => ({ workers: [w("c1")], slo: t === 0 || t === 60_000 ? slo : [], catalog }));
    // Then it cools down for 5 periods of 10 s (10-50 s); at 60 s queries miss again, f = 0.368 × 0.0316
    // + 0.632 × 0.05 = 0.0432 → again (without misses since its last period it holds: machine-plan-slo-churn.test.ts).
    expect(r.out).toEqual([["launch cpu ×1 slo"], [], [], [], [], [], ["launch cpu ×1 slo"]]);
    expect(ticks([0], () => ({ workers: [w("c1")], slo, catalog })).last[0]?.reason).toBe("SLO monitor: app a: miss fraction 3.16% > 2.00%: launch one instance (SLmin 98%)");
    // SLmin 95% for the app: 0.0316 < 0.05 → nothing.
    expect(ticks([0], () => ({ workers: [w("c1")], slo, catalog, config: { slMinByApp: { a: 0.95 } } })).out[0]).toEqual([]);
  });

  it("machine-plan - a spot notice: a standby at once, the noticed worker drained when the standby is up", () => {
    // Notice at 0 for 120 s later. Tick 0: standby (on-demand). Tick 2 s: standby booting → wait.
    // Tick 4 s: the standby (launched at 0 ≥ notice at 0) is up → drain c1.
    const noticed = w("c1", { interruptAtMs: 120_000, launchedAtMs: -600_000 });
    const r = ticks([0, 2_000, 4_000], (t) => ({ workers: t === 0 ? [noticed] : [noticed, w("s1", { booting: t < 4_000, launchedAtMs: 0, serving: false })], kinds: { cpu: { ...CPU, spot: true } } }));
    expect(r.out).toEqual([["launch cpu ×1 spot-standby"], [], ["terminate c1 spot-notice"]]);
    // Without a standby up, it is drained 30 s before the interruption: at 90 s.
    const late = ticks([0, 88_000, 90_000], () => ({ workers: [noticed] }));
    expect(late.out).toEqual([["launch cpu ×1 spot-standby"], [], ["terminate c1 spot-notice"]]);
    // Taken back (the provider reports it lost): the standby is its replacement, no second one.
    expect(ticks([100_000], () => ({ workers: [{ ...noticed, lostReason: "spot instance reclaimed" }] }), late.state).out[0]).toEqual([]);
  });

  it("machine-plan - the plan prefers a cheaper kind per query", () => {
    // GPU variant 400 qps on a $3.06/h worker: 3.06 / 400 = 0.00765 $/h per qps; CPU: 0.17 / 20 = 0.0085 → GPU.
    const gpu: MachineKind = { instanceType: "p3.2xlarge", pricePerHour: 3.06, bootMs: 2000, resources: { accelerators: 1, memoryBytes: 1e10 } };
    const both = [...catalog, variant({ name: "a-gpu", hardware: "gpu", peakQps: 400, resources: { accelerators: 1, memoryBytes: 1e9 } })];
    const r = ticks([0], () => ({ workers: [], kinds: { cpu: CPU, gpu }, forecasts: [forecast(new Array<number>(60).fill(100))], catalog: both }));
    // 100 / 400 = 0.25 worker → 1 gpu worker.
    expect(r.out[0]).toEqual(["plan gpu 1", "launch gpu ×1 predictive"]);
  });
});

describe("returned workers", () => {
  it("machine plan - a lost worker that reports again: its replacement is terminated, unless either is already leaving", () => {
    const replacement = { workerId: "w-9", kind: "cpu", leaving: false };
    expect(returnedWorkerDecision({ worker: "w-1", leaving: false }, replacement)).toEqual({ action: "terminate", worker: "w-9", kind: "cpu", trigger: "returned", reason: "w-1, which it replaced, reports again" });
    expect(returnedWorkerDecision({ worker: "w-1", leaving: true }, replacement)).toBeUndefined();
    expect(returnedWorkerDecision({ worker: "w-1", leaving: false }, { ...replacement, leaving: true })).toBeUndefined();
    expect(returnedWorkerDecision({ worker: "w-1", leaving: false }, undefined)).toBeUndefined();
  });
});
