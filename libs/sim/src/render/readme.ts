/**
 * reports/README.md's generated blocks: which libs/policy modules the services and the simulator
 * share (shared-modules.ts); one table with, for each experiment, the paper's figure and ours side by
 * side with the notes on where they differ and why; the figures that moved in the last revision
 * (moved.ts); then each experiment's own section (command, date, table, charts). The rest of the page
 * (the live replay, pipeline fidelity, the forecast backtest, OCR accuracy) is written by hand around
 * them: `npm run sim -- readme` (and `all`) rewrite only what lies between the markers.
 */
import type { ScenarioResult } from "../scenario.js";
import { sharedModulesSection } from "./shared-modules.js";
import { movedSection } from "./moved.js";
import { markdownTable } from "./table.js";

function pct(x: number): string {
  return `${Math.round(x * 1000) / 10}%`;
}

/** Our figure in words: the scenario's own `ours` line, else a summary of its systems. */
export function oursSummary(r: ScenarioResult): string {
  if (typeof r.ours === "string") return r.ours;
  return r.systems
    .map((s) => `${s.name}: cost ${s.cost_dollars.toPrecision(4)}, SLO ${pct(s.slo_attainment)}, p99 ${Math.round(s.p99_ms)} ms`)
    .join("; ");
}

/** The block markers: `<!-- sim:NAME:begin -->` … `<!-- sim:NAME:end -->`. */
export const README_BLOCKS = ["shared", "scenarios"] as const;
export type ReadmeBlock = (typeof README_BLOCKS)[number];

/** The generated text of each block (without its markers). */
export function readmeBlocks(results: ScenarioResult[]): Record<ReadmeBlock, string> {
  const scenarios: string[] = [
    "## The papers' figures and ours",
    "",
    "One row per simulator scenario: what the paper reports, what the simulator (`libs/sim`, running the policy code of `libs/policy`) measures, and where and why they differ. Each scenario's own section below has its table, charts, the command and the date of the run.",
    "",
    markdownTable(
      results.map((r) => ({
        experiment: `[${r.scenario}](#${r.scenario})`,
        "paper's figure": r.paper,
        ours: oursSummary(r),
        "where they differ, and why": r.notes.join(" "),
      })),
    ),
    "",
    ...movedSection(),
  ];
  for (const r of results) {
    const seed = typeof r.seed === "number" ? r.seed : 1;
    const date = typeof r.date === "string" ? `; this run: ${r.date}` : "";
    const how = typeof r.command === "string" ? `\`${r.command}\` writes \`reports/${r.scenario}.json\`` : `\`npm run sim -- ${r.scenario}\` (seed ${seed}) writes \`reports/${r.scenario}.json\` and its charts`;
    scenarios.push(`## ${r.scenario}`, "", `${how}${date}.`, "", markdownTable(r.table), "");
    for (const c of r.charts) scenarios.push(`![${c.title}](${c.id}.svg)`, "");
  }
  return { shared: sharedModulesSection().join("\n"), scenarios: scenarios.join("\n") };
}

/**
 * The page with its generated blocks replaced; a block whose markers are missing is appended at the end
 * with its markers (a new page gets a title first).
 */
export function readme(results: ScenarioResult[], existing = "# Measured results\n"): string {
  const blocks = readmeBlocks(results);
  let out = existing;
  for (const name of README_BLOCKS) {
    const begin = `<!-- sim:${name}:begin -->`;
    const end = `<!-- sim:${name}:end -->`;
    const text = `${begin}\n${blocks[name].trimEnd()}\n${end}`;
    const i = out.indexOf(begin);
    const j = out.indexOf(end);
    if (i >= 0 && j > i) out = out.slice(0, i) + text + out.slice(j + end.length);
    else out = `${out.trimEnd()}\n\n${text}\n`;
  }
  return out;
}
