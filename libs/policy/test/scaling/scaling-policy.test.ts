import { describe, expect, it } from "vitest";
import {
  DEFAULT_MACHINE_PLAN_CONFIG,
  SCALING_POLICIES,
  emptyMachinePlanState,
  isScalingPolicy,
  machinePlanRulesOf,
  planMachines,
  scalingRulesOf,
  type AppForecast,
  type MachineDecision,
  type MachineKind,
  type MachinePlanConfig,
  type MachinePlanContext,
  type MachinePlanState,
  type MachineView,
  type ScalingPolicy,
  type VariantProfile,
} from "../../src/index.js";

/**
 * The scaling policies (scaling-policy.ts) through the machine plan (machine-plan.ts): each policy on
 * a small CPU fleet, the state carried through loops of ticks.
 *
 * Fixture (as machine-plan.test.ts): app "a" has one CPU variant, 10 QPS peak, 1 thread, 100 MB; a CPU
 * worker offers 2 threads and 1 GB, so 2 instances fit → C(a, cpu) = 20 QPS per worker.
 */

const variant: VariantProfile = {
  name: "a-cpu", model: "a", app: "a", hardware: "cpu", batchSize: 1, accuracy: 0.9, latencyMs: { 1: 100 }, peakQps: 10,
  loadLatencyMs: 500, pricePerS: 0.0001, profiled: true, resources: { threads: 1, memoryBytes: 1e8 },
};
const catalog: VariantProfile[] = [variant];
const CPU: MachineKind = { instanceType: "c5.xlarge", pricePerHour: 0.17, bootMs: 2000, resources: { threads: 2, memoryBytes: 1e9 } };

/** A managed, serving CPU worker launched long ago that has just sent a heartbeat (NaN → now). */
function w(name: string, o: Partial<MachineView> = {}): MachineView {
  return { name, kind: "cpu", booting: false, utilization: 0.5, interfered: false, overloaded: false, serving: true, capacityQps: 20, lastHeartbeatMs: NaN, variants: ["a-cpu"], apps: ["a"], managed: true, launchedAtMs: -600_000, ...o };
}

const brief = (d: MachineDecision): string => {
  switch (d.action) {
    case "launch":
      return `launch ${d.kind} ×${d.count} ${d.trigger}`;
    case "replace":
      return `replace ${d.worker}`;
    case "terminate":
      return `terminate ${d.worker} ${d.trigger}`;
    case "hold":
      return `hold ${d.worker ?? d.kind}`;
    case "plan":
      return `plan ${d.kind} ${d.workers}`;
  }
};

type At = (nowMs: number) => Omit<MachinePlanContext, "nowMs" | "state" | "kinds" | "config"> & { kinds?: MachinePlanContext["kinds"] };

/** Runs ticks under a policy (plus `extra` config), carrying the state. */
function ticks(policy: ScalingPolicy, times: number[], at: At, extra: Partial<MachinePlanConfig> = {}, state: MachinePlanState = emptyMachinePlanState()): { out: string[][]; decisions: MachineDecision[][]; state: MachinePlanState } {
  const out: string[][] = [];
  const decisions: MachineDecision[][] = [];
  for (const nowMs of times) {
    const c = at(nowMs);
    const r = planMachines({ kinds: { cpu: CPU }, ...c, workers: c.workers.map((x) => (Number.isNaN(x.lastHeartbeatMs) ? { ...x, lastHeartbeatMs: nowMs } : x)), nowMs, state, config: { ...machinePlanRulesOf(policy), ...extra } });
    state = r.state;
    decisions.push(r.decisions);
    out.push(r.decisions.map(brief));
  }
  return { out, decisions, state };
}

const forecast = (value: number, atMs = 0): AppForecast => ({ app: "a", atMs, stepMs: 60_000, values: new Array<number>(60).fill(value) });
/** 1000 queries of app a, 50 late: the SLO monitor's fraction 3.16% > 2% (machine-plan.test.ts). */
const missing = [{ app: "a", total: 1000, missed: 50 }];
/** INFaaS's one-tick reading, so that one tick's utilisation decides. */
const oneTick: Partial<MachinePlanConfig> = { vm: { readingTicks: 1 } };

