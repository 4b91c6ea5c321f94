import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { ServingResult, ModelFigures, ServerScenarioStep } from "../benchmarks/serving.js";
import type { SelectionResult } from "../benchmarks/selection.js";
import type { EstimatorResult } from "../benchmarks/estimator.js";
import type { SimResultFigure } from "../benchmarks/sim.js";
import type { ProfileReport } from "./profile.js";
import { BENCH_DIR } from "./proc.js";
import { round } from "./stats.js";
import type { Envelope } from "./results.js";
import type { Ratio, Summary } from "./summary.js";

/**
 * Renders the generated parts of bench/README.md: the results tables (between the `bench:results`
 * markers) and the profile tables (between the `bench:profile` markers). Text outside the markers
 * is written by hand and kept.
 */

export const README = join(BENCH_DIR, "README.md");
const RESULTS = ["<!-- bench:results:start -->", "<!-- bench:results:end -->"] as const;
const PROFILE = ["<!-- bench:profile:start -->", "<!-- bench:profile:end -->"] as const;

export interface ProfileResult {
  phases: Record<string, Record<string, ProfileReport>>;
}

const fmt = (x: number | null | undefined, unit = ""): string => (x === null || x === undefined || Number.isNaN(x) ? "–" : `${x}${unit}`);
const yes = (b: boolean | null | undefined): string => (b === null || b === undefined ? "–" : b ? "yes" : "**no**");
const origin = (e: Envelope<unknown> | null): string => (e ? `\`${e.command}\`, ${e.date.slice(0, 16).replace("T", " ")} UTC` : "not run");

function table(head: string[], rows: Array<Array<string | number>>): string {
  return [`| ${head.join(" | ")} |`, `|${head.map(() => "---").join("|")}|`, ...rows.map((r) => `| ${r.join(" | ")} |`)].join("\n");
}

function lowLoadTable(m: ModelFigures): string {
  const rows = Object.entries(m.lowLoad.latencyMs).map(([name, s]) => {
    const added = m.lowLoad.addedMs[name];
    return [name, fmt(s.p50), fmt(s.p99), fmt(s.mean), added ? fmt(added.p50) : "", added ? fmt(added.p99) : "", s.n, m.lowLoad.errors?.[name]?.count ?? 0];
  });
  return table(["target", "p50 ms", "p99 ms", "mean ms", "added p50 ms", "added p99 ms", "answered", "failed"], rows);
}

/** A path's name in the tables: HTTP (JSON), HTTP binary (the binary tensor extension), NATS. */
function pathLabel(p: string): string {
  return p === "http-bin" ? "HTTP binary" : p.toUpperCase();
}

function throughputTable(m: ModelFigures): string {
  const t = m.throughput;
  const rows: Array<Array<string | number>> = [
    ["raw onnxruntime, batch 8", fmt(t.rawB8Qps), (t.rawB8QpsPerRotation ?? []).join(", "), "1", "", "8", `${fmt(t.rawB8BatchMs)} per batch`, "", ""],
    ["raw onnxruntime, batch 1", fmt(t.rawB1Qps), "", fmt(t.rawB8Qps > 0 ? Math.round((100 * t.rawB1Qps) / t.rawB8Qps) / 100 : null), "", "1", "", "", ""],
  ];
  for (const [name, f] of Object.entries(t.targets)) {
    const cpu = Object.entries(f.cpuUsPerQuery)
      .filter(([, us]) => us >= 1)
      .sort((a, b) => b[1] - a[1])
      .map(([p, us]) => `${p} ${us}`)
      .join(", ");
    rows.push([name, fmt(f.qps), (f.qpsPerRotation ?? []).join(", "), fmt(t.vsRaw[name]), fmt(t.vsDirect[name]), fmt(f.meanBatch), `${fmt(f.latencyMs.p50)} / ${fmt(f.latencyMs.p99)}`, f.errors > 0 ? `${f.errors} (${(f.firstError ?? "").slice(0, 80)})` : 0, cpu]);
  }
  return table(["target", "queries/s (median)", "per rotation", "vs raw b8", "vs direct", "mean batch", "latency p50 / p99 ms", "errors", "CPU µs per query, by process"], rows);
}

