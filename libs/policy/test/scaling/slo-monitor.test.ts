import { describe, expect, it } from "vitest";
import { initialSloCycleState, initialSloMonitorState, observeRequest, observeRequests, sloMonitorCycle, sloMonitorTick, type SloMonitorState } from "../../src/scaling/slo-monitor.js";

describe("slo-monitor", () => {
  it("slo-monitor - one miss moves the EWMA by 0.001", () => {
    const s = observeRequest(initialSloMonitorState, true);
    expect(s.missFraction).toBeCloseTo(0.001, 12); // 0.999·0 + 0.001·1
    expect(observeRequest(s, false).missFraction).toBeCloseTo(0.000999, 12); // 0.999·0.001
  });

  it("slo-monitor - counts agree with per-request updates when misses are spread evenly", () => {
    // 1000 requests, every 20th missed (5%), one at a time vs in one call.
    let a: SloMonitorState = initialSloMonitorState;
    for (let i = 0; i < 1000; i++) a = observeRequest(a, i % 20 === 19);
    const b = observeRequests(initialSloMonitorState, 1000, 50);
    // closed form: (1 − 0.999¹⁰⁰⁰)·0.05 = (1 − 0.3677)·0.05 = 0.0316
    expect(b.missFraction).toBeCloseTo(0.0316, 3);
    expect(Math.abs(a.missFraction - b.missFraction)).toBeLessThan(0.001);
  });

  it("slo-monitor - acts above 2%, then cools down for 5 cycles", () => {
    let state: SloMonitorState = { missFraction: 0.03, cooldownLeft: 0 };
    const launches: number[] = [];
    for (let cycle = 0; cycle < 8; cycle++) {
      const d = sloMonitorTick(state);
      launches.push(d.launch);
      state = d.state;
    }
    // cycle 0 acts; cycles 1-5 cool down; cycle 6 acts again (f still 3%); cycle 7 cools down.
    expect(launches).toEqual([1, 0, 0, 0, 0, 0, 1, 0]);
  });

  it("slo-monitor - stays quiet at or below 2%", () => {
    const d = sloMonitorTick({ missFraction: 0.02, cooldownLeft: 0 });
    expect(d.launch).toBe(0);
    expect(d.reason).toBe("miss fraction 2.00% within 2.00%");
    expect(sloMonitorTick({ missFraction: 0.05, cooldownLeft: 0 }).reason).toBe("miss fraction 5.00% > 2.00%: launch one instance");
  });

  describe("sloMonitorCycle", () => {
    const cfg = { periodMs: 10_000, decay: 0.999, cooldownCycles: 5, slMinOf: (app: string) => (app === "loose" ? 0.9 : 0.98) };

    it("slo-monitor - observes every call, runs a cycle every period, launches while queries miss, then cools down", () => {
      // 1000 queries, 100 missed: f = (1 − 0.999¹⁰⁰⁰)·0.1 = 0.0632 > 2%
      let r = sloMonitorCycle(initialSloCycleState, [{ app: "a", total: 1000, missed: 100 }], 0, cfg);
      expect(r.cycled).toBe(true);
      expect(r.acts).toEqual([{ app: "a", act: "launch", reason: "app a: miss fraction 6.32% > 2.00%: launch one instance (SLmin 98%)" }]);
      expect(r.short.map((s) => s.app)).toEqual(["a"]);
      expect(r.state.missedSinceCycle).toEqual({});
      // 5 s later: samples observed, no cycle yet; the misses are remembered for the next cycle.
      r = sloMonitorCycle(r.state, [{ app: "a", total: 10, missed: 1 }], 5_000, cfg);
      expect(r.cycled).toBe(false);
      expect(r.acts).toEqual([]);
      expect(r.state.missedSinceCycle).toEqual({ a: 1 });
      // 10 s after the first cycle: cool-down (5 cycles).
      r = sloMonitorCycle(r.state, [], 10_000, cfg);
      expect(r.cycled).toBe(true);
      expect(r.acts).toEqual([]);
      expect(r.state.slo["a"]!.cooldownLeft).toBe(4);
    });

    it("slo-monitor - holds when the miss fraction is high but no query missed since the last cycle", () => {
      const high = { slo: { a: { missFraction: 0.05, cooldownLeft: 0 } }, missedSinceCycle: {}, lastCycleAtMs: 0 };
      const r = sloMonitorCycle(high, [{ app: "a", total: 50, missed: 0 }], 10_000, cfg);
      expect(r.acts).toEqual([{ app: "a", act: "hold", reason: "SLO monitor: app a: miss fraction 4.76% > 2%, but no query missed in the last 10 s: the misses have stopped, and a worker launched now would serve none of them" }]);
      expect(r.short).toEqual([]);
      // The app's own service level: 10% misses allowed for "loose".
      const loose = sloMonitorCycle({ ...high, slo: { loose: { missFraction: 0.05, cooldownLeft: 0 } } }, [{ app: "loose", total: 10, missed: 1 }], 10_000, cfg);
      expect(loose.acts).toEqual([]);
      expect(loose.short).toEqual([]);
    });
  });
});
