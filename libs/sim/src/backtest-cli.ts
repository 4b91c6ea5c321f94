/**
 * `npm run forecast:backtest`: how well the forecaster's predictors forecast real traces (DESIGN §3).
 *
 *   npm run forecast:backtest -- --trace FILE [--predictor NAME[,NAME…]] [--season N] [--horizon 60] [--lead 5] [--start N] [--every N]
 *   npm run forecast:backtest -- --all [--traces-dir libs/sim/data] [--out reports]
 *
 * One row per (trace, predictor): MAPE, RMSE and the under-provision rate of the forecast made `lead`
 * minutes earlier (libs/policy forecast-backtest.ts). Predictors are the registry's names (auto,
 * last-value, seasonal-naive, holt-winters) or `module:/path/to/predictor.js` (a user's Forecaster,
 * examples/predictor-recent-peak.js); without --predictor, every built-in one. Traces: trace.ts formats
 * (per-second `tweets` counts, or per-minute `minute,count,…`); a per-second trace is reduced to the
 * forecaster's input exactly (per-minute maximum of 5 s windows), a per-minute one gives its mean rate.
 *
 * --all runs the standard table — the shipped Twitter trace (libs/sim/data) and the traces in
 * --traces-dir (the per-second Twitter trace and the Azure Functions aggregate; a file with the same
 * bytes as one already listed is skipped; the one-day Azure trace with an hourly season) — with every
 * built-in predictor and the example module,
 * prints it and writes <out>/forecast-backtest.json; `npm run sim -- readme` then puts it in
 * reports/README.md.
 */
import { createHash } from "node:crypto";
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { basename, isAbsolute, join, relative, resolve } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { parseArgs } from "node:util";
import { BUILTIN_PREDICTORS, loadPredictor, type Predictor } from "@sloserve/policy";
import { backtestReport, backtestTable, runForecastBacktests, type BacktestTrace, type ForecastBacktestOptions } from "./forecast-backtest.js";
import { textTable } from "./render/table.js";
import { DEFAULT_TWITTER_TRACE, parseTrace } from "./trace.js";

const importModule = (path: string): Promise<unknown> => import(pathToFileURL(resolve(path)).href);
const REPO_ROOT = fileURLToPath(new URL("../../../", import.meta.url));
/** The files --all looks for in --traces-dir, in report order, with a season where the default (a day) cannot apply. */
const SHARED_TRACES: Array<{ file: string; season?: number; note?: string }> = [
  { file: "twitter_2021-08_per_second.csv" },
  { file: "twitter_2021-08_per_minute.csv" },
  { file: "azure_functions_2019_sample1000_aggregate_per_minute.csv", season: 60, note: "The Azure Functions aggregate covers one day: it is backtested with an hourly season (60 minutes) instead of a daily one, which it cannot have." },
];
const EXAMPLE_PREDICTOR = "module:examples/predictor-recent-peak.js";

function num(name: string, v: string | undefined): number | undefined {
  if (v === undefined) return undefined;
  const n = Number(v);
  if (!Number.isInteger(n) || n < 0) throw new Error(`--${name} must be a whole number ≥ 0, got "${v}"`);
  return n;
}

