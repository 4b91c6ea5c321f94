import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { afterAll, describe, expect, it } from "vitest";
import {
  BUILTIN_PREDICTORS,
  builtinPredictor,
  loadPredictor,
  parsePredictorSpec,
  parsePredictorsByApp,
  planForecast,
  predictorFromForecaster,
  type ModuleImporter,
} from "../../src/index.js";

/** The registry (predictors.ts): names, errors, and a user module loaded for real. */

const dir = mkdtempSync(join(tmpdir(), "sloserve-predictor-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const importFile: ModuleImporter = (path) => import(pathToFileURL(path).href);

describe("predictors", () => {
  it("predictors - the built-in names", () => {
    expect(BUILTIN_PREDICTORS).toEqual(["auto", "last-value", "seasonal-naive", "holt-winters"]);
    const history = [9, 9, 9, 9, 1, 2, 3, 4];
    const o = { season: 4, horizon: 2 };
    expect(builtinPredictor("last-value").predict(history, o)).toMatchObject({ values: [4, 4], method: "last-value" });
    expect(builtinPredictor("seasonal-naive").predict(history, o)).toMatchObject({ values: [1, 2], method: "seasonal-naive(4)" });
    // auto is planForecast itself: one season, not two + horizon → seasonal-naive
    expect(builtinPredictor("auto").predict(history, o)).toEqual(planForecast(history, o));
    const hw = builtinPredictor("holt-winters").predict(history, o);
    expect(hw.method).toMatch(/^holt-winters\(α=/);
    expect(hw.state.fittedAtLength).toBe(8);
  });

  it("predictors - an unknown name is refused with the known ones listed", () => {
    const message = 'unknown predictor "lstm"; known: auto, last-value, seasonal-naive, holt-winters, or module:/path/to/predictor.js';
    expect(() => builtinPredictor("lstm")).toThrow(message);
    expect(() => parsePredictorSpec("lstm")).toThrow(message);
    expect(() => parsePredictorSpec("module:")).toThrow('predictor "module:": module: needs a path to an ES module, e.g. module:/path/to/predictor.js');
    expect(parsePredictorSpec(" holt-winters ")).toEqual({ kind: "builtin", name: "holt-winters" });
    expect(parsePredictorSpec("module:/x/p.js")).toEqual({ kind: "module", path: "/x/p.js" });
    expect(parsePredictorsByApp("shop=holt-winters, ads=module:/x/p.js")).toEqual({ shop: "holt-winters", ads: "module:/x/p.js" });
    expect(parsePredictorsByApp("")).toEqual({});
    expect(() => parsePredictorsByApp("shop")).toThrow('"shop" is not app=predictor');
    expect(() => parsePredictorsByApp("shop=arima")).toThrow('unknown predictor "arima"');
  });

  it("predictors - a user module is imported and used for real", async () => {
    // The user's Forecaster: the peak of the last 3 units, plus 10%.
    const path = join(dir, "recent-peak.mjs");
    writeFileSync(path, [
      "export default {",
      '  name: "recent-peak",',
      "  forecast(history, horizon) {",
      "    const seen = history.slice(-3).filter((v) => !Number.isNaN(v));",
      "    return new Array(horizon).fill(1.1 * Math.max(0, ...seen));",
      "  },",
      "};",
    ].join("\n"));
    const p = await loadPredictor(`module:${path}`, importFile);
    expect(p.name).toBe(`module:${path}`);
    const plan = p.predict([5, 20, NaN, 10], { season: 1440, horizon: 3 });
    expect(plan.method).toBe("recent-peak");
    plan.values.forEach((v) => expect(v).toBeCloseTo(22, 12)); // 1.1 × max(20, 10)

    // A named export `forecaster` works too.
    const named = join(dir, "named.mjs");
    writeFileSync(named, 'export const forecaster = { name: "flat", forecast: (_h, n) => new Array(n).fill(-1) };');
    expect((await loadPredictor(`module:${named}`, importFile)).predict([1], { season: 2, horizon: 2 }).values).toEqual([0, 0]); // negatives → 0
  });

  it("predictors - a module that exports no Forecaster, or cannot be loaded, or answers wrongly, says so", async () => {
    const empty = join(dir, "empty.mjs");
    writeFileSync(empty, "export const x = 1;");
    await expect(loadPredictor(`module:${empty}`, importFile)).rejects.toThrow(
      `predictor module ${empty} exports no Forecaster: its default export (or an export named "forecaster") must be { name: string, forecast(history, horizon): number[] }; it exports x`,
    );
    await expect(loadPredictor(`module:${join(dir, "missing.mjs")}`, importFile)).rejects.toThrow(`predictor module:${join(dir, "missing.mjs")}: cannot load ${join(dir, "missing.mjs")}:`);
    const short = predictorFromForecaster({ name: "short", forecast: () => [1] }, "module:short.js");
    expect(() => short.predict([1], { season: 2, horizon: 2 })).toThrow("predictor module:short.js (short) returned 1 values for a horizon of 2");
    const nan = predictorFromForecaster({ name: "nan", forecast: (_h, n) => new Array<number>(n).fill(NaN) }, "module:nan.js");
    expect(() => nan.predict([1], { season: 2, horizon: 2 })).toThrow("predictor module:nan.js (nan) returned NaN at step 1: rates must be finite numbers");
  });
});
