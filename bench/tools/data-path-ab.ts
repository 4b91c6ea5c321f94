/**
 * Run by hand, not part of `npm run bench` (issue 14): the frontend's and the dispatcher's CPU per
 * query (saturated, closed loop, 32 clients) and the low-load p50 of the tiny digits model over HTTP
 * JSON, HTTP binary and NATS, for one or more copies of the tree side by side in one run (an A/B:
 * ROOTS=/work/main,/tmp/copy-before; each root gets its own stack, started from its own sources).
 * Usage: [ROOTS=a,b] [REPS=3] [ONLY=http,http-bin,nats] [PROFILE_DIR=dir] npx tsx bench/tools/data-path-ab.ts [seconds per load window] [low-load rounds]
 * Load windows alternate between the roots (the machine is shared: medians of the windows).
 * PROFILE_DIR: CPU profiles of every service (lib/cpu-profiler.mjs) and the load windows (windows.json).
 */
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { connect, headers as natsHeaders } from "@nats-io/transport-node";
import { contentTypes, headers, subjects } from "@sloserve/contracts";
import { median, variantName } from "@sloserve/policy";
import { HttpClient, expectOk } from "../lib/http-client.js";
import { makeQuery, smallModel } from "../lib/inputs.js";
import { closedLoop, interleaved, type Target } from "../lib/load.js";
import { BENCH_DIR, CpuMeter, monotonicUs } from "../lib/proc.js";

const seconds = Number(process.argv[2] ?? 4);
const rounds = Number(process.argv[3] ?? 300);
const reps = Number(process.env.REPS ?? 3);
const roots = (process.env.ROOTS ?? join(BENCH_DIR, "..")).split(",");
const paths = (process.env.ONLY ?? "http,http-bin,nats").split(",");
const profDir = process.env.PROFILE_DIR;
const env: Record<string, string> = { PROFILE_ON_REGISTER: "false" };
if (profDir) Object.assign(env, { NODE_OPTIONS: `--import ${join(BENCH_DIR, "lib", "cpu-profiler.mjs")}`, BENCH_CPU_PROFILE_DIR: profDir });
const windows: Array<{ fromUs: number; toUs: number }> = [];

const small = await smallModel("digits");
const q = makeQuery(small);
type StackMod = typeof import("@sloserve/stack");
const stacks: Array<{ root: string; stop: () => Promise<void>; targets: Record<string, Target>; pids: Record<string, number> }> = [];
try {
  for (const root of roots) {
    const mod = (await import(join(root, "libs/stack/src/index.ts"))) as StackMod;
    const stack = await mod.startStack({ cpuWorkers: 1, workerThreads: 2, logLevel: "info", env });
    const entry = { root, stop: () => stack.stop(), targets: {} as Record<string, Target>, pids: {} as Record<string, number> };
    stacks.push(entry);
    const r = await mod.registerOverHttp(stack.httpUrl, small.model);
    if (r.status !== 201) throw new Error(`register: ${r.status}`);
    const variant = variantName(small.model.name, "cpu", "fp32", 8, 1);
    const nc = await connect({ servers: stack.nats.url, noAsyncTraces: true });
    const h = natsHeaders();
    h.set(headers.contentType, contentTypes.wire);
    const http = new HttpClient(stack.httpUrl);
    const path = `/v2/models/${small.model.name}/infer`;
    entry.targets = {
      http: async () => expectOk(await http.post(path, q.json), "http"),
      "http-bin": async () => expectOk(await http.post(path, q.binary.body, "application/octet-stream", { "inference-header-content-length": q.binary.headerLength }), "bin"),
      nats: async () => {
        const m = await nc.request(subjects.inferVariant(variant), q.wire, { timeout: 30_000, headers: h });
        if (m.headers?.get(headers.error)) throw new Error(new TextDecoder().decode(m.data));
      },
    };
    for (let i = 0; ; i++) {
      try {
        await entry.targets.nats!();
        await entry.targets.http!();
        break;
      } catch (err) {
        if (i > 200) throw err;
        await new Promise((res) => setTimeout(res, 500));
      }
    }
    for (const s of stack.services) entry.pids[s.name] = s.process.pid as number;
    entry.pids["nats-server"] = stack.nats.process.pid as number;
  }
  const label = (k: number): string => (roots.length > 1 ? `${k}:` : "");
  const out: Record<string, unknown> = { roots };
  if (rounds > 0) {
    const all: Record<string, Target> = {};
    stacks.forEach((s, k) => {
      for (const p of paths) all[`${label(k)}${p}`] = s.targets[p] as Target;
    });
    const low = await interleaved(all, { rounds, warmupRounds: 30, maxMs: 120_000 });
    out.p50_ms = Object.fromEntries(Object.entries(low.latencies).map(([k, v]) => [k, Number(median(v).toFixed(3))]));
  }
  const cpu: Record<string, Record<string, number[]>> = {};
  const qps: Record<string, number[]> = {};
  for (let rep = 0; rep < reps; rep++) {
    for (const p of paths) {
      for (const [k, s] of stacks.entries()) {
        const key = `${label(k)}${p}`;
        const meter = new CpuMeter(s.pids);
        let used: Record<string, number> = {};
        const res = await closedLoop(s.targets[p] as Target, {
          concurrency: 32,
          warmupMs: 1000,
          durationMs: seconds * 1000,
          onWindow: (e) => {
            if (e === "start") {
              meter.mark();
              windows.push({ fromUs: monotonicUs(), toUs: Infinity });
            } else {
              used = meter.delta();
              (windows[windows.length - 1] as { toUs: number }).toUs = monotonicUs();
            }
          },
        });
        if (res.errors) console.error(key, "errors", res.errors, res.firstError);
        (qps[key] ??= []).push(res.qps);
        for (const [proc, ms] of Object.entries(used)) ((cpu[key] ??= {})[proc] ??= []).push((ms * 1000) / Math.max(1, res.completed));
      }
    }
  }
  for (const key of Object.keys(qps)) {
    out[key] = { qps: Math.round(median(qps[key]!)), cpu_us_per_query: Object.fromEntries(["frontend", "dispatcher", "nats-server"].map((p) => [p, Math.round(median(cpu[key]![p] ?? [0]))])) };
  }
  console.log(JSON.stringify(out));
  if (profDir) writeFileSync(join(profDir, "windows.json"), JSON.stringify(windows));
} finally {
  for (const s of stacks) await s.stop();
}
