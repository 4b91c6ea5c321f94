/**
 * Live replay, the simulator's side (`npm run replay`, scripts/replay.ts; docs/ARCHITECTURE.md "Live
 * replay"): a real trace, time-compressed by K, through the INFaaS system with MArk's predictive plan,
 * SLO monitor and serverless overflow — the rules the live stack runs — on machines priced and booting
 * like the local worker provider. The live side drives the real stack with the same arrival times;
 * both report the same figures, dollars in trace time.
 *
 * **Compression.** Trace minute m is replayed during [m/K, (m+1)/K) real minutes, at the trace's
 * per-minute rate scaled so that the window's busiest minute runs at `peakQps` (real queries per
 * second: the load level is real, only the calendar is compressed). Gap minutes (zero, or under 5% of
 * the window's median: the Twitter trace's daily gap) take the previous minute's rate, as mark-twitter
 * does. Arrivals within a minute are Poisson (libs/policy common/arrivals.ts `traceArrivals`), drawn once from `seed`: the
 * live replayer sends exactly these times and the simulator replays them.
 *
 * The control loops' time settings are compressed by K ({@link replayConfig}): the VM's boot delay,
 * the cool-down, the billing minimum, the plan period, the SLO monitor's period, the forecaster's unit
 * — each its trace-time value / K, with floors where what they pace is not compressed: the
 * forecaster's unit is whole seconds (the dispatchers report arrivals once a second), so above K = 60
 * one unit spans K/60 trace minutes on both sides; the cool-down is at least the plan's boot time (an
 * executor process takes seconds to start whatever K is: a shorter cool-down gives workers back before
 * they could serve, which MArk's 6 min cool-down against its 5 min start-up never does). What is not
 * compressed: queries (their SLO, latencies), an executor process's start, a function's cold start
 * and so the functions' keep-alive (10 min: compressed to seconds, every burst would pay cold starts
 * that take longer than the burst), the services' 1-2 s ticks and the heartbeat timeout. Money: instances are billed for their real lifetime × K (trace seconds), per
 * second with EC2's 60 s minimum counted in trace seconds ({@link traceDollars}); function invocations
 * are billed as they ran (their duration is not compressed).
 *
 * Pure: takes the trace, the settings, the variants and the measured boot and cold-start times.
 *
 * **Two ways to run the simulator's side.** {@link runReplaySim} takes what it is given: in the
 * consistency mode (scripts/replay.ts) that is what the live run itself measured (its per-second
 * slowdown, its report times, its start utilisation, its boot and function times), so that the two
 * sides differ only where the simulator's mechanics differ from the stack's. {@link predictReplay} is
 * the prediction: it builds the input from a calibration file alone (libs/contracts `Calibration`,
 * measured before and apart from the run: libs/sim calibration.ts) and reads nothing of the run it is
 * compared with. Its machines' slowdown comes from the simulator's own state every second (the
 * calibration's contention model), each launch boots for a time drawn from the calibration's boot
 * samples, functions run as the calibration measured them, workers report at the calibration's period
 * from a phase drawn from the seed, and the static workers start with the variant the dispatcher's
 * selection picks for the app's SLO and accuracy (what the live warm-up loads).
 */
import {
  DEFAULT_MACHINE_PLAN_CONFIG, DEFAULT_PREDICTOR, initialSloMonitorState, observeRequests, LIVE_READING_TICKS, SelectionIndex, builtinPredictor, createRng, ec2Cost, lambdaCost, maxRatePerUnit, pricePerSecond, quantile, selectForApp, workerCapacityForApp,
  type AppForecast, type ForecastPlanState, type VariantProfile,
} from "@sloserve/policy";
import { DEFAULT_SCALING_POLICY, scalingRulesOf, type ScalingPolicy } from "@sloserve/policy";
import { DEFAULT_QUERY_TIMEOUT_MS, type CalibratedVariant, type Calibration, type ContentionPoint } from "@sloserve/contracts";
import { drawBootMs, drawSample, meanOf, medianOf, reportTimes, variantContention, type BootSamples, type Contention } from "../calibration.js";
import { Simulator, type Machine, type MachineOptions, type Query, type Replica } from "../engine.js";
import { installInfaas, liveSettingsNote } from "../systems/infaas.js";
import type { Chart, Scenario, ScenarioResult } from "../scenario.js";
import { minuteRates, type TraceData } from "../trace.js";
import { ReplayArrivals, arrivalTimes, traceArrivals, type RateSchedule } from "@sloserve/policy";

/** Trace-time values of the compressed settings (what a day of real operation would use). */
export const TRACE_TIME = {
  /** A VM's boot before the executor starts, s (the local provider's BOOT_DELAY_MS stands for it). */
  vmBootS: 60,
  /** INFaaS's idle time and MArk's plan history (COOLDOWN_MS). */
  cooldownS: 300,
  /** EC2's billing minimum (BILLING_MINIMUM_MS). */
  billingMinimumS: 60,
  /** MArk's prediction unit and plan period (the forecaster's UNIT_S, PLAN_PERIOD_MS). */
  unitS: 60,
  /** MArk's SLO monitor period (SLO_PERIOD_MS). */
  sloPeriodS: 10,
} as const;

export interface ReplayOptions {
  /** K: trace seconds per real second. */
  speedup: number;
  app: string;
  sloMs: number;
  minAccuracy: number;
  /** Workers of the stack's own (never terminated). @default 1 */
  staticWorkers?: number;
  /** CPU workers in all. @default 4 */
  maxWorkers?: number;
  /** Threads of every worker. @default 1 */
  workerThreads?: number;
  /** @default "c5.xlarge" */
  instanceType?: string;
  /** Local function pool size (`npm run replay -- --function-pool N`). @default 4 */
  functionPoolSize?: number;
  /** @default 2048 */
  functionMemoryMb?: number;
  /**
   * The scaling policy both sides run (libs/policy `ScalingPolicy`: the vm-autoscaler's SCALING_POLICY;
   * `infaas` and `static` run without overflow, the dispatcher's OVERFLOW=off). @default "combined"
   */
  policy?: ScalingPolicy;
}

/** Every setting both sides run with (real time, ms, unless said). */
export interface ReplayConfig extends Required<ReplayOptions> {
  bootDelayMs: number;
  /** What the plan counts a launch to first heartbeat as (the vm-autoscaler's default for local: boot delay + 5 s). */
  planBootMs: number;
  cooldownMs: number;
  billingMinimumMs: number;
  planPeriodMs: number;
  sloPeriodMs: number;
  /**
   * The VM autoscaler's tick (its TICK_MS, left at its default: the model autoscaler reads a TICK_MS
   * of its own, and `--print-env` gives every service the same environment; the simulator's
   * `vmPeriodMs`), not compressed: a service's tick. The live window starts on one of its ticks, so
   * that both sides tick at the same seconds of the window (scripts/replay.ts).
   */
  vmTickMs: number;
  /** Ticks the INFaaS rules read (the vm-autoscaler's READING_TICKS, its default). */
  readingTicks: number;
  /** Forecaster: unit and sample window (whole seconds), units per season (a trace day), horizon. */
  unitS: number;
  sampleS: number;
  season: number;
  horizon: number;
  /** Not compressed (see the module comment). */
  functionKeepAliveMs: number;
  /**
   * When the executor sheds a query and the function pool gives up on it, ms after it arrives: the
   * replay's client sends no deadline, so the dispatcher's default (DEFAULT_QUERY_TIMEOUT_MS), not
   * compressed; the SLO decides overflow only.
   */
  queryTimeoutMs: number;
}

export function replayConfig(o: ReplayOptions): ReplayConfig {
  const problems: string[] = [];
  if (!(o.speedup >= 1)) problems.push(`speedup must be ≥ 1, got ${o.speedup}`);
  if (!(o.sloMs > 0)) problems.push(`sloMs must be > 0, got ${o.sloMs}`);
  if (!(o.minAccuracy >= 0 && o.minAccuracy <= 1)) problems.push(`minAccuracy must be in [0, 1], got ${o.minAccuracy}`);
  if (problems.length > 0) throw new Error(`invalid replay settings: ${problems.join("; ")}`);
  const k = o.speedup;
  const unitS = Math.max(1, Math.round(TRACE_TIME.unitS / k));
  const bootDelayMs = Math.round((TRACE_TIME.vmBootS * 1000) / k);
  return {
    staticWorkers: 1,
    maxWorkers: 4,
    workerThreads: 1,
    instanceType: "c5.xlarge",
    functionPoolSize: 4,
    functionMemoryMb: 2048,
    policy: DEFAULT_SCALING_POLICY,
    ...o,
    bootDelayMs,
    planBootMs: bootDelayMs + 5000,
    cooldownMs: Math.max(bootDelayMs + 5000, Math.round((TRACE_TIME.cooldownS * 1000) / k)),
    billingMinimumMs: Math.round((TRACE_TIME.billingMinimumS * 1000) / k),
    planPeriodMs: unitS * 1000,
    sloPeriodMs: Math.max(1, Math.round((TRACE_TIME.sloPeriodS * 1000) / k)),
    vmTickMs: 2000,
    readingTicks: LIVE_READING_TICKS,
    unitS,
    sampleS: unitS >= 5 && unitS % 5 === 0 ? 5 : 1,
    season: Math.max(2, Math.round(86_400 / (k * unitS))),
    horizon: 60,
    functionKeepAliveMs: 600_000,
    queryTimeoutMs: DEFAULT_QUERY_TIMEOUT_MS,
  };
}

