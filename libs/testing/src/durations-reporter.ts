import { mkdirSync, writeFileSync } from "node:fs";
import { join, relative } from "node:path";
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

/** The table the reporter prints: "file  seconds", slowest first (the first `limit` rows), and the total of all. */
export function durationsTable(rows: readonly FileDuration[], limit = Infinity): string {
  const shown = rows.slice(0, limit);
  const width = Math.max(4, ...shown.map((r) => r.file.length));
  const line = (file: string, seconds: string, note = "") => `${file.padEnd(width)}  ${seconds.padStart(8)}${note}`;
  const total = rows.reduce((s, r) => s + r.seconds, 0);
  return [
    line("file", "seconds"),
    ...shown.map((r) => line(r.file, r.seconds.toFixed(1), r.state === "passed" ? "" : `  (${r.state})`)),
    ...(shown.length < rows.length ? [`… ${rows.length - shown.length} faster files`] : []),
    line(`${rows.length} files`, total.toFixed(1)),
  ].join("\n");
}

/** One failed test (or a file that failed outside its tests), with the first lines of its first error. */
export interface Failure {
  where: string;
  message: string;
}

const firstLines = (text: string, n = 4) => text.split("\n").slice(0, n).join("\n    ");

/** Every failed test, and every file that failed without a failed test (an error in a hook or at import). */
export function failures(modules: ReadonlyArray<TestModule>, root: string): Failure[] {
  const out: Failure[] = [];
  for (const m of modules) {
    const file = relative(root, m.moduleId);
    let inTests = 0;
    for (const t of m.children.allTests()) {
      const r = t.result();
      if (r.state !== "failed") continue;
      inTests++;
      const e = r.errors[0];
      out.push({ where: `${file} > ${t.fullName}`, message: firstLines(e ? `${e.name ?? "Error"}: ${e.message}` : "failed") });
    }
    if (inTests === 0 && m.state() === "failed") {
      const e = m.errors()[0];
      out.push({ where: file, message: firstLines(e ? `${e.name ?? "Error"}: ${e.message}` : "failed outside its tests") });
    }
  }
  return out;
}

/** The recap printed last: failures (and unhandled errors) first, then one closing count line. */
export function recap(modules: ReadonlyArray<TestModule>, unhandled: ReadonlyArray<{ name?: string; message?: string }>, root: string): string {
  const failed = failures(modules, root);
  let passed = 0;
  let failedCount = 0;
  let skipped = 0;
  for (const m of modules) {
    for (const t of m.children.allTests()) {
      const s = t.result().state;
      if (s === "passed") passed++;
      else if (s === "failed") failedCount++;
      else if (s === "skipped") skipped++;
    }
  }
  const lines: string[] = [];
  if (failed.length > 0 || unhandled.length > 0) {
    lines.push(`Failures (${failed.length}), each with the first lines of its error:`);
    for (const f of failed) lines.push(`  ✗ ${f.where}\n    ${f.message}`);
    for (const e of unhandled) lines.push(`  ✗ unhandled ${e.name ?? "error"}\n    ${firstLines(e.message ?? "")}`);
  }
  lines.push(`tests: ${passed} passed, ${failedCount} failed, ${skipped} skipped`);
  return lines.join("\n");
}

/**
 * A vitest reporter, beside the default one: at the end of a run of more than one file, the slowest
 * files (import, hooks and tests; the whole table goes to .cache/test-durations.txt), then a short
 * recap of what failed, last, where a log that keeps only its tail still shows it. Files that did not
 * run (filtered out, or the run was interrupted before them) are left out.
 */
export default class DurationsReporter implements Reporter {
  private root = process.cwd();

  onInit(vitest: Vitest): void {
    this.root = vitest.config.root;
  }

  onTestRunEnd(modules: ReadonlyArray<TestModule>, unhandled: ReadonlyArray<{ name?: string; message?: string }>): void {
    const ran = modules.filter((m) => m.state() !== "queued" && m.state() !== "skipped");
    if (ran.length < 2) return;
    const rows = fileDurations(ran, this.root);
    try {
      const dir = join(this.root, ".cache");
      mkdirSync(dir, { recursive: true });
      writeFileSync(join(dir, "test-durations.txt"), `${durationsTable(rows)}\n`);
    } catch {
      // The full table is a convenience; the printed one and the recap still follow.
    }
    process.stdout.write(`\nTest files by duration (all of them in .cache/test-durations.txt):\n${durationsTable(rows, 15)}\n\n${recap(ran, unhandled, this.root)}\n`);
  }
}
