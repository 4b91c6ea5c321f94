import { mkdirSync, readFileSync, writeFileSync, createWriteStream, existsSync } from "node:fs";
import { join, relative, resolve } from "node:path";
import { parseArgs } from "node:util";
import cliProgress from "cli-progress";
import { connect, headers as natsHeaders, type NatsConnection, type Subscription } from "@nats-io/transport-node";
import { calibrationSchema, contentTypes, costSummarySchema, decodeTensors, describeZodError, encodeTensors, forecastMessageSchema, headers, servingStates, subjects, workerReportSchema, type Calibration, type CostSummary, type VariantState } from "@sloserve/contracts";
import { DEFAULT_MACHINE_PLAN_CONFIG, createRng, workerCapacityForApp, initialSloMonitorState, observeRequest, pricePerSecond, profiledLatencyAt, quantile, reportUtilization, type ScalingPolicy, type VariantProfile } from "@sloserve/policy";
import {
  AUTO_PEAK_WORKERS,
  DEFAULT_TWITTER_TRACE,
  REPLAY_DEFAULTS,
  calibratedProfile,
  REPLAY_PRELUDE,
  fleetCheck,
  predictReplay,
  preludeBurstSize,
  replayPreloadVariant,
  replaySettleQps,
  settleBounds,
  settleMore,
  autoPeakQps,
  parseTrace,
  renderReplaySvg,
  replayArrivals,
  replayConfig,
  replayLaunches,
  replaySchedule,
  replaySeriesRows,
  replayStackEnv,
  runReplaySim,
  staticDollars,
  traceDollars,
  type FleetWait,
  type ReplayConfig,
  type ReplaySideSeries,
  type ReplaySimResult,
  type ReplaySummary,
} from "@sloserve/sim";
import { REPO_ROOT, ocrModels, startStack, type Stack } from "@sloserve/stack";
import { profileOf, registerApp, type Listing } from "./replay-models.js";

/**
 * `npm run replay`: a real trace, time-compressed, through the running stack and through the simulator
 * (libs/sim scenarios/replay.ts) with the same arrivals, policy and settings; writes DIR/replay.json
 * ({live, sim, series}), DIR/replay.svg and the decisions of both sides. docs/ARCHITECTURE.md "Live
 * replay" explains the choices and has the measured table.
 *
 * Without --base it starts its own stack (libs/stack, as `npm start` does) with the compressed
 * settings, registers the app's model and waits for its profile; with --base it drives a stack you
 * started with those settings (the env it prints), over the NATS server given by --nats or found in
 * .run/nats/nats.conf (npm start's).
 */

const USAGE = `usage: npm run replay -- --out DIR --calibration FILE [--emulated] [--policy combined|infaas|mark|static-peak]
       [--trace FILE] [--speedup K] [--start-minute S] [--minutes M] [--peak-qps Q|auto | --peak-workers N]
       [--app APP] [--slo-ms MS] [--min-accuracy A] [--base URL [--nats URL]] [--max-workers N] [--seed N]
       [--function-pool N] [--draws N] [--predict-only] [--consistency] [--no-progress]
       npm run -s replay -- --print-env [--speedup K] [--policy P] [--emulated --calibration FILE]   (the stack's environment, for --base)`;

/** The replay's policies: the vm-autoscaler's SCALING_POLICY, and static-peak: a static fleet sized for the window's peak. */
const REPLAY_POLICIES = ["combined", "infaas", "mark", "static-peak"] as const;

const { values } = parseArgs({
  options: {
    trace: { type: "string", default: DEFAULT_TWITTER_TRACE },
    speedup: { type: "string", default: String(REPLAY_DEFAULTS.speedup) },
    "start-minute": { type: "string", default: String(REPLAY_DEFAULTS.startMinute) },
    minutes: { type: "string", default: String(REPLAY_DEFAULTS.minutes) },
    "peak-qps": { type: "string", default: "auto" },
    app: { type: "string", default: REPLAY_DEFAULTS.app },
    "slo-ms": { type: "string", default: String(REPLAY_DEFAULTS.sloMs) },
    "min-accuracy": { type: "string", default: String(REPLAY_DEFAULTS.minAccuracy) },
    base: { type: "string" },
    nats: { type: "string" },
    out: { type: "string" },
    seed: { type: "string", default: "1" },
    "max-workers": { type: "string" },
    "peak-workers": { type: "string" },
    /** Simulator runs the prediction averages (libs/sim predictReplay `draws`). */
    draws: { type: "string", default: "5" },
    calibration: { type: "string" },
    consistency: { type: "boolean", default: false },
    /** Write the prediction (DIR/prediction.json) and stop: no stack, no live run. */
    "predict-only": { type: "boolean", default: false },
    emulated: { type: "boolean", default: false },
    policy: { type: "string", default: "combined" },
    "request-timeout-ms": { type: "string", default: "30000" },
    "function-pool": { type: "string" },
    "no-progress": { type: "boolean", default: false },
    "print-env": { type: "boolean", default: false },
    help: { type: "boolean", short: "h" },
  },
});
if (values.help || (!values.out && !values["print-env"])) {
  console.log(USAGE);
  process.exit(values.help ? 0 : 2);
}
const problems: string[] = [];
const num = (name: string, v: string | undefined, ok: (n: number) => boolean = Number.isFinite): number => {
  const n = Number(v);
  if (v === undefined || !ok(n)) problems.push(`--${name}: "${v}" is not a valid value`);
  return n;
};
const speedup = num("speedup", values.speedup, (n) => n >= 1);
const startMinute = num("start-minute", values["start-minute"], (n) => Number.isInteger(n) && n >= 0);
const minutes = num("minutes", values.minutes, (n) => Number.isInteger(n) && n >= 1);
const peakGiven = values["peak-qps"] === "auto" ? undefined : num("peak-qps", values["peak-qps"], (n) => n > 0);
const sloMs = num("slo-ms", values["slo-ms"], (n) => n > 0);
const minAccuracy = num("min-accuracy", values["min-accuracy"], (n) => n >= 0 && n <= 1);
const seed = num("seed", values.seed, Number.isInteger);
const peakWorkers = values["peak-workers"] === undefined ? undefined : num("peak-workers", values["peak-workers"], (n) => n > 0);
const draws = num("draws", values.draws, (n) => Number.isInteger(n) && n >= 1 && n <= 50);
if (peakWorkers !== undefined && peakGiven !== undefined) problems.push("--peak-workers and --peak-qps: give one (the peak in workers, or in queries/s)");
const maxWorkers = values["max-workers"] === undefined ? Math.max(4, Math.ceil(peakWorkers ?? 0) + 2) : num("max-workers", values["max-workers"], (n) => Number.isInteger(n) && n >= 1);
const replayPolicy = values.policy as (typeof REPLAY_POLICIES)[number];
if (!REPLAY_POLICIES.includes(replayPolicy)) problems.push(`--policy: "${values.policy}" is not one of ${REPLAY_POLICIES.join(", ")}`);
if (!values.calibration && !values.consistency && !values["print-env"]) problems.push("--calibration FILE: the prediction is made from a calibration (npm run calibrate -- --out FILE; --emulated: npm run calibrate -- --emulated --from NATIVE.json --out FILE), or give --consistency for the simulator fed this run's own measurements");
if (values.emulated && !values.calibration) problems.push("--emulated: give --calibration FILE (an emulated calibration: the workers serve its batch times)");
const requestTimeoutMs = num("request-timeout-ms", values["request-timeout-ms"], (n) => n > 0);
/**
 * The local function pool's size (default 4, the replay's). Emulated containers still are processes on
 * this host (each a Node process, ~1 s of CPU to start): 48 of them, tried as Lambda's stand-ins beside
 * an 8-worker emulated fleet, overloaded its two cores (cold starts of 27 s, 55.6% within the SLO).
 */
