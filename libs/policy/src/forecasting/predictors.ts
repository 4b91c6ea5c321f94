/**
 * The predictor registry: MArk §4.2 exposes the workload predictor as a plug-in ("users can ... replace
 * it with their own implementations"); this is where a predictor is chosen by name. The forecaster
 * service (per app: `FORECASTER`, `FORECASTER_BY_APP`), the simulator's MArk systems (`--predictor`)
 * and the backtest (`npm run forecast:backtest -- --predictor`) resolve names here, so a name means the
 * same model everywhere.
 *
 * Names:
 * - `auto`: forecast-plan.ts `planForecast` — last value with under a season of history, seasonal-naive
 *   with one, Holt-Winters (grid-fitted, refitted every 60 units) with two seasons and a horizon;
 * - `last-value`, `seasonal-naive` (one season back, `season` units), `holt-winters` (fitted at any length);
 * - `module:<path>`: a user's ES module whose default export (or export named `forecaster`) is a
 *   {@link Forecaster}: `{ name: string, forecast(history: number[], horizon: number): number[] }`.
 *   `history` holds the per-unit (minute) maximum rates over 5 s windows, oldest first, gaps as NaN;
 *   the result is the next `horizon` units' maximum rates (finite, ≥ 0; negatives are taken as 0).
 *   Example: examples/predictor-recent-peak.js. Relative paths are resolved from the process's
 *   working directory by the caller's importer.
 *
 * A predictor is a pure step, Ray Serve style: `predict(history, options, state) → { values, method,
 * state }`; whatever it learns (Holt-Winters' fitted parameters) travels in the state, which the caller
 * keeps per app. Loading a module is the caller's I/O: {@link loadPredictor} takes the importer.
 */
import { lastValueForecaster, seasonalNaive, type Forecaster } from "./forecast.js";
import { fittedHoltWinters, planForecast, type ForecastPlan, type ForecastPlanState } from "./forecast-plan.js";

export interface PredictorOptions {
  /** Units per season (1440 one-minute units = one day). */
  season: number;
  /** Units forecast. */
  horizon: number;
}

export interface Predictor {
  /** The name it was chosen by: a built-in name or `module:<path>`. */
  name: string;
  predict(history: readonly number[], options: PredictorOptions, state?: ForecastPlanState): ForecastPlan;
}

/** The default: the live forecaster's rule since the beginning (planForecast). */
export const DEFAULT_PREDICTOR = "auto";

const stateless = (name: string, make: (o: PredictorOptions) => Forecaster): Predictor => ({
  name,
  predict(history, options, state = {}) {
    const f = make(options);
    return { values: f.forecast(history, options.horizon), method: f.name, state };
  },
});

const BUILTIN: Readonly<Record<string, Predictor>> = {
  auto: { name: "auto", predict: (history, options, state) => planForecast(history, options, state) },
  "last-value": stateless("last-value", () => lastValueForecaster),
  "seasonal-naive": stateless("seasonal-naive", (o) => seasonalNaive(o.season)),
  "holt-winters": { name: "holt-winters", predict: (history, options, state) => fittedHoltWinters(history, options, state) },
};

/** Names the registry knows, in the order error messages list them. */
export const BUILTIN_PREDICTORS: readonly string[] = Object.keys(BUILTIN);

const MODULE_PREFIX = "module:";

function known(): string {
  return `${BUILTIN_PREDICTORS.join(", ")}, or ${MODULE_PREFIX}/path/to/predictor.js`;
}

export type PredictorSpec = { kind: "builtin"; name: string } | { kind: "module"; path: string };

/** A predictor name as given in configuration: a built-in name or `module:<path>`; anything else is refused, naming what is known. */
export function parsePredictorSpec(spec: string): PredictorSpec {
  const s = spec.trim();
  if (s.startsWith(MODULE_PREFIX)) {
    const path = s.slice(MODULE_PREFIX.length).trim();
    if (path === "") throw new Error(`predictor "${spec}": ${MODULE_PREFIX} needs a path to an ES module, e.g. ${MODULE_PREFIX}/path/to/predictor.js`);
    return { kind: "module", path };
  }
  if (!Object.hasOwn(BUILTIN, s)) throw new Error(`unknown predictor "${spec}"; known: ${known()}`);
  return { kind: "builtin", name: s };
}