/**
 * HOST_CORES of a replay's stack: its local workers and function containers stand for a cloud's
 * machines and Lambda's functions, as the simulator has them, so the host's cores do not limit them
 * (libs/policy host-room.ts); the calibration measures what sharing the host costs them instead.
 */
export const REPLAY_HOST_CORES = 1024;

/** The live stack's environment for these settings: for every service, and the vm-autoscaler's own. */
export function replayStackEnv(c: ReplayConfig): { all: Record<string, string>; vmAutoscaler: Record<string, string> } {
  return {
    all: {
      OVERFLOW: scalingRulesOf(c.policy).overflow ? "local" : "off",
      HOST_CORES: String(REPLAY_HOST_CORES),
      FUNCTION_POOL_SIZE: String(c.functionPoolSize),
      FUNCTION_MEMORY_MB: String(c.functionMemoryMb),
      FUNCTION_KEEP_ALIVE_MS: String(c.functionKeepAliveMs),
      UNIT_S: String(c.unitS),
      SAMPLE_S: String(c.sampleS),
      SEASON: String(c.season),
      HORIZON: String(c.horizon),
      KEEP: String(Math.max(2 * c.season + c.horizon, 100)),
    },
    vmAutoscaler: {
      BOOT_DELAY_MS: String(c.bootDelayMs),
      BOOT_TIME_MS: String(c.planBootMs),
      COOLDOWN_MS: String(c.cooldownMs),
      BILLING_MINIMUM_MS: String(c.billingMinimumMs),
      PLAN_PERIOD_MS: String(c.planPeriodMs),
      SLO_PERIOD_MS: String(c.sloPeriodMs),
      CPU_INSTANCE_TYPE: c.instanceType,
      COST_EVERY_MS: "1000",
      READING_TICKS: String(c.readingTicks),
      SCALING_POLICY: c.policy,
    },
  };
}

/** The default peak is this many times what one worker is planned to serve. */
export const AUTO_PEAK_WORKERS = 1.5;

/**
 * The default peak: 1.5 × what one worker serves at the plan's target utilisation (libs/policy
 * `workerCapacityForApp` × 0.8, the vm-autoscaler's figure, over the variants given: scripts/replay.ts
 * gives the one its warm-up loaded): a second worker is then needed in the trace's busiest minutes and
 * one is enough in its quiet hours, while the load stays within what two cores serve if the profile is
 * right. Undefined when none of the variants is profiled. `workers`: another multiple (the replay's
 * `--peak-workers N`: the busiest minutes need N workers at the plan's target utilisation).
 */
export function autoPeakQps(variants: readonly VariantProfile[], c: ReplayConfig, workers: number = AUTO_PEAK_WORKERS): number | undefined {
  const one = workerCapacityForApp(variants, c.app, "cpu", { threads: c.workerThreads, memoryBytes: Infinity }, c.sloMs);
  return one ? Math.round(workers * DEFAULT_MACHINE_PLAN_CONFIG.targetUtilization * one.qps) : undefined;
}

export interface ReplayWindow {
  startMinute: number;
  minutes: number;
  peakQps: number;
}

export interface ReplaySchedule {
  /** Real-time rates: bins of 60 000 / K ms, queries per second. */
  schedule: RateSchedule;
  /** Per trace minute of the window: the trace's rate (queries/s, gaps filled) and the replayed rate. */
  traceQps: number[];
  replayQps: number[];
  gapMinutes: number;
  durationMs: number;
}

/** A minute below this share of the window's median rate is a gap (as mark-twitter). */
const GAP_SHARE_OF_MEDIAN = 0.05;

/** The window of the trace, gaps filled, scaled to peakQps, compressed by K. */
export function replaySchedule(trace: TraceData, w: ReplayWindow, speedup: number): ReplaySchedule {
  const all = minuteRates(trace);
  if (!(w.minutes >= 1) || w.startMinute < 0 || w.startMinute + w.minutes > all.length) {
    throw new Error(`the trace has ${all.length} whole minutes: minutes ${w.startMinute} … ${w.startMinute + w.minutes - 1} are not all in it`);
  }
  if (!(w.peakQps > 0)) throw new Error(`peakQps must be > 0, got ${w.peakQps}`);
  const rates = all.slice(w.startMinute, w.startMinute + w.minutes);
  const positive = rates.filter((r) => r > 0).sort((a, b) => a - b);
  if (positive.length === 0) throw new Error(`minutes ${w.startMinute} … ${w.startMinute + w.minutes - 1} of the trace are all gaps`);
  const gapBelow = GAP_SHARE_OF_MEDIAN * quantile(positive, 0.5);
  let gapMinutes = 0;
  const firstReal = rates.find((r) => r > gapBelow) ?? 0;
  for (let i = 0; i < rates.length; i++) {
    if ((rates[i] ?? 0) > gapBelow) continue;
    gapMinutes++;
    rates[i] = i > 0 ? (rates[i - 1] ?? 0) : firstReal;
  }
  const max = Math.max(...rates);
  const replayQps = rates.map((r) => (r * w.peakQps) / max);
  const binMs = 60_000 / speedup;
  return { schedule: { binMs, rates: replayQps }, traceQps: rates, replayQps, gapMinutes, durationMs: binMs * rates.length };
}

/** The arrival times (ms from the window's start) both sides use. */
export function replayArrivals(s: ReplaySchedule, seed: number): number[] {
  return arrivalTimes(traceArrivals(s.schedule), createRng(seed));
}

/** An instance's lifetime, real ms, for billing. */
export interface BilledInstance {
  pricePerHour: number;
  launchedAtMs: number;
  endedAtMs: number | null;
}

/**
 * Dollars in trace time: each instance's lifetime inside [fromMs, toMs] × K, billed per trace second
 * with EC2's 60 s minimum (libs/policy `ec2Cost`).
 */
export function traceDollars(instances: readonly BilledInstance[], speedup: number, fromMs: number, toMs: number): number {
  let sum = 0;
  for (const i of instances) {
    const start = Math.max(fromMs, i.launchedAtMs);
    const end = Math.min(toMs, i.endedAtMs ?? toMs);
    if (end < start || i.launchedAtMs > toMs) continue;
    sum += ec2Cost(i.pricePerHour / 3600, 0, (end - start) * speedup);
  }
  return sum;
}

/** One machine the autoscaler launched, as replay.json's `launches` lists it (both sides alike). */
export interface ReplayLaunch {
  /** Launched at this second of the window (real; negative: before it, still billed inside it). */
  at_s: number;
  /** Real seconds billed inside the window (launch, or the window's start, to the termination asked, or its end). */
  held_s: number;
  /** What it costs in trace time ({@link traceDollars}). */
  dollars: number;
  /** Why: the launch decision's trigger and reason. */
  reason: string;
}

/**
 * Each launched machine with the decision that launched it (the latest launch decision of its kind at
 * or before its launch) and what it costs inside [fromMs, toMs]: the launch-by-launch account of a side's
 * `machine_dollars` (their sum). Machines billed nowhere inside the window are left out.
 */
export function replayLaunches(
  machines: ReadonlyArray<BilledInstance & { kind: string }>,
  decisions: ReadonlyArray<{ atMs: number; kind: string; reason: string }>,
  speedup: number,
  fromMs: number,
  toMs: number,
): ReplayLaunch[] {
  const out: ReplayLaunch[] = [];
  for (const m of [...machines].sort((a, b) => a.launchedAtMs - b.launchedAtMs)) {
    const start = Math.max(fromMs, m.launchedAtMs);
    const end = Math.min(toMs, m.endedAtMs ?? toMs);
    if (end < start || m.launchedAtMs > toMs) continue;
    let why: string | undefined;
    for (const d of decisions) if (d.kind === m.kind && d.atMs <= m.launchedAtMs) why = d.reason;
    out.push({ at_s: (m.launchedAtMs - fromMs) / 1000, held_s: (end - start) / 1000, dollars: traceDollars([m], speedup, fromMs, toMs), reason: why ?? "?" });
  }
  return out;
}