const functionPoolSize = values["function-pool"] !== undefined ? num("function-pool", values["function-pool"], (n) => Number.isInteger(n) && n >= 1) : undefined;
if (problems.length > 0) {
  console.error(`${problems.join("\n")}\n${USAGE}`);
  process.exit(2);
}
const app = values.app;
/** Paths given on the command line are relative to where `npm run` was typed (npm runs scripts from the repository root). */
const userDir = process.env.INIT_CWD ?? process.cwd();
/** The frozen calibration the prediction reads (and the emulated workers serve), checked before anything starts. */
const calibrationPath = values.calibration ? resolve(userDir, values.calibration) : undefined;
const calibration: Calibration | undefined = calibrationPath ? readCalibration(calibrationPath) : undefined;
/** A path as the reports record it: relative to the repository when inside it. */
const shown = (path: string | undefined): string | undefined => (path === undefined ? undefined : relative(REPO_ROOT, path).startsWith("..") ? path : relative(REPO_ROOT, path));
function readCalibration(path: string): Calibration {
  const parsed = calibrationSchema.safeParse(JSON.parse(readFileSync(path, "utf8")));
  if (!parsed.success) {
    console.error(`--calibration ${path}: ${describeZodError(parsed.error)}`);
    process.exit(2);
  }
  const c = parsed.data;
  const wanted = values.emulated ? "emulated" : "native";
  if (c.backend !== wanted) {
    console.error(`--calibration ${path}: it measured ${c.backend} workers, and this run has ${wanted} ones${values.emulated ? "" : " (add --emulated, or calibrate without it)"}`);
    process.exit(2);
  }
  if (c.app !== app) {
    console.error(`--calibration ${path}: it calibrated app ${c.app}, not ${app}`);
    process.exit(2);
  }
  return c;
}
const policy: ScalingPolicy = replayPolicy === "static-peak" ? "static" : replayPolicy;
const baseConfig = replayConfig({ speedup, app, sloMs, minAccuracy, maxWorkers, policy, ...(functionPoolSize !== undefined ? { functionPoolSize } : {}) });
/** The calibration's variants as the decision code reads them; the peak and the static fleet are sized on the one selection serves. */
const calibratedVariants = calibration?.variants.map(calibratedProfile) ?? [];
const servedCalibrated = calibration ? replayPreloadVariant(calibratedVariants, baseConfig) : undefined;
/**
 * The peak from the calibration (known before the stack starts: both sides get the same arrivals); else, as before, from the live profiles.
 * `--peak-workers N` counts workers as the vm-autoscaler's plan does (the app's variant with the most
 * throughput per worker, the one the model autoscaler upgrades to under load); the default peak is
 * 1.5 × what one worker serves with the variant the warm-up loads (what two cores can take natively).
 */
const peakFromCalibration = peakGiven ?? (servedCalibrated ? autoPeakQps(peakWorkers !== undefined ? calibratedVariants : [servedCalibrated], baseConfig, peakWorkers ?? AUTO_PEAK_WORKERS) : undefined);
if (calibration && peakFromCalibration === undefined) {
  console.error(`--calibration: no calibrated variant of ${app} meets the SLO of ${sloMs} ms`);
  process.exit(2);
}
/** static-peak: as many static workers as the peak needs at the plan's target utilisation. */
const staticPeakWorkers = (): number => {
  const one = servedCalibrated ? autoPeakQps([servedCalibrated], baseConfig, 1) : undefined;
  if (peakWorkers !== undefined) return Math.ceil(peakWorkers);
  if (!one || peakFromCalibration === undefined) throw new Error("--policy static-peak: needs --calibration (to size the fleet for the peak)");
  return Math.ceil(peakFromCalibration / one);
};
const staticWorkers = replayPolicy === "static-peak" ? staticPeakWorkers() : undefined;
const config = replayConfig({ speedup, app, sloMs, minAccuracy, maxWorkers: Math.max(maxWorkers, staticWorkers ?? 0), policy, ...(staticWorkers !== undefined ? { staticWorkers } : {}), ...(functionPoolSize !== undefined ? { functionPoolSize } : {}) });
const env = replayStackEnv(config);
// The profiler records the calibration's timings (libs/executor profiler.ts): live decisions and the prediction read one profile.
if (calibrationPath) Object.assign(env.all, { PROFILE_CALIBRATION: calibrationPath });
if (values.emulated && calibrationPath) {
  // Every worker serves the calibration's batch times: the stack's own and those the vm-autoscaler
  // launches; so do the local function containers (functions stand for Lambda's, off this host).
  Object.assign(env.all, { BACKEND: "emulated", FUNCTION_BACKEND: "emulated", EMULATED_CALIBRATION: calibrationPath });
  Object.assign(env.vmAutoscaler, { LOCAL_WORKER_BACKEND: "emulated" });
}
if (values["print-env"]) {
  // For --base: the environment to start the stack with (`env $(npm run -s replay -- --print-env) npm start -- --workers 1 --max-workers 4`).
  console.log(Object.entries({ ...env.all, ...env.vmAutoscaler, WORKER_THREADS: "1", VARIANT_HARDWARE: "cpu", VARIANT_BATCH_SIZES: "1", VARIANT_CPU_THREADS: "1" }).map(([k, v]) => `${k}=${v}`).join(" "));
  process.exit(0);
}
const outDir = resolve(userDir, values.out ?? ".");
mkdirSync(outDir, { recursive: true });
const say = (line: string): void => console.log(`[replay] ${line}`);

const trace = parseTrace(readFileSync(values.trace === DEFAULT_TWITTER_TRACE ? resolve(REPO_ROOT, values.trace) : resolve(userDir, values.trace), "utf8"));
// Checked before anything starts (without a calibration, the peak is known once the app is profiled).
replaySchedule(trace, { startMinute, minutes, peakQps: peakFromCalibration ?? 1 }, speedup);

// ------------------------------------------------------------------------------------ the prediction

/**
 * The simulator's prediction, made before the stack starts from the calibration, the trace, the seed
 * and the settings alone (libs/sim `predictReplay`), and written at once (DIR/prediction.json).
 */
