import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { availableParallelism, loadavg, totalmem } from "node:os";
import { dirname, join, resolve } from "node:path";
import { parseArgs } from "node:util";
import { connect, headers as natsHeaders, type NatsConnection, type Subscription } from "@nats-io/transport-node";
import { jetstream } from "@nats-io/jetstream";
import {
  calibrationSchema,
  contentTypes,
  decodeTensors,
  describeZodError,
  emulationCalibrationSchema,
  emulationPartOf,
  encodeTensors,
  headers,
  servingStates,
  subjects,
  workerReportSchema,
  type Calibration,
  type CalibratedVariant,
  type CalibrationEntry,
  type ContentionPoint,
  type ScaleCommand,
  type VariantState,
  type WorkerReport,
} from "@sloserve/contracts";
import { createLogger, systemClock } from "@sloserve/bus";
import { createRng, median as policyMedian, profiledLatencyAt, quantile, workerCapacityForApp, type VariantProfile } from "@sloserve/policy";
import { LocalWorkerProvider, type WorkerInstance } from "@sloserve/providers";
import { REPLAY_DEFAULTS, calibratedVariantOf, replayConfig, replayStackEnv } from "@sloserve/sim";
import { MALLOC_ENV, logFile, ocrModels, startStack, tempDir, type Stack } from "@sloserve/stack";
import { MetadataStore } from "@sloserve/store";
import { profileOf, registerApp, type Listing } from "./replay-models.js";

/**
 * `npm run calibrate`: what the simulator needs to know about this machine and these variants,
 * measured once, before and apart from any replay, into a calibration file (libs/contracts
 * calibration.ts `calibrationSchema`, checked before it is written).
 *
 *   npm run calibrate -- --out FILE [--app heavy] [--emulated [--from NATIVE_CALIBRATION.json]] [--max-workers N] [--quick]
 *
 *   --out FILE         the calibration file to write (relative to where npm run was typed)
 *   --app APP          the app to register and measure (heavy, digits or an OCR app). @default heavy,
 *                      or --from's app
 *   --emulated         every worker runs BACKEND=emulated and the local function containers
 *                      FUNCTION_BACKEND=emulated (EMULATED_CALIBRATION=--from when given): the file
 *                      then describes the emulated fleet (backend "emulated")
 *   --from FILE        a native calibration file whose `emulation` part the emulated executors serve
 *   --max-workers N    the contention sweep goes up to N workers on this host. @default 4, 16 emulated
 *   --quick            shorter steps, fewer levels and rates (≤ 2 min instead of ≤ 6)
 *
 * It starts its own stack (libs/stack `startStack`, as `npm run replay` does) with the replay's
 * settings (`replayStackEnv(replayConfig(REPLAY_DEFAULTS))`: OVERFLOW=local, the compressed boot delay,
 * VARIANT_HARDWARE=cpu, VARIANT_BATCH_SIZES=1, one thread per worker and variant), the vm-autoscaler
 * held at the stack's one worker (it launches nothing of its own), registers the app and waits for
 * its profiles, then measures:
 *
 * - `variants`, `emulation`: the app's profiled variants as the registry lists them
 *   (GET /v1/apps/<app>/models → libs/policy toVariantProfile), and per variant, batch size →
 *   {p50, p99} of one batch from its profile (the median the listing shows, the P99 the profiler
 *   records in the variant's record), with its load time and accuracy.
 * - `functions`: bursts of model-less queries (the replay's SLO) the worker cannot take within the SLO,
 *   so that the dispatcher's own rule sends the excess to the local function pool (as the replay's
 *   warm-up does): the answers served by a function, cold ones' and warm ones' `timing_ms.inference`
 *   (the invocation's duration, a cold start's start and load included).
 * - `contention`: 1 … N workers on this host (the stack's own, then executors launched by a local
 *   worker provider of this script's, with the replay's BOOT_DELAY_MS), each serving the variant the
 *   stack's worker serves after the bursts and nothing else of the app (`scale.model.<worker>` unload
 *   and load commands; the model autoscaler is stopped for the sweep, or it would replicate, upgrade
 *   and downgrade under the sweep's load); then, level by level on the way down (launched workers
 *   stopped in between), the selection's pick and the variant the vm-autoscaler's plan sizes workers
 *   by, where they differ from it (a batch's slowdown differs with the variant: the simulator reads
 *   each variant's own points). Each level is driven with open-loop Poisson queries to that
 *   variant (`infer.variant.*`, no deadline: never overflowed; at most 1 s of them in flight) at shares
 *   of the instances' profiled capacity. Per step, from the worker reports (`metrics.worker.*`) after
 *   its first seconds: demand = Σ over workers of their mean profiled busy share × the variant's
 *   threads; slowdown = Σ observed / Σ profiled busy time; p50Ratio = the median over reports (those
 *   with ≥ 10 batches) of the median batch / its profiled time at that batch size; samples = the
 *   reports; workers = the level. The first launches are made while the workers already up are
 *   loaded: their reports from the new process's start to its first report are a point with
 *   `booting: 1`.
 * - `bootMs`: launch → first report of each worker launched alone (the provider's BOOT_DELAY_MS, the
 *   replay's, included), at least 3. `groupBoots`: the same for the workers of a level launched at
 *   once (after those samples), with how many were launched together; the workers up are driven at
 *   half their capacity meanwhile, and their reports until the first new one reports are a point
 *   with `booting` = that many.
 * - `reports`: the median interval between a worker's consecutive reports as received, and their
 *   standard deviation; `workerMemoryBytes`: the reports' `memoryBytes`.
 * - `host`: cores, memory, load average at the start.
 *
 * Every process it started is stopped at the end, on failure and on SIGINT.
 */