/** The data path's ratios (summary.json `ratios`, issue 14), one row each. */
function renderRatios(summary: Summary): string[] {
  if (!summary.ratios) return [];
  const { server_scenario_qps: _scenario, ...ratios } = summary.ratios;
  const rows = Object.entries(ratios).map(([name, r]) => [
    `\`${name}\``,
    fmt(r.value),
    "le" in r.goal ? `≤ ${r.goal.le}` : `≥ ${r.goal.ge}`,
    yes(r.met),
    r.how,
    r.run ? `\`${r.run.command}\`, ${r.run.date.slice(0, 16).replace("T", " ")} UTC, load ${r.run.loadAvgAtStart.join(" / ")}` : "",
  ]);
  return ["### Data path ratios (`results/summary.json` `ratios`, issue 14)", "", table(["ratio", "value", "goal", "met", "from", "run"], rows), ""];
}

const runOf = (run: Ratio["run"]): string =>
  run ? `\`${run.command}\`, ${run.date.slice(0, 16).replace("T", " ")} UTC, load ${run.loadAvgAtStart.join(" / ")}` : "";

/** A step of a server-scenario search, short: `1200 ✓ 8.1`, the rate and its p99 (∞: a query over the grace). */
const stepText = (x: ServerScenarioStep): string => `${x.qps} ${x.pass ? "✓" : "✗"} ${x.p99Ms === null ? "∞" : x.p99Ms}`;

/** The server scenario (summary.json `ratios.server_scenario_qps`, and each search's steps from the serving run). */
function renderServerScenario(summary: Summary, serving: ServingResult | null): string[] {
  const sc = summary.ratios?.server_scenario_qps;
  if (!sc || !serving) return [];
  const rows: Array<Array<string | number>> = [];
  for (const m of [serving.models.small, serving.models.rec]) {
    const f = m.serverScenario;
    if (!f) continue;
    for (const [name, t] of Object.entries(f.targets)) {
      const reference = f.reference?.[name];
      const label = name === "direct" ? "direct server, HTTP JSON" : name === "direct-bin" ? "direct server, HTTP binary" : pathLabel(name);
      const steps = t.ended === "low-load" ? `not searched: its low-load p50 (${fmt(m.lowLoad.latencyMs[name]?.p50)} ms, one query at a time) is over the bound` : t.steps.map(stepText).join("; ");
      rows.push([m.model, `${f.boundMs} ms`, label, t.maxQps, t.failQps ?? "–", reference ? `${fmt(f.vsDirect[name])} (${reference})` : "", steps]);
    }
  }
  const plans = Object.entries(sc.models).map(([model, x]) => `${model}: ≤ ${x.max_steps} steps of ${x.step_s}${x.max_step_s > x.step_s ? `-${x.max_step_s}` : ""} s, ≥ ${x.min_queries} queries, grace ${x.grace_s} s`);
  return [
    "### Server scenario (`results/summary.json` `ratios.server_scenario_qps`, issue 28)",
    "",
    `MLPerf Inference's server scenario, scaled down: ${sc.how}. ${plans.join("; ")}. Steps: rate q/s, ✓ within / ✗ over the bound, p99 ms (∞: a query failed or unanswered in time). ${runOf(sc.run)}.`,
    "",
    table(["model", "p99 bound", "protocol", "max queries/s", "lowest failing queries/s", "vs direct", "steps"], rows),
    "",
  ];
}

