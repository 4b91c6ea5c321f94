/**
 * MArk and its baselines on the simulator (MArk §4-5), shared by the mark-twitter, mark-mmpp and
 * combined scenarios. A run serves one or more models ("lanes"); each query is sent to a lane by a
 * selector (one lane for the model-specific systems; for `combined`, the model that INFaaS's
 * selection index picks, see combined.ts). INFaaS itself is systems/infaas.ts, not a system here.
 *
 * MArk (`mark-ondemand`, `mark-spot`, and the provisioning of `combined`), per lane:
 * - one request queue served by every instance of the lane (heterogeneous types, each with its
 *   batching and capacity from batch-tuning.ts `tunedBatching`, the rule the live registrar tunes Wbatch
 *   with: MArk §4.3); queries that can no longer meet their deadline when a
 *   batch starts are shed to Lambda (the engine's `shedLate`);
 * - per query on arrival, overflow.ts decides local vs Lambda (queue ahead / μ* + Wbatch + T(b) against
 *   the SLO: MArk §4.1's Bouncer; the queue ahead is the live dispatcher's backlog estimate,
 *   `drainBacklog`), its input mapped from the ready replicas by `overflowInputFor`, the
 *   mapping the live dispatcher uses;
 * - every minute: the per-minute max arrival rate (5 s samples, forecast.ts) is appended to the lane's
 *   history, the run's predictor from the registry the live forecaster uses (predictors.ts; `auto` by
 *   default: forecast-plan.ts `planForecast`, last value, seasonal-naive or Holt-Winters refitted every
 *   60 minutes, by the history's length; `--predictor` chooses another) forecasts the next 60 minutes and
 *   provisioning.ts (MArk Algorithm 1) plans for t0 + 5 min; launches happen at once, destroys under the 6-plan limit;
 * - every second each running instance sends the live worker report (worker-report.ts
 *   `simulatedWorkerReport`), read by the VM autoscaler's observation (libs/policy `FleetObservation`):
 *   its SLO outcomes (answered, answered late, shed as late) are the SLO monitor's samples, as live;
 * - every 10 s: the reactive SLO monitor's cycle (slo-monitor.ts `sloMonitorCycle`, the machine plan's
 *   own, with its defaults: acts only while queries still miss) may launch one c5.large (or the lane's
 *   cheapest type when c5.large cannot serve the model); the launch is added to the latest plan so that
 *   the 6-plan destroy limit protects it like a planned instance;
 * - `mark-spot` prices every type at its spot price and draws interruptions (2-minute notice; see
 *   SPOT_MEAN_LIFETIME_S): on notice the instance leaves the plan, burstable t2.medium standbys are
 *   resumed to cover its capacity until the replacement is up (MArk §4.5), and the provisioner re-plans
 *   at once; at the deadline the instance is killed and its running batches go back to the queue.
 *   Options for the microbenchmarks and Table 5 (none of them set by mark-twitter, mark-mmpp or
 *   combined): `spotPrices`, a spot price series (libs/policy spot-prices.ts) — every plan prices each
 *   type with `chooseMarket` at that time (on-demand while its spot price is above on-demand, the rule
 *   the live machine plan uses) and spot instances are billed along the series; `interruptions`, notices
 *   forced at a time to a fraction of the spot fleet; `standbys: false`, no burstable standbys (Lambda
 *   alone covers); `spotMeanLifetimeS`; `bootMs`.
 *
 * `sagemaker-2x`: ml.c5.large instances (SageMaker hosting price, see SAGEMAKER_PRICE_PREMIUM) behind
 * one queue, scaled by baselines-sagemaker.ts (target tracking on invocations per instance with 2×
 * over-provisioning), no overflow, SLO-oblivious.
 *
 * Costs are billed by the engine: EC2 per second with a 60 s minimum from the launch request (start-up
 * included), Lambda per request and GB-second.
 */
