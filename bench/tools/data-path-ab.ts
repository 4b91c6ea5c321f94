/**
 * Run by hand, not part of `npm run bench`: saturated throughput (closed loop, 32 clients),
 * CPU per query of every process and the low-load p50 over HTTP JSON, HTTP binary and NATS, for one or
 * more copies of the tree side by side in one run (an A/B: ROOTS=.,/tmp/copy-before; each root
 * gets its own stack, started from its own sources, the variant `<model>--cpu-fp32-b8-t1` pinned).
 * Usage: [MODEL=small|rec] [ROOTS=a,b] [REPS=3] [ONLY=http,http-bin,nats] [PROFILE_DIR=dir]
 *        npx tsx bench/tools/data-path-ab.ts [seconds per load window] [low-load rounds]
 * MODEL=rec (ocr-rec, the compute-bound model): every rep starts with raw onnxruntime at batch 8 in this
 * process (the serving benchmark's reference: same session options, 1 intra-op thread) and reports each
 * path's queries/s over raw's of the same rep (`vs_raw`, median of the reps), and the executor's CPU per
 * query by thread (the inference thread apart from the main thread). Runs under libs/stack's malloc
 * settings, as `npm run bench` does (raw onnxruntime runs in this process).
 * Load windows alternate between the roots (the machine is shared: medians of the windows).
 * PROFILE_DIR: CPU profiles of every service (lib/cpu-profiler.mjs) and the load windows (windows.json).
 * PERF_DIR: `perf record -a -g` of the whole machine during each path's first load window
 * (perf-<path>.data; `perf report -i … --sort comm,dso` splits kernel and user time by process).
 */
import { spawn } from "node:child_process";
import os from "node:os";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { connect, headers as natsHeaders } from "@nats-io/transport-node";
import { contentTypes, decodeWireMeta, headers, subjects } from "@sloserve/contracts";
import { median, variantName } from "@sloserve/policy";
import { INFERENCE_NICE } from "@sloserve/executor";
import { OnnxRunner } from "@sloserve/runtime";
import { HttpClient, expectOk } from "../lib/http-client.js";
import { makeQuery, recModel, smallModel } from "../lib/inputs.js";
import { backToBack, closedLoop, interleaved, type Target } from "../lib/load.js";
import { BENCH_DIR, CpuMeter, atNice, monotonicUs, rerunWithMallocEnv, threadSchedMs } from "../lib/proc.js";

rerunWithMallocEnv();

const seconds = Number(process.argv[2] ?? 4);
const rounds = Number(process.argv[3] ?? 300);
const reps = Number(process.env.REPS ?? 3);
const roots = (process.env.ROOTS ?? join(BENCH_DIR, "..")).split(",");
const paths = (process.env.ONLY ?? "http,http-bin,nats").split(",");
const rec = process.env.MODEL === "rec";
const profDir = process.env.PROFILE_DIR;
const perfDir = process.env.PERF_DIR;
/**
 * NICE=0,-10: every rep runs at each priority of raw onnxruntime and the executors' inference threads
 * (keys nice<n>:…). Without it raw onnxruntime runs at libs/executor INFERENCE_NICE, as in the serving
 * benchmark, and each tree's executor sets its own.
 */
const nices: Array<number | undefined> = process.env.NICE ? process.env.NICE.split(",").map(Number) : [undefined];
const env: Record<string, string> = { PROFILE_ON_REGISTER: "false" };
if (profDir) Object.assign(env, { NODE_OPTIONS: `--import ${join(BENCH_DIR, "lib", "cpu-profiler.mjs")}`, BENCH_CPU_PROFILE_DIR: profDir });
const windows: Array<{ key: string; fromUs: number; toUs: number; fromMs: number; toMs?: number }> = [];
/** The NATS path's answers: batch size and the executor's wall time for the batch (timing_ms.inference). */
let served: Array<{ batch: number; inferenceMs: number }> = [];

