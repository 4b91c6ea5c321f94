import { spawnSync } from "node:child_process";
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { cpus, loadavg, totalmem } from "node:os";
import { join } from "node:path";
import { BENCH_DIR } from "./proc.js";

/** Where results go, what machine produced them, and the envelope every results file has. */

export const RESULTS_DIR = join(BENCH_DIR, "results");

export interface Machine {
  cpu: string;
  cores: number;
  memoryGb: number;
  node: string;
  loadAvgAtStart: number[];
  gitCommit: string | null;
}

export interface Envelope<T> {
  name: string;
  command: string;
  date: string;
  quick: boolean;
  machine: Machine;
  durationS: number;
  result: T | null;
  error?: string;
}

export function machineInfo(): Machine {
  const git = spawnSync("git", ["rev-parse", "--short", "HEAD"], { encoding: "utf8" });
  return {
    cpu: cpus()[0]?.model ?? "unknown",
    cores: cpus().length,
    memoryGb: Math.round(totalmem() / 2 ** 30),
    node: process.version,
    loadAvgAtStart: loadavg().map((x) => Math.round(x * 100) / 100),
    gitCommit: git.status === 0 ? git.stdout.trim() : null,
  };
}

export function writeResult<T>(envelope: Envelope<T>, file = `${envelope.name}.json`): string {
  mkdirSync(RESULTS_DIR, { recursive: true });
  const path = join(RESULTS_DIR, file);
  writeFileSync(path, `${JSON.stringify(envelope, null, 2)}\n`);
  return path;
}

export function readResult<T>(name: string): Envelope<T> | null {
  const path = join(RESULTS_DIR, `${name}.json`);
  if (!existsSync(path)) return null;
  try {
    return JSON.parse(readFileSync(path, "utf8")) as Envelope<T>;
  } catch {
    return null;
  }
}
