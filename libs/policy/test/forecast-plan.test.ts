import { describe, expect, it } from "vitest";
import { planForecast } from "../src/index.js";

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
});