const predicted = calibration && peakFromCalibration !== undefined ? predictFirst(calibration, peakFromCalibration) : undefined;
function predictFirst(c: Calibration, peak: number): { result: ReturnType<typeof predictReplay>; arrivals: number[]; schedule: ReturnType<typeof replaySchedule> } {
  const schedule = replaySchedule(trace, { startMinute, minutes, peakQps: peak }, speedup);
  const arrivals = replayArrivals(schedule, seed);
  const result = predictReplay({ calibration: c, config, arrivalsMs: arrivals, durationMs: schedule.durationMs, seed, settleQps: replaySettleQps(schedule), draws });
  writeFileSync(
    join(outDir, "prediction.json"),
    JSON.stringify({ command: `npm run replay -- ${process.argv.slice(2).join(" ")}`, date: new Date().toISOString(), calibration: { path: shown(calibrationPath), date: c.date, backend: c.backend }, policy: replayPolicy, peak_qps: peak, window_start: predictedStart(result.prelude), prediction: predictionOf(result.summary), draws: result.draws, launches: result.launches }, null, 1),
  );
  say(`predicted from ${calibrationPath} (${c.backend} workers, calibrated ${c.date}), the mean of ${result.draws.length} run(s): ${fmtPrediction(predictionOf(result.summary))}${result.draws.length > 1 ? `; cost $${Math.min(...result.draws.map((d) => d.cost_dollars)).toFixed(3)}-${Math.max(...result.draws.map((d) => d.cost_dollars)).toFixed(3)} over the runs` : ""}`);
  return { result, arrivals, schedule };
}

if (values["predict-only"]) {
  if (!predicted) {
    console.error("--predict-only: give --calibration FILE (the prediction is made from it)");
    process.exit(2);
  }
  say(`prediction written to ${shown(join(outDir, "prediction.json"))}; --predict-only: no live run`);
  process.exit(0);
}

// ------------------------------------------------------------------------------------ the stack

let stack: Stack | undefined;
let baseUrl = values.base ?? "";
let natsUrl = values.nats ?? "";
const stopStack = async (): Promise<void> => {
  const s = stack;
  stack = undefined;
  if (s) await s.stop();
};
process.on("SIGINT", () => void stopStack().finally(() => process.exit(130)));

if (!values.base) {
  say(`starting the stack (logs: ${join(outDir, "stack", "logs", "stack.log")}) with the settings compressed ${speedup}×: ${JSON.stringify({ ...env.all, ...env.vmAutoscaler })}`);
  stack = await startStack({
    dir: join(outDir, "stack"),
    cpuWorkers: config.staticWorkers,
    workerThreads: config.workerThreads,
    maxWorkers: config.maxWorkers,
    logLevel: "info", // (the services announce "ready" at info level; their logs go to the file)
    env: { ...env.all, VARIANT_HARDWARE: "cpu", VARIANT_BATCH_SIZES: "1", VARIANT_CPU_THREADS: String(config.workerThreads) },
    vmAutoscalerEnv: env.vmAutoscaler,
  });
  baseUrl = stack.httpUrl;
  natsUrl = stack.nats.url;
  await registerApp(baseUrl, app, join(outDir, "models"), say);
} else {
  if (!natsUrl) {
    const conf = join(REPO_ROOT, ".run", "nats", "nats.conf");
    const listen = existsSync(conf) ? /listen:\s*"([^"]+)"/.exec(readFileSync(conf, "utf8"))?.[1] : undefined;
    if (!listen) throw new Error(`--base ${baseUrl}: give --nats URL (no ${conf} to read npm start's NATS address from)`);
    natsUrl = `nats://${listen}`;
  }
  say(`driving ${baseUrl} (NATS ${natsUrl}); it must run with these settings for the simulator to match: ${JSON.stringify({ ...env.all, ...env.vmAutoscaler })}`);
}

// ------------------------------------------------------------------------------------ the app

const listing = (await (await fetch(`${baseUrl}/v1/apps/${app}/models`)).json()) as Listing;
if (!Array.isArray(listing.models) || listing.models.length === 0) throw new Error(`GET /v1/apps/${app}/models: no model in app ${app}: ${JSON.stringify(listing).slice(0, 300)}`);
const variants = listing.models.flatMap((m) => m.variants.map((v) => profileOf(m, v)).filter((p): p is VariantProfile => p !== undefined && p.hardware === "cpu"));
/** Each variant's threads, as the vm-autoscaler weighs a report's busy shares (libs/policy reportUtilization). */
const threadsByVariant = new Map(listing.models.flatMap((m) => m.variants.map((v) => [String(v.name), { threads: Number(v.threads) }] as const)));
if (variants.length === 0) throw new Error(`app ${app} has no profiled CPU variant yet`);
const input = listing.models[0]!.inputs[0]!;
const bundledShape = ocrModels().find((m) => m.app === app)?.profileShape?.[input.name];
const shape = input.shape.map((d, i) => (i === 0 ? 1 : d > 0 ? d : (bundledShape?.[i - 1] ?? 0)));
if (shape.some((d) => d <= 0)) throw new Error(`input ${input.name} of ${app} has dynamic dimensions ${JSON.stringify(input.shape)}: the replay does not know what size to send`);
const count = shape.reduce((a, b) => a * b, 1);
const rng = createRng(seed + 1);
const payload = encodeTensors([{ name: input.name, datatype: "FP32", shape, data: Float32Array.from({ length: count }, () => rng.next()) }]);
say(`app ${app}: ${variants.length} profiled CPU variant(s): ${variants.map((v) => `${v.name} (${v.peakQps.toFixed(0)} qps, b1 ${v.latencyMs[1]?.toFixed(1) ?? "?"} ms)`).join(", ")}; query ${shape.join("×")} FP32 (${payload.length} bytes), SLO ${sloMs} ms, accuracy ≥ ${minAccuracy}`);

// ------------------------------------------------------------------------------------ the bus

const nc: NatsConnection = await connect({ servers: natsUrl, name: "replay" });
const workerSeen = new Map<string, { first: number; last: number }>();
/**
 * The app's variants' busy time as observed and as profiled (Σ batch run times / window, and the same at
 * each batch's profiled time), one per worker report with ≥ 10 batches (the variant-state rule's
 * evidence), with the second of the window. Their ratio of sums is how much slower than profiled the
 * workers ran: what their utilisation saw (a median batch time would not be: batch times skew to the
 * right, and the busy share sums them). `p50Ratio`, the median batch over its profile, is what the
 * interference rule and the overflow estimate saw.
 */
const slowdowns: Array<{ s: number; observed: number; profiled: number; p50Ratio?: number }> = [];
let measuring = false;
/**
 * When the stack's own worker reported during the window (ms of the window, as received here, within a
 * millisecond of the vm-autoscaler): the simulator's VM tick reads the mean of the reports since its
 * last tick at the same times (its reports' phase decides bursts read at the 80% threshold).
 */
const reportTimes: number[] = [];
let reportingWorker: string | undefined;
/**
 * Each worker's reports up to the window's start (when received, and their utilisation as the
 * vm-autoscaler reads it): the mean of the stack's worker's reports in the tick before the window is
 * what the live vm-autoscaler read at the window's first tick, given to the simulator's.
 */