const USAGE = "usage: npm run calibrate -- --out FILE [--app APP] [--emulated [--from NATIVE_CALIBRATION.json]] [--max-workers N] [--quick]";

const { values } = parseArgs({
  options: {
    out: { type: "string" },
    app: { type: "string" },
    emulated: { type: "boolean", default: false },
    from: { type: "string" },
    "max-workers": { type: "string" },
    quick: { type: "boolean", default: false },
    help: { type: "boolean", short: "h" },
  },
});
if (values.help || !values.out) {
  console.log(USAGE);
  process.exit(values.help ? 0 : 2);
}
const startedAt = Date.now();
const host = { cores: availableParallelism(), memoryBytes: totalmem(), loadAverage: loadavg().map((x) => Math.round(x * 100) / 100) };
const date = new Date(startedAt).toISOString();
const command = `npm run calibrate -- ${process.argv.slice(2).join(" ")}`.trim();
/** Paths given on the command line are relative to where `npm run` was typed (npm runs scripts from the repository root). */
const userDir = process.env.INIT_CWD ?? process.cwd();
const outFile = resolve(userDir, values.out);
const say = (line: string): void => console.log(`[calibrate ${((Date.now() - startedAt) / 1000).toFixed(0).padStart(3)} s] ${line}`);
const fail = (message: string): never => {
  console.error(`${message}\n${USAGE}`);
  process.exit(2);
};

const emulated = values.emulated;
if (values.from && !emulated) fail("--from: only with --emulated (the emulated executors serve its `emulation` part)");
/** The native calibration the emulated executors serve (EMULATED_CALIBRATION). */
let fromFile: string | undefined;
let fromApp: string | undefined;
if (values.from) {
  fromFile = resolve(userDir, values.from);
  if (!existsSync(fromFile)) fail(`--from ${values.from}: no such file`);
  let json: unknown;
  try {
    json = JSON.parse(readFileSync(fromFile, "utf8"));
  } catch (err) {
    fail(`--from ${values.from}: ${(err as Error).message}`);
  }
  const full = calibrationSchema.safeParse(json);
  if (full.success) fromApp = full.data.app;
  else {
    const part = emulationCalibrationSchema.safeParse(emulationPartOf(json));
    if (!part.success) fail(`--from ${values.from}: neither a calibration file nor its emulation part: ${describeZodError(full.error)}`);
  }
}
const app = values.app ?? fromApp ?? REPLAY_DEFAULTS.app;
if (fromApp !== undefined && fromApp !== app) say(`warning: --from measured app ${fromApp}, this calibration is of ${app}`);
const maxWorkers = Number(values["max-workers"] ?? (emulated ? 16 : 4));
if (!Number.isInteger(maxWorkers) || maxWorkers < 1) fail(`--max-workers: "${values["max-workers"]}" is not a whole number ≥ 1`);
const quick = values.quick;

// ------------------------------------------------------------------------------------ plan

/** Per step: how long the load runs, and how much of its start the measure leaves out (the queue of the level's start, a report window straddling it). */
const STEP_MS = quick ? 5000 : 14_000;
const SETTLE_MS = quick ? 1000 : 2000;
/** Shares of the loaded instances' profiled capacity each level is driven at. */
const RATES = quick ? [0.5, 0.9] : [0.25, 0.5, 0.9];
/** Steps with a worker booting meanwhile (the first launches), at these shares. */
const BOOTING_RATES = [0.9, 0.5];
/** The share of capacity the workers up are driven at while a level's launches boot together. */
const GROUP_BOOT_SHARE = 0.5;
/** Boot samples at least (launches made alone). */
const MIN_BOOT_SAMPLES = 3;
/** Queries in flight at most, in seconds of the step's rate: a saturated host's backlog stays this short, so the next step starts clean. */
const IN_FLIGHT_S = 1;
const REQUEST_TIMEOUT_MS = 30_000;

/** The worker counts measured: every count up to 4, then doubling, and N; --quick: 1 and N. */
function sweepLevels(n: number): number[] {
  if (quick) return [...new Set([1, n])];
  if (n <= 4) return Array.from({ length: n }, (_, i) => i + 1);
  const out: number[] = [];
  for (let k = 1; k < n; k *= 2) out.push(k);
  out.push(n);
  return out;
}
const levels = sweepLevels(maxWorkers);

// ------------------------------------------------------------------------------------ the stack

const config = replayConfig({ ...REPLAY_DEFAULTS, app });
const env = replayStackEnv(config);
const backendEnv: Record<string, string> = emulated ? { BACKEND: "emulated", FUNCTION_BACKEND: "emulated", ...(fromFile ? { EMULATED_CALIBRATION: fromFile } : {}) } : {};
/** What every service and worker runs with: the replay's settings (scripts/replay.ts). */
const serviceEnv: Record<string, string> = { ...env.all, VARIANT_HARDWARE: "cpu", VARIANT_BATCH_SIZES: "1", VARIANT_CPU_THREADS: String(config.workerThreads), ...backendEnv };
const stackDir = tempDir("calibrate");