/** The figures each side reports (replay.json's `live` and `sim`). */
export interface ReplaySummary {
  queries: number;
  answered: number;
  failed: number;
  /** Answered within the SLO / queries. */
  slo_attainment: number;
  /** p99 latency of the answered queries, ms. */
  p99_ms: number;
  /** Machines the autoscaler launched (trace-time billing) + function invocations, $. */
  cost_dollars: number;
  machine_dollars: number;
  function_dollars: number;
  /** The never-terminated workers of the stack, billed over the window in trace time (the same on both sides), $. */
  static_dollars: number;
  /** Answered by a function / queries. */
  overflow_share: number;
  /** Most workers up at once (heartbeating, draining ones included; the static ones included). */
  workers_max: number;
  /** Workers the autoscaler launched in the window. */
  launches: number;
  failed_by_code: Record<string, number>;
}

/** Per real second of the window. */
export interface ReplaySideSeries {
  /** Queries sent (arrivals) per second. */
  load: number[];
  /** The latest forecast for the next unit, queries/s (NaN before the first). */
  forecast: number[];
  /** Workers up. */
  workers: number[];
  /** Queries sent to functions. */
  overflow: number[];
  /** Answered after their SLO or failed (counted when their outcome is known). */
  misses: number[];
}

export interface ReplaySimInput {
  config: ReplayConfig;
  arrivalsMs: readonly number[];
  durationMs: number;
  /** The app's profiled variants (the live registry's). */
  variants: readonly VariantProfile[];
  /**
   * Instances loaded at the start (what the live static workers run after the warm-up): on the first
   * static worker with room, or on static worker `worker` (0-based) when given.
   */
  preload?: ReadonlyArray<{ variant: string; count: number; worker?: number }>;
  /** Launch to first heartbeat of a launched worker, ms (measured live; else the plan's figure). */
  bootMs: number;
  /**
   * Launch-to-first-report times measured apart from the run (a calibration's `bootMs`): each launch
   * boots for one of them, drawn uniformly from the simulator's generator (`bootMs` is then unused).
   * @default every launch boots `bootMs`
   */
  bootMsSamples?: readonly number[];
  /**
   * Launch-to-first-report times of launches made together (a calibration's `groupBoots`): with them,
   * a launch draws by the launches booting with it (libs/sim calibration.ts `drawBootMs`).
   * @default none: every launch draws from `bootMsSamples`
   */
  bootGroupSamples?: readonly BootSamples[];
  /**
   * The memory a worker offers its variants, bytes (the live workers' reports, `memoryBytes`): the
   * model autoscaler places an upgrade or a replica on a worker only where the variant's profiled
   * memory fits. @default unlimited
   */
  workerMemoryBytes?: number;
  /**
   * The live replay's prelude, played before the window ({@link simulatePrelude}): its queries are
   * served and counted in no figure; the window's arrivals start at its `windowStartMs`, and every
   * figure, series and time of the result is the window's. @default none (the window from t = 0)
   */
  prelude?: Pick<ReplayPrelude, "arrivalsMs" | "windowStartMs">;
  /** Function invocation: cold start (process start, runtime, model load) and warm execution, ms. */
  functionColdStartMs: number;
  functionWarmMs: number;
  /**
   * Warm invocations' durations measured apart from the run (a calibration's `functions.warmMs`): each
   * invocation runs (and is billed) one of them, drawn uniformly from the simulator's generator
   * (`functionWarmMs` is then unused; a cold one adds `functionColdStartMs`). @default `functionWarmMs`
   */
  functionWarmMsSamples?: readonly number[];
  /**
   * The variant the samples ran (a calibration's `functions.variant`): with it, an invocation for
   * another variant runs a sample less this one's batch-1 latency plus its own (the container's time
   * is the rest). @default none: every invocation runs a sample as drawn
   */
  functionWarmMsVariant?: string;
  /** Function containers warm at the start (the live replay's warm-up starts them). @default 0 */
  functionsWarm?: number;
  /**
   * How much slower than profiled the workers ran (observed / profiled busy time, measured live from
   * the workers' reports: the machine's other load and our own processes), one figure for the run or
   * one per second of it (the machine's conditions replayed): every machine's batches take this × their
   * profile. Below 1 where they ran faster than profiled (a profile taken on a busier machine, or a
   * worker busy enough to stay warm); values that are not positive count as 1. @default 1
   */
  slowdown?: number | readonly number[];
  /**
   * The host's contention (a calibration's `contention` points; libs/sim calibration.ts): every second
   * the simulator reads its own state, the demand of the second before (Σ over the machines up of each
   * instance's busy share at profiled batch times — its busy time over the slowdown it ran at — × its
   * threads), the worker processes starting now (machines booting, past the config's `bootDelayMs`) and
   * those serving (machines up or draining), and sets every machine's `slowdown` and `observedFactor`
   * (p50Ratio / slowdown) for the next second from {@link contentionModel}. Every machine shares the
   * one host the calibration measured (the local provider runs every worker on one machine). A
   * `slowdown` or `observedFactor` given wins over the model's. @default none (those two, or 1)
   */
  contention?: readonly ContentionPoint[];
  /**
   * When the live stack's worker reported (ms of the window): the simulator's VM tick reads the mean of
   * the reports since its last tick at these times, as the vm-autoscaler does (infaas.ts
   * `reportTimesMs`). @default the exact busy share since the last tick (or `reportPeriod`)
   */
  reportTimesMs?: readonly number[];
  /**
   * The workers' report period and the standard deviation of their intervals (a calibration's
   * `reports`): the machines report every `periodMs` from a phase drawn from the simulator's
   * generator, each report a little late (libs/sim calibration.ts `reportTimes`), read as
   * `reportTimesMs` are. `reportTimesMs` given wins.
   * @default none
   */
  reportPeriod?: { periodMs: number; jitterMs: number };
  /**
   * The stack's worker's utilisation as the live vm-autoscaler read it at the window's first tick (the
   * mean of its reports in the tick before the window: the window starts on a tick). Given, the
   * simulator's VM autoscaler ticks at 0 with it, as the live one does (infaas.ts `vmStartReading`);
   * without it, a first tick at `vmTickMs` reads that tick's reports alone, where live reads them with
   * the quiet seconds before the window. @default none
   */
  startUtilization?: number;
  /**
   * The workers' median batch time over their mean, one figure or one per second (measured live):
   * what the dispatcher's overflow estimate reads of the batches, the median, against what their busy
   * time sums, the mean (Machine `observedFactor`). The variant-state rule reads the mean, as the
   * executors do. @default 1 (the mean)
   */
  observedFactor?: number | readonly number[];
  seed: number;
}

export interface ReplaySimResult {
  summary: ReplaySummary;
  series: ReplaySideSeries;
  /** The autoscalers' decisions with their reasons (the first 5000). */
  log: Array<{ tMs: number; source: string; action: string; reason: string }>;
  /** Launch by launch: when, how long billed, what it cost, why ({@link replayLaunches}). */
  launches: ReplayLaunch[];
  /**
   * With a contention model (`contention` given), per second of the window: the demand it read
   * (CPU-seconds of inference asked in the second before, at profiled batch times), the machines
   * booting, the machines serving (up or draining), and the slowdown and observed factor the machines
   * ran the second at.
   */
  contention?: { demand: number[]; booting: number[]; workers: number[]; slowdown: number[]; observedFactor: number[] };
}