const beforeStart: Array<{ worker: string; atMs: number; utilization: number }> = [];
/** The window's start, once chosen. */
let startAtMs: number | undefined;
/** The memory the stack's worker offers its variants (its reports' `memoryBytes`; the launched ones run with the same default). */
let workerMemoryBytes: number | undefined;
let lastForecast: number | undefined;
let lastCost: CostSummary | undefined;
/** When the vm-autoscaler decided to terminate each worker (EC2 stops billing at the request; the local provider's ledger bills the drain too). */
const terminateAsked = new Map<string, number>();
/** The vm-autoscaler's launch decisions (for the launch-by-launch account). */
const launchDecisions: Array<{ atMs: number; kind: string; reason: string }> = [];
/** When the vm-autoscaler last ticked (its decisions carry the tick's time; a plan is published every tick while forecasts come). */
let vmTickAtMs: number | undefined;
const decisionsLog = createWriteStream(join(outDir, "decisions-live.jsonl"));
const parseErrors = { count: 0 };
const onBad = (what: string, err: unknown): void => {
  if (parseErrors.count++ < 5) console.error(`[replay] ignoring a malformed ${what}: ${(err as Error).message}`);
};
const subs: Subscription[] = [
  nc.subscribe(subjects.workerMetricsAll, {
    callback: (_e, m) => {
      try {
        const r = workerReportSchema.parse(m.json());
        const now = Date.now();
        if (r.leaving) {
          // (it is up no more; when it was first seen stays: its boot time)
          const gone = workerSeen.get(r.worker);
          if (gone) gone.last = -Infinity;
          return;
        }
        const w = workerSeen.get(r.worker);
        if (w) w.last = now;
        else workerSeen.set(r.worker, { first: now, last: now });
        if (startAtMs === undefined || now <= startAtMs) {
          beforeStart.push({ worker: r.worker, atMs: now, utilization: reportUtilization(r, threadsByVariant) });
          while ((beforeStart[0]?.atMs ?? now) < now - 10_000) beforeStart.shift();
        }
        if (!measuring) return;
        if (r.worker === reportingWorker && now >= t0) reportTimes.push(now - t0);
        if (r.worker === reportingWorker) workerMemoryBytes = r.memoryBytes;
        for (const v of r.variants) {
          const p = variants.find((x) => x.name === v.variant);
          if (!p || v.batches < 10 || v.batchP50Ms <= 0) continue;
          const s = Math.floor((now - t0) / 1000);
          if (v.profiledUtilisation !== undefined) {
            // (and the median batch over its profile, what the variant-state rule and the overflow estimate read)
            const at = profiledLatencyAt(p.latencyMs as Record<string, number>, Math.max(1, Math.round(v.batchSizeP50)));
            if (v.profiledUtilisation > 0) slowdowns.push({ s, observed: v.utilisation, profiled: v.profiledUtilisation, ...(at > 0 ? { p50Ratio: v.batchP50Ms / at } : {}) });
            continue;
          }
          // An executor without the profiled share (an older one): its median batch against the profile.
          const profiled = profiledLatencyAt(p.latencyMs as Record<string, number>, Math.max(1, Math.round(v.batchSizeP50)));
          if (profiled > 0) slowdowns.push({ s, observed: v.batchP50Ms, profiled });
        }
      } catch (err) {
        onBad("worker report", err);
      }
    },
  }),
  nc.subscribe(subjects.forecast(app), {
    callback: (_e, m) => {
      try {
        lastForecast = forecastMessageSchema.parse(m.json()).values[0];
      } catch (err) {
        onBad("forecast", err);
      }
    },
  }),
  nc.subscribe(subjects.costSummary, {
    callback: (_e, m) => {
      try {
        lastCost = costSummarySchema.parse(m.json());
      } catch (err) {
        onBad("cost summary", err);
      }
    },
  }),
  nc.subscribe(subjects.decisionsAll, {
    callback: (_e, m) => {
      const d = m.json<Record<string, unknown>>();
      decisionsLog.write(`${JSON.stringify({ subject: m.subject, ...d })}\n`);
      if (m.subject.startsWith("decision.vm.") && d.action === "terminate" && typeof d.worker === "string" && typeof d.atMs === "number" && !terminateAsked.has(d.worker)) terminateAsked.set(d.worker, d.atMs);
      if (m.subject.startsWith("decision.vm.") && d.action === "launch" && typeof d.atMs === "number") launchDecisions.push({ atMs: d.atMs, kind: String(d.kind), reason: String(d.reason) });
      if (m.subject.startsWith("decision.vm.") && d.action === "plan" && typeof d.atMs === "number") vmTickAtMs = Math.max(vmTickAtMs ?? 0, d.atMs);
    },
  }),
];

// ------------------------------------------------------------------------------------ queries

interface Outcome {
  /** When it was due, ms from the window's start (its arrival time). */
  dueMs: number;
  sentMs: number;
  doneMs: number;
  ok: boolean;
  code: string;
  fn: boolean;
  cold: boolean;
  fnMs: number;
  fnDollars: number;
}
const outcomes: Outcome[] = [];
/**
 * The SLO monitor's memory of the queries before the window (warm-ups, settling), as the replay sees
 * them: libs/policy `observeRequest` over each outcome in the order they come back, with the monitor's
 * decay; the vm-autoscaler's counts the executors' late answers and errors, the same queries.
 */
let warmMemory = initialSloMonitorState;
let inFlight = 0;
/**
 * The client's own limit on queries in flight (beyond it a query is recorded failed, `client_backlog`,
 * unsent): a guard for this process's memory, far above what a stack that keeps up holds (the peak
 * rate × the SLO), so that at a fleet's peak rates the client does not fail queries the stack would
 * still answer, which the simulator, whose callers have no such limit, cannot predict.
 */
const MAX_IN_FLIGHT = 20_000;

