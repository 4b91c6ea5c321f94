import { describe, expect, it } from "vitest";
import { planForecast } from "../../src/index.js";

describe("forecast-plan", () => {
  it("forecast-plan - the model follows the history available", () => {
    expect(planForecast([], { season: 4, horizon: 3 })).toMatchObject({ values: [0, 0, 0], method: "none (no history yet)" });
    // fewer than one season (4): last value
    expect(planForecast([5, 7], { season: 4, horizon: 2 })).toMatchObject({ values: [7, 7], method: "last-value" });
    // one season, not two + horizon: seasonal-naive repeats the last season: [1,2,3,4] → 1, 2
    expect(planForecast([9, 9, 9, 9, 1, 2, 3, 4], { season: 4, horizon: 2 })).toMatchObject({ values: [1, 2], method: "seasonal-naive(4)" });
  });

  it("forecast-plan - Holt-Winters once there are two seasons and a horizon, refitted only every refitEvery units", () => {
    const series = Array.from({ length: 40 }, (_, i) => 10 + 5 * Math.sin((2 * Math.PI * i) / 8));
    const first = planForecast(series, { season: 8, horizon: 4, refitEvery: 10 });
    expect(first.method).toMatch(/^holt-winters/);
    expect(first.values).toHaveLength(4);
    expect(first.state.fittedAtLength).toBe(40);
    // 5 more units < refitEvery 10: the same parameters
    const later = planForecast([...series, 10, 13, 15, 13, 10], { season: 8, horizon: 4, refitEvery: 10 }, first.state);
    expect(later.state).toBe(first.state);
    // the forecast follows the sine: within 2 of it
    for (const [h, v] of first.values.entries()) expect(Math.abs(v - (10 + 5 * Math.sin((2 * Math.PI * (40 + h)) / 8)))).toBeLessThan(2);
  });

  it("forecast-plan - the season is chosen by validation: a daily cycle keeps its day, spikes that do not repeat do not come back", () => {
    const days = 3;
    const n = days * 1440 + 60;
    const o = { season: 1440, horizon: 60 };
    // A real daily cycle: 60 ± 30 over the day. The daily season forecasts the held-back day best.
    const daily = Array.from({ length: n }, (_, i) => 60 + 30 * Math.sin((2 * Math.PI * i) / 1440));
    const d = planForecast(daily, o);
    expect(d.method).toMatch(/m=1440\)$/);
    expect(d.state.validation?.["1440"]).toBeLessThan(d.state.validation?.["none"] ?? 0);
    // A flat 60 with a 10-minute spike to 140 at a different time each day (no daily cycle): a daily
    // season would replay yesterday's spike; validation keeps a model without one.
    const spiky = Array.from({ length: 4 * 1440 }, (_, i) => {
      const day = Math.floor(i / 1440);
      const at = [200, 700, 1100, 300][day]!;
      return i % 1440 >= at && i % 1440 < at + 10 ? 140 : 60;
    });
    const s = planForecast(spiky.slice(0, n), o);
    expect(s.method).not.toMatch(/m=1440\)$/);
    // Day 2's spike (its minutes 1100-1109) is not forecast for the same minutes of day 3.
    const tomorrow = planForecast(spiky.slice(0, 3 * 1440 + 1090), o);
    expect(Math.max(...tomorrow.values.slice(0, 30))).toBeLessThan(80);
    expect(Object.keys(s.state.validation ?? {}).sort()).toEqual(["1440", "60", "last-value", "none"]);
  });
});