/** The simulator's side of a replay. */
export function runReplaySim(input: ReplaySimInput): ReplaySimResult {
  const c = input.config;
  const windowMs = input.prelude?.windowStartMs ?? 0;
  const seconds = Math.ceil(input.durationMs / 1000);
  const b = buildReplaySim(input, windowMs + input.durationMs);
  const { sim } = b;
  if (input.prelude && input.prelude.arrivalsMs.length > 0) b.addQueries(input.prelude.arrivalsMs, false);
  b.addQueries(windowMs > 0 ? input.arrivalsMs.map((t) => t + windowMs) : input.arrivalsMs, true);
  const res = sim.run();

  // The window's figures: [windowMs, windowMs + durationMs) of the run, times from the window's start.
  const fromS = Math.round(windowMs / 1000);
  const launched = sim.machines.filter((m) => !b.initial.has(m));
  const billed = launched.map((m) => ({ kind: m.kind, pricePerHour: m.pricePerS * 3600, launchedAtMs: m.billedFromMs, endedAtMs: m.billedToMs }));
  const machineDollars = traceDollars(billed, c.speedup, windowMs, windowMs + input.durationMs);
  const launchDecisions = b.system.log.filter((e) => e.source === "vm-autoscaler" && e.action.startsWith("add ")).map((e) => ({ atMs: e.tMs, kind: e.action.slice(4), reason: e.reason }));
  const functionDollars = res.functionCostDollars;
  const failedByCode: Record<string, number> = {};
  for (const [reason, n] of Object.entries(res.droppedByReason)) failedByCode[reason] = n;
  const pad = (a: readonly number[]): number[] => Array.from({ length: seconds }, (_, i) => a[fromS + i] ?? 0);
  const workers = pad(b.workers);
  const summary: ReplaySummary = {
    queries: res.arrivals,
    answered: res.completed,
    failed: res.dropped,
    slo_attainment: res.sloAttainment,
    p99_ms: res.latencyMs.p99,
    cost_dollars: machineDollars + functionDollars,
    machine_dollars: machineDollars,
    function_dollars: functionDollars,
    static_dollars: staticDollars(c, input.durationMs),
    overflow_share: res.arrivals > 0 ? res.functionInvocations / res.arrivals : 0,
    workers_max: Math.max(c.staticWorkers, ...workers),
    // (as the live side counts them: launched in the window; those of the prelude still up are billed in it)
    launches: launched.filter((m) => m.billedFromMs >= windowMs).length,
    failed_by_code: failedByCode,
  };
  const contention = b.contention
    ? {
        demand: b.contention.demand.slice(fromS, fromS + seconds),
        booting: b.contention.booting.slice(fromS, fromS + seconds),
        workers: b.contention.workers.slice(fromS, fromS + seconds),
        slowdown: b.contention.slowdown.slice(fromS, fromS + seconds),
        observedFactor: b.contention.observedFactor.slice(fromS, fromS + seconds),
      }
    : undefined;
  return {
    summary,
    series: {
      load: pad(res.series.arrivals),
      forecast: Array.from({ length: seconds }, (_, i) => b.forecast[fromS + i] ?? NaN),
      workers,
      overflow: pad(b.overflowPerSecond),
      misses: pad(res.series.missed),
    },
    log: b.system.log.map((e) => ({ ...e, tMs: e.tMs - windowMs })),
    launches: replayLaunches(billed, launchDecisions, c.speedup, windowMs, windowMs + input.durationMs),
    ...(contention ? { contention } : {}),
  };
}

/** A replay's simulator, built and not yet run ({@link buildReplaySim}). */
interface ReplaySimBuild {
  sim: Simulator;
  system: ReturnType<typeof installInfaas>;
  /** The machines it starts with (the stack's own). */
  initial: ReadonlySet<Machine>;
  /** Per second from the run's start: workers heartbeating (from the second second), the forecast, queries sent to functions. */
  workers: number[];
  forecast: number[];
  overflowPerSecond: number[];
  contention: { demand: number[]; booting: number[]; workers: number[]; slowdown: number[]; observedFactor: number[] } | undefined;
  /** Adds a stream of the app's queries at these times (`counted` false: served, not in the results). */
  addQueries(arrivalsMs: readonly number[], counted: boolean): void;
}

/**
 * The replay's simulator over `totalMs` (the prelude, if any, then the window): the machines, the
 * function pool, the forecaster and the INFaaS system with the config's settings, the machines'
 * slowdown every second (given, or the contention model's). The caller adds the queries and runs it.
 */
function buildReplaySim(input: ReplaySimInput, totalMs: number): ReplaySimBuild {
  const c = input.config;
  const seconds = Math.ceil(totalMs / 1000);
  const sim = new Simulator({ seed: input.seed, durationMs: totalMs, drainMs: 60_000 });
  const pricePerS = pricePerSecond(c.instanceType);
  // (both resources a variant's profile names: a machine without one of them fits none of its instances)
  const worker: MachineOptions = { type: c.instanceType, kind: "cpu", pricePerS, bootMs: input.bootMs, resources: { threads: c.workerThreads, memoryBytes: input.workerMemoryBytes ?? Infinity }, billingMinimumS: c.billingMinimumMs / 1000 };
  // (drawn first, before the run draws anything: the seed gives the same phase whatever happens later)
  const reportTimesMs = input.reportTimesMs ?? (input.reportPeriod ? reportTimes(input.reportPeriod.periodMs, input.reportPeriod.jitterMs, totalMs + 60_000, sim.rng) : undefined);
  const bootSamples = input.bootMsSamples && input.bootMsSamples.length > 0 ? input.bootMsSamples : undefined;
  const warmSamples = input.functionWarmMsSamples && input.functionWarmMsSamples.length > 0 ? input.functionWarmMsSamples : undefined;
  // A function's duration is the container's own time plus its variant's: a sample, less the sampled
  // variant's batch-1 latency, plus the overflowing query's variant's (the variant each query
  // overflowed from, noted by onOverflow).
  const latencyOf = (name: string | undefined): number | undefined => {
    const v = name === undefined ? undefined : input.variants.find((x) => x.name === name);
    return v ? profiledLatencyOf(v) : undefined;
  };
  const sampledLatency = latencyOf(input.functionWarmMsVariant);
  const overflowedFrom = new WeakMap<Query, string>();
  const functionMs = (q: Query): number => {
    const drawn = drawSample(warmSamples!, sim.rng);
    const own = latencyOf(overflowedFrom.get(q));
    return sampledLatency === undefined || own === undefined ? drawn : Math.max(0.1, drawn - sampledLatency + own);
  };
  const variants = input.variants.filter((v) => v.app === c.app && v.hardware === "cpu" && v.profiled);
  if (variants.length === 0) throw new Error(`no profiled CPU variant of app ${c.app} to simulate`);

  // The forecaster (services/forecaster, its default predictor): per-second arrivals → each unit's max rate → the forecast.
  const predictor = builtinPredictor(DEFAULT_PREDICTOR);
  const perSecond = new Array<number>(seconds + 1).fill(0);
  const history: number[] = [];
  let forecastState: ForecastPlanState = {};
  let latest: AppForecast | undefined;
  const unitMs = c.unitS * 1000;
  sim.every(
    unitMs,
    (nowMs) => {
      // Closes the unit that ended a second ago (the service waits a second for the last reports).
      const endS = Math.round((nowMs - 1000) / 1000);
      const counts = perSecond.slice(Math.max(0, endS - c.unitS), endS);
      while (counts.length < c.unitS) counts.unshift(0);
      history.push(maxRatePerUnit(counts, c.sampleS, c.unitS)[0] ?? 0);
      const plan = predictor.predict(history, { season: c.season, horizon: c.horizon }, forecastState);
      forecastState = plan.state;
      latest = { app: c.app, atMs: endS * 1000, stepMs: unitMs, values: plan.values };
    },
    unitMs + 1000,
  );

  const overflowPerSecond = new Array<number>(seconds + 1).fill(0);
  const pool = sim.addFunctionPool({
    name: "functions",
    latencyMs: warmSamples ? functionMs : input.functionWarmMs,
    coldStartMs: input.functionColdStartMs,
    keepAliveMs: c.functionKeepAliveMs,
    memoryGb: c.functionMemoryMb / 1024,
    maxConcurrency: c.functionPoolSize,
  });
  // Containers the warm-up started: idle and warm at t = 0.
  for (let i = 0; i < Math.min(c.functionPoolSize, input.functionsWarm ?? 0); i++) {
    pool.busyUntil.push(0);
    pool.lastUsedMs.push(0);
  }
  const system = installInfaas(sim, {
    mode: "infaas",
    variants,
    workers: Array.from({ length: c.staticWorkers }, () => worker),
    templates: { cpu: worker },
    unmanagedWorkers: true,
    ...(input.preload ? { preload: input.preload } : {}),
    sloMsByModel: Object.fromEntries(variants.map((v) => [v.model, c.sloMs])),
    vmPeriodMs: c.vmTickMs,
    vmConfig: { minWorkersPerKind: c.staticWorkers, maxWorkersPerKind: c.maxWorkers, readingTicks: c.readingTicks },
    planConfig: { cooldownMs: c.cooldownMs, billingMinimumMs: c.billingMinimumMs, planPeriodMs: c.planPeriodMs, sloPeriodMs: c.sloPeriodMs },
    kinds: { cpu: { bootMs: c.planBootMs, resources: { threads: c.workerThreads, memoryBytes: Infinity } } },
    forecasts: () => (latest ? [latest] : []),
    sloMonitor: true,
    scalingPolicy: c.policy,
    refuseUnplaceable: true,
    ...(reportTimesMs ? { reportTimesMs } : {}),
    ...(input.startUtilization !== undefined ? { vmStartReading: input.startUtilization } : {}),
    ...(bootSamples ? { launchBootMs: (_kind: string, together: number) => drawBootMs(bootSamples, input.bootGroupSamples ?? [], together, sim.rng) } : {}),
    overflow: {
      pool,
      onOverflow: (q, nowMs, variant) => {
        overflowPerSecond[Math.floor(nowMs / 1000)]! += 1;
        overflowedFrom.set(q, variant);
      },
    },
  });

  const workers: number[] = [];
  const forecast: number[] = [];
  const initial = new Set<Machine>(sim.machines);
  // (a series given is the window's, second by second: the prelude reads its first second)
  const windowMs = input.prelude?.windowStartMs ?? 0;
  const secondOf = (given: number | readonly number[], nowMs: number): number => {
    const s = typeof given === "number" ? given : (given[Math.min(given.length - 1, Math.max(0, Math.floor((nowMs - windowMs) / 1000)))] ?? 1);
    return s > 0 ? s : 1;
  };
  // Every machine runs at the second's slowdown (those launched within a second are still booting).
  const modelled = input.contention ? contentionSecond(sim, input.contention, c.bootDelayMs) : undefined;
  const contention = modelled ? { demand: [] as number[], booting: [] as number[], workers: [] as number[], slowdown: [] as number[], observedFactor: [] as number[] } : undefined;
  sim.every(
    1000,
    modelled && contention
      ? (nowMs) => {
          const m = modelled(nowMs);
          const s = input.slowdown !== undefined ? secondOf(input.slowdown, nowMs) : m.slowdown;
          const f = input.observedFactor !== undefined ? secondOf(input.observedFactor, nowMs) : m.p50Ratio / m.slowdown;
          for (const x of sim.machines) {
            // (a machine serving nothing, or booting, runs at the host's main reading)
            const own = input.slowdown === undefined ? m.byMachine.get(x) : undefined;
            x.slowdown = own ? own.slowdown : s;
            x.observedFactor = own && input.observedFactor === undefined ? own.p50Ratio / own.slowdown : f;
          }
          if (nowMs < totalMs) {
            contention.demand.push(m.demand);
            contention.booting.push(m.booting);
            contention.workers.push(m.workers);
            contention.slowdown.push(s);
            contention.observedFactor.push(f);
          }
        }
      : (nowMs) => {
          const s = secondOf(input.slowdown ?? 1, nowMs);
          const f = secondOf(input.observedFactor ?? 1, nowMs);
          for (const m of sim.machines) {
            m.slowdown = s;
            m.observedFactor = f;
          }
        },
    0,
  );
  sim.every(
    1000,
    () => {
      // Heartbeating: up, or draining what it holds (the live side counts the workers that report).
      workers.push(sim.machines.filter((m) => m.state === "running" || (m.state === "draining" && m.readyMs <= sim.nowMs)).length);
      forecast.push(latest?.values[0] ?? NaN);
    },
    1000,
  );
  return {
    sim,
    system,
    initial,
    workers,
    forecast,
    overflowPerSecond,
    contention,
    addQueries: (arrivalsMs, counted) =>
      sim.addStream({
        app: c.app,
        sloMs: c.sloMs,
        timeoutMs: c.queryTimeoutMs,
        minAccuracy: c.minAccuracy,
        process: new ReplayArrivals(arrivalsMs),
        init: (q) => void (perSecond[Math.floor(q.arrivalMs / 1000)]! += 1),
        counted,
      }),
  };
}

