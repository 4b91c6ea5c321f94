/**
 * `npm run bench [-- options]`: runs the benchmarks, writes `bench/results/<name>.json`,
 * `bench/results/summary.json` and the tables of `bench/README.md`.
 *
 *   --quick              shorter phases (the whole run in about 7 minutes, the serving benchmark 5-6 of them)
 *   --only a,b           run only these benchmarks (serving, selection, estimator, sim); the summary
 *                        takes the others from their last results file; `as-started` (the system as
 *                        `npm start` runs it, two HOST_CORES settings side by side) runs only when named
 *   --small auto|digits|ocr-cls
 *                        the tiny model (auto: the smallest digits model when libs/zoo is built, else ocr-cls)
 *   --profiled-variants  serving: profile every variant at registration (PROFILE_ON_REGISTER=true, as
 *                        `npm start` does) and measure the system with its control plane acting;
 *                        writes results/serving-profiled-variants.json (not used by the summary)
 *   --frontends 1,2      serving: also measure the tiny model's saturated HTTP throughput through frontends
 *                        of these many processes (FRONTEND_PROCESSES), started beside the stack's own
 *   --report-only        run nothing: rebuild summary.json and the README tables from the results files
 *   --profile            run the serving benchmark with a CPU profiler in every service and reference
 *                        server (lib/cpu-profiler.mjs, the inspector's sampler); writes results/profile.json and results/serving-profiled.json (the
 *                        summary keeps the unprofiled figures)
 */
import { mkdirSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { runServing, type ServingResult } from "./benchmarks/serving.js";
import { runSelection, type SelectionResult } from "./benchmarks/selection.js";
import { runEstimator, type EstimatorResult } from "./benchmarks/estimator.js";
import { runSim, type SimResultFigure } from "./benchmarks/sim.js";
import { runAsStarted } from "./benchmarks/as-started.js";
import { analyseProfile, profilesByPid } from "./lib/profile.js";
import { renderProfile, renderResults, updateReadme, type ProfileResult } from "./lib/report.js";
import { RESULTS_DIR, machineInfo, readResult, writeResult, type Envelope } from "./lib/results.js";
import { buildSummary } from "./lib/summary.js";
import { rerunWithMallocEnv } from "./lib/proc.js";

// The services run with libs/stack's malloc settings: so does this process, where raw onnxruntime
// (the reference of throughput_vs_raw) runs. glibc reads them at start, hence the new process.
rerunWithMallocEnv();

const BENCHMARKS = ["serving", "selection", "estimator", "sim"] as const;
/** Run only when named in --only (not in the summary). */
const ON_REQUEST = ["as-started"] as const;
type Name = (typeof BENCHMARKS)[number] | (typeof ON_REQUEST)[number];

const args = process.argv.slice(2);
const { values } = parseArgs({
  args,
  options: {
    quick: { type: "boolean", default: false },
    only: { type: "string" },
    small: { type: "string", default: "auto" },
    profile: { type: "boolean", default: false },
    "profiled-variants": { type: "boolean", default: false },
    "report-only": { type: "boolean", default: false },
    frontends: { type: "string" },
    help: { type: "boolean", short: "h", default: false },
  },
  strict: true,
});
if (values.help) {
  console.log("npm run bench -- [--quick] [--only serving,selection,estimator,sim,as-started] [--small auto|digits|ocr-cls] [--profiled-variants] [--profile] [--frontends 1,2] [--report-only]");
  process.exit(0);
}
const small = values.small as string;
if (small !== "auto" && small !== "digits" && small !== "ocr-cls") throw new Error(`--small must be auto, digits or ocr-cls, not ${small}`);
const only = values["report-only"] ? [] : values.only ? values.only.split(",").map((s) => s.trim()) : values.profile ? ["serving"] : [...BENCHMARKS];
for (const o of only) if (![...BENCHMARKS, ...ON_REQUEST].includes(o as Name)) throw new Error(`unknown benchmark ${o}; known: ${[...BENCHMARKS, ...ON_REQUEST].join(", ")}`);
const quick = values.quick;
const frontends = values.frontends?.split(",").map((s) => Number(s.trim()));
if (frontends?.some((n) => !Number.isInteger(n) || n < 1 || n > 16)) throw new Error(`--frontends takes process counts from 1 to 16, e.g. 1,2; not ${values.frontends}`);
if (frontends && !only.includes("serving")) throw new Error("--frontends is measured by the serving benchmark: add --only serving (or leave --only out)");
const profileVariants = values["profiled-variants"];
const command = `npm run bench${args.length > 0 ? ` -- ${args.join(" ")}` : ""}`;
const machine = machineInfo();
const log = (line: string): void => console.log(line);
const started = Date.now();

async function run<T>(name: Name, fn: () => Promise<T> | T, file?: string): Promise<Envelope<T>> {
  log(`== ${name}`);
  const t0 = Date.now();
  const date = new Date().toISOString();
  let envelope: Envelope<T>;
  try {
    const result = await fn();
    envelope = { name, command, date, quick, machine, durationS: Math.round((Date.now() - t0) / 100) / 10, result };
  } catch (err) {
    const e = err as Error;
    log(`   ${name} failed: ${e.stack ?? e.message}`);
    envelope = { name, command, date, quick, machine, durationS: Math.round((Date.now() - t0) / 100) / 10, result: null, error: e.message };
  }
  log(`   ${name}: ${envelope.durationS} s → ${writeResult(envelope, file)}`);
  return envelope;
}

if (values.profile) {
  const dir = join(RESULTS_DIR, "tmp", `profiles-${Date.now()}`);
  mkdirSync(dir, { recursive: true });
  const serving = await run("serving", () => runServing({ quick, small, profileDir: dir, profileVariants, frontends, log }), "serving-profiled.json");
  const s = serving.result;
  if (s) {
    const files = profilesByPid(dir);
    const phases: ProfileResult["phases"] = {};
    const wanted = (phase: string): string[] => {
      if (phase.endsWith("load-http") || phase.endsWith("load-http-bin") || phase.endsWith("low-load")) return ["frontend", "dispatcher", "executor-cpu"];
      if (phase.endsWith("load-nats")) return ["dispatcher", "executor-cpu"];
      if (phase.endsWith("load-direct")) return [phase.startsWith("small") ? "direct-small" : "direct-rec"];
      if (phase.endsWith("load-js-echo")) return ["echo-relay", "echo-consumer"];
      if (phase.endsWith("load-js-echo-nt")) return ["echo-relay-nt", "echo-consumer"];
      return [];
    };
    // Every rotation adds a window to a phase: a phase's report covers all of them.
    const byPhase = new Map<string, Array<{ fromUs: number; toUs: number }>>();
    for (const w of s.windows) byPhase.set(w.phase, [...(byPhase.get(w.phase) ?? []), w]);
    for (const [phase, windows] of byPhase) {
      for (const proc of wanted(phase)) {
        const pid = s.pids[proc];
        const file = pid !== undefined ? files.get(pid) : undefined;
        if (!file) continue;
        (phases[phase] ??= {})[proc] = analyseProfile(file, windows);
      }
    }
    const envelope: Envelope<ProfileResult> = { name: "profile", command, date: serving.date, quick, machine, durationS: serving.durationS, result: { phases } };
    writeResult(envelope);
    updateReadme(null, renderProfile(envelope));
    log(`   profiles of ${files.size} processes analysed → results/profile.json`);
    rmSync(dir, { recursive: true, force: true });
  }
} else {
  if (only.includes("serving")) await run("serving", () => runServing({ quick, small, profileVariants, frontends, log }), profileVariants ? "serving-profiled-variants.json" : undefined);
  if (only.includes("selection")) await run("selection", () => runSelection({ quick, log }));
  if (only.includes("estimator")) await run("estimator", () => runEstimator({ quick, log }));
  if (only.includes("sim")) await run("sim", () => runSim({ quick, log }));
  if (only.includes("as-started")) await run("as-started", () => runAsStarted({ quick, log }));
}
if (!values.profile && !profileVariants) {
  const serving = readResult<ServingResult>("serving");
  const selection = readResult<SelectionResult>("selection");
  const estimator = readResult<EstimatorResult>("estimator");
  const sim = readResult<SimResultFigure>("sim");
  const summary = buildSummary(serving, selection, estimator, sim);
  // summary.json is flat: the figures at the top level; `sources` says which command produced each.
  writeFileSync(join(RESULTS_DIR, "summary.json"), `${JSON.stringify({ ...summary, written_by: command, machine }, null, 2)}\n`);
  const profile = readResult<ProfileResult>("profile");
  updateReadme(renderResults(summary, serving, selection, estimator, sim), profile?.result ? renderProfile(profile) : null);
  log(JSON.stringify(summary, null, 2));
}
log(`bench: done in ${Math.round((Date.now() - started) / 1000)} s`);