import {
  builtinPredictor, chooseMarket, createRng, DEFAULT_MACHINE_PLAN_CONFIG, decideOverflow, FleetObservation, initialSloCycleState, sloMonitorCycle,
  type ObservedVariant, type SloCycleState, drainBacklog, serviceRateOf, type BacklogEstimate, INSTANCE_PRICES, spotCostDollars, overflowInputFor, initialProvisioningState, initialSloMonitorState,
  initialTargetTrackingState, interpolateBatchLatency, maxRatePerUnit, planProvisioning,
  pricePerSecond, sampleExponential, samplePoisson, targetTracking, tunedBatching,
  type BatchTuning, type ForecastPlanState, type InstanceTypeSpec, type OverflowCapacity, type Predictor, type ProvisioningState,
  type SpotPriceSeries, type TargetTrackingState, DEFAULT_PREDICTOR,
} from "@sloserve/policy";
import { Simulator, drop, type Machine, type Query, type Queue, type SimResult } from "../engine.js";
import { MARK_BATCHING, MARK_CAPACITIES, MARK_TABLE2 } from "../hardware.js";
import { simulatedWorkerReport, type ReplicaReadings } from "../worker-report.js";
import { traceArrivals, type RateSchedule } from "@sloserve/policy";

export type MarkSystem = "sagemaker-2x" | "mark-ondemand" | "mark-spot" | "combined";

/** One instance type serving the model: its latency curve and largest batch. */
export interface MarkInstanceProfile {
  type: string;
  latencyMs: (batch: number) => number;
  maxBatch: number;
}

export interface MarkModel {
  name: string;
  sloMs: number;
  /** Top-1 accuracy, for model-less selection. */
  accuracy: number;
  instances: MarkInstanceProfile[];
  /** Lambda (3 GB) warm execution time. */
  lambdaMs: number;
}

/**
 * MArk [repo] capacities as instance profiles; T(1) of a batched entry is an assumption (the paper
 * prints none): a number, or a function of the entry's T(batch) (ms).
 */
function markInstances(model: string, batchedT1Ms: number | ((tBatchMs: number, type: string) => number)): MarkInstanceProfile[] {
  return MARK_CAPACITIES.filter((c) => c.model === model).map((c) => {
    if (c.batch === 1) {
      const t1 = 60_000 / c.rpm;
      return { type: c.type, latencyMs: (b: number) => t1 * b, maxBatch: 1 };
    }
    const tBatch = 60_000 / c.rpm;
    const t1 = typeof batchedT1Ms === "number" ? batchedT1Ms : batchedT1Ms(tBatch, c.type);
    return { type: c.type, latencyMs: interpolateBatchLatency([[1, t1], [c.batch, tBatch]]), maxBatch: c.batch };
  });
}

/**
 * Inception-v3 as MArk measured it. CPU types serve one request at a time at their [repo] capacity, so
 * T(1) = 60 000 / rpm (c5.large: 211 ms, matching Table 2's 210 ms). p2.xlarge: T(8) = 60 000 / 415 =
 * 144.6 ms per batch of 8 ([repo] "415 per batch of 8"); T(1) = 50 ms is our assumption, linear between.
 * Accuracy 78.0% top-1 (the Inception-v3 paper's ImageNet figure).
 */
export function inceptionV3(): MarkModel {
  return { name: "inception-v3", sloMs: MARK_BATCHING["inception-v3"]!.sloMs, accuracy: 0.78, instances: markInstances("inception-v3", 50), lambdaMs: MARK_TABLE2["inception-v3"]!.lambda[1] };
}

/**
 * NASNet-Large: [repo] capacities (c5.xlarge 85, c5.2xlarge 135, c5.4xlarge 187 rpm; p2.xlarge 95
 * batches of 8 per minute); GPU T(1) = 150 ms assumed; Lambda time assumed 2× Inception-v3's (a model
 * 7.6× larger, Table 4). Accuracy 82.7% top-1.
 */
export function nasnet(): MarkModel {
  return { name: "nasnet", sloMs: MARK_BATCHING.nasnet!.sloMs, accuracy: 0.827, instances: markInstances("nasnet", 150), lambdaMs: 2 * MARK_TABLE2["inception-v3"]!.lambda[1] };
}

/**
 * LSTM-ptb (language modelling, MXNet Model Server; MArk ran it on CPU only, without batching): [repo]
 * capacity c5.xlarge 3100 rpm, so T(1) = 19.4 ms; SLO 100 ms. Lambda time assumed 1.81 × T(1) (Inception-
 * v3's Lambda/c5.large ratio in Table 2, 380/210). No top-1 accuracy (a language model): 0.
 */