/**
 * The contention model's reading at a second (`nowMs`, a whole second): the demand of the second
 * before, read from the simulator's own machines (each instance's busy time in it over the slowdown
 * its machine ran the second at — the profiled busy time, exact but for a batch that straddles two
 * seconds of different slowdowns — over 1000 ms, × the threads it takes; machines up or draining),
 * the worker processes starting now (machines still booting, launched at least `bootDelayMs` ago: the
 * local provider waits its BOOT_DELAY_MS, the VM's boot, before it starts the executor process, and
 * the calibration's `booting` points are measured from the process's start to its first report), the
 * worker processes serving now (the machines whose instances the demand sums: up or draining, as the
 * calibration's `workers` count the workers serving, the booting ones apart), and what the
 * calibration's points say of them: for each machine, the points of the variant it served most in the
 * second ({@link variantContention}: all the points for a variant the calibration did not sweep).
 */
function contentionSecond(
  sim: Simulator,
  points: readonly ContentionPoint[],
  bootDelayMs: number,
): (nowMs: number) => { demand: number; booting: number; workers: number; slowdown: number; p50Ratio: number; byMachine: Map<Machine, Contention> } {
  const models = variantContention(points);
  const busyBefore = new WeakMap<Replica, number>();
  let lastMs = 0;
  return (nowMs) => {
    const spanMs = nowMs - lastMs;
    lastMs = nowMs;
    let demand = 0;
    let booting = 0;
    let workers = 0;
    // Each machine's variant: the one whose instances there were busiest in the second (else its first instance's).
    const served = new Map<Machine, string | undefined>();
    const demandOf = new Map<string, number>();
    for (const m of sim.machines) {
      if (m.state === "booting" && nowMs - m.billedFromMs >= bootDelayMs) booting++;
      if (m.state !== "running" && m.state !== "draining") continue;
      workers++;
      let top: string | undefined;
      let topRan = -1;
      for (const r of m.replicas) {
        const busy = r.busyMsAt(nowMs);
        const ran = busy - (busyBefore.get(r) ?? 0);
        busyBefore.set(r, busy);
        if (ran > topRan) {
          topRan = ran;
          top = r.label;
        }
        if (spanMs > 0 && ran > 0) {
          const d = (ran / (m.slowdown * r.slowdown) / spanMs) * (r.uses["threads"] ?? 1);
          demand += d;
          demandOf.set(r.label, (demandOf.get(r.label) ?? 0) + d);
        }
      }
      served.set(m, top);
    }
    const byMachine = new Map<Machine, Contention>();
    for (const [m, v] of served) byMachine.set(m, models.forVariant(v).at(demand, booting, workers));
    // The series' figure: the reading of the variant with the most demand (of all the points without one).
    const main = [...demandOf.entries()].sort((a, b) => b[1] - a[1])[0]?.[0];
    return { demand, booting, workers, ...models.forVariant(main).at(demand, booting, workers), byMachine };
  };
}

// ---------------------------------------------------------------------------------------- prelude

/**
 * What the live replay does before its window (scripts/replay.ts reads these; {@link simulatePrelude}
 * does the same in the simulator), so that the window starts from the state the procedure leaves —
 * the variant the warm-up loaded or the settling upgraded to, the forecaster's history, the function
 * pool, the machines still up — on both sides:
 * 1. **warm-up**: one query at a time, `warmupGapMs` apart once answered, until `warmupStreak` in a
 *    row are answered (the first one loads the variant selection picks);
 * 2. **function burst**: {@link preludeBurstSize} queries at once (the excess goes to functions and
 *    starts the pool's containers), until all are answered;
 * 3. **settling**: at {@link replaySettleQps}, `settleMin` queries, then `settleStep` more while the
 *    SLO monitor's memory of every query so far (libs/policy `observeRequest`) misses more than
 *    `settleMissShare` × its threshold (1 − SLmin), `settleMax` at most; never more than the
 *    window's own queries; each step waits for its answers;
 * 4. **the fleet back**: checks every second, the window starts once only the stack's own workers
 *    have reported for `fleetQuietS` checks in a row, or after `fleetWaitS` checks.
 */
export const REPLAY_PRELUDE = {
  warmupStreak: 20,
  warmupGapMs: 50,
  burstSlos: 3,
  settleMinQps: 50,
  settleMin: 3000,
  settleStep: 1000,
  settleMax: 12_000,
  settleMissShare: 0.1,
  fleetQuietS: 5,
  fleetWaitS: 90,
} as const;

/** The function burst: 3 SLOs' worth of the fastest variant's profiled peak, sent at once. */
export function preludeBurstSize(variants: ReadonlyArray<{ peakQps: number }>, sloMs: number): number {
  return Math.ceil(REPLAY_PRELUDE.burstSlos * Math.max(0, ...variants.map((v) => v.peakQps)) * (sloMs / 1000));
}

/** The settling rate: the window's first minute's, at least 50 queries/s. */
export function replaySettleQps(s: Pick<ReplaySchedule, "replayQps">): number {
  return Math.max(REPLAY_PRELUDE.settleMinQps, s.replayQps[0] ?? 0);
}

/** How many queries settling sends first and at most, for a window of `windowQueries`. */
export function settleBounds(windowQueries: number): { min: number; max: number } {
  const min = Math.min(REPLAY_PRELUDE.settleMin, windowQueries);
  return { min, max: Math.min(REPLAY_PRELUDE.settleMax, Math.max(min, windowQueries)) };
}

/** Queries to settle next after `settled` with the SLO monitor's miss fraction `missFraction` (0: the window may start). */
export function settleMore(settled: number, missFraction: number, bounds: { max: number }): number {
  const bound = REPLAY_PRELUDE.settleMissShare * (1 - DEFAULT_MACHINE_PLAN_CONFIG.slMin);
  return missFraction > bound && settled < bounds.max ? Math.min(REPLAY_PRELUDE.settleStep, bounds.max - settled) : 0;
}

