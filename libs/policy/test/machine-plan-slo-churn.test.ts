import { describe, expect, it } from "vitest";
import { emptyMachinePlanState, planMachines, type AppSloSample, type MachineKind, type MachinePlanState, type MachineView, type VariantProfile } from "../src/index.js";

/**
 * The SLO monitor inside the machine plan against the plan's give-backs (machine-plan.ts (c)), with the
 * live replay's compressed settings (docs/ARCHITECTURE.md "Live replay": a tick every 2 s, the monitor's
 * period shorter than a tick, plan every second, cool-down 5.417 s, billing minimum 0.417 s, boot 5.417 s).
 *
 * What the recorded replay showed (reports/replay-live, decisions-live.jsonl): 54 queries missed in
 * 2 s of a machine hiccup; the monitor launched a worker, the plan gave it back at the next tick (the
 * forecast needs one worker), and the monitor, its miss fraction still above 2% (it remembers ~1000
 * queries, ~40 s at 25 q/s), launched again after each cool-down of 5 periods, three times, each
 * worker given back before it booted. The simulator, without the hiccup, launched none.
 *
 * Fixture: one unmanaged serving worker c0 (the stack's), a forecast of 10 q/s (a worker offers 20 q/s,
 * 16 at 80%: the plan wants 1 worker), 50 queries answered per tick, utilisation 50% (INFaaS's rules
 * stay quiet). Each row gives the misses per tick; the workers launched appear (booting for 5.417 s) and
 * go as decided.
 */

const variant: VariantProfile = {
  name: "a-cpu", model: "a", app: "a", hardware: "cpu", batchSize: 1, accuracy: 0.9, latencyMs: { 1: 100 },
  peakQps: 10, loadLatencyMs: 500, pricePerS: 0.0001, profiled: true, resources: { threads: 1, memoryBytes: 1e8 },
};
const CPU: MachineKind = { instanceType: "c5.xlarge", pricePerHour: 0.17, bootMs: 5417, resources: { threads: 2, memoryBytes: 1e9 } };
const CONFIG = { sloPeriodMs: 69, planPeriodMs: 1000, cooldownMs: 5417, billingMinimumMs: 417 };
const TICK_MS = 2000;

/** Runs `misses.length` ticks; returns the launches, terminations and SLO holds, as "t=<s> …". */
function run(misses: readonly number[], perTick = 50): string[] {
  let state: MachinePlanState = emptyMachinePlanState();
  let launched: Array<{ name: string; atMs: number }> = [];
  const out: string[] = [];
  misses.forEach((missed, i) => {
    const nowMs = i * TICK_MS;
    const view = (name: string, o: Partial<MachineView>): MachineView => ({
      name, kind: "cpu", booting: false, utilization: 0.5, interfered: false, overloaded: false, serving: true,
      capacityQps: 20, lastHeartbeatMs: nowMs, variants: ["a-cpu"], apps: ["a"], managed: true, ...o,
    });
    const workers = [
      view("c0", { managed: false }),
      ...launched.map((l) => (nowMs - l.atMs < CPU.bootMs ? view(l.name, { booting: true, serving: false, variants: [], apps: [], launchedAtMs: l.atMs }) : view(l.name, { launchedAtMs: l.atMs }))),
    ];
    const slo: AppSloSample[] = perTick > 0 ? [{ app: "a", total: perTick, missed }] : [];
    const r = planMachines({ nowMs, workers, kinds: { cpu: CPU }, forecasts: [{ app: "a", atMs: nowMs, stepMs: 1000, values: new Array<number>(60).fill(10) }], slo, catalog: [variant], config: CONFIG, state });
    state = r.state;
    const t = `t=${nowMs / 1000}`;
    for (const d of r.decisions) {
      if (d.action === "launch") {
        out.push(`${t} launch ${d.trigger}`);
        launched = [...launched, { name: `L${launched.length + 1}`, atMs: nowMs }];
      } else if (d.action === "terminate") {
        out.push(`${t} terminate ${d.worker}`);
        launched = launched.filter((l) => l.name !== d.worker);
      } else if (d.action === "hold" && /SLO|miss/.test(d.reason)) out.push(`${t} hold: ${/stopped/.test(d.reason) ? "misses stopped" : "misses go on"}`);
    }
  });
  return out;
}

const ticks = (n: number, at: Record<number, number>): number[] => Array.from({ length: n }, (_, i) => at[i] ?? 0);

describe("machine plan: the SLO monitor acts on misses that go on", () => {
  const rows: Array<{ name: string; misses: number[]; want: string[] }> = [
    {
      // The recorded hiccup: 54 of one tick's 50 + 26 queries missed. Tick 3: f = (1 − 0.999⁷⁶) × 54/76
      // = 5.2% > 2% with misses this tick → launch. Tick 4: no miss → the plan (1 worker) gives L1 back.
      // The monitor cools down 5 periods (ticks 4-8); from tick 9 f = 5.2% × 0.951^(t − 3) is still above
      // 2% (until tick 23) but nothing missed: holds, no launch (before: launches at ticks 9 and 15).
      name: "a transient: one launch, given back, no relaunch on the memory of it",
      misses: ticks(16, { 3: 54 }),
      want: ["t=6 launch slo", "t=8 terminate L1", ...[18, 20, 22, 24, 26, 28, 30].map((t) => `t=${t} hold: misses stopped`)],
    },
    {
      // 5 of 50 miss at ticks 3-10: f = 10% × (1 − 0.951^k) after k ticks passes 2% at k = 5 (2.21%),
      // tick 7 → launch L1. Ticks 8-10: misses go on, f > 2% → the plan keeps L1. Tick 11: no miss → L1
      // goes. Tick 13: the cool-down is over (ticks 8-12), f = 3.30% × 0.951³ = 2.84% > 2% but nothing
      // missed since tick 10 → hold.
      name: "misses that go on: the launch is kept while they do",
      misses: ticks(15, { 3: 5, 4: 5, 5: 5, 6: 5, 7: 5, 8: 5, 9: 5, 10: 5 }),
      want: ["t=14 launch slo", "t=16 hold: misses go on", "t=18 hold: misses go on", "t=20 hold: misses go on", "t=22 terminate L1", "t=26 hold: misses stopped", "t=28 hold: misses stopped"],
    },
    {
      // 1 of 50 per tick: f tends to 2% from below, never above → nothing, however long.
      name: "misses within 1 − SLmin: nothing",
      misses: new Array<number>(40).fill(1),
      want: [],
    },
  ];
  for (const row of rows) it(row.name, () => expect(run(row.misses)).toEqual(row.want));

  it("no query at all after the misses: f does not move, and the monitor does not relaunch on it", () => {
    // Tick 0: 1000 queries, 50 missed → f = 3.16% → launch; then no queries: holds once the cool-down is over.
    let state: MachinePlanState = emptyMachinePlanState();
    const out: string[] = [];
    for (const [i, slo] of [[{ app: "a", total: 1000, missed: 50 }], [], [], [], [], [], [], []].entries()) {
      const r = planMachines({ nowMs: i * 10_000, workers: [], kinds: { cpu: CPU }, slo, catalog: [variant], state });
      state = r.state;
      out.push(r.decisions.map((d) => d.action).join(","));
    }
    expect(out).toEqual(["launch", "", "", "", "", "", "hold", "hold"]);
  });
});
