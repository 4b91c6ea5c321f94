import { spawnSync, type ChildProcess } from "node:child_process";
import { MALLOC_ENV, startScript } from "@sloserve/stack";
import { readFileSync, readdirSync } from "node:fs";
import { getPriority, setPriority } from "node:os";
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

/** User + system CPU time in a /proc `stat` file (a process's or a thread's), ms; null if it is gone. */
function statCpuMs(path: string): number | null {
  try {
    const stat = readFileSync(path, "utf8");
    // Fields after the command name (which may contain spaces) start after the last ')'.
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    const utime = Number(fields[11]);
    const stime = Number(fields[12]);
    return ((utime + stime) * 1000) / ticksPerSecond();
  } catch {
    return null;
  }
}

/** User + system CPU time a process has used so far, ms (/proc/<pid>/stat); null if it is gone. */
export function cpuMs(pid: number): number | null {
  return statCpuMs(`/proc/${pid}/stat`);
}

/**
 * Time on a CPU and time runnable but waiting for one, so far, ms, of each thread of a process, by
 * thread id (/proc/<pid>/task/<tid>/schedstat: ns, finer than stat's clock ticks).
 */
export function threadSchedMs(pid: number): Map<string, { runMs: number; waitMs: number }> {
  const out = new Map<string, { runMs: number; waitMs: number }>();
  let tids: string[] = [];
  try {
    tids = readdirSync(`/proc/${pid}/task`);
  } catch {
    return out;
  }
  for (const tid of tids) {
    try {
      const [run, wait] = readFileSync(`/proc/${pid}/task/${tid}/schedstat`, "utf8").trim().split(" ").map(Number);
      out.set(tid, { runMs: (run ?? 0) / 1e6, waitMs: (wait ?? 0) / 1e6 });
    } catch {
      // the thread ended
    }
  }
  return out;
}

/**
 * Runs this script again in a new process with libs/stack's malloc settings (glibc reads them at
 * start) unless it has them, and exits with its status: the services run with them, so the reference
 * measured in the benchmark's own process (raw onnxruntime) must too.
 */
export function rerunWithMallocEnv(): void {
  if (Object.keys(MALLOC_ENV).every((k) => process.env[k] !== undefined)) return;
  const again = spawnSync(process.execPath, [...process.execArgv, ...process.argv.slice(1)], { stdio: "inherit", env: { ...MALLOC_ENV, ...process.env } });
  process.exit(again.status ?? 1);
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

/**
 * Runs `fn` with this thread at the nice value the executors give their inference threads (libs/executor
 * INFERENCE_NICE), then back to its own: raw onnxruntime, the reference of throughput_vs_raw, runs at
 * the priority the system's inference runs at. Where the process may not take it (no CAP_SYS_NICE),
 * neither may the executors: both keep the process's. Returns fn's result and the nice value used.
 */
export async function atNice<T>(nice: number, fn: () => Promise<T>): Promise<{ result: T; nice: number }> {
  const before = getPriority();
  let used = before;
  try {
    setPriority(nice);
    used = nice;
  } catch {
    // not permitted: run as we are
  }
  try {
    return { result: await fn(), nice: used };
  } finally {
    if (used !== before) setPriority(before);
  }
}