export function lstmPtb(): MarkModel {
  const t1 = 60_000 / MARK_CAPACITIES.find((c) => c.model === "lstm-ptb")!.rpm;
  return { name: "lstm-ptb", sloMs: MARK_BATCHING["lstm-ptb"]!.sloMs, accuracy: 0, instances: markInstances("lstm-ptb", 0), lambdaMs: (380 / 210) * t1 };
}

/**
 * OpenNMT-ende (translation, TF Serving): [repo] capacities in batches of 2 per minute on CPU (c5.xlarge
 * 40, c5.2xlarge 54, c5.4xlarge 75: T(2) = 1.5 s, 1.11 s, 0.8 s; MArk: CPU Nbatch 2) and of 8 on
 * p2.xlarge (80: T(8) = 750 ms). Assumed: T(1) = 2/3 × T(2) on CPU (batching gains 1.33×) and 300 ms on the
 * GPU. Lambda 3100 ms (Table 2): above the 1400 ms SLO, so queries sent to Lambda miss it. Accuracy 0 (BLEU, not top-1).
 */
export function openNmt(): MarkModel {
  const instances = markInstances("opennmt", (tBatch, type) => (type.startsWith("p2.") ? 300 : (2 / 3) * tBatch));
  return { name: "opennmt", sloMs: MARK_BATCHING.opennmt!.sloMs, accuracy: 0, instances, lambdaMs: MARK_TABLE2.opennmt!.lambda[1] };
}

/** Start-up of an EC2 instance with the model server, ms (inside MArk's τ = 5 min). */
export const EC2_BOOT_MS = 200_000;
/** SageMaker ML instances cost about 40% more than the EC2 instance (ml.c5.large $0.119/h vs c5.large $0.085/h, us-east-1). */
export const SAGEMAKER_PRICE_PREMIUM = 1.4;
/** Assumed mean lifetime of a spot instance before an interruption notice (chosen to exercise the path). */
export const SPOT_MEAN_LIFETIME_S = 6 * 3600;
/** Burstable standby (MArk §3.2, Table 3: t2.medium runs Inception-v3 in 140 ms at full burst). */
const STANDBY = { type: "t2.medium", latencyMs: 140.37, resumeMs: 100_000, holdMs: 8 * 60_000 };
/** Lambda cold start (model load in a fresh 3 GB container): assumption. */
const LAMBDA_COLD_START_MS = 2_000;

export interface MarkRunInput {
  system: MarkSystem;
  /** The models served (lanes). */
  models: MarkModel[];
  /** Lane of each query (default: lane 0). */
  select?: (query: Query) => number;
  /** Per query on arrival: its SLO and accuracy requirement (default: lane 0's SLO, no accuracy floor). */
  init?: (query: Query, rng: { next(): number }) => void;
  seed: number;
  /** Arrival rates of the measured window (Poisson arrivals within each bin). */
  rates: RateSchedule;
  /** Per lane: per-minute maximum arrival rates (5 s samples) before the window, the forecaster's history. */
  history: number[][];
  /** Season of the history for Holt-Winters (minutes). */
  season: number;
  /** The forecaster's predictor (libs/policy predictors.ts, as the live forecaster's `FORECASTER`). @default auto */
  predictor?: Predictor;
  /**
   * mark-spot: spot prices over time (libs/policy spot-prices.ts, times from the run's start). At every
   * plan each type's market and price are `chooseMarket`'s at that time; spot instances are billed at
   * the price in effect each second. @default none (the price table's static spot prices)
   */
  spotPrices?: SpotPriceSeries;
  /** mark-spot: mean lifetime before a drawn interruption notice, s (Infinity: none drawn). @default SPOT_MEAN_LIFETIME_S */
  spotMeanLifetimeS?: number;
  /** mark-spot: notices given at `atMs` to `fraction` of the running spot instances (the oldest first). @default none */
  interruptions?: ReadonlyArray<{ atMs: number; fraction: number }>;
  /** mark-spot: burstable standbys resumed on a notice (MArk §4.5); false: Lambda alone covers. @default true */
  standbys?: boolean;
  /** Launch request to ready, ms. @default EC2_BOOT_MS */
  bootMs?: number;
}

/** One minute of a run by arrival time: queries, those answered within their SLO, those sent to Lambda. */
export interface MarkMinuteSlo {
  minute: number;
  arrivals: number;
  met: number;
  toLambda: number;
}