/** Sends one model-less query over NATS (binary tensors, the SLO in headers); its outcome is recorded whatever happens. */
function send(dueMs = 0): Promise<void> {
  const sentMs = Date.now();
  const record = (o: Omit<Outcome, "dueMs" | "sentMs" | "doneMs">): void => {
    const doneMs = Date.now();
    outcomes.push({ dueMs, sentMs, doneMs, ...o });
    if (!measuring) warmMemory = observeRequest(warmMemory, !o.ok || doneMs - sentMs > sloMs);
  };
  if (inFlight >= MAX_IN_FLIGHT) {
    record({ ok: false, code: "client_backlog", fn: false, cold: false, fnMs: 0, fnDollars: 0 });
    return Promise.resolve();
  }
  const h = natsHeaders();
  h.set(headers.contentType, contentTypes.wire);
  h.set(headers.sloLatencyMs, String(sloMs));
  h.set(headers.sloMinAccuracy, String(minAccuracy));
  inFlight++;
  return nc
    .request(subjects.inferApp(app), payload, { timeout: requestTimeoutMs, headers: h })
    .then((reply) => {
      const code = reply.headers?.get(headers.error) ?? "";
      if (code !== "") return record({ ok: false, code, fn: false, cold: false, fnMs: 0, fnDollars: 0 });
      const meta = decodeTensors<{ served_by?: { hardware?: string; cold_start?: boolean }; timing_ms?: { inference?: number }; cost_dollars?: number }>(reply.data).meta;
      const fn = meta.served_by?.hardware === "function";
      record({ ok: true, code: "", fn, cold: fn && meta.served_by?.cold_start === true, fnMs: fn ? (meta.timing_ms?.inference ?? 0) : 0, fnDollars: fn ? (meta.cost_dollars ?? 0) : 0 });
    })
    .catch((err: unknown) => {
      const e = err as { code?: string; name?: string; message?: string };
      record({ ok: false, code: /timeout/i.test(`${e.name ?? ""} ${e.message ?? ""}`) ? "timeout" : /no responders/i.test(e.message ?? "") ? "no_responders" : `client_error: ${e.message ?? String(err)}`, fn: false, cold: false, fnMs: 0, fnDollars: 0 });
    })
    .finally(() => void inFlight--);
}

// Warm-up: the first queries load the variant on the stack's worker; the replay starts once 20 in a row are answered.
say("warming up (the first queries load the variant)...");
{
  const deadline = Date.now() + 120_000;
  let streak = 0;
  while (streak < REPLAY_PRELUDE.warmupStreak) {
    if (Date.now() > deadline) throw new Error("warm-up: 20 queries in a row were not answered within 120 s");
    const before = outcomes.length;
    await send();
    streak = outcomes[before]?.ok ? streak + 1 : 0;
    await new Promise((r) => setTimeout(r, REPLAY_PRELUDE.warmupGapMs));
  }
  outcomes.length = 0;
}
const status = (await (await fetch(`${baseUrl}/v1/status`)).json()) as { instances: Array<{ variant: string; worker: string; state: string }> };
const preload = new Map<string, number>();
for (const i of status.instances) if (variants.some((v) => v.name === i.variant) && i.state === "active") preload.set(i.variant, (preload.get(i.variant) ?? 0) + 1);
say(`warm: ${[...preload].map(([v, n]) => `${v} ×${n}`).join(", ") || "nothing active"}`);
// The peak: given, or 1.5 × 80% of what one worker serves with the variant the warm-up loaded.
const served = variants.filter((v) => preload.has(v.name));
// With a calibration, the peak and the arrivals are the prediction's (made before the stack started).
const peakQps = peakFromCalibration ?? peakGiven ?? autoPeakQps(served.length > 0 ? served : variants, config);
if (peakQps === undefined) throw new Error(`--peak-qps auto: no profiled CPU variant of ${app} meets the SLO of ${sloMs} ms`);
const schedule = predicted?.schedule ?? replaySchedule(trace, { startMinute, minutes, peakQps }, speedup);
const arrivals = predicted?.arrivals ?? replayArrivals(schedule, seed);
const peakHow =
  peakGiven !== undefined
    ? ""
    : servedCalibrated
      ? ` (${peakWorkers ?? AUTO_PEAK_WORKERS} × 80% of what one worker serves with ${(peakWorkers !== undefined ? workerCapacityForApp(calibratedVariants, app, "cpu", { threads: config.workerThreads, memoryBytes: Infinity }, sloMs)?.variant : undefined) ?? servedCalibrated.name}, as calibrated)`
      : ` (auto: ${AUTO_PEAK_WORKERS} × 80% of what one worker serves with ${served[0]?.name ?? "the app's best variant"})`;
say(`${values.trace}: minutes ${startMinute} … ${startMinute + minutes - 1} (${schedule.gapMinutes} gap minutes filled), peak ${peakQps} qps${peakHow}, ${speedup}× → ${(schedule.durationMs / 60_000).toFixed(2)} min, ${arrivals.length} queries`);

// Then the function path: a burst the worker cannot take within the SLO, so the dispatcher's own rule sends
// the excess to functions and the pool's containers start now, as they would have in the hours before a
// day of a running system, not in the measured window (the simulator's pool starts as warm).
const burstSize = preludeBurstSize(variants, sloMs);
say(`warming the function pool: a burst of ${burstSize} queries...`);
await Promise.all(Array.from({ length: burstSize }, () => send()));
const burstFn = outcomes.filter((o) => o.fn);
const functionsWarm = Math.min(config.functionPoolSize, burstFn.filter((o) => o.cold).length);
const warmupColdMs = burstFn.filter((o) => o.cold).map((o) => o.fnMs);
outcomes.length = 0;
/** Waits (90 s at most) until only the stack's own workers have reported for 5 s: the warm-ups may have launched some. */
async function fleetBack(): Promise<number> {
  const up = (): number => [...workerSeen.values()].filter((w) => Date.now() - w.last <= 1500).length;
  for (let wait: FleetWait = { checks: 0, quiet: 0 }, back = false; !back; ) {
    await new Promise((r) => setTimeout(r, 1000));
    ({ back, ...wait } = fleetCheck(wait, up(), config.staticWorkers));
  }
  return up();
}
say(`${functionsWarm} function container(s) warm (${burstFn.length} of the burst went to functions)`);
// Settle: the warm-ups' late answers (the variant's first load, the burst) are in the SLO monitor's
// memory (~1000 queries, libs/policy slo-monitor.ts); carried into the window they would make it launch
// on misses that the simulator, which starts with an empty memory, never had. Queries at the first
// minute's rate (at least 50/s): 3000 (0.999^3000 ≈ 5% of what it remembered), then more, 1000 at a
// time, while its miss fraction is still above a tenth of its threshold (1 − SLmin), 12 000 at most;
// never more than the window's own queries (a short check is not held up by it).
const settle = settleBounds(arrivals.length);
const settleMissBound = REPLAY_PRELUDE.settleMissShare * (1 - DEFAULT_MACHINE_PLAN_CONFIG.slMin);
let settled = 0;
{
  const rate = replaySettleQps(schedule);
  say(`settling: at least ${settle.min} queries at ${rate.toFixed(0)}/s, until the SLO monitor's miss fraction is under ${(settleMissBound * 100).toFixed(2)}% (now ${(warmMemory.missFraction * 100).toFixed(2)}%)...`);
  /** Sends n queries at the rate from now on, and waits for their answers. */
  const settleSome = async (n: number): Promise<void> => {
    const sends: Array<Promise<void>> = [];
    const started = Date.now();
    for (let i = 0; i < n; i++) {
      const due = started + (i * 1000) / rate;
      if (due > Date.now()) await new Promise((r) => setTimeout(r, due - Date.now()));
      sends.push(send());
    }
    settled += n;
    await Promise.all(sends);
  };
  await settleSome(settle.min);
  for (let more = settleMore(settled, warmMemory.missFraction, settle); more > 0; more = settleMore(settled, warmMemory.missFraction, settle)) await settleSome(more);
  outcomes.length = 0;
  say(`settled after ${settled} queries: the SLO monitor's miss fraction ${(warmMemory.missFraction * 100).toFixed(2)}%${warmMemory.missFraction > settleMissBound ? ` (still above ${(settleMissBound * 100).toFixed(2)}% after ${settle.max}: the window starts with it)` : ""}; fleet at ${await fleetBack()} worker(s)`);
}
// What the stack's worker runs now (after the warm-ups): the simulator starts from it.
// (Interfered and Overloaded instances serve too: they are loaded; the states at the start are reported.)
const statusAfter = (await (await fetch(`${baseUrl}/v1/status`)).json()) as { instances: Array<{ variant: string; worker: string; state: string }> };
preload.clear();
const startStates: Record<string, string> = {};
for (const i of statusAfter.instances) {
  if (!variants.some((v) => v.name === i.variant)) continue;
  startStates[`${i.variant}@${i.worker}`] = i.state;
  if (servingStates.has(i.state as VariantState)) preload.set(i.variant, (preload.get(i.variant) ?? 0) + 1);
}
const windowStart = { settle_queries: settled, slo_miss_fraction: warmMemory.missFraction, workers: [...workerSeen.values()].filter((w) => Date.now() - w.last <= 1500).length, instance_states: startStates };
say(`starting the window from ${Object.entries(startStates).map(([k, st]) => `${k} ${st}`).join(", ") || "nothing loaded"}`);