/** Step 4's count of its checks, those in a row with only the stack's own workers up included. */
export interface FleetWait {
  checks: number;
  quiet: number;
}

/** One of step 4's checks (a second after the one before): with `workersUp` reporting, whether the window may start. */
export function fleetCheck(w: FleetWait, workersUp: number, staticWorkers: number): FleetWait & { back: boolean } {
  const checks = w.checks + 1;
  const quiet = workersUp <= staticWorkers ? w.quiet + 1 : 0;
  return { checks, quiet, back: quiet >= REPLAY_PRELUDE.fleetQuietS || checks >= REPLAY_PRELUDE.fleetWaitS };
}

/** The prelude as the simulator played it ({@link simulatePrelude}). */
export interface ReplayPrelude {
  /** Its queries, ms from the run's start (the stack's first query at 0). */
  arrivalsMs: number[];
  /** When the window starts (on a VM autoscaler tick: a multiple of `vmTickMs`; every figure of the run is the window's). */
  windowStartMs: number;
  warmupQueries: number;
  burstQueries: number;
  settleQueries: number;
  /** The SLO monitor's memory of the prelude's queries when the window starts. */
  sloMissFraction: number;
  /** Machines up (reporting) when the window starts. */
  workers: number;
  /** What each machine runs then, `variant@machine` → its state (as replay.json's `window_start`). */
  instanceStates: Record<string, string>;
}

/** One run of the prelude so far: when its queries were all answered, its outcomes per second, and (watched from `fleetFromMs`) when the fleet was back. */
interface PreludePass {
  answeredMs: number;
  completed: number[];
  missed: number[];
  fleetBackMs: number;
  workers: number;
  instanceStates: Record<string, string>;
}

function preludePass(input: ReplaySimInput, arrivalsMs: readonly number[], fleetFromMs?: number): PreludePass {
  const last = arrivalsMs.at(-1) ?? 0;
  const horizonMs = (fleetFromMs ?? last) + (REPLAY_PRELUDE.fleetWaitS + 2) * 1000;
  const b = buildReplaySim({ ...input, prelude: undefined }, horizonMs);
  b.addQueries(arrivalsMs, true);
  const statics = input.config.staticWorkers;
  let answeredMs = Infinity;
  let fleetBackMs = Infinity;
  let wait: FleetWait = { checks: 0, quiet: 0 };
  let workers = 0;
  let instanceStates: Record<string, string> = {};
  const up = (): Machine[] => b.sim.machines.filter((m) => m.state === "running" || (m.state === "draining" && m.readyMs <= b.sim.nowMs));
  b.sim.every(
    10,
    (nowMs) => {
      if (answeredMs === Infinity && nowMs >= last && b.sim.queriesInFlight === 0) answeredMs = nowMs;
      // (live: a check a second after the last answer, then every second)
      if (fleetFromMs === undefined || fleetBackMs < Infinity || nowMs < fleetFromMs + 1000 * (wait.checks + 1)) return;
      const machines = up();
      const check = fleetCheck(wait, machines.length, statics);
      wait = check;
      if (check.back) {
        fleetBackMs = Math.ceil(nowMs / 1000) * 1000;
        workers = machines.length;
        instanceStates = Object.fromEntries(machines.flatMap((m) => [...m.replicas].filter((r) => r.state !== "draining").map((r) => [`${r.queue.name}@${m.name}`, r.state])));
      }
    },
    0,
  );
  const res = b.sim.run();
  return { answeredMs: Math.min(answeredMs, res.endMs), completed: res.series.completed.map((n, i) => n + (res.series.dropped[i] ?? 0)), missed: res.series.missed, fleetBackMs: Math.min(fleetBackMs, horizonMs), workers, instanceStates };
}

/**
 * The live replay's prelude in the simulator ({@link REPLAY_PRELUDE}, steps 1-4), from the input a
 * prediction runs on (nothing loaded at the start, the function pool cold): each step's queries are
 * sent when the step before was answered, so it is played step by step, each time from the start
 * (the runs agree up to where the shorter one ends: the seed and the same queries give the same
 * events). Warm-up queries after the first go out `warmupGapMs` + the picked variant's batch-1
 * latency apart (live waits for each answer), and every one counts as answered (live repeats until 20
 * in a row are). The SLO monitor's memory reads the outcomes second by second (libs/policy
 * `observeRequests`: the order within a second is not kept). `settleQps`: {@link replaySettleQps};
 * `windowQueries`: the window's queries (settling sends no more).
 */
export function simulatePrelude(input: ReplaySimInput, settleQps: number, windowQueries: number): ReplayPrelude {
  const c = input.config;
  const variants = input.variants.filter((v) => v.app === c.app && v.hardware === "cpu" && v.profiled);
  const pick = replayPreloadVariant(variants, c);
  // 1. warm-up
  const first = preludePass(input, [0]);
  const gapMs = REPLAY_PRELUDE.warmupGapMs + profiledLatencyOf(pick);
  const arrivals = [0, ...Array.from({ length: REPLAY_PRELUDE.warmupStreak - 1 }, (_, i) => first.answeredMs + REPLAY_PRELUDE.warmupGapMs + i * gapMs)];
  const warmed = preludePass(input, arrivals);
  // 2. the function burst
  const burst = preludeBurstSize(variants, c.sloMs);
  for (let i = 0; i < burst; i++) arrivals.push(warmed.answeredMs);
  let pass = preludePass(input, arrivals);
  // 3. settling
  const bounds = settleBounds(windowQueries);
  let settled = 0;
  let next = bounds.min;
  for (;;) {
    const from = pass.answeredMs;
    for (let i = 0; i < next; i++) arrivals.push(from + (i * 1000) / settleQps);
    settled += next;
    pass = preludePass(input, arrivals);
    next = settleMore(settled, missFractionOf(pass), bounds);
    if (next === 0) break;
  }
  // 4. the fleet back
  const back = preludePass(input, arrivals, pass.answeredMs);
  return {
    arrivalsMs: arrivals,
    // On a tick of the VM autoscaler (at every vmTickMs of the run), as the live replay starts its
    // window on one of the live vm-autoscaler's: both sides then tick at the same seconds of the window.
    windowStartMs: Math.ceil(back.fleetBackMs / c.vmTickMs) * c.vmTickMs,
    warmupQueries: REPLAY_PRELUDE.warmupStreak,
    burstQueries: burst,
    settleQueries: settled,
    sloMissFraction: missFractionOf(pass),
    workers: back.workers,
    instanceStates: back.instanceStates,
  };
}

/** The SLO monitor's memory of a pass's outcomes, read second by second. */
function missFractionOf(p: PreludePass): number {
  let s = initialSloMonitorState;
  for (let i = 0; i < p.completed.length; i++) s = observeRequests(s, p.completed[i] ?? 0, p.missed[i] ?? 0);
  return s.missFraction;
}

/** A variant's profiled batch-1 latency (its smallest batch's), ms. */
function profiledLatencyOf(v: VariantProfile): number {
  const sizes = Object.keys(v.latencyMs).map(Number).sort((a, b) => a - b);
  return v.latencyMs[sizes[0] ?? 1] ?? 0;
}

// ---------------------------------------------------------------------------------------- prediction

/** What a prediction reads: a calibration, the settings and the arrivals; nothing measured of the run it predicts. */
export interface ReplayPredictionInput {
  calibration: Calibration;
  config: ReplayConfig;
  arrivalsMs: readonly number[];
  durationMs: number;
  seed: number;
  /**
   * The rate the live replay settles at before the window ({@link replaySettleQps} of its schedule).
   * @default the window's first trace minute's arrivals (its first 60 000 / K ms), at least 50/s
   */
  settleQps?: number;
  /**
   * Runs of the simulator, each with its own draw of what the calibration knows only as a
   * distribution — the workers' report phases, each launch's boot time, each function's duration —
   * on the same arrivals: the prediction is their mean ({@link ensembleSummary}), the first run's
   * seed is `seed`. @default 1
   */
  draws?: number;
}

/** One run of an ensemble prediction ({@link predictReplay} with `draws` > 1). */
export interface ReplayDraw {
  seed: number;
  cost_dollars: number;
  machine_dollars: number;
  launches: number;
  slo_attainment: number;
  p99_ms: number;
}

/** The k-th draw's seed (the first is the prediction's own). */
export function drawSeed(seed: number, k: number): number {
  return k === 0 ? seed : seed + 7919 * k;
}

/**
 * The prediction of an ensemble of runs: the mean of every count, dollar figure and share (launches
 * may then be fractional: an expectation), the median of the p99s and of the most workers.
 */
