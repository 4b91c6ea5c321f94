/**
 * `npm run sim -- <command>`: run the paper scenarios and write the reports.
 *
 *   npm run sim -- list
 *   npm run sim -- <scenario> [--trace FILE] [--peak-qps N] [--seed N] [--duration-s N] [--out DIR] [--predictor NAME]
 *   npm run sim -- all [--seed N]              every registered scenario, then reports/README.md
 *   npm run sim -- readme                      reports/README.md's generated blocks from the reports/*.json present
 *
 * The simulator's speed (the whole INFaaS policy stack, 1 h at 1000 QPS) is `npm run bench -- --only sim`.
 *
 * A run prints the scenario's table, writes reports/<scenario>.json (the ScenarioResult) and one SVG
 * per chart. Traces (trace.ts): a one-column per-second CSV with a header (`tweets` then one count per
 * line), or a per-minute CSV whose first two columns are `minute,count` (further columns ignored).
 * Without --trace, the bundled Twitter trace (libs/sim/data/twitter_2021-08_per_minute.csv) is read and
 * passed to the scenarios (mark-twitter and combined replay it). --predictor chooses the MArk systems'
 * predictor from the forecaster's registry (libs/policy predictors.ts: auto, the default, last-value,
 * seasonal-naive, holt-winters, or module:/path/to/predictor.js).
 */
import { existsSync, mkdirSync, readFileSync, readdirSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { parseArgs } from "node:util";
import { loadPredictor } from "@sloserve/policy";
import type { Scenario, ScenarioOptions, ScenarioResult } from "./scenario.js";
import { scenarios } from "./scenarios/index.js";
import { readme } from "./render/readme.js";
import { renderSvg } from "./render/svg.js";
import { textTable } from "./render/table.js";
import { DEFAULT_TWITTER_TRACE, parseTrace } from "./trace.js";

function find(name: string): Scenario {
  const s = scenarios.find((x) => x.name === name);
  if (!s) throw new Error(`unknown scenario "${name}"; known: ${scenarios.map((x) => x.name).join(", ")}`);
  return s;
}

async function writeReport(result: ScenarioResult, outDir: string): Promise<void> {
  mkdirSync(outDir, { recursive: true });
  writeFileSync(join(outDir, `${result.scenario}.json`), JSON.stringify(result, null, 2));
  for (const c of result.charts) writeFileSync(join(outDir, `${c.id}.svg`), await renderSvg(c));
}

function writeReadme(outDir: string): string {
  const order = scenarios.map((s) => s.name);
  const results = readdirSync(outDir)
    .filter((f) => f.endsWith(".json"))
    .map((f) => JSON.parse(readFileSync(join(outDir, f), "utf8")) as ScenarioResult)
    .filter((r) => typeof r.scenario === "string" && Array.isArray(r.systems))
    .sort((a, b) => (order.indexOf(a.scenario) >>> 0) - (order.indexOf(b.scenario) >>> 0));
  const path = join(outDir, "README.md");
  writeFileSync(path, existsSync(path) ? readme(results, readFileSync(path, "utf8")) : readme(results));
  return path;
}

async function runOne(s: Scenario, options: ScenarioOptions, outDir: string): Promise<void> {
  const t0 = performance.now();
  // (the date and seed first after the name, for the report's readers)
  const { scenario, ...rest } = s.run(options);
  const result: ScenarioResult = { scenario, date: new Date().toISOString().slice(0, 10), seed: options.seed, ...rest };
  const ms = performance.now() - t0;
  console.log(`\n== ${s.name}: ${s.description} (${(ms / 1000).toFixed(1)} s)\n`);
  console.log(textTable(result.table));
  if (result.notes.length > 0) console.log(`\nNotes:\n${result.notes.map((n) => `- ${n}`).join("\n")}`);
  await writeReport(result, outDir);
  console.log(`\nwrote ${join(outDir, `${result.scenario}.json`)} and ${result.charts.length} chart(s)`);
}

async function main(argv: string[]): Promise<void> {
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      trace: { type: "string" },
      "peak-qps": { type: "string" },
      seed: { type: "string", default: "1" },
      "duration-s": { type: "string" },
      out: { type: "string", default: "reports" },
      predictor: { type: "string" },
      help: { type: "boolean", short: "h" },
    },
  });
  const command = positionals[0];
  if (!command || values.help) {
    console.log(`usage: npm run sim -- <list|all|readme|scenario> [--trace FILE] [--peak-qps N] [--seed N] [--duration-s N] [--out DIR] [--predictor NAME]\nscenarios: ${scenarios.map((s) => s.name).join(", ")}`);
    return;
  }
  const num = (name: string, v: string | undefined): number | undefined => {
    if (v === undefined) return undefined;
    const n = Number(v);
    if (!Number.isFinite(n)) throw new Error(`--${name} must be a number, got "${v}"`);
    return n;
  };
  const outDir = resolve(values.out ?? "reports");
  const options: ScenarioOptions = { seed: num("seed", values.seed) ?? 1 };
  options.readDataFile = (name) => readFileSync(fileURLToPath(new URL(`../data/${name}`, import.meta.url)), "utf8");
  const peak = num("peak-qps", values["peak-qps"]);
  const duration = num("duration-s", values["duration-s"]);
  if (peak !== undefined) options.peakQps = peak;
  if (duration !== undefined) options.durationS = duration;
  if (values.predictor) options.predictor = await loadPredictor(values.predictor, (path) => import(pathToFileURL(resolve(path)).href));
  if (values.trace) {
    options.tracePath = values.trace;
    options.trace = parseTrace(readFileSync(values.trace, "utf8"));
  } else {
    options.tracePath = DEFAULT_TWITTER_TRACE;
    options.trace = parseTrace(readFileSync(fileURLToPath(new URL("../data/twitter_2021-08_per_minute.csv", import.meta.url)), "utf8"));
  }

  switch (command) {
    case "list":
      for (const s of scenarios) console.log(`${s.name.padEnd(28)} ${s.description}`);
      return;
    case "readme":
      console.log(`wrote ${writeReadme(outDir)}`);
      return;
    case "all":
      for (const s of scenarios) await runOne(s, options, outDir);
      console.log(`wrote ${writeReadme(outDir)}`);
      return;
    default:
      await runOne(find(command), options, outDir);
  }
}

main(process.argv.slice(2)).catch((err: unknown) => {
  console.error(err instanceof Error ? err.message : err);
  process.exitCode = 1;
});