export interface MarkRunResult {
  /** The system's name in the report (runMark's MarkSystem, or another system reported alike). */
  system: string;
  sim: SimResult;
  /** Total: the engine's bill plus spot instances billed along a price series. */
  costDollars: number;
  ec2Dollars: number;
  lambdaDollars: number;
  lambdaShare: number;
  /** Per minute (all lanes): running instances and their capacity, the max rate and the forecast made for it. */
  perMinute: Array<{ minute: number; arrivalsQps: number; maxRateQps: number; instances: number; capacityQps: number; forecastQps: number }>;
  interruptions: number;
  monitorLaunches: number;
  /** Batching per instance type, of the first lane. */
  batching: Record<string, BatchTuning>;
  forecaster: string;
  /** Queries per lane. */
  perLane: Record<string, number>;
  /** Per minute of arrival (all lanes): SLO attainment and overflow (runMark's runs). */
  perMinuteSlo?: MarkMinuteSlo[];
  /** Every launch: when, the type, and its market ("standby": a burstable standby) (runMark's runs). */
  launches?: Array<{ atMs: number; type: string; market: "on-demand" | "spot" | "standby" }>;
}

interface Fleet {
  machine: Machine;
  type: string;
  capacityQps: number;
  interrupted: boolean;
  standby: boolean;
  lastBusyMs: number;
}

interface Lane {
  model: MarkModel;
  queue: Queue;
  lambda: ReturnType<Simulator["addFunctionPool"]>;
  /** The dispatcher's backlog estimate of this lane's queue (the overflow rule's queue ahead). */
  backlog?: BacklogEstimate;
  batching: Record<string, BatchTuning>;
  types: InstanceTypeSpec[];
  fleet: Fleet[];
  perSecond: number[];
  history: number[];
  /** The predictor's state (what it learnt: Holt-Winters' fitted parameters), kept per lane as the live forecaster keeps it per app. */
  forecast: ForecastPlanState;
  /** The method of the last forecast. */
  method: string;
  forecastFor: Map<number, number>;
  prov: ProvisioningState;
  /** What the VM autoscaler reads of the lane's instances: their worker reports. */
  observation: FleetObservation;
  /** The lane's variants as the observation reads them (one per instance type, of the lane's app). */
  observed: Map<string, ObservedVariant>;
  /** Queries sent to the lane's queue since the last report (shared among its reporting instances). */
  localSinceReport: number;
  monitor: SloCycleState;
  tt: TargetTrackingState;
  queries: number;
  /** The ready replicas as overflow capacity, at the queue's replicaVersion (see readyCapacity). */
  capacity: { version: number; value: readonly OverflowCapacity[] };
}

/** Per-minute maximum 5 s rates of per-minute mean rates, realised with Poisson counts per second (seeded). */
export function historyFromRates(perMinuteQps: readonly number[], seed: number): number[] {
  const rng = createRng(seed);
  const perSecond: number[] = [];
  for (const r of perMinuteQps) for (let s = 0; s < 60; s++) perSecond.push(samplePoisson(rng, r));
  return maxRatePerUnit(perSecond);
}

/**
 * The measured window's queries, the same for every system of a scenario: one stream replaying `rates`
 * (libs/policy common/arrivals.ts `traceArrivals`: a Poisson process within each bin at the bin's rate, from the stream's
 * seeded generator), and `init` drawing each query's requirements from a generator seeded by `seed`.
 */
export function addMarkStream(sim: Simulator, o: { app: string; sloMs: number; rates: RateSchedule; seed: number; init?: MarkRunInput["init"] }): void {
  const init = o.init;
  const rng = createRng(o.seed ^ 0x2545f491);
  sim.addStream({ app: o.app, sloMs: o.sloMs, process: traceArrivals(o.rates), ...(init ? { init: (q: Query) => init(q, rng) } : {}) });
}

/**
 * c5.large, MArk's default type for the SLO monitor's launches (§4.4) and SageMaker's ml.c5.large; the
 * model's cheapest type per capacity that meets the SLO where c5.large cannot serve it.
 */
function defaultType(lane: Lane): string {
  return lane.types.some((t) => t.name === "c5.large" && t.meetsSlo !== false) ? "c5.large" : mostEfficient(lane).name;
}