export function ensembleSummary(runs: readonly ReplaySummary[]): ReplaySummary {
  const first = runs[0];
  if (!first) throw new Error("an ensemble of no runs");
  const mean = (f: (s: ReplaySummary) => number): number => runs.reduce((a, s) => a + f(s), 0) / runs.length;
  const median = (f: (s: ReplaySummary) => number): number => quantile(runs.map(f).sort((a, b) => a - b), 0.5);
  const codes = new Set(runs.flatMap((s) => Object.keys(s.failed_by_code)));
  return {
    queries: first.queries,
    answered: mean((s) => s.answered),
    failed: mean((s) => s.failed),
    slo_attainment: mean((s) => s.slo_attainment),
    p99_ms: median((s) => s.p99_ms),
    cost_dollars: mean((s) => s.cost_dollars),
    machine_dollars: mean((s) => s.machine_dollars),
    function_dollars: mean((s) => s.function_dollars),
    static_dollars: first.static_dollars,
    overflow_share: mean((s) => s.overflow_share),
    workers_max: median((s) => s.workers_max),
    launches: mean((s) => s.launches),
    failed_by_code: Object.fromEntries([...codes].sort().map((c) => [c, mean((s) => s.failed_by_code[c] ?? 0)])),
  };
}

/** A profile as a calibration stores it (libs/contracts `calibratedVariantSchema`); {@link calibratedProfile} reads it back. */
export function calibratedVariantOf(v: VariantProfile): CalibratedVariant {
  return {
    name: v.name,
    model: v.model,
    app: v.app,
    hardware: v.hardware as CalibratedVariant["hardware"],
    batchSize: v.batchSize,
    accuracy: v.accuracy,
    latencyMs: Object.fromEntries(Object.entries(v.latencyMs).map(([b, ms]) => [String(b), ms])),
    peakQps: v.peakQps,
    loadLatencyMs: v.loadLatencyMs,
    pricePerS: v.pricePerS,
    profiled: v.profiled,
    ...(v.resources ? { resources: { ...v.resources } } : {}),
    ...(v.concurrency !== undefined ? { concurrency: v.concurrency } : {}),
  };
}

/** A calibration's variant as the decision code's profile (libs/policy `VariantProfile`). */
export function calibratedProfile(v: CalibratedVariant): VariantProfile {
  return {
    name: v.name,
    model: v.model,
    app: v.app,
    hardware: v.hardware,
    batchSize: v.batchSize,
    accuracy: v.accuracy,
    latencyMs: Object.fromEntries(Object.entries(v.latencyMs).map(([b, ms]) => [Number(b), ms])),
    peakQps: v.peakQps,
    loadLatencyMs: v.loadLatencyMs,
    pricePerS: v.pricePerS,
    profiled: v.profiled,
    ...(v.resources ? { resources: { ...v.resources } } : {}),
    ...(v.concurrency !== undefined ? { concurrency: v.concurrency } : {}),
  };
}

/**
 * The variant the live warm-up leaves on the stack's workers: what the dispatcher's selection (libs/policy
 * `selectForApp` over a `SelectionIndex` of the app's profiled CPU variants, all Inactive, as the
 * simulator's dispatcher runs it) picks for a query of the app at the replay's SLO and accuracy, its
 * load placed. Throws when no variant meets them (the live warm-up could not start either).
 */
export function replayPreloadVariant(variants: readonly VariantProfile[], c: ReplayConfig): VariantProfile {
  const index = new SelectionIndex(variants.filter((v) => v.app === c.app && v.hardware === "cpu" && v.profiled));
  const d = selectForApp(index, c.app, { latencyMs: c.sloMs, minAccuracy: c.minAccuracy }, 0, () => ({ outcome: "placed", reason: "the warm-up's load" }));
  if (d.kind !== "route") throw new Error(`no CPU variant of app ${c.app} to preload for SLO ${c.sloMs} ms, accuracy ≥ ${c.minAccuracy}: ${d.reason}`);
  return d.variant;
}

/** Function durations when the calibration has none (scripts/replay.ts's defaults). */
const DEFAULT_FUNCTION_COLD_START_MS = 2000;
const DEFAULT_FUNCTION_WARM_MS = 20;

/**
 * The simulator's input for a prediction, from the calibration alone (see {@link predictReplay} for
 * what enters how). Throws when the calibration has no profiled CPU variant of the replay's app.
 */
export function replayPredictionInput(p: ReplayPredictionInput): ReplaySimInput {
  return predictionSetup(p).input;
}

/** The prediction's input and the prelude it plays (what {@link replayPredictionInput} and {@link predictReplay} share). */
function predictionSetup(p: ReplayPredictionInput): { input: ReplaySimInput; prelude: ReplayPrelude } {
  const { calibration: cal, config: c } = p;
  const variants = cal.variants.map(calibratedProfile).filter((v) => v.app === c.app && v.hardware === "cpu" && v.profiled);
  if (variants.length === 0) throw new Error(`the calibration (app ${cal.app}, ${cal.date}) has no profiled CPU variant of app ${c.app}`);
  const pick = replayPreloadVariant(variants, c);
  const input: ReplaySimInput = {
    config: c,
    arrivalsMs: p.arrivalsMs,
    durationMs: p.durationMs,
    variants,
    // (each launch draws from the samples; the median stands for them where one figure is read)
    bootMs: medianOf(cal.bootMs) ?? c.planBootMs,
    bootMsSamples: cal.bootMs,
    ...(cal.groupBoots ? { bootGroupSamples: cal.groupBoots } : {}),
    ...(cal.workerMemoryBytes > 0 ? { workerMemoryBytes: cal.workerMemoryBytes } : {}),
    functionColdStartMs: medianOf(cal.functions.coldStartMs) ?? DEFAULT_FUNCTION_COLD_START_MS,
    // (the mean where the samples are not drawn: money sums durations, see scripts/replay.ts)
    functionWarmMs: meanOf(cal.functions.warmMs) ?? pick.latencyMs[1] ?? DEFAULT_FUNCTION_WARM_MS,
    functionWarmMsSamples: cal.functions.warmMs,
    // (older calibrations do not say: their bursts ran the variant selection picks, as the prelude's)
    functionWarmMsVariant: cal.functions.variant ?? pick.name,
    contention: cal.contention,
    reportPeriod: { periodMs: cal.reports.periodMs, jitterMs: cal.reports.jitterMs },
    seed: p.seed,
  };
  const firstBinMs = 60_000 / c.speedup;
  const settleQps = p.settleQps ?? Math.max(REPLAY_PRELUDE.settleMinQps, (p.arrivalsMs.filter((t) => t < firstBinMs).length * 1000) / firstBinMs);
  const prelude = simulatePrelude(input, settleQps, p.arrivalsMs.length);
  return { input: { ...input, prelude: { arrivalsMs: prelude.arrivalsMs, windowStartMs: prelude.windowStartMs } }, prelude };
}

/**
 * The simulator's prediction of a live replay from a calibration file alone (`npm run calibrate`),
 * reading nothing of the run it is compared with. How each calibrated figure enters:
 *
 * - **variants**: the app's profiled CPU variants, as the calibration profiled them ({@link calibratedProfile}).
 * - **contention**: every second, the demand of the second before (the simulator's instances' busy time
 *   at profiled batch times × their threads), the machines booting now and the machines serving (up or
 *   draining) give every machine's slowdown and observed factor for the next second (libs/sim
 *   calibration.ts `contentionModel`; one host). A
 *   launch counts as booting from its executor process's start (`bootDelayMs` after the launch) to its
 *   first report, as the calibration's `booting` points were measured.
 * - **bootMs**, **groupBoots**: each launch boots for a sample drawn from the seed, of the launches
 *   made alone or of those made as many together as boot with it (`drawBootMs`; the plan is still told
 *   the configured `planBootMs`, as the live vm-autoscaler is told BOOT_TIME_MS). The samples include
 *   the boot delay the calibration ran with (`npm run calibrate` uses the replay's): a calibration taken
 *   at another speedup has another delay in them.
 * - **functions**: a cold start is the cold samples' median; each warm invocation runs one of the warm
 *   samples, drawn (their mean on average: money sums durations); without samples, 2000 ms and the
 *   picked variant's batch-1 latency.
 * - **reports**: the machines report every `periodMs` from a phase drawn from the seed, each late by a
 *   uniform draw whose spread makes the intervals' standard deviation `jitterMs` (libs/sim
 *   calibration.ts `reportTimes`); the VM autoscaler's first tick (at `vmTickMs`) reads the simulator's
 *   own reports.
 * - **workerMemoryBytes**: what every worker offers its variants (0: unlimited).
 * - **the prelude**: the run starts as the live stack does, nothing loaded and the function pool cold,
 *   and plays the live replay's warm-up, function burst, settling and wait for the fleet
 *   ({@link simulatePrelude}) before the window: the variant loaded (the one selection picks for the
 *   SLO and accuracy, {@link replayPreloadVariant}, or what settling upgraded it to), the forecaster's
 *   history, the containers warm and the machines still up are the simulator's own. `prelude` (in
 *   the result) says what it played and the state the window starts from.
 *
 * - **draws**: with `draws` > 1, as many runs, each drawing the report phases, boot times and
 *   function durations anew from its seed ({@link drawSeed}); the prediction is their mean
 *   ({@link ensembleSummary}) and `draws` lists each run's figures, the spread the calibration leaves.
 *
 * Not used: `emulation` (the batch-time spread: a second's batches all take profile × slowdown) and
 * `host` (recorded for the reader). Deterministic for a seed.
 */