async function main(argv: string[]): Promise<void> {
  const { values } = parseArgs({
    args: argv,
    options: {
      trace: { type: "string", multiple: true },
      predictor: { type: "string" },
      season: { type: "string" },
      horizon: { type: "string" },
      lead: { type: "string" },
      start: { type: "string" },
      every: { type: "string" },
      all: { type: "boolean", default: false },
      "traces-dir": { type: "string", default: "libs/sim/data" },
      out: { type: "string", default: "reports" },
      help: { type: "boolean", short: "h" },
    },
  });
  if (values.help || (!values.all && !values.trace)) {
    console.log("usage: npm run forecast:backtest -- --trace FILE [--predictor NAME[,NAME…]] [--season 1440] [--horizon 60] [--lead 5] [--start N] [--every 1]\n" +
      "       npm run forecast:backtest -- --all [--traces-dir libs/sim/data] [--out reports]\n" +
      `predictors: ${BUILTIN_PREDICTORS.join(", ")}, module:/path/to/predictor.js`);
    if (!values.help) process.exitCode = 2;
    return;
  }
  const options: ForecastBacktestOptions = {};
  const season = num("season", values.season);
  const horizon = num("horizon", values.horizon);
  const lead = num("lead", values.lead);
  const start = num("start", values.start);
  const every = num("every", values.every);
  if (season !== undefined) options.season = season;
  if (horizon !== undefined) options.horizon = horizon;
  if (lead !== undefined) options.lead = lead;
  if (start !== undefined) options.start = start;
  if (every !== undefined) options.every = every;

  const names = values.predictor ? values.predictor.split(",").map((s) => s.trim()).filter(Boolean) : [...BUILTIN_PREDICTORS, ...(values.all ? [EXAMPLE_PREDICTOR] : [])];
  const predictors: Predictor[] = [];
  for (const n of names) predictors.push(await loadPredictor(n, importModule));

  const notes: string[] = [];
  const files: Array<{ path: string; season?: number }> = (values.trace ?? []).map((path) => ({ path }));
  if (values.all) {
    files.push({ path: join(REPO_ROOT, DEFAULT_TWITTER_TRACE) });
    const dir = resolve(values["traces-dir"] ?? "libs/sim/data");
    for (const f of SHARED_TRACES) {
      const path = join(dir, f.file);
      if (!existsSync(path)) {
        notes.push(`${f.file} not found in ${dir}: not in this table.`);
        continue;
      }
      files.push({ path, ...(f.season !== undefined && season === undefined ? { season: f.season } : {}) });
      if (f.note && season === undefined) notes.push(f.note);
    }
  }
  const traces: BacktestTrace[] = [];
  const seen = new Map<string, string>();
  for (const { path, season: traceSeason } of files) {
    const bytes = readFileSync(path);
    const hash = createHash("sha256").update(bytes).digest("hex");
    const inside = relative(REPO_ROOT, path);
    // (a trace from outside the repository is named by its file alone: the report is read in the repository)
    const name = inside.startsWith("..") || isAbsolute(inside) ? `${basename(path)} (not in the repository)` : inside;
    const same = seen.get(hash);
    if (same) {
      notes.push(`${name} has the same bytes as ${same}: its rows are those of ${same}.`);
      continue;
    }
    seen.set(hash, name);
    traces.push({ name, trace: parseTrace(bytes.toString("utf8")), ...(traceSeason !== undefined ? { season: traceSeason } : {}) });
  }
  const t0 = performance.now();
  const rows = runForecastBacktests(traces, predictors, options);
  console.log(textTable(backtestTable(rows)));
  for (const n of notes) console.log(`- ${n}`);
  console.log(`(${((performance.now() - t0) / 1000).toFixed(1)} s)`);
  if (values.all) {
    const outDir = resolve(values.out ?? "reports");
    mkdirSync(outDir, { recursive: true });
    const path = join(outDir, "forecast-backtest.json");
    const which = `Predictors: ${names.join(", ")}${names.includes(EXAMPLE_PREDICTOR) ? " (the module is the example user predictor, examples/predictor-recent-peak.js: the peak of the last 15 minutes or of the same minutes a day before, + 10%)" : ""}.`;
    const { scenario, ...report } = backtestReport(rows, { ...options, notes: [which, ...notes] });
    const command = `npm run forecast:backtest -- --all${values["traces-dir"] ? " --traces-dir DIR" : ""}`;
    writeFileSync(path, JSON.stringify({ scenario, date: new Date().toISOString().slice(0, 10), command, ...report }, null, 2));
    console.log(`wrote ${path}; \`npm run sim -- readme\` puts it in ${join(outDir, "README.md")}`);
  }
}

main(process.argv.slice(2)).catch((err: unknown) => {
  console.error(err instanceof Error ? err.message : err);
  process.exitCode = 1;
});
