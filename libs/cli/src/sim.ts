import { spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { CliError, exitCodes } from "./client.js";
import type { Out } from "./output.js";

/**
 * `sloserve sim …`: the simulator's scenarios, run by the simulator's own command (libs/sim cli.ts, the
 * one `npm run sim` runs) in a child process: its options pass through (--seed, --peak-qps, --duration-s,
 * --trace, --out, --predictor). With --json, `list` prints the scenarios and a run prints its
 * ScenarioResult (the report it writes) on stdout, with the simulator's own output on stderr.
 */

/** libs/sim's command, next to the package's entry. */
function simCli(): string {
  return join(dirname(fileURLToPath(import.meta.resolve("@sloserve/sim"))), "cli.ts");
}

/** Runs the simulator's command: its stdout to ours ("inherit"), to our stderr, or returned ("string"); its stderr to ours. */
function runSim(args: readonly string[], stdout: "inherit" | "stderr" | "string"): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ["--import", "tsx", simCli(), ...args], { stdio: ["ignore", stdout === "inherit" ? "inherit" : "pipe", "pipe"] });
    let text = "";
    let errors = "";
    child.stdout?.on("data", (d: Buffer) => {
      if (stdout === "string") text += d.toString("utf8");
      else process.stderr.write(d);
    });
    child.stderr?.on("data", (d: Buffer) => {
      errors += d.toString("utf8");
      process.stderr.write(d);
    });
    child.on("error", (err) => reject(new CliError(`cannot start the simulator: ${err.message}`)));
    child.on("close", (code) => {
      if (code === 0) resolve(text);
      // Its message is on stderr already.
      else reject(new CliError(`the simulator failed (exit ${code ?? "signal"})`, errors.includes("unknown scenario") ? exitCodes.usage : exitCodes.refused));
    });
  });
}

export async function simList(out: Out): Promise<void> {
  if (!out.json) {
    await runSim(["list"], "inherit");
    return;
  }
  // `list` prints one scenario a line: its name, then its description.
  const text = await runSim(["list"], "string");
  const scenarios = text
    .split("\n")
    .filter((l) => l.trim())
    .map((l) => {
      const [, name = "", description = ""] = /^(\S+)\s+(.*)$/.exec(l.trim()) ?? [];
      return { name, description };
    });
  out.emit({ scenarios }, () => "");
}

/** Runs one scenario (or `all`) with the simulator's options passed through. */
export async function simRun(out: Out, scenario: string, passed: readonly string[]): Promise<void> {
  if (!out.json) {
    await runSim([scenario, ...passed], "inherit");
    return;
  }
  if (scenario === "all") throw new CliError("--json takes one scenario; `sim run all` writes its reports under --out", exitCodes.usage);
  const at = passed.findIndex((a) => a === "--out" || a.startsWith("--out="));
  const given = at < 0 ? undefined : passed[at] === "--out" ? passed[at + 1] : passed[at]!.slice("--out=".length);
  const outDir = given ?? mkdtempSync(join(tmpdir(), "sloserve-sim-"));
  try {
    await runSim([scenario, ...(given ? passed : [...passed, "--out", outDir])], "stderr");
    out.emit(JSON.parse(readFileSync(join(outDir, `${scenario}.json`), "utf8")), () => "");
  } finally {
    if (!given) rmSync(outDir, { recursive: true, force: true });
  }
}
