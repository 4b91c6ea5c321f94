import { describe, expect, it } from "vitest";
import { initialSloMonitorState, observeRequest, observeRequests, sloMonitorTick, type SloMonitorState } from "../../src/scaling/slo-monitor.js";

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
});
