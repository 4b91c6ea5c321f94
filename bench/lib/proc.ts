import { spawnSync, type ChildProcess } from "node:child_process";
import { startScript } from "@sloserve/stack";
import { readFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

/** Child processes of the benchmark (reference servers) and /proc readings (RSS, CPU time). */

export const BENCH_DIR = resolve(dirname(fileURLToPath(import.meta.url)), "..");
export const REPO_ROOT = resolve(BENCH_DIR, "..");

export interface Child {
  name: string;
  process: ChildProcess;
  pid: number;
  /** Fields of the child's ready line. */
  info: Record<string, unknown>;
  stop(): Promise<void>;
}

/**
 * Starts `bench/lib/<script>` with tsx (libs/stack startScript) and waits for its JSON line
 * `{"event":"ready",...}` on stdout. Stopping sends SIGTERM (SIGKILL after 10 s).
 */
export async function startChild(name: string, script: string, env: Record<string, string>, timeoutMs = 60_000): Promise<Child> {
  const child = await startScript(name, join(BENCH_DIR, "lib", script), env, { timeoutMs });
  return { name, process: child.process, pid: child.process.pid as number, info: child.info, stop: child.stop };
}

/** Resident set size of a process, MiB (VmRSS of /proc/<pid>/status); null if it is gone. */
export function rssMb(pid: number): number | null {
  try {
    const status = readFileSync(`/proc/${pid}/status`, "utf8");
    const m = /^VmRSS:\s+(\d+)\s+kB/m.exec(status);
    return m ? Number(m[1]) / 1024 : null;
  } catch {
    return null;
  }
}

let clockTicks: number | undefined;
function ticksPerSecond(): number {
  if (clockTicks === undefined) {
    const out = spawnSync("getconf", ["CLK_TCK"], { encoding: "utf8" });
    clockTicks = Number(out.stdout.trim()) || 100;
  }
  return clockTicks;
}

/** User + system CPU time a process has used so far, ms (/proc/<pid>/stat); null if it is gone. */
export function cpuMs(pid: number): number | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    // Fields after the command name (which may contain spaces) start after the last ')'.
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    const utime = Number(fields[11]);
    const stime = Number(fields[12]);
    return ((utime + stime) * 1000) / ticksPerSecond();
  } catch {
    return null;
  }
}

/** Samples the RSS of named processes every `periodMs`, keeping the largest value seen. */
export class RssSampler {
  private readonly peak = new Map<string, number>();
  private timer: NodeJS.Timeout | undefined;

  constructor(private readonly pids: Record<string, number>, private readonly periodMs = 250) {}

  start(): void {
    this.sample();
    this.timer = setInterval(() => this.sample(), this.periodMs);
  }

  private sample(): void {
    for (const [name, pid] of Object.entries(this.pids)) {
      const mb = rssMb(pid);
      if (mb !== null) this.peak.set(name, Math.max(this.peak.get(name) ?? 0, mb));
    }
  }

  stop(): Record<string, number> {
    if (this.timer) clearInterval(this.timer);
    this.sample();
    return Object.fromEntries(this.peak);
  }
}

/** CPU time per process over a window: call `mark()` at the start and `delta()` at the end. */
export class CpuMeter {
  private before: Record<string, number> = {};
  private selfBefore = process.cpuUsage();

  constructor(private readonly pids: Record<string, number>) {}

  mark(): void {
    this.before = {};
    for (const [name, pid] of Object.entries(this.pids)) this.before[name] = cpuMs(pid) ?? 0;
    this.selfBefore = process.cpuUsage();
  }

  /** CPU ms used by each process since mark(); "bench-client" is this process. */
  delta(): Record<string, number> {
    const out: Record<string, number> = {};
    for (const [name, pid] of Object.entries(this.pids)) out[name] = (cpuMs(pid) ?? 0) - (this.before[name] ?? 0);
    const self = process.cpuUsage(this.selfBefore);
    out["bench-client"] = (self.user + self.system) / 1000;
    return out;
  }
}

/** Monotonic clock in µs, the same clock V8's CPU profiles use for their timestamps (Linux). */
export function monotonicUs(): number {
  return Number(process.hrtime.bigint() / 1000n);
}