/** HTTP throughput by frontend processes (`--frontends`; summary.json `frontend_processes`). */
function renderFrontendProcesses(summary: Summary, serving: ServingResult | null): string[] {
  const fp = summary.frontend_processes;
  const f = serving?.frontends;
  if (!fp || !f) return [];
  const rows: Array<Array<string | number>> = [];
  for (const [path, byCount] of Object.entries(f.paths)) {
    for (const [n, x] of Object.entries(byCount)) {
      const frontendCpu = Object.entries(x.cpuUsPerQuery).filter(([p]) => p.startsWith("frontend")).reduce((sum, [, us]) => sum + us, 0);
      rows.push([pathLabel(path), n, x.qps, x.qpsPerRotation.join(", "), n === "1" ? "1" : fmt(f.vsOne[path]?.[n]), n === "1" ? "" : fmt(f.perAddedProcessQps[path]?.[n]), `${fmt(x.latencyMs.p50)} / ${fmt(x.latencyMs.p99)}`, round(frontendCpu), x.errors]);
    }
  }
  return [
    "### Frontend processes (`results/summary.json` `frontend_processes`)",
    "",
    `${f.model}, saturated HTTP through frontends of ${f.processes.join(", ")} processes (FRONTEND_PROCESSES; Node's cluster, one port), closed loop, ${f.concurrency} clients, ${f.durationS} s per count and path, ${f.rotations} rotations; ratios are medians of within-rotation ratios. ${runOf(fp.run)}.`,
    "",
    table(["path", "processes", "queries/s (median)", "per rotation", "vs 1 process", "queries/s per added process", "latency p50 / p99 ms", "frontend CPU µs per query (all its processes)", "errors"], rows),
    "",
  ];
}