// The replay: open loop, each query at its arrival time.
const seconds = Math.ceil(schedule.durationMs / 1000);
const liveWorkers: number[] = [];
const liveForecast: number[] = [];
const bar = values["no-progress"]
  ? undefined
  : new cliProgress.SingleBar({ format: "[replay] {bar} {percentage}% | trace minute {minute} | {value}/{total} queries | answered {answered} failed {failed} | in flight {inflight} | workers {workers}", hideCursor: true, noTTYOutput: false }, cliProgress.Presets.shades_classic);
// The window starts on a tick of the live vm-autoscaler (both tick every vmTickMs, from when each
// starts): its ticks then fall at the same seconds of the window as the simulator's (vmTickMs, 2·vmTickMs,
// …), and a burst of a second or two is measured over the same interval on both sides; started at
// another phase, one side's 2 s utilisation window could straddle a burst the other's holds whole.
const earliest = Date.now() + 200;
const t0 = vmTickAtMs === undefined ? earliest : vmTickAtMs + Math.ceil((earliest - vmTickAtMs) / config.vmTickMs) * config.vmTickMs;
startAtMs = t0;
if (vmTickAtMs === undefined) say("warning: no vm-autoscaler tick seen (no plan decision): the window starts at any phase of its ticks");
// The stack's own worker (the first, when there are several: the simulator's machines report on one clock).
reportingWorker = Object.keys(startStates).map((k) => k.slice(k.indexOf("@") + 1)).sort()[0] ?? [...workerSeen.keys()].sort()[0];
measuring = true;
bar?.start(arrivals.length, 0, { minute: startMinute, answered: 0, failed: 0, inflight: 0, workers: 0 });
const workersUp = (now: number): number => [...workerSeen.values()].filter((w) => now - w.last <= 1500).length;
const sampler = setInterval(() => {
  const now = Date.now();
  if (now < t0) return;
  liveWorkers.push(workersUp(now));
  liveForecast.push(lastForecast ?? NaN);
}, 1000);
const progress = setInterval(() => {
  const answered = outcomes.filter((o) => o.ok).length;
  bar?.update(sentCount, { minute: startMinute + Math.floor(((Date.now() - t0) * speedup) / 60_000), answered, failed: outcomes.length - answered, inflight: inFlight, workers: workersUp(Date.now()) });
}, 500);
let sentCount = 0;
const pending = new Set<Promise<void>>();
await new Promise<void>((done) => {
  const pump = (): void => {
    const elapsed = Date.now() - t0;
    while (sentCount < arrivals.length && (arrivals[sentCount] ?? Infinity) <= elapsed) {
      const p = send(arrivals[sentCount]);
      sentCount++;
      pending.add(p);
      void p.finally(() => pending.delete(p));
    }
    if (sentCount >= arrivals.length) return done();
    setTimeout(pump, Math.max(0, (arrivals[sentCount] ?? 0) - (Date.now() - t0)));
  };
  setTimeout(pump, Math.max(0, t0 - Date.now()));
});
// Until the window's end, then every answer (each query has its timeout).
await new Promise((r) => setTimeout(r, Math.max(0, t0 + schedule.durationMs - Date.now())));
clearInterval(sampler);
measuring = false;
const windowEnd = t0 + schedule.durationMs;
await Promise.all([...pending]);
clearInterval(progress);
bar?.update(sentCount, { answered: outcomes.filter((o) => o.ok).length, failed: outcomes.filter((o) => !o.ok).length, inflight: 0 });
bar?.stop();
// The vm-autoscaler's ledger as of the window's end (it publishes every second here).
{
  const deadline = Date.now() + 15_000;
  while ((lastCost?.atMs ?? 0) < windowEnd && Date.now() < deadline) await new Promise((r) => setTimeout(r, 250));
  if ((lastCost?.atMs ?? 0) < windowEnd) say("warning: no cost summary from after the window's end within 15 s; using the last one");
}

// ------------------------------------------------------------------------------------ live figures

