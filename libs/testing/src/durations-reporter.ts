import { relative } from "node:path";
import type { Reporter, TestModule, Vitest } from "vitest/node";

/** One test file's time: importing it (and what it imports), then its hooks and tests. */
export interface FileDuration {
  file: string;
  seconds: number;
  state: string;
}

/** The files' times, slowest first. */
export function fileDurations(modules: ReadonlyArray<TestModule>, root: string): FileDuration[] {
  return modules
    .map((m) => {
      const d = m.diagnostic();
      const ms = d.environmentSetupDuration + d.prepareDuration + d.setupDuration + d.collectDuration + d.duration;
      return { file: relative(root, m.moduleId), seconds: ms / 1000, state: m.state() };
    })
    .sort((a, b) => b.seconds - a.seconds || a.file.localeCompare(b.file));
}

/** The table the reporter prints: "file  seconds", slowest first, and the total. */
export function durationsTable(rows: readonly FileDuration[]): string {
  const width = Math.max(4, ...rows.map((r) => r.file.length));
  const line = (file: string, seconds: string, note = "") => `${file.padEnd(width)}  ${seconds.padStart(8)}${note}`;
  const total = rows.reduce((s, r) => s + r.seconds, 0);
  return [
    line("file", "seconds"),
    ...rows.map((r) => line(r.file, r.seconds.toFixed(1), r.state === "passed" ? "" : `  (${r.state})`)),
    line(`${rows.length} files`, total.toFixed(1)),
  ].join("\n");
}

/**
 * A vitest reporter, beside the default one: at the end of a run of more than one file, each file's
 * time (import, hooks and tests), slowest first. Files that did not run (filtered out, or the run was
 * interrupted before them) are left out.
 */
export default class DurationsReporter implements Reporter {
  private root = process.cwd();

  onInit(vitest: Vitest): void {
    this.root = vitest.config.root;
  }

  onTestRunEnd(modules: ReadonlyArray<TestModule>): void {
    const ran = modules.filter((m) => m.state() !== "queued" && m.state() !== "skipped");
    if (ran.length < 2) return;
    process.stdout.write(`\nTest files by duration:\n${durationsTable(fileDurations(ran, this.root))}\n`);
  }
}
