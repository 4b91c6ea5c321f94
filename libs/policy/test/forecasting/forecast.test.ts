import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import {
  fitHoltWinters, holtWinters, lastValueForecaster, maxRatePerUnit, seasonalNaive, spreadOverSeconds, withGaps, type Forecaster,
} from "../../src/forecasting/forecast.js";
import { backtestPredictor } from "../../src/forecasting/forecast-backtest.js";
import { predictorFromForecaster } from "../../src/forecasting/predictors.js";

// The Twitter trace ships with the simulator (libs/sim/data/, see its README); the test reads the
// file and passes the data in, src never touches the file system.
const tracePath = new URL("../../../sim/data/twitter_2021-08_per_minute.csv", import.meta.url);

describe("forecast", () => {
  it("forecast - per-minute max rate from 5 s sample windows", () => {
    // 120 s: minute 0 has 10 qps flat except a 5 s window at 40 qps; minute 1 is 2 qps flat.
    const perSecond = [...new Array<number>(60).fill(10), ...new Array<number>(60).fill(2)];
    for (let s = 20; s < 25; s++) perSecond[s] = 40;
    expect(maxRatePerUnit(perSecond)).toEqual([40, 2]); // (5 × 40) / 5 = 40; (5 × 2) / 5 = 2
    // A window straddling two 5 s samples is split: 3 s at 40 in window [20,25) + 2 s in [25,30) → max 3·40/5 + 2·10/5 = 28.
    const straddle = new Array<number>(60).fill(10);
    for (let s = 22; s < 27; s++) straddle[s] = 40;
    expect(maxRatePerUnit(straddle)).toEqual([28]);
    expect(maxRatePerUnit(new Array<number>(59).fill(1))).toEqual([]); // no whole minute
  });

  it("forecast - seasonal-naive repeats the last season and steps over gaps", () => {
    const f = seasonalNaive(4);
    // history 1 2 3 4 | 5 6 NaN 8 → next: phase 0 → 5, phase 1 → 6, phase 2 → gap → a season earlier: 3, phase 3 → 8
    expect(f.forecast([1, 2, 3, 4, 5, 6, NaN, 8], 5)).toEqual([5, 6, 3, 8, 5]);
    expect(f.forecast([7, NaN], 3)).toEqual([7, 7, 7]); // no value at those phases: the last observed
  });

  it("forecast - Holt-Winters follows a trend plus season exactly", () => {
    // y_t = 100 + 2t + [0, 10, 0, −10] (season 4): with exact initial trend the filter has zero error.
    const shape = [0, 10, 0, -10];
    const y = Array.from({ length: 40 }, (_, t) => 100 + 2 * t + shape[t % 4]!);
    const f = holtWinters({ alpha: 0.5, beta: 0.1, gamma: 0.3, season: 4 }).forecast(y, 4);
    const expected = [40, 41, 42, 43].map((t) => 100 + 2 * t + shape[t % 4]!);
    f.forEach((v, i) => expect(v).toBeCloseTo(expected[i]!, 6));
  });

  it("forecast - Holt-Winters carries level and trend across a gap", () => {
    const y = Array.from({ length: 20 }, (_, t) => 50 + t); // season 1 degenerates to Holt's linear trend
    y[19] = NaN;
    const f = holtWinters({ alpha: 0.5, beta: 0.5, gamma: 0.1, season: 2 }).forecast(y, 1);
    expect(f[0]).toBeCloseTo(70, 6); // 50 + 20
  });

  it("forecast - the grid search picks the parameters that forecast best", () => {
    // A level shift half way: a larger α tracks it; the fit must not choose the smallest α of the grid.
    const y = Array.from({ length: 200 }, (_, t) => (t < 100 ? 10 : 30) + (t % 2));
    const fit = fitHoltWinters(y, { season: 2, horizon: 5, every: 5 });
    expect(fit.tried).toBe(7 * 4 * 4);
    expect(fit.params.alpha).toBeGreaterThan(0.05);
    const worst = fitHoltWinters(y, { season: 2, horizon: 5, every: 5, alphas: [0.05], betas: [0], gammas: [0.05] });
    expect(fit.mae).toBeLessThan(worst.mae);
  });

  it("forecast - backtest scores every step: MAPE, RMSE and under-provisioning, skipping gaps", () => {
    const constant = predictorFromForecaster({ name: "ten", forecast: (_h, n) => new Array<number>(n).fill(10) });
    // Origins at 2 and 4 with horizon 2 score units 2,3 and 4,5; unit 3 is a gap.
    // unit 2: a = 8 → |10−8|/8 = 0.25 (over); unit 4: a = 20 → 0.5 (under, short by 0.5); unit 5: a = 10 → 0.
    const r = backtestPredictor([1, 1, 8, NaN, 20, 10], constant, { start: 2, season: 2, horizon: 2, every: 2 });
    expect(r.scored).toBe(3);
    expect(r.origins).toBe(2);
    expect(r.mape).toBeCloseTo((0.25 + 0.5 + 0) / 3, 12);
    expect(r.rmse).toBeCloseTo(Math.sqrt((4 + 100 + 0) / 3), 12); // (10−8)², (10−20)², 0
    expect(r.underProvisionRate).toBeCloseTo(1 / 3, 12);
    expect(r.meanShortfall).toBeCloseTo(0.5, 12);
    expect(r.methods).toEqual(["ten"]);
  });

  it("forecast - backtest with a lead scores the forecast made lead units earlier, at every origin", () => {
    // The last value, forecast 3 units ahead: from origin t (units 0 … t−1 seen) step 3 is unit t + 2,
    // forecast as series[t − 1]. Series 4 6 5 10 2 0 8, start 1:
    //   t=1: F(unit 3) = 4 vs 10 → APE 0.6, under, short 0.6, SE 36
    //   t=2: F(unit 4) = 6 vs 2  → APE 2,   over,             SE 16
    //   t=3: F(unit 5) = 5 vs 0  → not scored (no positive actual)
    //   t=4: F(unit 6) = 10 vs 8 → APE 0.25, over,            SE 4
    // t=5 would need unit 7: past the end. MAPE (0.6 + 2 + 0.25) / 3 = 0.95; RMSE √(56 / 3); under 1/3.
    const last = predictorFromForecaster(lastValueForecaster, "last-value");
    const r = backtestPredictor([4, 6, 5, 10, 2, 0, 8], last, { start: 1, season: 2, horizon: 4, lead: 3 });
    expect(r.origins).toBe(4);
    expect(r.scored).toBe(3);
    expect(r.mape).toBeCloseTo(0.95, 12);
    expect(r.rmse).toBeCloseTo(Math.sqrt(56 / 3), 12);
    expect(r.underProvisionRate).toBeCloseTo(1 / 3, 12);
    expect(r.meanShortfall).toBeCloseTo(0.6, 12);
    expect(() => backtestPredictor([1, 2], last, { start: 1, season: 2, horizon: 4, lead: 5 })).toThrow("lead 5 must be a whole number of units from 1 to the horizon 4");
  });

  it("forecast - backtest on the Twitter trace (7 days, 3 to fit, hourly origins, 60-minute horizon)", () => {
    const rows = readFileSync(tracePath, "utf8")
      .trim().split("\n").slice(1, 1 + 7 * 1440).map((l) => l.split(","));
    const series = withGaps(rows.map((r) => Number(r[1])), rows.map((r) => r[2] === "1"));
    // the daily gap at minutes 1412-1439 (7 × 28) and one more zero minute
    expect(series.filter(Number.isNaN).length).toBe(7 * 28 + 1);
    const fit = fitHoltWinters(series.slice(0, 3 * 1440), { season: 1440 });
    const results = [lastValueForecaster, seasonalNaive(1440), holtWinters(fit.params)].map((f: Forecaster) =>
      backtestPredictor(series, predictorFromForecaster(f), { start: 3 * 1440, season: 1440, every: 60 }),
    );
    const [last, naive, hw] = results as [typeof results[0], typeof results[0], typeof results[0]];
    // Measured: last-value 43% MAPE, seasonal-naive 23%, Holt-Winters 20%; each under-forecasts ~half the minutes.
    expect(naive.mape).toBeLessThan(last.mape);
    expect(hw.mape).toBeLessThan(naive.mape);
    expect(hw.mape).toBeLessThan(0.25);
    for (const r of results) {
      expect(r.scored).toBeGreaterThan(5000);
      expect(r.underProvisionRate).toBeGreaterThan(0.3);
      expect(r.underProvisionRate).toBeLessThan(0.7);
    }
  });
  it("forecast - spreadOverSeconds: a report's count over the seconds of its window, by overlap", () => {
    expect(spreadOverSeconds(5000, 1000, 10)).toEqual([[4, 10]]);
    // 1.5 s ending at 6.5 s: 1 s in second 5 (2/3 of the count), 0.5 s in second 6.
    expect(spreadOverSeconds(6500, 1500, 30)).toEqual([[5, 20], [6, 10]]);
    expect(spreadOverSeconds(6500, 0, 7)).toEqual([[6, 7]]);
    const parts = spreadOverSeconds(12_345, 2_468, 99);
    expect(parts.map(([s]) => s)).toEqual([9, 10, 11, 12]);
    expect(parts.reduce((a, [, n]) => a + n, 0)).toBeCloseTo(99, 9);
  });
});