/** The lane's cheapest type per unit of capacity that can serve the model. */
function mostEfficient(lane: Lane): InstanceTypeSpec {
  return [...lane.types].filter((t) => t.meetsSlo !== false).sort((a, b) => a.pricePerHour / a.capacityQps - b.pricePerHour / b.capacityQps)[0]!;
}

export function runMark(input: MarkRunInput): MarkRunResult {
  const { system } = input;
  const durationMs = input.rates.rates.length * input.rates.binMs;
  const sim = new Simulator({ seed: input.seed, durationMs, drainMs: 30_000 });
  const rng = createRng(input.seed ^ 0x5f3759df);
  const sagemaker = system === "sagemaker-2x";
  const spot = system === "mark-spot";
  const market = spot ? "spot" : "on-demand";
  const first = input.models[0]!;
  addMarkStream(sim, { app: first.name, sloMs: first.sloMs, rates: input.rates, seed: input.seed, ...(input.init ? { init: input.init } : {}) });

  const lanes: Lane[] = input.models.map((model, i) => {
    const batching: Record<string, BatchTuning> = {};
    for (const p of model.instances) batching[p.type] = tunedBatching(p, model.sloMs);
    const types: InstanceTypeSpec[] = model.instances.map((p) => ({
      name: p.type, pricePerHour: pricePerSecond(p.type, market) * 3600, capacityQps: batching[p.type]!.throughputQps,
      meetsSlo: batching[p.type]!.nbatch > 0, spot,
    }));
    const history = [...(input.history[i] ?? [])];
    return {
      model, batching, types, history, forecast: {}, method: "",
      queue: sim.addQueue({ name: model.name, shedLate: !sagemaker }),
      lambda: sim.addFunctionPool({ name: `lambda-${model.name}`, latencyMs: model.lambdaMs, coldStartMs: LAMBDA_COLD_START_MS, memoryGb: 3, keepAliveMs: 45 * 60_000 }),
      fleet: [], perSecond: [], forecastFor: new Map(), prov: initialProvisioningState,
      observation: new FleetObservation(), localSinceReport: 0, monitor: initialSloCycleState,
      observed: new Map([...model.instances.map((p) => p.type), STANDBY.type].map((t) => [t, { app: model.name, threads: 1 }])),
      tt: initialTargetTrackingState, queries: 0, capacity: { version: -1, value: [] },
    };
  });

  const profileOf = (lane: Lane, type: string): MarkInstanceProfile => lane.model.instances.find((p) => p.type === type)!;
  const bootMs = input.bootMs ?? EC2_BOOT_MS;
  const series = spot ? input.spotPrices : undefined;
  const launches: NonNullable<MarkRunResult["launches"]> = [];
  /** Spot machines billed along the series (the engine bills them nothing). */
  const billedAlong: Machine[] = [];
  /** Each type at the market and price `chooseMarket` gives it at `nowMs` (the lane's static types without a series). */
  const typesAt = (lane: Lane, nowMs: number): InstanceTypeSpec[] => {
    if (!series) return lane.types;
    return lane.types.map((t) => {
      const c = chooseMarket({ type: t.name, spot: true }, series, nowMs);
      return { ...t, pricePerHour: c.pricePerHour, spot: c.market === "spot" };
    });
  };
  const launch = (lane: Lane, type: string, bootMs: number, opts: { market?: "on-demand" | "spot"; standby?: boolean } = {}): Fleet => {
    const standby = opts.standby ?? false;
    const m = opts.market ?? market;
    const alongSeries = series !== undefined && !standby && m === "spot";
    const price = alongSeries ? 0 : standby ? pricePerSecond(STANDBY.type) : sagemaker ? pricePerSecond(type) * SAGEMAKER_PRICE_PREMIUM : pricePerSecond(type, m);
    const gpu = !standby && INSTANCE_PRICES[type]?.kind === "gpu";
    const machine = sim.launchMachine({ type: standby ? STANDBY.type : type, kind: gpu ? "gpu" : "cpu", pricePerS: price, bootMs, spot: !standby && m === "spot" });
    if (alongSeries) billedAlong.push(machine);
    launches.push({ atMs: sim.nowMs, type, market: standby ? "standby" : m });
    const lat = standby ? (b: number) => STANDBY.latencyMs * b : profileOf(lane, type).latencyMs;
    const b = standby ? { nbatch: 1, wbatchMs: 0, throughputQps: 1000 / STANDBY.latencyMs } : lane.batching[type]!;
    sim.addReplica(lane.queue, machine, { latencyMs: lat, maxBatch: b.nbatch, waitMs: b.wbatchMs, label: type });
    const f: Fleet = { machine, type, capacityQps: b.throughputQps, interrupted: false, standby, lastBusyMs: 0 };
    lane.fleet.push(f);
    if (!standby && m === "spot") scheduleInterruption(lane, f);
    return f;
  };
  const alive = (lane: Lane): Fleet[] => {
    // Terminated instances are read no more: dropped, so that each scan is as long as the fleet, not its history.
    lane.fleet = lane.fleet.filter((f) => f.machine.billedToMs === null);
    return [...lane.fleet];
  };

  let toLambda = 0;
  const perMinuteSlo: MarkMinuteSlo[] = [];
  const minuteOf = (q: Query): MarkMinuteSlo => {
    const m = Math.floor(q.arrivalMs / 60_000);
    while (perMinuteSlo.length <= m) perMinuteSlo.push({ minute: perMinuteSlo.length, arrivals: 0, met: 0, toLambda: 0 });
    return perMinuteSlo[m]!;
  };
  sim.setRouter((q: Query, _from, cause) => {
    if (cause === "arrival") {
      const lane = lanes[input.select ? input.select(q) : 0];
      minuteOf(q).arrivals++;
      if (!lane) return drop("no model meets the query's requirements");
      q.data = lane;
      lane.queries++;
      const s = Math.floor(q.arrivalMs / 1000);
      while (lane.perSecond.length <= s) lane.perSecond.push(0);
      lane.perSecond[s]!++;
      if (sagemaker) return lane.queue;
      // Queue ahead as the live dispatcher reads it: its backlog estimate (libs/policy drainBacklog).
      const serving = readyCapacity(lane);
      const backlog = drainBacklog(lane.backlog, q.arrivalMs, serviceRateOf(serving));
      const d = decideOverflow(overflowInputFor({ serving, queueAhead: backlog.queries, nowMs: q.arrivalMs, deadlineMs: q.arrivalMs + q.sloMs }));
      if (d.action === "local") {
        backlog.queries++;
        lane.localSinceReport++;
        lane.backlog = backlog;
        return lane.queue;
      }
      lane.backlog = backlog;
      toLambda++;
      minuteOf(q).toLambda++;
      return lane.lambda;
    }
    const lane = q.data as Lane;
    if (cause === "late") {
      toLambda++;
      minuteOf(q).toLambda++;
      return lane.lambda;
    }
    if (sim.nowMs - q.arrivalMs <= q.sloMs) minuteOf(q).met++;
    return null;
  });

  let interruptions = 0;
  let monitorLaunches = 0;
  /** The next 60 minutes' max rates, by the run's predictor (the live forecaster's registry; auto: planForecast's method choice and refits). */
  const predictor = input.predictor ?? builtinPredictor(DEFAULT_PREDICTOR);
  const forecastOf = (lane: Lane): number[] => {
    const plan = predictor.predict(lane.history, { season: input.season, horizon: 60 }, lane.forecast);
    lane.forecast = plan.state;
    lane.method = plan.method;
    return plan.values;
  };
  const applyPlan = (lane: Lane, forecastQps: number[], tau: number, bootAfterMs = bootMs): void => {
    const running = alive(lane).filter((f) => !f.interrupted && !f.standby);
    const types = typesAt(lane, sim.nowMs);
    const d = planProvisioning({ forecastQps, types, running: running.map((f) => ({ id: String(f.machine.id), type: f.type })), state: lane.prov, tau });
    lane.prov = d.state;
    for (const l of d.launches) {
      if (!series) launch(lane, l.type, bootAfterMs);
      else launch(lane, l.type, bootAfterMs, { market: types.find((t) => t.name === l.type)?.spot ? "spot" : "on-demand" });
    }
    for (const x of d.destroys) {
      const f = running.find((r) => String(r.machine.id) === x.id);
      if (f) sim.terminateMachine(f.machine);
    }
  };

  const lifetimeS = input.spotMeanLifetimeS ?? SPOT_MEAN_LIFETIME_S;
  function scheduleInterruption(lane: Lane, f: Fleet): void {
    if (lifetimeS === Infinity) return;
    const lifeMs = 1000 * sampleExponential(rng, 1 / lifetimeS);
    sim.at(sim.nowMs + lifeMs, () => {
      if (f.machine.billedToMs !== null || f.interrupted) return;
      notice(lane, [f]);
    });
  }
  /** Interruption notices for `doomed`: standbys for their capacity, a new plan at once, the instances taken back in 2 minutes. */
  function notice(lane: Lane, doomed: readonly Fleet[]): void {
    for (const f of doomed) {
      f.interrupted = true;
      interruptions++;
      if (input.standbys === false) continue;
      // MArk §4.5: resume burstable standbys for the lost capacity until the replacement is up.
      const n = Math.ceil(f.capacityQps / (1000 / STANDBY.latencyMs));
      for (let i = 0; i < n; i++) {
        const s = launch(lane, f.type, STANDBY.resumeMs, { standby: true, market: "on-demand" });
        sim.at(sim.nowMs + STANDBY.holdMs, () => sim.terminateMachine(s.machine));
      }
    }
    applyPlan(lane, forecastOf(lane), 5);
    for (const f of doomed) sim.at(sim.nowMs + 120_000, () => sim.killMachine(f.machine));
  }
  if (spot) {
    for (const x of input.interruptions ?? []) {
      sim.at(x.atMs, () => {
        for (const lane of lanes) {
          const live = alive(lane).filter((f) => !f.interrupted && !f.standby && f.machine.spot);
          if (live.length > 0) notice(lane, live.slice(0, Math.ceil(x.fraction * live.length)));
        }
      });
    }
  }

  // Start in steady state: the instances each policy would run for the first minute, already up.
  const binsPerMinute = Math.max(1, Math.round(60_000 / input.rates.binMs));
  const firstQps = Math.max(...Array.from({ length: Math.min(binsPerMinute, input.rates.rates.length) }, (_, i) => input.rates.rates[i] ?? 0));
  const totalHistoryLast = lanes.reduce((a, l) => a + (l.history[l.history.length - 1] ?? 0), 0);
  for (const lane of lanes) {
    const share = totalHistoryLast > 0 ? (lane.history[lane.history.length - 1] ?? 0) / totalHistoryLast : 1 / lanes.length;
    const qps = firstQps * share;
    if (sagemaker) {
      const type = defaultType(lane);
      const cap = lane.batching[type]!.throughputQps;
      for (let i = 0; i < Math.max(1, Math.ceil(qps / (cap / 2))); i++) launch(lane, type, 0);
    } else {
      applyPlan(lane, forecastOf(lane).map((x, i) => (i === 0 ? Math.max(x, qps) : x)), 1, 0);
    }
  }

  const perMinute: MarkRunResult["perMinute"] = [];
  sim.every(60_000, (nowMs) => {
    const minute = Math.round(nowMs / 60_000) - 1;
    const row = { minute, arrivalsQps: 0, maxRateQps: 0, instances: 0, capacityQps: 0, forecastQps: 0 };
    for (const lane of lanes) {
      const last = lane.perSecond.slice(minute * 60, minute * 60 + 60);
      while (last.length < 60) last.push(0);
      const maxRate = maxRatePerUnit(last)[0] ?? 0;
      lane.history.push(maxRate);
      const running = alive(lane);
      row.arrivalsQps += last.reduce((a, b) => a + b, 0) / 60;
      row.maxRateQps += maxRate;
      row.instances += running.length;
      row.capacityQps += running.reduce((a, f) => a + f.capacityQps, 0);
      row.forecastQps += lane.forecastFor.get(minute) ?? NaN;
      if (sagemaker) {
        const type = defaultType(lane);
        const cap = lane.batching[type]!.throughputQps;
        const d = targetTracking({ nowS: nowMs / 1000, instances: running.length, invocationsLastMinute: last.reduce((a, b) => a + b, 0), capacityQps: cap, state: lane.tt });
        lane.tt = d.state;
        for (let i = running.length; i < d.desired; i++) launch(lane, type, bootMs);
        // Scale-in removes the instances that were launched last.
        for (let i = 0; i < running.length - d.desired; i++) sim.terminateMachine(running[running.length - 1 - i]!.machine);
      } else {
        const fc = forecastOf(lane);
        lane.forecastFor.set(minute + 5, fc[4] ?? NaN); // made at the end of `minute`: fc[0] is minute + 1
        applyPlan(lane, fc, 5);
      }
    }
    perMinute.push(row);
  });

  if (!sagemaker) {
    // Every second, each running instance's worker report to the VM autoscaler's observation (the
    // standbys' label is their own type, which the observation also reads as the lane's app).
    const readings: ReplicaReadings = new WeakMap();
    const lastReportMs = new Map<Machine, number>();
    sim.every(1000, (nowMs) => {
      for (const lane of lanes) {
        const reporting = alive(lane).filter((f) => f.machine.state === "running" && !f.machine.failed);
        const share = reporting.length > 0 ? lane.localSinceReport / reporting.length : 0;
        lane.localSinceReport = 0;
        for (const f of reporting) {
          const m = f.machine;
          const from = lastReportMs.get(m) ?? Math.min(nowMs, m.readyMs);
          lastReportMs.set(m, nowMs);
          const report = simulatedWorkerReport(m, nowMs, from, readings, { stateOf: () => "active", arrivalsOf: () => share });
          lane.observation.observeReport(report, nowMs, lane.observed);
        }
      }
    });
    const plan = DEFAULT_MACHINE_PLAN_CONFIG;
    sim.every(plan.sloPeriodMs, (nowMs) => {
      for (const lane of lanes) {
        const cycle = sloMonitorCycle(lane.monitor, lane.observation.takeSloSamples(), nowMs, {
          periodMs: plan.sloPeriodMs, decay: plan.sloDecay, cooldownCycles: plan.sloCooldownCycles, slMinOf: () => plan.slMin,
        });
        lane.monitor = cycle.state;
        if (!cycle.acts.some((a) => a.act === "launch")) continue;
        monitorLaunches++;
        const type = defaultType(lane);
        launch(lane, type, bootMs, { market: "on-demand" });
        const plans = lane.prov.recentPlans;
        const lastPlan = { ...(plans[plans.length - 1] ?? {}) };
        lastPlan[type] = (lastPlan[type] ?? 0) + 1;
        lane.prov = { recentPlans: [...plans.slice(0, -1), lastPlan] };
      }
    });
  }

  const res = sim.run();
  const lambdaDollars = res.functionCostDollars;
  // Spot instances along the series, billed as the engine bills (to termination or the window's end, 60 s minimum).
  let alongDollars = 0;
  for (const m of billedAlong) {
    if (m.billedFromMs > durationMs) continue;
    alongDollars += spotCostDollars(series ?? {}, m.type, pricePerSecond(m.type, "spot") * 3600, m.billedFromMs, Math.min(m.billedToMs ?? durationMs, durationMs), m.billingMinimumS);
  }
  return {
    system, sim: res, costDollars: res.costDollars + alongDollars, ec2Dollars: res.costDollars - lambdaDollars + alongDollars, lambdaDollars,
    lambdaShare: res.arrivals > 0 ? toLambda / res.arrivals : 0,
    perMinute, interruptions, monitorLaunches, batching: lanes[0]!.batching, forecaster: lanes[0]!.method,
    perLane: Object.fromEntries(lanes.map((l) => [l.model.name, l.queries])),
    perMinuteSlo,
    launches,
  };
}

/**
 * The ready replicas as overflow capacity (libs/policy `overflowInputFor`, as the live dispatcher maps
 * its instances). Asked per query: rebuilt only when a replica of the queue was added or changed state.
 */
function readyCapacity(lane: Lane): readonly OverflowCapacity[] {
  const queue = lane.queue;
  if (lane.capacity.version === queue.replicaVersion) return lane.capacity.value;
  const out: OverflowCapacity[] = [];
  for (const r of queue.replicas) {
    if (r.state === "ready") out.push({ instances: 1, peakQpsPerInstance: r.peakQps(), wbatchMs: r.waitMs, batchLatencyMs: r.latencyMs(r.maxBatch) });
  }
  lane.capacity = { version: queue.replicaVersion, value: out };
  return out;
}
