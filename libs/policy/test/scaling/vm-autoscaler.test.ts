import { describe, expect, it } from "vitest";
import { vmAutoscale as rawVmAutoscale, type VmAutoscalerContext, type VmAutoscalerState, type VmWorkerView } from "../../src/index.js";

/** Workers without an explicit heartbeat have just sent one. */
const vmAutoscale = (c: VmAutoscalerContext): ReturnType<typeof rawVmAutoscale> =>
  rawVmAutoscale({ ...c, workers: c.workers.map((x) => (Number.isNaN(x.lastHeartbeatMs) ? { ...x, lastHeartbeatMs: c.nowMs } : x)) });

function w(name: string, o: Partial<VmWorkerView> = {}): VmWorkerView {
  return { name, kind: "gpu", booting: false, utilization: 0.5, interfered: false, overloaded: false, serving: true, capacityQps: 100, lastHeartbeatMs: NaN, variants: ["v"], ...o };
}
const brief = (r: ReturnType<typeof vmAutoscale>): string[] => r.decisions.map((d) => `${d.action} ${"worker" in d ? d.worker : d.kind}`);

describe("vm-autoscaler", () => {
  const cases: Array<{ name: string; workers: VmWorkerView[]; want: string[]; pending?: Array<{ kind: string; variant: string; count: number }> }> = [
    { name: "utilisation above 80% on all workers adds one", workers: [w("g1", { utilization: 0.85 }), w("g2", { utilization: 0.9 })], want: ["add gpu"] },
    { name: "one worker below 80% adds none", workers: [w("g1", { utilization: 0.85 }), w("g2", { utilization: 0.7 })], want: [] },
    { name: "interfered on all workers adds one", workers: [w("g1", { interfered: true }), w("g2", { interfered: true })], want: ["add gpu"] },
    // 4 of 5 = 80% is not more than 80%; 5 of 5 is.
    { name: "80% overloaded is not enough", workers: [w("1", { overloaded: true }), w("2", { overloaded: true }), w("3", { overloaded: true }), w("4", { overloaded: true }), w("5")], want: [] },
    { name: "more than 80% overloaded adds one", workers: [w("1", { overloaded: true }), w("2", { overloaded: true })], want: ["add gpu"] },
    { name: "a booting worker holds further adds", workers: [w("g1", { utilization: 0.95 }), w("g2", { booting: true, utilization: 0 })], want: ["hold gpu"] },
    { name: "pending placements add a worker of their kind", workers: [w("g1")], pending: [{ kind: "inferentia", variant: "B", count: 2 }], want: ["add inferentia"] },
    // g2 came up after the placement was asked for and runs nothing: it takes it, no worker is added.
    { name: "pending placements wait for a worker of their kind that is up with nothing loaded", workers: [w("g1"), w("g2", { variants: [], utilization: 0, serving: false })], pending: [{ kind: "gpu", variant: "B", count: 1 }], want: ["hold gpu"] },
    // ...but a hot kind still adds one: the empty worker answers the placement, not the utilisation.
    { name: "an empty worker does not hold the other rules", workers: [w("g1", { utilization: 0.9 }), w("g2", { variants: [], utilization: 0.85 })], pending: [{ kind: "gpu", variant: "B", count: 1 }], want: ["hold gpu", "add gpu"] },
    { name: "kinds are independent", workers: [w("g1", { utilization: 0.9 }), w("c1", { kind: "cpu", utilization: 0.1 })], want: ["add gpu"] },
  ];
  for (const c of cases) {
    it(`vm-autoscaler - ${c.name}`, () => {
      expect(brief(vmAutoscale({ nowMs: 1000, workers: c.workers, ...(c.pending ? { pending: c.pending } : {}) }))).toEqual(c.want);
    });
  }

  it("vm-autoscaler - the worker limit holds", () => {
    const r = vmAutoscale({ nowMs: 0, workers: [w("g1", { utilization: 0.9 })], config: { maxWorkersPerKind: 1, readingTicks: 1 } });
    expect(r.decisions).toEqual([{ action: "hold", kind: "gpu", reason: "utilisation above 80% on all 1 gpu worker(s) (min 90%); at the limit of 1 gpu worker(s)" }]);
  });

  it("vm-autoscaler - lost heartbeat replaces the worker and restores its variants", () => {
    const r = vmAutoscale({ nowMs: 30_000, workers: [w("g1", { lastHeartbeatMs: 15_000, variants: ["a", "b"] }), w("g2", { lastHeartbeatMs: 29_000 })] });
    expect(r.decisions).toEqual([{ action: "replace", worker: "g1", kind: "gpu", restore: ["a", "b"], reason: "heartbeat lost for 15 s (> 10 s): replace it and restore 2 variant(s)" }]);
  });

  it("vm-autoscaler - a replacement counts as booting capacity", () => {
    // g1 is lost and the placements it left behind want a gpu worker: the replacement is that worker.
    const r = vmAutoscale({ nowMs: 30_000, workers: [w("g1", { lastHeartbeatMs: 0 })], pending: [{ kind: "gpu", variant: "v", count: 1 }] });
    expect(brief(r)).toEqual(["replace g1", "hold gpu"]);
  });

  it("vm-autoscaler - removes a worker idle for 5 min when the rest covers 1.2 × forecast", () => {
    const workers = [w("g1", { serving: false }), w("g2", { capacityQps: 100 })];
    let state: VmAutoscalerState = { idleSinceMs: {} };
    const at = (nowMs: number, forecast: number): string[] => {
      const r = vmAutoscale({ nowMs, workers, forecastQpsByKind: { gpu: forecast }, state });
      state = r.state;
      return brief(r);
    };
    expect(at(0, 50)).toEqual([]); // idle clock starts
    expect(at(299_000, 50)).toEqual([]); // 299 s < 300 s
    // 300 s idle, but 100 QPS < 1.2 × 90 = 108 → keep it.
    expect(at(300_000, 90)).toEqual([]);
    // 100 ≥ 1.2 × 80 = 96 → remove.
    expect(at(302_000, 80)).toEqual(["remove g1"]);
  });

  it("vm-autoscaler - serving again resets the idle clock", () => {
    const r1 = vmAutoscale({ nowMs: 0, workers: [w("g1", { serving: false }), w("g2")] });
    const r2 = vmAutoscale({ nowMs: 200_000, workers: [w("g1"), w("g2")], state: r1.state });
    const r3 = vmAutoscale({ nowMs: 400_000, workers: [w("g1", { serving: false }), w("g2")], state: r2.state });
    expect(r3.decisions).toEqual([]);
    expect(r3.state.idleSinceMs).toEqual({ g1: 400_000 });
  });

  it("vm-autoscaler - keeps the minimum number of workers", () => {
    const r = vmAutoscale({ nowMs: 600_000, workers: [w("g1", { serving: false })], config: { minWorkersPerKind: 1 }, state: { idleSinceMs: { g1: 0 } } });
    expect(r.decisions).toEqual([]);
  });
  it("vm-autoscaler - with readingTicks 2, a one-tick burst adds none; two ticks' mean above 80% adds one", () => {
    const config = { readingTicks: 2 };
    const tick = (nowMs: number, workers: VmWorkerView[], state?: VmAutoscalerState) => vmAutoscale({ nowMs, workers, config, ...(state ? { state } : {}) });
    // Quiet, then one tick at 100%: the mean of (0.4, 1.0) is 70%.
    const quiet = tick(0, [w("g1", { utilization: 0.4 })]);
    const burst = tick(2000, [w("g1", { utilization: 1 })], quiet.state);
    expect(brief(burst)).toEqual([]);
    expect(burst.state.readings?.["g1"]?.utilization).toEqual([0.4, 1]);
    // A second tick at 90%: mean 95%.
    const held = tick(4000, [w("g1", { utilization: 0.9 })], burst.state);
    expect(held.decisions).toEqual([{ action: "add", kind: "gpu", count: 1, reason: "utilisation above 80% on all 1 gpu worker(s) over the last 2 ticks (min 95%)" }]);
    expect(held.state.readings?.["g1"]?.utilization).toEqual([1, 0.9]);
    // Interfered (and Overloaded) must hold at each of the ticks read.
    const once = tick(6000, [w("g1", { interfered: true })], held.state);
    expect(brief(once)).toEqual([]);
    expect(brief(tick(8000, [w("g1", { interfered: true })], once.state))).toEqual(["add gpu"]);
    // A worker with one reading so far is read over it; a gone worker's readings are dropped.
    const fresh = tick(10_000, [w("g2", { utilization: 0.95 })], once.state);
    expect(brief(fresh)).toEqual(["add gpu"]);
    expect(Object.keys(fresh.state.readings ?? {})).toEqual(["g2"]);
  });

  it("vm-autoscaler - with readingTicks 1 (INFaaS's rule) the state keeps no readings", () => {
    const r = vmAutoscale({ nowMs: 0, workers: [w("g1", { utilization: 0.9 })], config: { readingTicks: 1 } });
    expect(brief(r)).toEqual(["add gpu"]);
    expect(r.state).toEqual({ idleSinceMs: {} });
  });
});