const median = (xs: number[]): number | undefined => (xs.length > 0 ? quantile(xs, 0.5) : undefined);
const mean = (xs: number[]): number | undefined => (xs.length > 0 ? xs.reduce((a, b) => a + b, 0) / xs.length : undefined);
/** Σ observed / Σ profiled of some busy-time samples (undefined: none, or nothing profiled). */
const ratioOfSums = (xs: ReadonlyArray<{ observed: number; profiled: number }>): number | undefined => {
  let observed = 0;
  let profiled = 0;
  for (const x of xs) {
    observed += x.observed;
    profiled += x.profiled;
  }
  return profiled > 0 ? observed / profiled : undefined;
};
const inWindow = (lastCost?.instances ?? []).filter((i) => i.launchedAtMs <= windowEnd && (i.endedAtMs ?? Infinity) >= t0);
const bootTimes = inWindow.flatMap((i) => {
  const seen = workerSeen.get(i.worker);
  return seen && seen.first >= i.launchedAtMs ? [seen.first - i.launchedAtMs] : [];
});
const answered = outcomes.filter((o) => o.ok);
const fnAnswers = answered.filter((o) => o.fn);
const liveFunctionDollars = fnAnswers.reduce((s, o) => s + o.fnDollars, 0);
// Billed as EC2 bills (and as the simulator does): until the termination was asked for, not until the
// executor process has drained and exited, which the local provider's ledger counts.
const billedLive = inWindow.map((i) => {
  const asked = terminateAsked.get(i.worker);
  return { ...i, endedAtMs: asked !== undefined && asked >= i.launchedAtMs ? Math.min(asked, i.endedAtMs ?? Infinity) : i.endedAtMs };
});
const liveMachineDollars = traceDollars(billedLive, speedup, t0, windowEnd);
const liveLaunches = replayLaunches(billedLive, launchDecisions, speedup, t0, windowEnd);
const ledgerMachineDollars = traceDollars(inWindow, speedup, t0, windowEnd);
const failedByCode: Record<string, number> = {};
for (const o of outcomes) if (!o.ok) failedByCode[o.code] = (failedByCode[o.code] ?? 0) + 1;
const live: ReplaySummary = {
  queries: sentCount,
  answered: answered.length,
  failed: outcomes.length - answered.length,
  slo_attainment: sentCount > 0 ? answered.filter((o) => o.doneMs - o.sentMs <= sloMs).length / sentCount : 1,
  p99_ms: answered.length > 0 ? quantile(answered.map((o) => o.doneMs - o.sentMs), 0.99) : NaN,
  cost_dollars: liveMachineDollars + liveFunctionDollars,
  machine_dollars: liveMachineDollars,
  function_dollars: liveFunctionDollars,
  static_dollars: staticDollars(config, schedule.durationMs),
  overflow_share: sentCount > 0 ? fnAnswers.length / sentCount : 0,
  workers_max: Math.max(0, ...liveWorkers),
  launches: inWindow.filter((i) => i.launchedAtMs >= t0).length,
  failed_by_code: failedByCode,
};
const liveReport = { ...live, machine_dollars_until_exit: ledgerMachineDollars };
const perSecond = (pick: (o: Outcome) => boolean, at: (o: Outcome) => number): number[] => {
  const a = new Array<number>(seconds).fill(0);
  for (const o of outcomes) {
    if (!pick(o)) continue;
    const s = Math.min(seconds - 1, Math.max(0, Math.floor(at(o) / 1000)));
    a[s]! += 1;
  }
  return a;
};
const liveSeries: ReplaySideSeries = {
  load: perSecond(() => true, (o) => o.dueMs),
  forecast: Array.from({ length: seconds }, (_, i) => liveForecast[i] ?? NaN),
  workers: Array.from({ length: seconds }, (_, i) => liveWorkers[i] ?? 0),
  overflow: perSecond((o) => o.fn, (o) => o.dueMs),
  misses: perSecond((o) => !o.ok || o.doneMs - o.sentMs > sloMs, (o) => o.doneMs - t0),
};

// ------------------------------------------------------------------------------------ the simulator

/** Warm function invocations' durations (what each was billed for). */
const warmFnMs = fnAnswers.filter((o) => !o.cold).map((o) => o.fnMs);
const measured = {
  boot_ms: median(bootTimes) ?? config.planBootMs,
  boot_samples: bootTimes.length,
  function_cold_start_ms: median([...warmupColdMs, ...fnAnswers.filter((o) => o.cold).map((o) => o.fnMs)]) ?? 2000,
  functions_warm_at_start: functionsWarm,
  // The mean, not the median: an invocation is billed for its duration, and money sums durations (a
  // burst's invocations share the two cores and run several times the median: 11-28, day 2, $0.0028
  // for 480 invocations, ~170 ms each, against a 13.6 ms median: the simulator's functions cost a
  // fifteenth of live's).
  function_warm_ms: mean(warmFnMs) ?? (variants[0]?.latencyMs[1] ?? 20),
  function_warm_median_ms: median(warmFnMs) ?? null,
  function_samples: fnAnswers.length,
  /** The workers' observed / profiled busy time over the window (1: as profiled; below 1: faster than profiled). */
  slowdown: ratioOfSums(slowdowns) ?? 1,
  slowdown_samples: slowdowns.length,
  /** The stack's worker's reports, ms of the window (given to the simulator). */
  reporting_worker: reportingWorker ?? null,
  /** What that worker offers its variants (given to the simulator's workers). */
  worker_memory_bytes: workerMemoryBytes ?? null,
  report_times_ms: reportTimes.map((t) => Math.round(t)),
  /** Its utilisation as the vm-autoscaler read it at the window's first tick (given to the simulator; null: no report before the window). */
  start_utilization: startUtilization(),
};
/** The mean of the stack's worker's reports in the tick before the window (the latest before it when none came then). */
function startUtilization(): number | null {
  const mine = beforeStart.filter((x) => x.worker === reportingWorker && x.atMs <= t0);
  const inTick = mine.filter((x) => x.atMs > t0 - config.vmTickMs);
  const u = inTick.length > 0 ? mean(inTick.map((x) => x.utilization)) : mine.at(-1)?.utilization;
  return u === undefined ? null : Math.round(u * 1e4) / 1e4;
}
/** Per second of the window, a figure of that second's reports (`of`: undefined without evidence), the last one carried over seconds without. */
function bySecondOf<T extends { s: number }>(xs: readonly T[], first: number, of: (inSecond: T[]) => number | undefined): number[] {
  const bySecond = new Map<number, T[]>();
  for (const x of xs) (bySecond.get(x.s) ?? bySecond.set(x.s, []).get(x.s))?.push(x);
  const out: number[] = [];
  for (let i = 0, last = first; i < Math.ceil(schedule.durationMs / 1000); i++) {
    last = of(bySecond.get(i) ?? []) ?? last;
    out.push(last);
  }
  return out;
}
/** Per second of the window: the workers' observed / profiled busy time. */
const slowdownSeries = bySecondOf(slowdowns, measured.slowdown, ratioOfSums);
/**
 * Per second of the window: the workers' median batch time over their mean (both over the profile):
 * batch times skew right, so the median the variant-state rule reads is below the mean that their
 * busy time sums. The simulator's monitor observes its batches × this (engine `observedFactor`).
 */
const observedFactorSeries = bySecondOf(slowdowns, 1, (xs) =>
  median(xs.flatMap((x) => (x.p50Ratio !== undefined && x.profiled > 0 && x.observed > 0 ? [x.p50Ratio / (x.observed / x.profiled)] : []))),
);
say(`live done; simulating with boot ${measured.boot_ms.toFixed(0)} ms (${bootTimes.length} measured), function cold start ${measured.function_cold_start_ms.toFixed(0)} ms, warm ${measured.function_warm_ms.toFixed(1)} ms, workers ${measured.slowdown.toFixed(2)}× slower than profiled (busy time, ${slowdowns.length} reports; replayed second by second)`);
const simInput = {
  config,
  arrivalsMs: arrivals,
  durationMs: schedule.durationMs,
  variants,
  preload: [...preload].map(([variant, n]) => ({ variant, count: n })),
  bootMs: measured.boot_ms,
  ...(workerMemoryBytes !== undefined ? { workerMemoryBytes } : {}),
  functionColdStartMs: measured.function_cold_start_ms,
  functionWarmMs: measured.function_warm_ms,
  functionsWarm,
  ...(reportTimes.length > 0 ? { reportTimesMs: reportTimes } : {}),
  ...(measured.start_utilization !== null ? { startUtilization: measured.start_utilization } : {}),
  seed,
};
/** --consistency: the simulator fed this run's own measurements (a debugging aid: it agrees by construction where it reads them). */
const consistency = values.consistency ? runReplaySim({ ...simInput, slowdown: slowdownSeries, observedFactor: observedFactorSeries }) : undefined;