export function predictReplay(p: ReplayPredictionInput): ReplaySimResult & { prelude: ReplayPrelude; draws: ReplayDraw[] } {
  const n = Math.max(1, Math.floor(p.draws ?? 1));
  let head: (ReplaySimResult & { prelude: ReplayPrelude }) | undefined;
  const summaries: ReplaySummary[] = [];
  const draws: ReplayDraw[] = [];
  for (let k = 0; k < n; k++) {
    const seed = drawSeed(p.seed, k);
    const { input, prelude } = predictionSetup({ ...p, seed });
    const r = runReplaySim(input);
    head ??= { ...r, prelude };
    summaries.push(r.summary);
    draws.push({ seed, cost_dollars: r.summary.cost_dollars, machine_dollars: r.summary.machine_dollars, launches: r.summary.launches, slo_attainment: r.summary.slo_attainment, p99_ms: r.summary.p99_ms });
  }
  // (the series, launches and log are the first run's; the figures are the ensemble's)
  return { ...head!, summary: n > 1 ? ensembleSummary(summaries) : head!.summary, draws };
}

/** The stack's own workers over the window, in trace time (the same on both sides). */
export function staticDollars(c: ReplayConfig, durationMs: number): number {
  return c.staticWorkers * traceDollars([{ pricePerHour: pricePerSecond(c.instanceType) * 3600, launchedAtMs: 0, endedAtMs: durationMs }], c.speedup, 0, durationMs);
}

/** A side's function cost from invocation durations (the local pool prices them as Lambda would). */
export function functionDollars(durationsMs: readonly number[], memoryMb: number): number {
  return durationsMs.reduce((s, d) => s + lambdaCost(d, memoryMb / 1024), 0);
}

// ---------------------------------------------------------------------------------------- charts

export interface ReplaySeriesRow {
  /** Real second of the window, and the trace minute it replays. */
  t_s: number;
  trace_minute: number;
  live?: { load: number; forecast: number | null; workers: number; overflow: number; misses: number };
  sim: { load: number; forecast: number | null; workers: number; overflow: number; misses: number };
}

/** replay.json's `series`: per real second, live beside sim. */
export function replaySeriesRows(startMinute: number, speedup: number, sim: ReplaySideSeries, live?: ReplaySideSeries): ReplaySeriesRow[] {
  const n = Math.max(sim.load.length, live?.load.length ?? 0);
  const row = (s: ReplaySideSeries, i: number): ReplaySeriesRow["sim"] => ({
    load: s.load[i] ?? 0,
    forecast: Number.isFinite(s.forecast[i]) ? (s.forecast[i] as number) : null,
    workers: s.workers[i] ?? 0,
    overflow: s.overflow[i] ?? 0,
    misses: s.misses[i] ?? 0,
  });
  return Array.from({ length: n }, (_, i) => ({
    t_s: i,
    trace_minute: startMinute + Math.floor((i * speedup) / 60),
    ...(live ? { live: row(live, i) } : {}),
    sim: row(sim, i),
  }));
}

/** The scenario's line charts (one per figure, both sides), for `npm run sim -- replay` and the README. */
export function replayCharts(id: string, rows: readonly ReplaySeriesRow[]): Chart[] {
  const metrics = ["load", "forecast", "workers", "overflow", "misses"] as const;
  const label: Record<(typeof metrics)[number], string> = { load: "queries/s", forecast: "forecast queries/s", workers: "workers up", overflow: "to functions /s", misses: "SLO misses /s" };
  return metrics.map((m) => ({
    id: `${id}-${m}`,
    title: `${label[m]} (per second of replay)`,
    xLabel: "trace minute",
    yLabel: label[m],
    kind: "line" as const,
    series: (["live", "sim"] as const).flatMap((side) =>
      rows.some((r) => r[side]) ? [{ name: side, points: rows.map((r): [number, number] => [r.t_s, r[side]?.[m] ?? NaN]) }] : [],
    ),
  }));
}

// ---------------------------------------------------------------------------------------- scenario

/**
 * The MLP scripts/replay.ts registers by default (784 → 4096 → 4096 → 10, batch 1, one thread), as
 * its profile came out on the 2-core development machine: `npm run sim -- replay` uses it when no live
 * registry is at hand. Measured figures; replay.json carries the profile of each live run.
 */
export const REPLAY_DEFAULT_PROFILE: VariantProfile = {
  name: "heavy-mlp--cpu-fp32-b1-t1",
  model: "heavy-mlp",
  app: "heavy",
  hardware: "cpu",
  batchSize: 1,
  accuracy: 0,
  latencyMs: { 1: 14 },
  peakQps: 71,
  loadLatencyMs: 400,
  pricePerS: pricePerSecond("c5.xlarge") / 4,
  profiled: true,
  resources: { threads: 1, memoryBytes: 90e6 },
};

export const REPLAY_DEFAULTS = { app: "heavy", sloMs: 1000, minAccuracy: 0, speedup: 144, startMinute: 0, minutes: 1440 } as const;

export const replayScenario: Scenario = {
  name: "replay",
  description: "the live replay's simulator side alone: a trace day compressed 144× through INFaaS + MArk's plan, SLO monitor and overflow on local-provider machines",
  run(options): ScenarioResult {
    const trace = options.trace ?? { binMs: 60_000, counts: Array.from({ length: 1440 }, (_, m) => 3000 + 2000 * Math.sin((m / 1440) * 2 * Math.PI) ** 2) };
    const config = replayConfig({ speedup: REPLAY_DEFAULTS.speedup, app: REPLAY_DEFAULTS.app, sloMs: REPLAY_DEFAULTS.sloMs, minAccuracy: REPLAY_DEFAULTS.minAccuracy });
    const window = { startMinute: REPLAY_DEFAULTS.startMinute, minutes: Math.min(REPLAY_DEFAULTS.minutes, minuteRates(trace).length), peakQps: options.peakQps ?? autoPeakQps([REPLAY_DEFAULT_PROFILE], config) ?? 1 };
    const s = replaySchedule(trace, window, config.speedup);
    const r = runReplaySim({
      config,
      arrivalsMs: replayArrivals(s, options.seed),
      durationMs: s.durationMs,
      variants: [REPLAY_DEFAULT_PROFILE],
      preload: [{ variant: REPLAY_DEFAULT_PROFILE.name, count: 1 }],
      bootMs: config.planBootMs,
      functionColdStartMs: 2000,
      functionWarmMs: 20,
      seed: options.seed,
    });
    const rows = replaySeriesRows(window.startMinute, config.speedup, r.series);
    return {
      scenario: "replay",
      paper: "No paper figure: the live replay (npm run replay) compares this simulation with the running stack on the same arrivals; the live-replay sections below have the measured runs.",
      systems: [{ name: "sim", ...r.summary }],
      table: [{ system: "sim", queries: r.summary.queries, "SLO %": round(r.summary.slo_attainment * 100, 2), "p99 ms": round(r.summary.p99_ms, 1), "cost $": round(r.summary.cost_dollars, 4), "to functions %": round(r.summary.overflow_share * 100, 2), "workers max": r.summary.workers_max }],
      charts: replayCharts("replay", rows),
      notes: [
        `Trace ${options.tracePath ?? "(synthetic diurnal)"} minutes ${window.startMinute} … ${window.startMinute + window.minutes - 1} (${s.gapMinutes} gap minutes filled), peak ${window.peakQps} qps, compressed ${config.speedup}× into ${round(s.durationMs / 60_000, 1)} min.`,
        `Variant profile: ${REPLAY_DEFAULT_PROFILE.name} (${REPLAY_DEFAULT_PROFILE.peakQps} qps, ${REPLAY_DEFAULT_PROFILE.latencyMs[1]} ms); boot ${config.planBootMs} ms; function cold start 2000 ms.`,
        liveSettingsNote({ mode: "infaas", variants: [], workers: [], sloMsByModel: {}, vmConfig: { readingTicks: config.readingTicks } }),
      ],
    };
  },
};

const round = (x: number, d: number): number => Math.round(x * 10 ** d) / 10 ** d;
