/**
 * Pipelines, profiles and the live-serving loop shared by the InferLine scenarios.
 *
 * Pipelines (InferLine Fig. 2; the figure did not survive extraction, so the shapes follow the text):
 * - Image Processing: preprocess → ResNet152.
 * - Social Media: two roots per post — the image path preprocess → ResNet152 and the text path
 *   language identification → translation (taken by 30% of posts, the non-English ones; our assumption).
 * - Video Monitoring: object detection, then vehicle identification (50% of frames) and person
 *   identification (30%), and license-plate reading for 40% of the frames with a vehicle (branch
 *   fractions are our assumption).
 *
 * Profiles (batch latency per hardware; the K80 numbers anchor on InferLine §2: ResNet152 0.6 QPS on a
 * CPU vs 50.6 QPS on a K80 at its best batch of 32, and "preprocessing gains nothing from batching or
 * a GPU"); the rest are our assumptions, stated in the scenario notes:
 * - preprocess: CPU only, 3 ms per query, no batching gain;
 * - ResNet152: K80 T(b) = 40 + 18.5·(b − 1) ms (T(32) = 614 ms → 52 QPS); CPU 1.67 s per query;
 * - language id: K80 2 + 0.05·(b − 1) ms, CPU 4 + 1.0·(b − 1) ms: the K80 is its fastest hardware at
 *   batch 1, so Algorithm 1 starts it there, and a CPU (a fifth of the price) serves it within the SLO,
 *   so DowngradeHW moves it to CPUs (InferLine §4.3: the planner "downgrading the hardware of a language
 *   identification model from a GPU to a CPU" at a 150 ms SLO);
 * - translation (NMT): K80 30 + 4·(b − 1) ms; CPU 250 ms per query;
 * - detection: K80 25 + 6·(b − 1) ms; vehicle id: K80 15 + 2·(b − 1), CPU 120 ms; person id: K80
 *   20 + 3·(b − 1), CPU 150 ms; plate reader: K80 10 + 1.5·(b − 1), CPU 40 ms.
 * Prices (InferLine §6's cost model, libs/policy costs.ts): a K80 replica costs its share of a
 * p2.8xlarge less its non-GPU equivalent, (p2.8xlarge $7.20 − r4.8xlarge $2.128) / 8 = $0.634/h; a CPU
 * replica one vCPU of that equivalent, $2.128 / 32 = $0.0665/h.
 *
 * Live serving ({@link serveLive}): the planners and tuners choose with the Estimator, but every
 * system is judged on the engine (libs/sim engine.ts through systems/inferline.ts, the same serving
 * model, checked against the Estimator by test/estimator-vs-engine.test.ts), serving the live trace
 * with a controller that sees only arrivals (InferLine's Tuner and the AutoScale baseline both react
 * to the arrival process, not to latencies), ticking every second. Scale-ups take effect after a 5 s
 * replica activation (InferLine §5) and are billed from the decision; scale-downs are immediate (a
 * busy replica finishes its batch, unbilled). Attainment, P99 and cost are the engine's.
 */
import {
  acceleratorPerHour, autoScaleStep, createRng, findProfile, initialTunerState, sampleRoutes, tunerStep, unitsConfig, vcpuPerHour, type AutoScalePlan,
  type AutoScaleState, type HardwareProfile, type Pipeline, type PipelineConfig, type ProfileSet, type TunerOptions,
  type TunerPlan, type TunerState,
} from "@sloserve/policy";
import { Simulator } from "../engine.js";
import type { SystemResult } from "../scenario.js";
import { installPipeline } from "../systems/inferline.js";
import { ScheduledArrivals, arrivalTimes, type RateSchedule } from "@sloserve/policy";

/** InferLine §6: a K80 is priced as p2.8xlarge minus r4.8xlarge, per GPU; a CPU as one vCPU of r4.8xlarge. */
export const K80_PER_HOUR = acceleratorPerHour("p2.8xlarge", "r4.8xlarge");
export const CPU_PER_HOUR = vcpuPerHour("r4.8xlarge");
const BATCHES = [1, 2, 4, 8, 16, 32];

function linear(hardware: string, pricePerHour: number, t1: number, slope: number, batches = BATCHES): HardwareProfile {
  return { hardware, pricePerHour, batchLatencyMs: batches.map((b) => [b, t1 + slope * (b - 1)] as [number, number]) };
}