let stack: Stack | undefined;
let provider: LocalWorkerProvider | undefined;
let nc: NatsConnection | undefined;
const subs: Subscription[] = [];
let cleaning: Promise<void> | undefined;
/** Stops what this script started: the launched workers (they drain and leave), the bus connection, the stack. */
function cleanup(): Promise<void> {
  cleaning ??= (async () => {
    const p = provider;
    provider = undefined;
    if (p) await p.close().catch((err: unknown) => console.error(`[calibrate] stopping the launched workers: ${(err as Error).message}`));
    for (const s of subs) s.unsubscribe();
    const c = nc;
    nc = undefined;
    if (c) await c.close().catch(() => undefined);
    const s = stack;
    stack = undefined;
    if (s) await s.stop().catch((err: unknown) => console.error(`[calibrate] stopping the stack: ${(err as Error).message}`));
    // The servers' data (JetStream, Redis) and the model files; the logs stay.
    for (const d of ["nats", "redis", "models"]) rmSync(join(stackDir, d), { recursive: true, force: true });
  })();
  return cleaning;
}
for (const [signal, code] of [["SIGINT", 130], ["SIGTERM", 143]] as const) {
  process.on(signal, () => {
    // (once: under `tsx`, a Ctrl-C reaches this process from the terminal and again from tsx)
    if (!cleaning) console.error(`[calibrate] ${signal}: stopping every process started...`);
    void cleanup().finally(() => process.exit(code));
  });
}

try {
  await main();
} catch (err) {
  console.error(`[calibrate] failed: ${(err as Error).stack ?? String(err)}\n[calibrate] logs: ${join(stackDir, "logs", "stack.log")}`);
  await cleanup();
  process.exit(1);
}
await cleanup();