export function renderResults(
  summary: Summary,
  serving: Envelope<ServingResult> | null,
  selection: Envelope<SelectionResult> | null,
  estimator: Envelope<EstimatorResult> | null,
  sim: Envelope<SimResultFigure> | null,
): string {
  const out: string[] = [];
  const s = serving?.result ?? null;
  const machine = serving?.machine ?? selection?.machine ?? null;
  if (machine) out.push(`Machine: ${machine.cpu}, ${machine.cores} cores, ${machine.memoryGb} GiB, Node ${machine.node}, load average at start ${machine.loadAvgAtStart.join(" / ")}; commit ${machine.gitCommit ?? "?"} (plus uncommitted work).`, "");
  out.push("### Headline figures (`results/summary.json`)", "");
  const headline: Array<Array<string | number>> = [];
  if (s) {
    for (const m of [s.models.small, s.models.rec]) {
      for (const p of ["http", "http-bin", "nats"]) {
        const a = m.lowLoad.addedMs[p];
        headline.push([`added latency p50, ${m.model}, ${pathLabel(p)}`, fmt(a?.p50, " ms"), "≤ 1 ms", yes(a ? a.p50 <= 1 : null), origin(serving)]);
        headline.push([`added latency p99, ${m.model}, ${pathLabel(p)}`, fmt(a?.p99, " ms"), "≤ 3 ms", yes(a ? a.p99 <= 3 : null), origin(serving)]);
      }
    }
    for (const m of [s.models.small, s.models.rec]) {
      for (const p of ["http", "http-bin", "nats"]) {
        const r = m.throughput.vsRaw[p];
        headline.push([`throughput_vs_raw, ${m.model}, ${pathLabel(p)}`, fmt(r), m === s.models.rec ? "≥ 0.8" : "", m === s.models.rec ? yes(r === null || r === undefined ? null : r >= 0.8) : "", origin(serving)]);
        headline.push([`throughput_vs_direct, ${m.model}, ${pathLabel(p)}`, fmt(m.throughput.vsDirect[p]), "", "", origin(serving)]);
      }
    }
    const q = s.models.small.throughput;
    headline.push([`${s.models.small.model} queries/s, HTTP / NATS / bare NATS echo`, `${fmt(q.targets.http?.qps)} / ${fmt(q.targets.nats?.qps)} / ${fmt(q.targets.echo?.qps)}`, "", "", origin(serving)]);
    headline.push([`${s.models.small.model} NATS path / bare NATS echo`, fmt(q.vsEcho.nats), "", "", origin(serving)]);
  } else {
    headline.push(["serving figures", "–", "", "", serving?.error ?? "not run"]);
  }
  headline.push(["selection_p99_us (1 000 variants)", fmt(summary.selection_p99_us, " µs"), "", "", origin(selection)]);
  headline.push(["estimator_hour_ms (150 QPS, 4 stages)", fmt(summary.estimator_hour_ms, " ms"), "", "", origin(estimator)]);
  headline.push(["sim_hour_1000qps_s", fmt(summary.sim_hour_1000qps_s, " s"), "", "", origin(sim)]);
  out.push(table(["figure", "value", "goal", "met", "command, date"], headline), "");
  out.push(...renderRatios(summary));
  out.push(...renderServerScenario(summary, s));
  out.push(...renderFrontendProcesses(summary, s));

  if (s) {
    for (const m of [s.models.small, s.models.rec]) {
      out.push(`### ${m.model}: low-load latency (${origin(serving)})`, "");
      out.push(`${m.note}; input [${m.inputShape.join(", ")}] FP32. One query at a time, ${m.lowLoad.rounds} rounds, each round one query to every target in rotating order. "added" = the path's quantile minus raw's same quantile. System answers in a batch > 1: ${m.lowLoad.batchedAnswers}. Answers equal raw onnxruntime's within ${m.maxRelDiffVsRaw.toExponential(1)} (relative).` + (m.lowLoad.serverTimingMs ? ` The executor's own timing_ms (NATS path, medians): queue ${m.lowLoad.serverTimingMs.queue}, inference ${m.lowLoad.serverTimingMs.inference}, total ${m.lowLoad.serverTimingMs.total} ms.` : ""), "");
      out.push(lowLoadTable(m), "");
      const failures = Object.entries(m.lowLoad.errors ?? {}).map(([n, e]) => `${n}: ${e.count} × "${e.first}"`);
      if (failures.length > 0) out.push(`Failed queries at low load: ${failures.join("; ")}.`, "");
      const served = Object.entries(m.servedBy ?? {}).map(([path, byVariant]) => `${path}: ${Object.entries(byVariant).map(([v, n]) => `${v} × ${n}`).join(", ")}`);
      if (served.length > 0) out.push(`Registration${serving?.result?.settings.variantsProfiledOnRegister ? " and profiling of every CPU variant" : " (without profiling)"} took ${m.registerAndProfileS} s. Pinned variant \`${m.variant}\`; answers by variant (all phases): ${served.join("; ")}.`, "");
      out.push(`### ${m.model}: saturated throughput (${origin(serving)})`, "");
      const first = Object.values(m.throughput.targets)[0];
      out.push(
        `Closed loop, ${first?.concurrency ?? "?"} clients, ${first?.durationS ?? "?"} s per target after a warm-up, in ${m.throughput.rotations} rotations (raw, then every target, back to back); queries/s are medians over the rotations and ratios are medians of the ratios within a rotation. Variant \`${m.variant}\`: max batch 8, Wbatch 0, 1 intra-op thread; raw and direct use the same engine settings. CPU: user + system time of each process during the measured windows, divided by the answered queries.`,
        "",
      );
      out.push(throughputTable(m), "");
    }
    out.push(`### Memory (RSS, MiB; ${origin(serving)})`, "");
    out.push("start: services up, no model; idle: both models registered and loaded, no traffic; load: peak during the throughput phases.", "");
    out.push(table(["process", "start", "idle", "under load"], Object.entries(s.rssMb).map(([n, r]) => [n, fmt(r.start), fmt(r.idle), fmt(r.load)])), "");
  }
  if (selection?.result) {
    out.push(`### Variant selection (${origin(selection)})`, "");
    out.push(
      table(
        ["variants", "apps", "queries", "p50 µs", "p99 µs", "mean µs", "by decision: share, p50 / p99 µs"],
        selection.result.sizes.map((f) => [
          f.variants, f.apps, f.queries, f.p50Us, f.p99Us, f.meanUs,
          Object.entries(f.byKind ?? {}).map(([k, v]) => `${k} ${Math.round((100 * (f.kinds[k] ?? 0)) / f.queries)}%: ${v.p50Us} / ${v.p99Us}`).join("; "),
        ]),
      ),
      "",
    );
  }
  if (estimator?.result) {
    const e = estimator.result;
    out.push(`### Estimator (${origin(estimator)})`, "", `One hour at ${e.qps} QPS (${e.queries} queries) through four stages: median ${e.hourMs} ms (runs: ${e.runsMs.join(", ")} ms); estimated p99 ${e.p99Ms} ms.`, "");
  }
  if (sim?.result) {
    const r = sim.result;
    out.push(`### Simulator (${origin(sim)})`, "");
    const rows: Array<Array<string | number>> = [];
    if (r.stack) rows.push(["whole INFaaS policy stack (bench/lib/stack-bench.ts)", r.stack.hourS, r.stack.arrivals, r.stack.events, r.stack.eventsPerS, r.stack.sloAttainment, r.stack.p99Ms]);
    if (r.routing) rows.push(["engine + per-query selection only", r.routing.hourS, r.routing.arrivals, r.routing.events, r.routing.eventsPerS, r.routing.sloAttainment, r.routing.p99Ms]);
    out.push(table(["one simulated hour at 1 000 QPS", "wall s", "queries", "events", "events/s", "SLO attainment", "p99 ms"], rows), "");
  }
  if (summary.notes.length > 0) out.push("Notes:", "", ...summary.notes.map((n) => `- ${n}`), "");
  return out.join("\n");
}