export const INFERLINE_PROFILES: ProfileSet = {
  preprocess: [linear("cpu", CPU_PER_HOUR, 3, 3, [1, 2, 4, 8])],
  resnet152: [linear("k80", K80_PER_HOUR, 40, 18.5), linear("cpu", CPU_PER_HOUR, 1667, 1667, [1])],
  langid: [linear("k80", K80_PER_HOUR, 2, 0.05), linear("cpu", CPU_PER_HOUR, 4, 1)],
  nmt: [linear("k80", K80_PER_HOUR, 30, 4), linear("cpu", CPU_PER_HOUR, 250, 250, [1])],
  detect: [linear("k80", K80_PER_HOUR, 25, 6)],
  vehicle: [linear("k80", K80_PER_HOUR, 15, 2), linear("cpu", CPU_PER_HOUR, 120, 120, [1])],
  person: [linear("k80", K80_PER_HOUR, 20, 3), linear("cpu", CPU_PER_HOUR, 150, 150, [1])],
  plate: [linear("k80", K80_PER_HOUR, 10, 1.5), linear("cpu", CPU_PER_HOUR, 40, 40, [1])],
};

export const IMAGE_PROCESSING: Pipeline = {
  name: "image-processing",
  models: ["preprocess", "resnet152"],
  edges: [{ from: "preprocess", to: "resnet152" }],
};

export const SOCIAL_MEDIA: Pipeline = {
  name: "social-media",
  models: ["preprocess", "resnet152", "langid", "nmt"],
  edges: [{ from: "preprocess", to: "resnet152" }, { from: "langid", to: "nmt", probability: 0.3 }],
};

export const VIDEO_MONITORING: Pipeline = {
  name: "video-monitoring",
  models: ["detect", "vehicle", "person", "plate"],
  edges: [
    { from: "detect", to: "vehicle", probability: 0.5 },
    { from: "detect", to: "person", probability: 0.3 },
    { from: "vehicle", to: "plate", probability: 0.4 },
  ],
};

export interface Trace {
  arrivalsMs: Float64Array;
  routes: Uint32Array;
  durationMs: number;
}

/** Arrivals of a rate schedule with inter-arrival CV `cv` (σ/μ of the gaps, Gamma), and their routes. */
export function makeTrace(pipeline: Pipeline, schedule: RateSchedule, cv: number, seed: number): Trace {
  const rng = createRng(seed);
  const arrivalsMs = Float64Array.from(arrivalTimes(new ScheduledArrivals(schedule, cv), rng));
  return { arrivalsMs, routes: sampleRoutes(pipeline, arrivalsMs.length, rng), durationMs: schedule.rates.length * schedule.binMs };
}

/** A piecewise CV trace: segments with their own schedule and CV, concatenated in time. */
export function concatTraces(pipeline: Pipeline, parts: Array<{ schedule: RateSchedule; cv: number }>, seed: number): Trace {
  const times: number[] = [];
  let offset = 0;
  parts.forEach((p, i) => {
    const rng = createRng(seed * 31 + i);
    for (const t of arrivalTimes(new ScheduledArrivals(p.schedule, p.cv, offset), rng)) times.push(t);
    offset += p.schedule.rates.length * p.schedule.binMs;
  });
  const arrivalsMs = Float64Array.from(times);
  return { arrivalsMs, routes: sampleRoutes(pipeline, arrivalsMs.length, createRng(seed ^ 0x9e37)), durationMs: offset };
}

export interface LiveOutcome {
  costDollars: number;
  sloAttainment: number;
  p99Ms: number;
  /** Per second: replicas in total, and misses (latency > SLO) among queries arriving that second. */
  replicasPerSecond: number[];
  /** Per second: what the replicas running then cost, $/h. */
  costPerHourPerSecond: number[];
  missesPerSecond: number[];
  changes: number;
}

export type Controller =
  | { kind: "none" }
  | { kind: "tuner"; plan: TunerPlan; options?: TunerOptions }
  /** AutoScale; `unit` (default one replica of every model) is multiplied by the unit count. */
  | { kind: "autoscale"; plan: AutoScalePlan; units: number; unit?: PipelineConfig };

const ACTIVATION_MS = 5_000;
/** Queries still queued when the trace ends are served for up to this long (then count as misses). */
const DRAIN_MS = 30 * 60_000;