/** A built-in predictor by name (see the module comment); throws for any other name, listing the known ones. */
export function builtinPredictor(name: string): Predictor {
  const spec = parsePredictorSpec(name);
  if (spec.kind === "module") throw new Error(`predictor "${name}" is a module: load it with loadPredictor`);
  return BUILTIN[spec.name] as Predictor;
}

/**
 * A user's {@link Forecaster} as a predictor. Its output is checked on every call: exactly `horizon`
 * finite numbers (an error names the predictor and what was wrong); negative rates become 0.
 */
export function predictorFromForecaster(forecaster: Forecaster, name = `${MODULE_PREFIX}${forecaster.name}`): Predictor {
  return {
    name,
    predict(history, options, state = {}) {
      const out: unknown = forecaster.forecast(history, options.horizon);
      if (!Array.isArray(out)) throw new Error(`predictor ${name} (${forecaster.name}) returned ${typeof out}, not an array of ${options.horizon} rates`);
      if (out.length !== options.horizon) throw new Error(`predictor ${name} (${forecaster.name}) returned ${out.length} values for a horizon of ${options.horizon}`);
      const values = out.map((v: unknown, i) => {
        if (typeof v !== "number" || !Number.isFinite(v)) throw new Error(`predictor ${name} (${forecaster.name}) returned ${String(v)} at step ${i + 1}: rates must be finite numbers`);
        return Math.max(0, v);
      });
      return { values, method: forecaster.name, state };
    },
  };
}

function isForecaster(x: unknown): x is Forecaster {
  return typeof x === "object" && x !== null && typeof (x as Forecaster).name === "string" && typeof (x as Forecaster).forecast === "function";
}

/** The Forecaster a user module exports (default export, or the export named `forecaster`). */
export function forecasterFromModule(exports: unknown, path: string): Forecaster {
  const mod = (typeof exports === "object" && exports !== null ? exports : {}) as Record<string, unknown>;
  for (const candidate of [mod.default, mod.forecaster]) if (isForecaster(candidate)) return candidate;
  const names = Object.keys(mod);
  throw new Error(
    `predictor module ${path} exports no Forecaster: its default export (or an export named "forecaster") must be { name: string, forecast(history, horizon): number[] }; it exports ${names.length > 0 ? names.join(", ") : "nothing"}`,
  );
}

/** Loads an ES module (the caller's I/O: e.g. `(p) => import(pathToFileURL(resolve(p)).href)`). */
export type ModuleImporter = (path: string) => Promise<unknown>;

/** A predictor by name, loading `module:<path>` with `importModule`. */
export async function loadPredictor(spec: string, importModule: ModuleImporter): Promise<Predictor> {
  const parsed = parsePredictorSpec(spec);
  if (parsed.kind === "builtin") return BUILTIN[parsed.name] as Predictor;
  let exports: unknown;
  try {
    exports = await importModule(parsed.path);
  } catch (err) {
    throw new Error(`predictor ${spec}: cannot load ${parsed.path}: ${(err as Error).message}`);
  }
  return predictorFromForecaster(forecasterFromModule(exports, parsed.path), `${MODULE_PREFIX}${parsed.path}`);
}

/**
 * Per-app predictor names from configuration: `app=name,app2=name2` (`FORECASTER_BY_APP`); every name
 * is checked. Empty: none.
 */
export function parsePredictorsByApp(text: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const part of text.split(",").map((p) => p.trim()).filter(Boolean)) {
    const eq = part.indexOf("=");
    if (eq <= 0) throw new Error(`"${part}" is not app=predictor`);
    const app = part.slice(0, eq).trim();
    const name = part.slice(eq + 1).trim();
    parsePredictorSpec(name);
    out[app] = name;
  }
  return out;
}