describe("scaling policies", () => {
  it("scaling policy - what each policy runs", () => {
    expect(SCALING_POLICIES.map((p) => [p, scalingRulesOf(p)])).toEqual([
      ["combined", { infaasAdd: true, infaasRemoveIdle: true, markPlan: true, markSloMonitor: true, overflow: true }],
      ["infaas", { infaasAdd: true, infaasRemoveIdle: true, markPlan: false, markSloMonitor: false, overflow: false }],
      ["mark", { infaasAdd: false, infaasRemoveIdle: false, markPlan: true, markSloMonitor: true, overflow: true }],
      ["static", { infaasAdd: false, infaasRemoveIdle: false, markPlan: false, markSloMonitor: false, overflow: false }],
    ]);
    // The machine plan's default is `combined` (today's behaviour).
    const d = DEFAULT_MACHINE_PLAN_CONFIG;
    expect({ infaasAdd: d.infaasAdd, infaasRemoveIdle: d.infaasRemoveIdle, markPlan: d.markPlan, markSloMonitor: d.markSloMonitor }).toEqual(machinePlanRulesOf("combined"));
    expect(isScalingPolicy("mark")).toBe(true);
    expect(isScalingPolicy("MArk")).toBe(false);
  });

  it("scaling policy - combined decides as the plan with no switch set, on a run that uses every rule", () => {
    // Utilisation above 80%, a forecast, SLO misses, an idle worker, a lost one: every rule has a say.
    const at: At = (t) => ({
      workers: [w("c1", { utilization: t < 20_000 ? 0.95 : 0.3 }), w("c2", { serving: false, capacityQps: 0, utilization: t < 20_000 ? 0.95 : 0 }), ...(t === 0 ? [w("c3", { lostReason: "killed" })] : [])],
      forecasts: [forecast(t < 120_000 ? 30 : 0, Math.floor(t / 60_000) * 60_000)],
      slo: t === 0 ? missing : [],
      catalog,
      loadQpsByKind: { cpu: 5 },
    });
    const times = Array.from({ length: 300 }, (_, i) => i * 2_000);
    const withSwitches = ticks("combined", times, at, { cooldownMs: 120_000 });
    const plain = { out: [] as string[][] };
    let state = emptyMachinePlanState();
    for (const nowMs of times) {
      const c = at(nowMs);
      const r = planMachines({ kinds: { cpu: CPU }, ...c, workers: c.workers.map((x) => ({ ...x, lastHeartbeatMs: nowMs })), nowMs, state, config: { cooldownMs: 120_000 } });
      state = r.state;
      plain.out.push(r.decisions.map(brief));
    }
    expect(withSwitches.out).toEqual(plain.out);
    const all = withSwitches.out.flat();
    for (const x of ["replace c3", "launch cpu ×1 infaas", "plan cpu 2"]) expect(all, x).toContain(x);
    expect(withSwitches.decisions.flat().some((d) => d.action === "launch" && d.reason.includes("SLO monitor:"))).toBe(true);
    expect(all.some((x) => x.startsWith("terminate"))).toBe(true);
  });

  it("scaling policy - static: no launch on high utilisation, a placement, a forecast or SLO misses; nothing terminated; holds none about them", () => {
    const r = ticks("static", [0, 2_000, 10_000, 60_000], () => ({
      workers: [w("c1", { utilization: 0.95, overloaded: true, interfered: true })],
      pending: [{ kind: "cpu", variant: "a-cpu", count: 1 }],
      forecasts: [forecast(100)],
      slo: missing,
      catalog,
    }), oneTick);
    expect(r.out).toEqual([[], [], [], []]);
    // Combined on the same input launches (the largest ask: the plan's).
    const c = ticks("combined", [0], () => ({ workers: [w("c1", { utilization: 0.95 })], pending: [{ kind: "cpu", variant: "a-cpu", count: 1 }], forecasts: [forecast(100)], slo: missing, catalog }), oneTick);
    expect(c.out[0]).toEqual(["plan cpu 7", "launch cpu ×6 predictive"]);
    // An idle worker of ours, long past the cool-down, stays.
    const idle = ticks("static", [0, 400_000, 800_000], () => ({ workers: [w("c1"), w("c2", { serving: false, capacityQps: 0 })], loadQpsByKind: { cpu: 0 } }));
    expect(idle.out).toEqual([[], [], []]);
    expect(ticks("combined", [0, 400_000], () => ({ workers: [w("c1"), w("c2", { serving: false, capacityQps: 0 })], loadQpsByKind: { cpu: 0 } })).out).toEqual([[], ["terminate c2 idle"]]);
  });

  it("scaling policy - static keeps the fleet: a lost worker is replaced, a spot notice gets its standby", () => {
    expect(ticks("static", [0], () => ({ workers: [w("c1", { lostReason: "killed by SIGKILL" })] })).out[0]).toEqual(["replace c1"]);
    expect(ticks("static", [12_000], () => ({ workers: [w("c1", { lastHeartbeatMs: 0 })] })).out[0]).toEqual(["replace c1"]);
    const noticed = w("c1", { interruptAtMs: 120_000 });
    const spot = ticks("static", [0, 2_000, 4_000], (t) => ({ workers: t === 0 ? [noticed] : [noticed, w("s1", { booting: t < 4_000, launchedAtMs: 0, serving: false })], kinds: { cpu: { ...CPU, spot: true } } }));
    expect(spot.out).toEqual([["launch cpu ×1 spot-standby"], [], ["terminate c1 spot-notice"]]);
  });

  it("scaling policy - infaas: launches on utilisation; ignores forecasts and SLO samples", () => {
    // Utilisation 90% on the one worker: INFaaS adds one.
    expect(ticks("infaas", [0], () => ({ workers: [w("c1", { utilization: 0.9 })], catalog }), oneTick).out[0]).toEqual(["launch cpu ×1 infaas"]);
    // A forecast of 100 qps (combined: plan 7) and SLO misses (combined: an SLO launch): nothing.
    const quiet = (f: boolean): At => () => ({ workers: [w("c1")], catalog, ...(f ? { forecasts: [forecast(100)], slo: missing } : {}) });
    const times = [0, 10_000, 20_000, 60_000, 120_000];
    expect(ticks("infaas", times, quiet(true)).out).toEqual(times.map(() => []));
    expect(ticks("combined", [0], quiet(true)).out[0]).toEqual(["plan cpu 7", "launch cpu ×6 predictive"]);
    // The same decisions and rule state with and without them, over a run with idle workers: the idle
    // rule measures against the current load (5 qps), not the forecast (100 qps, which would keep c2).
    const hot = (t: number): number => (t === 20_000 ? 0.95 : 0.3);
    const run = (f: boolean): At => (t) => ({ workers: [w("c1", { utilization: hot(t) }), w("c2", { serving: false, capacityQps: 0, utilization: hot(t) })], catalog, loadQpsByKind: { cpu: 5 }, ...(f ? { forecasts: [forecast(100, t)], slo: missing } : {}) });
    const long = Array.from({ length: 200 }, (_, i) => i * 2_000);
    const fed = ticks("infaas", long, run(true), oneTick);
    const unfed = ticks("infaas", long, run(false), oneTick);
    expect(fed.decisions).toEqual(unfed.decisions);
    expect(fed.state).toEqual(unfed.state);
    expect(fed.out.flat()).toEqual(["launch cpu ×1 infaas", "terminate c2 idle"]);
    expect(ticks("combined", long, run(true), oneTick).out.flat()).not.toContain("terminate c2 idle");
  });

  it("scaling policy - mark: launches from a forecast, not from utilisation alone; the SLO monitor launches", () => {
    // Utilisation 95%, Overloaded, a placement no worker takes: no INFaaS add, no hold about it.
    expect(ticks("mark", [0, 2_000], () => ({ workers: [w("c1", { utilization: 0.95, overloaded: true })], pending: [{ kind: "cpu", variant: "a-cpu", count: 1 }], catalog }), oneTick).out).toEqual([[], []]);
    // The forecast: 30 qps / 20 qps per worker = 1.5 workers → 2 at 80%; one runs → launch 1.
    expect(ticks("mark", [0], () => ({ workers: [w("c1", { utilization: 0.95 })], forecasts: [forecast(30)], catalog }), oneTick).out[0]).toEqual(["plan cpu 2", "launch cpu ×1 predictive"]);
    // SLO misses: one worker of the app's kind.
    expect(ticks("mark", [0], () => ({ workers: [w("c1")], slo: missing, catalog })).out[0]).toEqual(["launch cpu ×1 slo"]);
  });

  it("scaling policy - mark removes by its plan, never by the idle rule", () => {
    // Three serving workers of ours; the forecast says 30 qps (plan 2), then 0. Cool-down 180 s: the plan
    // keeps the largest of its last 4 plans (machine-plan.test.ts "the plan gives workers back only after
    // the cool-down"), the same under mark as under combined.
    const run = (policy: ScalingPolicy): string[][] => {
      let alive = [w("c1"), w("c2"), w("c3")];
      let s: MachinePlanState = { ...emptyMachinePlanState(), provisioning: { cpu: { recentPlans: [{ cpu: 3 }] } } };
      const out: string[][] = [];
      for (let minute = 0; minute < 6; minute++) {
        const nowMs = minute * 60_000;
        const r = ticks(policy, [nowMs], () => ({ workers: alive, forecasts: [forecast(minute === 0 ? 30 : 0, nowMs)], catalog }), { cooldownMs: 180_000 }, s);
        s = r.state;
        out.push(r.out[0] ?? []);
        const gone = new Set((r.decisions[0] ?? []).flatMap((d) => (d.action === "terminate" ? [d.worker] : [])));
        alive = alive.filter((x) => !gone.has(x.name));
      }
      return out;
    };
    const want = [["plan cpu 2"], ["plan cpu 0"], ["plan cpu 0"], ["plan cpu 0", "terminate c3 predictive"], ["plan cpu 0", "terminate c2 predictive", "terminate c1 predictive"], ["plan cpu 0"]];
    expect(run("mark")).toEqual(want);
    expect(run("combined")).toEqual(want);
    // Without forecasts, an idle worker stays under mark (combined: the idle rule removes it after the cool-down).
    const idle: At = () => ({ workers: [w("c1"), w("c2", { serving: false, capacityQps: 0 })], loadQpsByKind: { cpu: 0 } });
    expect(ticks("mark", [0, 400_000, 800_000], idle).out).toEqual([[], [], []]);
    expect(ticks("combined", [0, 400_000], idle).out).toEqual([[], ["terminate c2 idle"]]);
    // ... nor does it hold about the billing minimum (the idle rule's hold).
    expect(ticks("mark", [0, 10_000], () => ({ workers: [w("c1", { serving: false, capacityQps: 0, launchedAtMs: 0 })] }), { cooldownMs: 10_000 }).out).toEqual([[], []]);
    expect(ticks("combined", [0, 10_000], () => ({ workers: [w("c1", { serving: false, capacityQps: 0, launchedAtMs: 0 })] }), { cooldownMs: 10_000 }).out).toEqual([[], ["hold c1"]]);
  });

  it("scaling policy - the limits hold in every policy", () => {
    // At maxWorkers = 1 the plan's launch is held (mark), as INFaaS's is (infaas).
    const full = { ...CPU, maxWorkers: 1 };
    expect(ticks("mark", [0], () => ({ workers: [w("c1")], forecasts: [forecast(30)], catalog, kinds: { cpu: full } })).out[0]).toEqual(["plan cpu 2", "hold cpu"]);
    expect(ticks("infaas", [0], () => ({ workers: [w("c1", { utilization: 0.95 })], kinds: { cpu: full } }), oneTick).out[0]).toEqual(["hold cpu"]);
    // minWorkers = 3: the plan gives none of three back under mark.
    const s: MachinePlanState = { ...emptyMachinePlanState(), provisioning: { cpu: { recentPlans: [] } } };
    const r = ticks("mark", [0], () => ({ workers: [w("c1"), w("c2"), w("c3")], forecasts: [forecast(0)], catalog, kinds: { cpu: { ...CPU, minWorkers: 3 } } }), { cooldownMs: 60_000 }, s);
    expect(r.out[0]).toEqual(["plan cpu 0", "hold c3", "hold c2", "hold c1"]);
  });
});