/** Index of the first arrival ≥ t (binary search). */
function lowerBound(a: Float64Array, t: number): number {
  let lo = 0;
  let hi = a.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (a[mid]! < t) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/**
 * Serve a live trace from `config` on the engine (systems/inferline.ts), with a controller ticking
 * every second; cost (replicas billed by the engine from the scaling decision to their removal) and
 * SLO outcome as the engine measured them.
 */
export function serveLive(pipeline: Pipeline, profiles: ProfileSet, config: PipelineConfig, trace: Trace, sloMs: number, controller: Controller): LiveOutcome {
  const seconds = Math.ceil(trace.durationMs / 1000);
  const missesPerSecond = new Array<number>(seconds).fill(0);
  const sim = new Simulator({ seed: 1, durationMs: trace.durationMs, drainMs: DRAIN_MS });
  const system = installPipeline(sim, {
    pipeline, profiles, config, arrivalsMs: trace.arrivalsMs, routes: trace.routes, sloMs,
    onComplete: (q, latencyMs) => {
      if (latencyMs > sloMs) missesPerSecond[Math.min(seconds - 1, Math.floor(q.arrivalMs / 1000))]!++;
    },
  });
  let tuner: TunerState | undefined = controller.kind === "tuner" ? initialTunerState(controller.plan) : undefined;
  let auto: AutoScaleState | undefined = controller.kind === "autoscale" ? { units: controller.units, lowerSinceMs: null } : undefined;
  let changes = 0;
  const apply = (next: Record<string, number>): void => {
    let any = false;
    for (const m of pipeline.models) {
      const want = next[m]!;
      if (want === system.replicas(m)) continue;
      any = true;
      system.setReplicas(m, want, ACTIVATION_MS);
    }
    if (any) changes++;
  };
  if (controller.kind !== "none") {
    // The controllers see only arrivals (InferLine's Tuner and AutoScale react to the arrival process).
    sim.every(1000, (now) => {
      if (now >= trace.durationMs) return;
      const from = lowerBound(trace.arrivalsMs, now - 60_000);
      const to = lowerBound(trace.arrivalsMs, now);
      const recent = trace.arrivalsMs.subarray(from, to);
      if (controller.kind === "tuner") {
        const d = tunerStep({ nowMs: now, recentArrivalsMs: recent, plan: controller.plan, state: tuner! }, controller.options);
        tuner = d.state;
        if (d.changed) apply(d.state.replicas);
      } else {
        const d = autoScaleStep({ nowMs: now, recentArrivalsMs: recent, plan: controller.plan, state: auto! });
        auto = d.state;
        const unit = controller.unit;
        if (d.changed) apply(unit ? Object.fromEntries(Object.entries(unitsConfig(unit, d.state.units)).map(([m, c]) => [m, c.replicas])) : Object.fromEntries(pipeline.models.map((m) => [m, d.state.units])));
      }
    });
  }
  // Queries still unfinished after the drain (none in these scenarios) count as misses in the
  // attainment, not in missesPerSecond.
  const r = sim.run();
  const replicasPerSecond = new Array<number>(seconds).fill(0);
  const costPerHourPerSecond = new Array<number>(seconds).fill(0);
  const pricePerHour = Object.fromEntries(pipeline.models.map((m) => [m, findProfile(profiles, m, config[m]!.hardware).pricePerHour]));
  for (const smp of r.samples) {
    const s = Math.round(smp.tMs / 1000);
    if (s >= seconds) continue;
    replicasPerSecond[s] = Object.values(smp.replicasByQueue).reduce((a, b) => a + b, 0);
    costPerHourPerSecond[s] = Object.entries(smp.replicasByQueue).reduce((a, [m, n]) => a + n * (pricePerHour[m] ?? 0), 0);
  }
  return { costDollars: r.costDollars, sloAttainment: r.sloAttainment, p99Ms: r.latencyMs.p99, replicasPerSecond, costPerHourPerSecond, missesPerSecond, changes };
}

const round = (x: number, d: number): number => Math.round(x * 10 ** d) / 10 ** d;

/** One system's result over its live runs: total cost, attainment weighted by queries, the worst P99, then `extra`. */
export function liveSystemResult(name: string, runs: ReadonlyArray<{ out: LiveOutcome; queries: number }>, extra: Record<string, unknown> = {}): SystemResult {
  const q = runs.reduce((a, r) => a + r.queries, 0);
  return {
    name,
    cost_dollars: round(runs.reduce((a, r) => a + r.out.costDollars, 0), 4),
    slo_attainment: round(runs.reduce((a, r) => a + r.out.sloAttainment * r.queries, 0) / q, 5),
    p99_ms: round(Math.max(...runs.map((r) => r.out.p99Ms)), 1),
    ...extra,
  };
}