const model = rec ? recModel() : await smallModel("digits");
const q = makeQuery(model);
const runner = rec ? await OnnxRunner.load(readFileSync(model.model.path), { intraOpThreads: 1 }) : undefined;
type StackMod = typeof import("@sloserve/stack");
const stacks: Array<{ root: string; stop: () => Promise<void>; targets: Record<string, Target>; pids: Record<string, number> }> = [];
try {
  for (const root of roots) {
    const mod = (await import(join(root, "libs/stack/src/index.ts"))) as StackMod;
    const stack = await mod.startStack({ cpuWorkers: 1, workerThreads: 2, logLevel: "info", env });
    const entry = { root, stop: () => stack.stop(), targets: {} as Record<string, Target>, pids: {} as Record<string, number> };
    stacks.push(entry);
    const r = await mod.registerOverHttp(stack.httpUrl, model.model);
    if (r.status !== 201) throw new Error(`register: ${r.status}`);
    const variant = variantName(model.model.name, "cpu", "fp32", 8, 1);
    const nc = await connect({ servers: stack.nats.url, noAsyncTraces: true });
    const h = natsHeaders();
    h.set(headers.contentType, contentTypes.wire);
    const http = new HttpClient(stack.httpUrl);
    const path = `/v2/models/${model.model.name}/infer`;
    entry.targets = {
      http: async () => expectOk(await http.post(path, q.json), "http"),
      "http-bin": async () => expectOk(await http.postBinary(path, q.binary.body, q.binary.headerLength), "bin"),
      nats: async () => {
        const m = await nc.request(subjects.inferVariant(variant), q.wire, { timeout: 60_000, headers: h });
        if (m.headers?.get(headers.error)) throw new Error(new TextDecoder().decode(m.data));
        const { meta } = decodeWireMeta<{ served_by?: { batch_size?: number }; timing_ms?: { inference?: number } }>(m.data);
        served.push({ batch: meta.served_by?.batch_size ?? 0, inferenceMs: meta.timing_ms?.inference ?? 0 });
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
  const out: Record<string, unknown> = { roots, model: model.model.name };
  if (rounds > 0) {
    const all: Record<string, Target> = {};
    stacks.forEach((s, k) => {
      for (const p of paths) all[`${label(k)}${p}`] = s.targets[p] as Target;
    });
    const low = await interleaved(all, { rounds, warmupRounds: rec ? 5 : 30, maxMs: 120_000 });
    out.p50_ms = Object.fromEntries(Object.entries(low.latencies).map(([k, v]) => [k, Number(median(v).toFixed(3))]));
  }
  const cpu: Record<string, Record<string, number[]>> = {};
  const threads: Record<string, Record<string, number[]>> = {};
  const qps: Record<string, number[]> = {};
  const vsRaw: Record<string, number[]> = {};
  const batches: Record<string, { batch: number[]; inferenceMs: number[] }> = {};
  const rawQps: Record<string, number[]> = {};
  const rawCpuUs: Record<string, number[]> = {};
  const batch8 = Array.from({ length: 8 }, () => q.tensors);
  for (let rep = 0; rep < reps; rep++) {
    for (const nice of nices) {
      const tag = nices.length > 1 ? `nice${nice}:` : "";
      if (nice !== undefined) {
        // The executors' inference threads (their busiest) at this priority; raw onnxruntime (this
        // thread) too while it runs, and back to 0 for the load generator.
        for (const st of stacks) {
          const ex = st.pids["executor-cpu"];
          const top = ex === undefined ? undefined : [...threadSchedMs(ex).entries()].sort((a, b) => b[1].runMs - a[1].runMs)[0];
          if (top) os.setPriority(Number(top[0]), nice);
        }
      }
      if (runner) {
        const { result } = await atNice(nice ?? INFERENCE_NICE, async () => {
          await backToBack(() => runner.runBatch(batch8), { warmupMs: 300, durationMs: 0 });
          const cpu = process.cpuUsage();
          const r = await backToBack(() => runner.runBatch(batch8), { warmupMs: 0, durationMs: Math.min(seconds, 3) * 1000 });
          return { r, used: process.cpuUsage(cpu) };
        });
        (rawQps[tag] ??= []).push(result.r.callsPerS * 8);
        (rawCpuUs[tag] ??= []).push((result.used.user + result.used.system) / (result.r.calls * 8));
      }
      for (const p of paths) {
        for (const [k, s] of stacks.entries()) {
          const key = `${tag}${label(k)}${p}`;
          const meter = new CpuMeter(s.pids);
          const executor = s.pids["executor-cpu"];
          let threadsBefore = new Map<string, { runMs: number; waitMs: number }>();
          let used: Record<string, number> = {};
          let byThread = new Map<string, { runMs: number; waitMs: number }>();
          const res = await closedLoop(s.targets[p] as Target, {
            concurrency: 32,
            warmupMs: rec ? 2000 : 1000,
            durationMs: seconds * 1000,
            onWindow: (e) => {
              if (e === "start") {
                served = [];
                meter.mark();
                if (executor !== undefined) threadsBefore = threadSchedMs(executor);
                if (perfDir && rep === 0) spawn("perf", ["record", "-a", "-g", "-F", "499", "-o", join(perfDir, `perf-${key.replace(":", "_")}.data`), "--", "sleep", String(seconds)], { stdio: "ignore" });
                windows.push({ key, fromUs: monotonicUs(), toUs: Infinity, fromMs: Date.now() });
              } else {
                used = meter.delta();
                if (executor !== undefined) {
                  for (const [t, x] of threadSchedMs(executor)) {
                    const b = threadsBefore.get(t);
                    byThread.set(t, { runMs: x.runMs - (b?.runMs ?? 0), waitMs: x.waitMs - (b?.waitMs ?? 0) });
                  }
                }
                Object.assign(windows[windows.length - 1] as object, { toUs: monotonicUs(), toMs: Date.now() });
              }
            },
          });
          if (res.errors) console.error(key, "errors", res.errors, res.firstError);
          if (served.length > 0) {
            ((batches[key] ??= { batch: [], inferenceMs: [] }).batch).push(served.reduce((a, x) => a + x.batch, 0) / served.length);
            batches[key].inferenceMs.push(median(served.map((x) => x.inferenceMs)));
          }
          (qps[key] ??= []).push(res.qps);
          const raws = rawQps[tag] ?? [];
          if (raws.length > 0) (vsRaw[key] ??= []).push(res.qps / (raws[raws.length - 1] as number));
          const n = Math.max(1, res.completed);
          for (const [proc, ms] of Object.entries(used)) ((cpu[key] ??= {})[proc] ??= []).push((ms * 1000) / n);
          // The executor's threads by CPU used (the inference thread first, then its main thread): time
          // on a CPU, and runnable but waiting for one, per query.
          [...byThread.entries()].sort((a, b) => b[1].runMs - a[1].runMs).slice(0, 3).forEach(([, x], i) => {
            const t = (threads[key] ??= {});
            (t[`#${i + 1}`] ??= []).push((x.runMs * 1000) / n);
            (t[`#${i + 1} waiting`] ??= []).push((x.waitMs * 1000) / n);
          });
          byThread = new Map();
          console.error(`rep ${rep + 1}/${reps} ${key}: ${res.qps.toFixed(1)}/s${raws.length > 0 ? ` (raw b8 ${raws[raws.length - 1]!.toFixed(1)}/s)` : ""}`);
        }
      }
    }
  }
  for (const [tag, xs] of Object.entries(rawQps)) out[`${tag}raw_b8`] = { qps: Number(median(xs).toFixed(1)), reps: xs.map((x) => Number(x.toFixed(1))), cpu_us_per_query: Math.round(median(rawCpuUs[tag] ?? [0])) };
  const procs = ["frontend", "dispatcher", "nats-server", "executor-cpu", "bench-client"];
  for (const key of Object.keys(qps)) {
    out[key] = {
      qps: Number(median(qps[key]!).toFixed(1)),
      ...(vsRaw[key] ? { vs_raw: Number(median(vsRaw[key]).toFixed(3)), vs_raw_reps: vsRaw[key].map((x) => Number(x.toFixed(3))) } : {}),
      cpu_us_per_query: Object.fromEntries(procs.map((p) => [p, Math.round(median(cpu[key]![p] ?? [0]))])),
      ...(batches[key] ? { mean_batch: Number(median(batches[key].batch).toFixed(2)), batch_wall_ms_p50: Number(median(batches[key].inferenceMs).toFixed(1)) } : {}),
      ...(threads[key] ? { executor_threads_us_per_query: Object.fromEntries(Object.entries(threads[key]).map(([t, xs]) => [t, Math.round(median(xs))])) } : {}),
    };
  }
  console.log(JSON.stringify(out));
  if (profDir) writeFileSync(join(profDir, "windows.json"), JSON.stringify({ windows, pids: stacks.map((s) => s.pids) }));
  if (process.env.WINDOWS_FILE) writeFileSync(process.env.WINDOWS_FILE, JSON.stringify({ windows, pids: stacks.map((s) => s.pids) }));
} finally {
  for (const s of stacks) await s.stop();
  await runner?.release();
}