// ------------------------------------------------------------------------------------ output

/** The side the live run is set against: the prediction, or without a calibration the consistency run. */
const against = (predicted?.result ?? consistency)!;
const rows = replaySeriesRows(startMinute, speedup, against.series, liveSeries);
const pricePerS = pricePerSecond(config.instanceType);
const livePrediction = predictionOf(live);
const report = {
  command: `npm run replay -- ${process.argv.slice(2).join(" ")}`,
  date: new Date().toISOString(),
  trace: values.trace,
  window: { start_minute: startMinute, minutes, gap_minutes_filled: schedule.gapMinutes, peak_qps: peakQps, speedup, duration_s: schedule.durationMs / 1000, started_at_ms: t0 },
  policy: replayPolicy,
  workers: values.emulated ? "emulated" : "native",
  /** The live side's state when the window started, and the prediction's (its own play of the prelude). */
  window_start: { live: windowStart, predicted: predicted ? predictedStart(predicted.result.prelude) : null },
  settings: { ...configReport(config), stack_env: { ...env.all, ...env.vmAutoscaler, ...Object.fromEntries(["EMULATED_CALIBRATION", "PROFILE_CALIBRATION"].flatMap((k) => (env.all[k] ? [[k, shown(env.all[k])]] : []))) }, stack: values.base ? "given (--base)" : "started by the replay" },
  calibration: calibration ? { path: shown(calibrationPath), date: calibration.date, backend: calibration.backend, host: calibration.host } : null,
  variants,
  live: { ...liveReport, machine_seconds: live.machine_dollars / pricePerS },
  /** From the calibration alone, made before the stack started (DIR/prediction.json). */
  prediction: predicted ? predictionOf(predicted.result.summary) : null,
  prediction_error: predicted ? predictionError(livePrediction, predictionOf(predicted.result.summary)) : null,
  /** Each simulator run the prediction averages (its seed and figures): the spread of what the calibration leaves to chance. */
  prediction_draws: predicted ? predicted.result.draws : null,
  /** --consistency: the simulator fed this run's measurements (agrees by construction where it reads them; not a prediction). */
  consistency: consistency ? { summary: consistency.summary, measured: { ...measured, slowdown_by_second: slowdownSeries.map((x) => Math.round(x * 100) / 100), observed_factor_by_second: observedFactorSeries.map((x) => Math.round(x * 100) / 100) } } : null,
  /** Launch by launch, both sides: when (s of the window), how long billed (real s), $ (trace time), why; each side's sum is its machine_dollars. */
  launches: { live: liveLaunches, predicted: predicted?.result.launches ?? null, consistency: consistency?.launches ?? null },
  series: rows,
};
writeFileSync(join(outDir, "replay.json"), JSON.stringify(report, null, 1));
writeFileSync(join(outDir, "decisions-sim.json"), JSON.stringify(against.log, null, 1));
writeFileSync(join(outDir, "replay.svg"), await renderReplaySvg(rows, `${values.trace} minutes ${startMinute}-${startMinute + minutes - 1} at ${speedup}×, peak ${peakQps} qps, app ${app}, SLO ${sloMs} ms: live and ${predicted ? "predicted" : "consistency"}`, speedup, Math.max(1, Math.round(seconds / 120))));

const fmt = (s: ReplaySummary): string =>
  `queries ${s.queries}, answered ${s.answered}, failed ${s.failed}, SLO ${(s.slo_attainment * 100).toFixed(2)}%, p99 ${s.p99_ms.toFixed(0)} ms, cost $${s.cost_dollars.toFixed(3)} (machines ${s.machine_dollars.toFixed(3)}, functions ${s.function_dollars.toFixed(4)}), launches ${s.launches}, most workers ${s.workers_max}`;
say(`live: ${fmt(live)}`);
if (predicted) say(`predicted: ${fmt(predicted.result.summary)}; error: ${JSON.stringify(report.prediction_error)}`);
if (consistency) say(`consistency (fed this run's measurements): ${fmt(consistency.summary)}`);
const held = (xs: ReadonlyArray<{ at_s: number; held_s: number }>): string => xs.map((x) => `${Math.round(x.at_s)}+${x.held_s.toFixed(1)}`).join(" ");
say(`launches, s of the window + s billed: live ${held(liveLaunches)}; ${predicted ? "predicted" : "consistency"} ${held(against.launches)}`);
say(`wrote ${join(outDir, "replay.json")}, replay.svg, decisions-live.jsonl, decisions-sim.json${predicted ? ", prediction.json" : ""}`);

for (const s of subs) s.unsubscribe();
await nc.drain();
decisionsLog.end();
await stopStack();

/** The state the prediction's prelude left (replay.json `window_start.predicted`, in the live side's terms). */
function predictedStart(p: ReturnType<typeof predictReplay>["prelude"]): Record<string, unknown> {
  return { settle_queries: p.settleQueries, slo_miss_fraction: p.sloMissFraction, workers: p.workers, instance_states: p.instanceStates, prelude_s: p.windowStartMs / 1000 };
}

function configReport(c: ReplayConfig): Record<string, unknown> {
  return { ...c };
}

/** What a prediction states of a run (replay.json `prediction`; the live side's, to compare). */
function predictionOf(s: ReplaySummary): { queries: number; cost_dollars: number; machine_seconds: number; launches: number; slo_attainment: number; p99_ms: number; overflow_share: number; workers_max: number } {
  return { queries: s.queries, cost_dollars: s.cost_dollars, machine_seconds: s.machine_dollars / pricePerSecond(config.instanceType), launches: s.launches, slo_attainment: s.slo_attainment, p99_ms: s.p99_ms, overflow_share: s.overflow_share, workers_max: s.workers_max };
}
function fmtPrediction(p: ReturnType<typeof predictionOf>): string {
  return `cost $${p.cost_dollars.toFixed(3)}, ${p.machine_seconds.toFixed(0)} machine-s (trace time), ${p.launches} launch(es), SLO ${(p.slo_attainment * 100).toFixed(2)}%, p99 ${p.p99_ms.toFixed(0)} ms`;
}
/** How far live came from the prediction: ratios live / predicted (1 where both are 0; null where only live is), differences live − predicted. */
function predictionError(l: ReturnType<typeof predictionOf>, p: ReturnType<typeof predictionOf>): Record<string, number | null> {
  const ratio = (a: number, b: number): number | null => (b > 0 ? a / b : a === 0 ? 1 : null);
  return {
    cost_ratio_live_over_predicted: ratio(l.cost_dollars, p.cost_dollars),
    machine_seconds_ratio_live_over_predicted: ratio(l.machine_seconds, p.machine_seconds),
    launches_live_minus_predicted: l.launches - p.launches,
    slo_points_live_minus_predicted: 100 * (l.slo_attainment - p.slo_attainment),
    p99_ratio_live_over_predicted: ratio(l.p99_ms, p.p99_ms),
  };
}