export function renderProfile(profile: Envelope<ProfileResult>): string {
  const out: string[] = [
    `Profiled run: ${origin(profile)} (results/profile.json has the top 15 of each). Self time inside the measured windows of each phase only (start-up excluded), as % of the process's busy time there; "(native/V8 builtins)" and \`writeBuffer\`/\`writev\` are mostly socket writes.`,
    "",
  ];
  const short = (what: string): string => what.replace(/ (?:node_modules\/)?(?:\S*\/)?([^/ ]+:\d+)$/, " $1");
  for (const [phase, procs] of Object.entries(profile.result?.phases ?? {})) {
    if (phase.endsWith("low-load")) continue;
    for (const [proc, r] of Object.entries(procs)) {
      if (r.busyMs < 50) continue;
      const pkgs = r.byPackage.slice(0, 6).map((x) => `${x.what} ${x.pct}%`).join(", ");
      const fns = r.topFunctions.slice(0, 6).map((x) => `\`${short(x.what)}\` ${x.pct}%`).join(", ");
      out.push(`- **${phase} — ${proc}** (busy ${r.busyMs} of ${r.windowMs} ms). Packages: ${pkgs}. Functions: ${fns}.`);
    }
  }
  return out.join("\n");
}

function replaceBlock(text: string, markers: readonly [string, string], body: string): string {
  const [start, end] = markers;
  const i = text.indexOf(start);
  const j = text.indexOf(end);
  const block = `${start}\n${body}\n${end}`;
  if (i >= 0 && j > i) return text.slice(0, i) + block + text.slice(j + end.length);
  return `${text.trimEnd()}\n\n${block}\n`;
}

export function updateReadme(results: string | null, profile: string | null): void {
  let text = existsSync(README) ? readFileSync(README, "utf8") : "# Benchmarks\n";
  if (results !== null) text = replaceBlock(text, RESULTS, results);
  if (profile !== null) text = replaceBlock(text, PROFILE, profile);
  writeFileSync(README, text.endsWith("\n") ? text : `${text}\n`);
}