async function main(): Promise<void> {
  say(`${emulated ? `emulated workers${fromFile ? ` serving ${fromFile}` : " serving their profiles"}` : "native workers"}, app ${app}, up to ${maxWorkers} worker(s) (levels ${levels.join(", ")}), ${quick ? "quick" : "full"}; host ${host.cores} cores, load ${host.loadAverage.join(" ")}`);
  say(`starting the stack (logs: ${join(stackDir, "logs", "stack.log")}) with the replay's settings: ${JSON.stringify({ ...serviceEnv, ...env.vmAutoscaler })}`);
  stack = await startStack({
    dir: stackDir,
    cpuWorkers: config.staticWorkers,
    workerThreads: config.workerThreads,
    // The vm-autoscaler never launches here: the sweep launches its own workers.
    maxWorkers: config.staticWorkers,
    logLevel: "info",
    env: serviceEnv,
    vmAutoscalerEnv: env.vmAutoscaler,
  });
  const baseUrl = stack.httpUrl;
  await registerApp(baseUrl, app, join(stackDir, "models"), say);

  // ---------------------------------------------------------------------------------- variants

  const listing = (await (await fetch(`${baseUrl}/v1/apps/${app}/models`)).json()) as Listing;
  if (!Array.isArray(listing.models) || listing.models.length === 0) throw new Error(`GET /v1/apps/${app}/models: no model in app ${app}: ${JSON.stringify(listing).slice(0, 300)}`);
  const variants = listing.models.flatMap((m) => m.variants.map((v) => profileOf(m, v)).filter((p): p is VariantProfile => p !== undefined));
  if (variants.length === 0) throw new Error(`app ${app} has no profiled variant`);
  const profiles = new Map(variants.map((v) => [v.name, v]));
  const threadsOf = new Map(listing.models.flatMap((m) => m.variants.map((v) => [String(v.name), Number(v.threads) || 1] as const)));
  // The P99s the profiler records (the listing shows the medians): the variants' records in the registry.
  const store = MetadataStore.connect(stack.redis.url);
  const records = (await Promise.all(listing.models.map((m) => store.listVariants(m.name)))).flat();
  await store.close();
  const emulation: Calibration["emulation"] = { variants: {}, models: {} };
  for (const v of variants) {
    const record = records.find((r) => r.name === v.name);
    const p99 = record?.profile?.latencyP99Ms ?? {};
    const batches: CalibrationEntry["batches"] = {};
    for (const [b, p50] of Object.entries(v.latencyMs)) {
      const tail = p99[b];
      batches[b] = { p50, ...(tail !== undefined ? { p99: Math.max(p50, tail) } : {}) };
    }
    emulation.variants[v.name] = { batches, loadMs: v.loadLatencyMs, ...(record?.accuracy !== null && record?.accuracy !== undefined ? { accuracy: record.accuracy } : {}) };
  }
  const calibratedVariants: CalibratedVariant[] = variants.map(calibratedVariantOf);
  say(`app ${app}: ${variants.map((v) => `${v.name} (${v.peakQps.toFixed(0)} qps, b1 ${v.latencyMs[1]?.toFixed(2) ?? "?"} ms, P99 ${emulation.variants[v.name]?.batches["1"]?.p99?.toFixed(2) ?? "?"} ms)`).join(", ")}`);

  const input = listing.models[0]!.inputs[0]!;
  const bundledShape = ocrModels().find((m) => m.app === app)?.profileShape?.[input.name];
  const shape = input.shape.map((d, i) => (i === 0 ? 1 : d > 0 ? d : (bundledShape?.[i - 1] ?? 0)));
  if (shape.some((d) => d <= 0)) throw new Error(`input ${input.name} of ${app} has dynamic dimensions ${JSON.stringify(input.shape)}: the calibration does not know what size to send`);
  const rng = createRng(1);
  const payload = encodeTensors([{ name: input.name, datatype: "FP32", shape, data: Float32Array.from({ length: shape.reduce((a, b) => a * b, 1) }, () => rng.next()) }]);

  // ---------------------------------------------------------------------------------- the bus

  const conn = await connect({ servers: stack.nats.url, name: "calibrate" });
  nc = conn;
  const js = jetstream(conn);
  /** Every worker report, as received. */
  const reports: Array<{ atMs: number; r: WorkerReport }> = [];
  /** When each worker first reported. */
  const firstSeen = new Map<string, number>();
  /** Each worker's latest report. */
  const latest = new Map<string, WorkerReport>();
  /** Intervals between a worker's consecutive reports, as received. */
  const intervals: number[] = [];
  const lastAt = new Map<string, number>();
  let badReports = 0;
  subs.push(
    conn.subscribe(subjects.workerMetricsAll, {
      callback: (_e, m) => {
        const now = Date.now();
        let r: WorkerReport;
        try {
          r = workerReportSchema.parse(m.json());
        } catch (err) {
          if (badReports++ < 5) console.error(`[calibrate] ignoring a malformed worker report: ${(err as Error).message}`);
          return;
        }
        if (r.leaving) {
          latest.delete(r.worker);
          lastAt.delete(r.worker);
          return;
        }
        if (!firstSeen.has(r.worker)) firstSeen.set(r.worker, now);
        const before = lastAt.get(r.worker);
        if (before !== undefined) intervals.push(now - before);
        lastAt.set(r.worker, now);
        latest.set(r.worker, r);
        reports.push({ atMs: now, r });
      },
    }),
  );

  // ---------------------------------------------------------------------------------- queries

  interface Answer {
    ok: boolean;
    code: string;
    variant?: string;
    fn: boolean;
    cold: boolean;
    fnMs: number;
  }
  /** One query: model-less with the replay's SLO (`app`), or to a variant without deadline (never overflowed). */
  async function query(to: { app: string } | { variant: string }): Promise<Answer> {
    const h = natsHeaders();
    h.set(headers.contentType, contentTypes.wire);
    if ("app" in to) {
      h.set(headers.sloLatencyMs, String(config.sloMs));
      h.set(headers.sloMinAccuracy, String(config.minAccuracy));
    }
    try {
      const reply = await conn.request("app" in to ? subjects.inferApp(to.app) : subjects.inferVariant(to.variant), payload, { timeout: REQUEST_TIMEOUT_MS, headers: h });
      const code = reply.headers?.get(headers.error) ?? "";
      if (code !== "") return { ok: false, code, fn: false, cold: false, fnMs: 0 };
      const meta = decodeTensors<{ served_by?: { variant?: string; hardware?: string; cold_start?: boolean }; timing_ms?: { inference?: number } }>(reply.data).meta;
      const fn = meta.served_by?.hardware === "function";
      return { ok: true, code: "", ...(meta.served_by?.variant ? { variant: meta.served_by.variant } : {}), fn, cold: fn && meta.served_by?.cold_start === true, fnMs: fn ? (meta.timing_ms?.inference ?? 0) : 0 };
    } catch (err) {
      const e = err as { name?: string; message?: string };
      return { ok: false, code: /timeout/i.test(`${e.name ?? ""} ${e.message ?? ""}`) ? "timeout" : `client_error: ${e.message ?? String(err)}`, fn: false, cold: false, fnMs: 0 };
    }
  }

  interface LoadCounts {
    sent: number;
    ok: number;
    failed: number;
    /** Not sent: IN_FLIGHT_S seconds' worth in flight already. */
    skipped: number;
    /** Failures by error code. */
    codes: Record<string, number>;
  }
  const describeCounts = (c: LoadCounts): string =>
    `${c.sent} sent, ${c.failed} failed${c.failed > 0 ? ` (${Object.entries(c.codes).map(([k, n]) => `${k} ×${n}`).join(", ")})` : ""}${c.skipped > 0 ? `, ${c.skipped} not sent (${IN_FLIGHT_S} s in flight already)` : ""}`;
  /** Open-loop Poisson queries to a variant at `qps` until stopped; at most IN_FLIGHT_S seconds' worth in flight (the rest are not sent). */
  function startLoad(variant: string, qps: number): { stop: () => Promise<LoadCounts> } {
    const arrivals = createRng(Math.round(qps * 1000) + reports.length);
    const cap = Math.max(20, Math.ceil(qps * IN_FLIGHT_S));
    const pending = new Set<Promise<void>>();
    const counts = { sent: 0, ok: 0, failed: 0, skipped: 0, codes: {} as Record<string, number> };
    let stopped = false;
    let next = Date.now();
    let timer: NodeJS.Timeout | undefined;
    const pump = (): void => {
      if (stopped) return;
      const now = Date.now();
      while (next <= now) {
        if (pending.size >= cap) counts.skipped++;
        else {
          counts.sent++;
          const p = query({ variant }).then((a) => {
            if (a.ok) counts.ok++;
            else {
              counts.failed++;
              counts.codes[a.code] = (counts.codes[a.code] ?? 0) + 1;
            }
          });
          pending.add(p);
          void p.finally(() => pending.delete(p));
        }
        next += (-Math.log(1 - arrivals.next()) * 1000) / qps;
      }
      timer = setTimeout(pump, Math.max(0, next - Date.now()));
    };
    pump();
    return {
      stop: async () => {
        stopped = true;
        if (timer) clearTimeout(timer);
        await Promise.all([...pending]);
        return counts;
      },
    };
  }

  const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
  async function until(what: string, ok: () => boolean, timeoutMs: number): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (!ok()) {
      if (Date.now() > deadline) throw new Error(`${what}: not within ${timeoutMs / 1000} s`);
      await sleep(20);
    }
  }
  /** The instances of the app's variants a worker's latest report shows serving. */
  const servingOn = (worker: string): Array<{ variant: string; instances: number }> =>
    (latest.get(worker)?.variants ?? []).filter((v) => profiles.has(v.variant) && servingStates.has(v.state as VariantState) && v.instances > 0).map((v) => ({ variant: v.variant, instances: v.instances }));

  // ---------------------------------------------------------------------------------- warm-up

  say("warming up (the first queries load the app's variant on the stack's worker)...");
  const chosen = new Map<string, number>();
  {
    const deadline = Date.now() + 120_000;
    let streak = 0;
    while (streak < 20) {
      if (Date.now() > deadline) throw new Error("warm-up: 20 queries in a row were not answered within 120 s");
      const a = await query({ app });
      streak = a.ok ? streak + 1 : 0;
      if (a.ok && a.variant && !a.fn) chosen.set(a.variant, (chosen.get(a.variant) ?? 0) + 1);
      await sleep(50);
    }
  }
  const selected = [...chosen].sort((a, b) => b[1] - a[1])[0]?.[0];
  if (!selected) throw new Error("warm-up: no answer named the variant that served it");
  const staticWorkers = [...latest.keys()];
  say(`warm: the selection serves ${selected} (the replay's SLO ${config.sloMs} ms, accuracy ≥ ${config.minAccuracy}); worker(s) ${staticWorkers.join(", ")}`);

  // ---------------------------------------------------------------------------------- functions

  // Bursts the worker cannot take within the SLO: the dispatcher's own rule sends the excess to the
  // local function pool (the replay's warm-up does the same); the first burst starts its containers.
  const functions: Calibration["functions"] = { coldStartMs: [], warmMs: [] };
  const fnVariants = new Map<string, number>();
  const burstSize = Math.ceil(3 * (profiles.get(selected)?.peakQps ?? 50) * (config.sloMs / 1000));
  for (let b = 0; b < (quick ? 1 : 2); b++) {
    const answers = await Promise.all(Array.from({ length: burstSize }, () => query({ app })));
    const fn = answers.filter((a) => a.fn);
    for (const a of fn) {
      (a.cold ? functions.coldStartMs : functions.warmMs).push(round(a.fnMs, 3));
      if (a.variant) fnVariants.set(a.variant, (fnVariants.get(a.variant) ?? 0) + 1);
    }
    say(`functions: burst ${b + 1} of ${burstSize} queries: ${fn.length} served by a function (${fn.filter((a) => a.cold).length} cold), ${answers.filter((a) => !a.ok).length} failed`);
    await sleep(1000);
  }

  const fnVariant = [...fnVariants].sort((a, b) => b[1] - a[1])[0]?.[0];
  if (fnVariant !== undefined) functions.variant = fnVariant;

  // ---------------------------------------------------------------------------------- contention

  const contention: ContentionPoint[] = [];
  const bootMs: number[] = [];
  const groupBoots: Array<{ together: number; ms: number }> = [];
  const launched: WorkerInstance[] = [];
  const workers = [...staticWorkers];
  // The variant the stack's worker serves after the bursts (the model autoscaler has had its say under
  // load), else the selection's; the sweep runs it alone on every worker.
  let sweepVariant = staticWorkers.flatMap(servingOn).sort((a, b) => b.instances - a.instances)[0]?.variant ?? selected;
  // The others the fleet serves, swept after it on the way down: the selection's pick and the variant
  // the vm-autoscaler's plan sizes workers by (the model autoscaler upgrades to it under load).
  const planVariant = workerCapacityForApp(variants, app, "cpu", { threads: config.workerThreads, memoryBytes: Infinity }, config.sloMs)?.variant;
  const laterSweeps = [...new Set([selected, planVariant])].filter((v): v is string => v !== undefined && v !== sweepVariant && profiles.has(v));
  // The sweep places the instances itself: the model autoscaler, left on, replicates, upgrades and
  // downgrades under the sweep's load (a worker would then serve another variant than the one queried).
  const modelAutoscaler = stack.services.find((s) => s.name === "model-autoscaler");
  if (modelAutoscaler) await modelAutoscaler.stop();
  provider = new LocalWorkerProvider({
    natsUrl: stack.nats.url,
    redisUrl: stack.redis.url,
    logLevel: "info",
    bootDelayMs: config.bootDelayMs,
    stopTimeoutMs: 10_000,
    // What the vm-autoscaler's launched workers run with (they inherit its environment: the stack's, the malloc settings, WORKER_THREADS, no metrics port).
    kindEnv: { cpu: { ...MALLOC_ENV, ...serviceEnv, WORKER_THREADS: String(config.workerThreads), METRICS_PORT: "0" } },
    // (the stack's log: a stream every worker pipes into)
    logTo: logFile(stack.logPath),
    clock: systemClock,
    log: createLogger("calibrate", "warn"),
  });

  /** The profiled capacity of the app's instances the workers serve now, queries/s. */
  const capacity = (): number => workers.flatMap(servingOn).reduce((s, x) => s + x.instances * (profiles.get(x.variant)?.peakQps ?? 0), 0);

  /**
   * A contention point from the reports received in (fromMs, toMs] (of the workers serving, but those excluded).
   * Undefined when they saw no profiled busy time or no batch.
   */
  function pointOf(fromMs: number, toMs: number, booting: number, exclude: ReadonlySet<string> = new Set()): ContentionPoint | undefined {
    // (the workers serving, as many whether or not each reported in the window)
    const serving = workers.filter((w) => !exclude.has(w)).length;
    let observed = 0;
    let profiled = 0;
    const ratios: Array<{ ratio: number; batches: number }> = [];
    const demandByWorker = new Map<string, number[]>();
    let samples = 0;
    for (const { atMs, r } of reports) {
      if (atMs <= fromMs || atMs > toMs || exclude.has(r.worker)) continue;
      let demand = 0;
      let used = false;
      for (const v of r.variants) {
        const p = profiles.get(v.variant);
        if (!p || v.profiledUtilisation === undefined) continue;
        const threads = threadsOf.get(v.variant) ?? 1;
        observed += v.utilisation * threads;
        profiled += v.profiledUtilisation * threads;
        demand += v.profiledUtilisation * threads;
        used = true;
        if (v.batches > 0 && v.batchP50Ms > 0) {
          const at = profiledLatencyAt(p.latencyMs as Record<string, number>, Math.max(1, Math.round(v.batchSizeP50)));
          if (at > 0) ratios.push({ ratio: v.batchP50Ms / at, batches: v.batches });
        }
      }
      if (!used) continue;
      samples++;
      (demandByWorker.get(r.worker) ?? demandByWorker.set(r.worker, []).get(r.worker))?.push(demand);
    }
    // The variant-state rule's evidence: reports with ≥ 10 batches (all of them when none has).
    const evidence = ratios.filter((x) => x.batches >= 10);
    const p50Ratio = median((evidence.length > 0 ? evidence : ratios).map((x) => x.ratio));
    if (!(profiled > 0) || p50Ratio === undefined || !(p50Ratio > 0)) return undefined;
    // Σ over the workers of their mean; a worker without a report in the window (a short one: a boot)
    // counts as the mean of those with one (they serve the same variant from the same queue).
    let perWorker = 0;
    for (const ds of demandByWorker.values()) perWorker += ds.reduce((a, b) => a + b, 0) / ds.length;
    const demand = (perWorker / demandByWorker.size) * Math.max(serving, demandByWorker.size);
    return { demand: round(demand, 4), booting, slowdown: round(observed / profiled, 4), p50Ratio: round(p50Ratio, 4), samples, workers: serving, variant: sweepVariant };
  }
  const describe = (p: ContentionPoint): string => `demand ${p.demand.toFixed(2)}, slowdown ${p.slowdown.toFixed(2)}, p50 ratio ${p.p50Ratio.toFixed(2)}, ${p.samples} reports`;

  /** Drives the workers at `share` of their profiled capacity for a step; a point from its reports after SETTLE_MS. */
  async function step(share: number): Promise<void> {
    const qps = share * capacity();
    if (!(qps > 0)) throw new Error(`no instance of ${app} serving on ${workers.join(", ")}`);
    const t0 = Date.now();
    const load = startLoad(sweepVariant, qps);
    await sleep(STEP_MS);
    const t1 = Date.now();
    const counts = await load.stop();
    const p = pointOf(t0 + SETTLE_MS, t1, 0);
    if (p) contention.push(p);
    say(`  ${workers.length} worker(s) at ${(share * 100).toFixed(0)}% (${qps.toFixed(0)} qps): ${p ? describe(p) : "no report with profiled busy time: no point"}; ${describeCounts(counts)}`);
  }

  /** The app's variants a worker's latest report holds (loaded, loading or serving). */
  const heldOn = (worker: string): string[] => (latest.get(worker)?.variants ?? []).filter((v) => profiles.has(v.variant) && (v.instances > 0 || (v.loading ?? 0) > 0)).map((v) => v.variant);
  let commands = 0;
  const sendCommand = async (worker: string, action: ScaleCommand["action"], variant: string): Promise<void> => {
    const cmd: ScaleCommand = { id: `calibrate-${++commands}`, action, variant, reason: "calibration sweep: the sweep's variant alone on every worker", atMs: Date.now() };
    await js.publish(subjects.scaleModel(worker), JSON.stringify(cmd));
  };
  /**
   * Makes a worker serve the sweep's variant and nothing else of the app (`scale.model.<worker>`:
   * unload the others, load it), and waits until its reports say so.
   */
  async function pin(worker: string): Promise<void> {
    const pinned = (): boolean => heldOn(worker).every((v) => v === sweepVariant) && servingOn(worker).some((s) => s.variant === sweepVariant);
    if (pinned()) return;
    for (const v of new Set(heldOn(worker))) if (v !== sweepVariant) await sendCommand(worker, "unload", v);
    if (!servingOn(worker).some((s) => s.variant === sweepVariant)) await sendCommand(worker, "load", sweepVariant);
    await until(`${sweepVariant} alone serving on ${worker}`, pinned, 120_000);
  }

  /**
   * Launches a worker (the local provider: BOOT_DELAY_MS, then the executor process) and waits for its
   * first report; `alone`: its boot time is a sample; `loadShare`: the workers up are driven at that
   * share meanwhile, and their reports from the process's start to its first report are a point with
   * `booting: 1`.
   */
  async function launch(alone: boolean, loadShare?: number): Promise<WorkerInstance> {
    const load = loadShare !== undefined ? startLoad(sweepVariant, loadShare * capacity()) : undefined;
    if (load) await sleep(SETTLE_MS);
    const p = provider;
    if (!p) throw new Error("stopping");
    const instance = await p.launch({ kind: "cpu", instanceType: config.instanceType, reason: "calibration" });
    launched.push(instance);
    await until(`launched worker ${instance.workerId}'s first report`, () => firstSeen.has(instance.workerId), 180_000);
    const first = firstSeen.get(instance.workerId)!;
    if (alone) bootMs.push(first - instance.launchedAtMs);
    if (load && loadShare !== undefined) {
      const counts = await load.stop();
      // From the executor process's start (after the boot delay) to its first report.
      const point = pointOf(instance.launchedAtMs + config.bootDelayMs + 500, first, 1, new Set([instance.workerId]));
      if (point) contention.push(point);
      say(`  ${workers.length} worker(s) at ${(loadShare * 100).toFixed(0)}% with ${instance.workerId} booting (${((first - instance.launchedAtMs) / 1000).toFixed(1)} s): ${point ? describe(point) : "no report with profiled busy time meanwhile: no point"}; ${describeCounts(counts)}`);
    } else {
      say(`  launched ${instance.workerId}: first report after ${((first - instance.launchedAtMs) / 1000).toFixed(1)} s${alone ? "" : " (launched with others: not a boot sample)"}`);
    }
    return instance;
  }

  /**
   * Launches `n` workers at once while the workers up are driven at `loadShare` of their capacity, and
   * waits for their first reports: each boot is a `groupBoots` sample (`together: n`), and the workers
   * up's reports from the processes' start to the first of their first reports a point with `booting: n`.
   */
  async function launchGroup(n: number, loadShare: number): Promise<WorkerInstance[]> {
    const load = startLoad(sweepVariant, loadShare * capacity());
    await sleep(SETTLE_MS);
    const p = provider;
    if (!p) throw new Error("stopping");
    const instances = await Promise.all(Array.from({ length: n }, () => p.launch({ kind: "cpu", instanceType: config.instanceType, reason: "calibration" })));
    launched.push(...instances);
    await until(`${n} workers launched together: their first reports`, () => instances.every((i) => firstSeen.has(i.workerId)), 300_000);
    const counts = await load.stop();
    const boots = instances.map((i) => firstSeen.get(i.workerId)! - i.launchedAtMs);
    for (const ms of boots) groupBoots.push({ together: n, ms: Math.round(ms) });
    const from = Math.min(...instances.map((i) => i.launchedAtMs)) + config.bootDelayMs + 500;
    const to = Math.min(...instances.map((i) => firstSeen.get(i.workerId)!));
    const point = to > from ? pointOf(from, to, n, new Set(instances.map((i) => i.workerId))) : undefined;
    if (point) contention.push(point);
    say(`  ${n} worker(s) launched together, ${workers.length} at ${(loadShare * 100).toFixed(0)}%: first reports after ${boots.map((b) => (b / 1000).toFixed(1)).join(", ")} s; ${point ? describe(point) : "no report with profiled busy time meanwhile: no point"}; ${describeCounts(counts)}`);
    return instances;
  }

  say(`contention: ${sweepVariant} on 1 … ${maxWorkers} worker(s), ${STEP_MS / 1000} s per step at ${RATES.map((r) => `${r * 100}%`).join(", ")} of their profiled capacity`);
  for (const w of workers) await pin(w);
  let bootingSteps = 0;
  for (let k = workers.length; ; ) {
    if (levels.includes(k)) {
      say(`${k} worker(s) serving ${sweepVariant} (capacity ${capacity().toFixed(0)} qps as profiled)`);
      for (const share of RATES) await step(share);
    }
    const target = levels.find((l) => l > k);
    if (target === undefined) break;
    // The first launches alone (boot samples; the first two with the workers up loaded), the rest of a
    // level's at once (with the workers up loaded: as the vm-autoscaler launches under load).
    while (k < target && bootMs.length < MIN_BOOT_SAMPLES) {
      const share = bootingSteps < BOOTING_RATES.length ? BOOTING_RATES[bootingSteps] : undefined;
      if (share !== undefined) bootingSteps++;
      const instance = await launch(true, share);
      workers.push(instance.workerId);
      await pin(instance.workerId);
      k++;
    }
    if (target - k === 1) workers.push((await launch(true)).workerId);
    else if (target > k) for (const instance of await launchGroup(target - k, GROUP_BOOT_SHARE)) workers.push(instance.workerId);
    await Promise.all(workers.map((w) => pin(w)));
    k = workers.length;
  }
  // The other variants, level by level on the way down (launched workers stopped in between).
  for (const v of laterSweeps) {
    sweepVariant = v;
    say(`contention: ${v} on ${workers.length} … 1 worker(s)`);
    for (const level of levels.filter((l) => l <= workers.length).sort((a, b) => b - a)) {
      while (workers.length > level) {
        const instance = launched.pop();
        if (!instance) break;
        await provider.terminate(instance.id, "calibration: fewer workers for the next level");
        workers.splice(workers.indexOf(instance.workerId), 1);
      }
      await Promise.all(workers.map((w) => pin(w)));
      say(`${workers.length} worker(s) serving ${v} (capacity ${capacity().toFixed(0)} qps as profiled)`);
      for (const share of RATES) await step(share);
    }
  }

  // Boot samples still missing (a sweep of fewer than 4 workers): launched alone, then stopped.
  while (bootMs.length < MIN_BOOT_SAMPLES) {
    const share = bootingSteps < BOOTING_RATES.length ? BOOTING_RATES[bootingSteps] : undefined;
    if (share !== undefined) bootingSteps++;
    const instance = await launch(true, share);
    await provider.terminate(instance.id, "calibration: boot sample taken");
  }

  // ---------------------------------------------------------------------------------- the file

  const used = intervals.filter((i) => i > 0 && i < 10_000);
  const period = median(used);
  const mean = used.reduce((a, b) => a + b, 0) / Math.max(1, used.length);
  const jitter = Math.sqrt(used.reduce((a, b) => a + (b - mean) ** 2, 0) / Math.max(1, used.length));
  const memory = median(reports.map((x) => x.r.memoryBytes));
  const calibration: Calibration = {
    version: 1,
    date,
    command,
    host,
    backend: emulated ? "emulated" : "native",
    app,
    variants: calibratedVariants,
    emulation,
    contention,
    bootMs: bootMs.map((b) => Math.round(b)),
    ...(groupBoots.length > 0 ? { groupBoots } : {}),
    functions,
    reports: { periodMs: round(period ?? 1000, 1), jitterMs: round(jitter, 1) },
    workerMemoryBytes: memory ?? 0,
  };
  const parsed = calibrationSchema.safeParse(calibration);
  if (!parsed.success) throw new Error(`the calibration does not pass calibrationSchema, not written: ${describeZodError(parsed.error)}\n${JSON.stringify(calibration).slice(0, 2000)}`);
  mkdirSync(dirname(outFile), { recursive: true });
  writeFileSync(outFile, `${JSON.stringify(parsed.data, null, 1)}\n`);

  const q = (xs: number[], p: number): string => (xs.length > 0 ? quantile(xs, p).toFixed(0) : "-");
  say(`wrote ${outFile} (${((Date.now() - startedAt) / 1000).toFixed(0)} s):`);
  console.log(`  backend ${calibration.backend}, app ${app}, ${calibratedVariants.length} variant(s): ${calibratedVariants.map((v) => `${v.name} b1 ${v.latencyMs["1"] ?? "?"} ms, ${v.peakQps} qps`).join("; ")}`);
  console.log(`  contention (${contention.length} points):`);
  for (const p of contention) console.log(`    workers ${String(p.workers ?? "?").padStart(2)}  demand ${p.demand.toFixed(2).padStart(5)}  booting ${p.booting}  slowdown ${p.slowdown.toFixed(2)}  p50Ratio ${p.p50Ratio.toFixed(2)}  (${p.samples} reports)`);
  console.log(`  boot: ${calibration.bootMs.join(", ")} ms (median ${q(calibration.bootMs, 0.5)})`);
  for (const n of [...new Set(groupBoots.map((g) => g.together))]) console.log(`  boot, ${n} launched together: ${groupBoots.filter((g) => g.together === n).map((g) => g.ms).join(", ")} ms`);
  console.log(`  functions: ${functions.coldStartMs.length} cold (median ${q(functions.coldStartMs, 0.5)} ms), ${functions.warmMs.length} warm (median ${q(functions.warmMs, 0.5)} ms, p99 ${q(functions.warmMs, 0.99)} ms)`);
  console.log(`  reports: every ${calibration.reports.periodMs} ms ± ${calibration.reports.jitterMs} ms (${used.length} intervals); worker memory ${(calibration.workerMemoryBytes / 2 ** 30).toFixed(2)} GiB`);
}

/** The median (libs/policy's), undefined when there is nothing. */
function median(xs: readonly number[]): number | undefined {
  return xs.length > 0 ? policyMedian(xs) : undefined;
}

function round(x: number, digits: number): number {
  return Math.round(x * 10 ** digits) / 10 ** digits;
}
