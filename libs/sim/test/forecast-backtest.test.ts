import { describe, expect, it } from "vitest";
import { builtinPredictor } from "@sloserve/policy";
import { backtestReport, backtestTable, defaultStart, runForecastBacktests } from "../src/forecast-backtest.js";
import { inceptionV3, runMark } from "../src/scenarios/mark-system.js";
import { forecastSeries, parseTrace } from "../src/trace.js";
import { readme } from "../src/render/readme.js";

/** The backtest command's pure part (forecast-backtest.ts) and the forecaster's input from a trace, on hand-made traces. */

describe("forecast backtest", () => {
  it("forecast-backtest - a per-second trace becomes per-minute maxima of 5 s windows; a silent minute is a gap", () => {
    // Minute 0: 2/s, with seconds 10-14 at 12/s → max window 12. Minute 1: nothing (a gap). Minute 2: 6/s.
    const counts = [...new Array<number>(60).fill(2), ...new Array<number>(60).fill(0), ...new Array<number>(60).fill(6)];
    for (let s = 10; s < 15; s++) counts[s] = 12;
    const text = ["tweets", ...counts.map(String)].join("\n");
    const s = forecastSeries(parseTrace(text));
    expect(s.measure).toBe("max of 5 s windows");
    expect(s.values).toEqual([12, NaN, 6]);
    // Per minute: the mean rate; a zero minute is a gap.
    const m = forecastSeries(parseTrace("minute,tweets,missing\n0,120,0\n1,0,1\n2,600,0\n3,3,0"));
    // minute 3: 3 per minute = 0.05 q/s, under 5% of the median positive rate (median(2, 10, 0.05) = 2 → 0.1): a partial minute, a gap
    expect(m).toEqual({ values: [2, NaN, 10, NaN], measure: "mean per minute" });
  });

  it("forecast-backtest - the table's arithmetic on a hand-made per-minute trace", () => {
    // Rates 1, 2, 3, 4, 5, 6 q/s (60 … 360 per minute); last-value with lead 2 from start 2:
    //   origin 2: F(unit 3) = 2 vs 4 → APE 0.5, SE 4, short by 0.5
    //   origin 3: F(unit 4) = 3 vs 5 → APE 0.4, SE 4, short by 0.4
    //   origin 4: F(unit 5) = 4 vs 6 → APE 1/3, SE 4, short by 1/3
    // MAPE (0.5 + 0.4 + 0.3333) / 3 = 41.1%; RMSE 2; every minute under-provisioned; mean shortfall 41.1%.
    const trace = parseTrace(["minute,count", ...[60, 120, 180, 240, 300, 360].map((c, i) => `${i},${c}`)].join("\n"));
    const rows = runForecastBacktests([{ name: "ramp", trace }], [builtinPredictor("last-value")], { season: 4, horizon: 3, lead: 2, start: 2 });
    expect(rows).toHaveLength(1);
    expect(rows[0]!.result).toMatchObject({ predictor: "last-value", scored: 3, origins: 3, rmse: 2, underProvisionRate: 1 });
    expect(rows[0]!.result.mape).toBeCloseTo((0.5 + 0.4 + 1 / 3) / 3, 12);
    expect(backtestTable(rows)[0]).toEqual({
      trace: "ramp", "input (per minute)": "mean per minute", minutes: 6, season: 4, predictor: "last-value", "models used": "last-value",
      "minutes scored": 3, "MAPE %": 41.1, "RMSE (q/s)": 2, "under-provisioned %": 100, "mean shortfall %": 41.1,
    });
    expect(defaultStart(24_480, 1440, 60)).toBe(2940);
    expect(defaultStart(1440, 1440, 60)).toBe(720);
    // The report renders as a section of reports/README.md.
    const report = backtestReport(rows, { season: 4, horizon: 3, lead: 2 });
    expect(report.scenario).toBe("forecast-backtest");
    expect(report.ours).toBe("ramp: best MAPE 41.1% (last-value), under-provisioned 100% of minutes");
    expect(readme([report])).toContain("## forecast-backtest");
  });

  it("forecast-backtest - the simulator's MArk system forecasts with the predictor it is given", () => {
    const rates = { binMs: 60_000, rates: new Array<number>(10).fill(20) };
    // An hourly cycle, 2 seasons (60) + a horizon (60) + the held-back four horizons (240) and more:
    // auto's validation keeps the hourly season.
    const history = [Array.from({ length: 500 }, (_, i) => 20 + 10 * Math.sin((2 * Math.PI * i) / 60))];
    const base = { system: "mark-ondemand" as const, models: [inceptionV3()], seed: 1, rates, history, season: 60 };
    expect(runMark(base).forecaster).toMatch(/^holt-winters\(.*m=60\)$/);
    expect(runMark({ ...base, predictor: builtinPredictor("last-value") }).forecaster).toBe("last-value");
  });
});
