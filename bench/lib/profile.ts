import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { REPO_ROOT } from "./proc.js";

/**
 * Reads V8 CPU profiles (`node --cpu-prof`) and reports self time per function and per package,
 * restricted to a time window (the measured phase of a benchmark), so that start-up does not count.
 */

interface CallFrame {
  functionName: string;
  url: string;
  lineNumber: number;
}
interface ProfileNode {
  id: number;
  callFrame: CallFrame;
}
interface CpuProfile {
  nodes: ProfileNode[];
  startTime: number;
  endTime: number;
  samples: number[];
  timeDeltas: number[];
}

export interface SelfTime {
  what: string;
  ms: number;
  /** Share of the busy (non-idle) time in the window. */
  pct: number;
}

export interface ProfileReport {
  windowMs: number;
  busyMs: number;
  idleMs: number;
  topFunctions: SelfTime[];
  byPackage: SelfTime[];
}

/** `CPU.<date>.<time>.<pid>.<tid>.<seq>.cpuprofile` files of a directory, by pid. */
export function profilesByPid(dir: string): Map<number, string> {
  const out = new Map<number, string>();
  let files: string[] = [];
  try {
    files = readdirSync(dir);
  } catch {
    return out;
  }
  for (const f of files) {
    const m = /^CPU\.\d+\.\d+\.(\d+)\.\d+\.\d+\.cpuprofile$/.exec(f);
    if (m) out.set(Number(m[1]), join(dir, f));
  }
  return out;
}

function shortUrl(url: string): string {
  let u = url.replace(/^file:\/\//, "");
  if (u.startsWith(REPO_ROOT)) u = u.slice(REPO_ROOT.length + 1);
  return u;
}

function packageOf(frame: CallFrame): string {
  const name = frame.functionName;
  if (name === "(garbage collector)" || name === "(program)" || name === "(idle)" || name === "(root)") return name;
  const u = shortUrl(frame.url);
  if (u === "") return "(native/V8 builtins)";
  if (u.startsWith("node:")) return `node:${u.slice(5).split("/")[0] ?? ""}`;
  const nm = u.lastIndexOf("node_modules/");
  if (nm >= 0) {
    const rest = u.slice(nm + "node_modules/".length).split("/");
    return rest[0]?.startsWith("@") ? `${rest[0]}/${rest[1] ?? ""}` : (rest[0] ?? u);
  }
  const parts = u.split("/");
  if ((parts[0] === "libs" || parts[0] === "services") && parts[1]) return `${parts[0]}/${parts[1]}`;
  return u;
}

/** Self time by function and by package within the windows [fromUs, toUs] of the monotonic clock (all if none). */
export function analyseProfile(path: string, windows: ReadonlyArray<{ fromUs: number; toUs: number }> = [], top = 15): ProfileReport {
  const profile = JSON.parse(readFileSync(path, "utf8")) as CpuProfile;
  const byId = new Map<number, ProfileNode>();
  for (const n of profile.nodes) byId.set(n.id, n);
  const fn = new Map<string, number>();
  const pkg = new Map<string, number>();
  let t = profile.startTime;
  let windowUs = 0;
  let idleUs = 0;
  for (let i = 0; i < profile.samples.length; i++) {
    const dt = profile.timeDeltas[i] ?? 0;
    t += dt;
    if (windows.length > 0 && !windows.some((w) => t >= w.fromUs && t <= w.toUs)) continue;
    const node = byId.get(profile.samples[i] as number);
    if (!node) continue;
    windowUs += dt;
    const f = node.callFrame;
    if (f.functionName === "(idle)") {
      idleUs += dt;
      continue;
    }
    const key = f.url ? `${f.functionName || "(anonymous)"} ${shortUrl(f.url)}:${f.lineNumber + 1}` : f.functionName || "(anonymous)";
    fn.set(key, (fn.get(key) ?? 0) + dt);
    const p = packageOf(f);
    pkg.set(p, (pkg.get(p) ?? 0) + dt);
  }
  const busyUs = windowUs - idleUs;
  const list = (m: Map<string, number>): SelfTime[] =>
    [...m.entries()]
      .sort((a, b) => b[1] - a[1])
      .slice(0, top)
      .map(([what, us]) => ({ what, ms: Math.round(us / 100) / 10, pct: busyUs > 0 ? Math.round((1000 * us) / busyUs) / 10 : 0 }));
  return { windowMs: Math.round(windowUs / 1000), busyMs: Math.round(busyUs / 1000), idleMs: Math.round(idleUs / 1000), topFunctions: list(fn), byPackage: list(pkg) };
}
