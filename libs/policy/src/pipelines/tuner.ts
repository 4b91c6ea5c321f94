/**
 * The InferLine Tuner (InferLine §5): high-frequency, per-model replica scaling driven by network-
 * calculus traffic envelopes.
 *
 * Envelope: for windows ΔT = T_s, 2T_s, 4T_s, … ≤ 60 s (T_s the pipeline's service time), r_i = the most
 * queries seen in any window of width ΔT_i, divided by ΔT_i (windows are also capped at the planning
 * trace's length, whose envelope is undefined beyond it). The Planner hands the Tuner the envelope of
 * the planning trace, each model's single-replica throughput μ_m (at its planned batch size), its scale
 * factor s_m and its max-provisioning ratio ρ_m.
 *
 * Scale up, at once: when any current r_i exceeds the planned one, take r_max = the largest exceeding
 * rate and set k_m = ⌈r_max·s_m / (μ_m·ρ_m)⌉ for every model that has fewer replicas.
 * Scale down, conservatively: once 15 s have passed since the last change, λ_new = the largest rate of
 * the last 30 s measured in 5 s windows, k_m = ⌈λ_new·s_m / (μ_m·ρ_p)⌉ with ρ_p = min_m ρ_m, and models
 * with more replicas shrink to it (never below one, and never below what the scale-up rule asks for the
 * current envelope: ours, not the paper's — its windows reach back up to 60 s, further than the 30 s
 * look-back, so a burst 30-60 s old would otherwise scale a model down and straight back up).
 *
 * ρ_m: the paper defines it as λ/μ_m ("the ratio of the arrival rate to the maximum throughput of the
 * model in its current configuration"). We read μ_m there as the model's whole planned capacity and
 * include its scale factor, ρ_m = λ·s_m / (k_m·μ_m), its planned utilisation: then k_m above gives back
 * the planned replicas exactly when r_max = λ, which is the property the formula is built on.
 * Pure: state in, state out; time is an argument.
 */
import type { Pipeline, PipelineConfig, ProfileSet } from "./pipeline.js";
import { replicaThroughputQps, scaleFactors, serviceTimeMs } from "./pipeline.js";

/** Windows T_s, 2T_s, 4T_s, … up to maxMs (ms). */
export function envelopeWindows(serviceTimeMs: number, maxMs = 60_000): number[] {
  if (!(serviceTimeMs > 0)) throw new Error(`envelope: service time must be positive, got ${serviceTimeMs}`);
  const out: number[] = [];
  for (let w = serviceTimeMs; w <= maxMs; w *= 2) out.push(w);
  return out;
}

/**
 * r_i = (max arrivals within any window of width w_i) / w_i, in queries per second, over sorted arrival
 * times (ms). A window is half-open, (t − w, t], ending at an arrival.
 */
export function trafficEnvelope(arrivalsMs: ArrayLike<number>, windowsMs: readonly number[], fromMs = -Infinity): number[] {
  let start = 0;
  while (start < arrivalsMs.length && arrivalsMs[start]! < fromMs) start++;
  return windowsMs.map((w) => {
    let best = 0;
    let j = start;
    for (let i = start; i < arrivalsMs.length; i++) {
      const t = arrivalsMs[i]!;
      while (arrivalsMs[j]! <= t - w) j++;
      if (i - j + 1 > best) best = i - j + 1;
    }
    return (1000 * best) / w;
  });
}

export interface TunerModelPlan {
  scaleFactor: number;
  /** μ_m: one replica's throughput at the planned batch size, queries per second. */
  replicaQps: number;
  /** ρ_m: planned utilisation. */
  rho: number;
  plannedReplicas: number;
}

export interface TunerPlan {
  windowsMs: number[];
  plannedEnvelopeQps: number[];
  /** Mean rate of the planning trace, queries per second. */
  plannedQps: number;
  models: Record<string, TunerModelPlan>;
  /** ρ_p = min ρ_m. */
  minRho: number;
  /** min ρ_m over models planned with more than one replica (min ρ_m when there are none). */
  minRhoReplicated: number;
}

/** What the Planner hands the Tuner (§5 "Initialization"). */
export function makeTunerPlan(pipeline: Pipeline, profiles: ProfileSet, config: PipelineConfig, planningArrivalsMs: ArrayLike<number>): TunerPlan {
  const n = planningArrivalsMs.length;
  const spanMs = n > 1 ? planningArrivalsMs[n - 1]! - planningArrivalsMs[0]! : 1;
  const plannedQps = n > 1 ? (1000 * (n - 1)) / spanMs : 0;
  // Windows longer than the planning trace would understate its rates; cap them at its length.
  const windowsMs = envelopeWindows(serviceTimeMs(pipeline, profiles, config), Math.min(60_000, Math.max(spanMs, 1)));
  const s = scaleFactors(pipeline);
  const models: Record<string, TunerModelPlan> = {};
  let minRho = Infinity;
  let minRhoReplicated = Infinity;
  for (const m of pipeline.models) {
    const c = config[m]!;
    const mu = replicaThroughputQps(profiles, m, c);
    const rho = (plannedQps * (s[m] ?? 1)) / (c.replicas * mu);
    models[m] = { scaleFactor: s[m] ?? 1, replicaQps: mu, rho, plannedReplicas: c.replicas };
    minRho = Math.min(minRho, rho);
    if (c.replicas > 1) minRhoReplicated = Math.min(minRhoReplicated, rho);
  }
  if (minRhoReplicated === Infinity) minRhoReplicated = minRho;
  return { windowsMs, plannedEnvelopeQps: trafficEnvelope(planningArrivalsMs, windowsMs), plannedQps, models, minRho, minRhoReplicated };
}

export interface TunerState {
  replicas: Record<string, number>;
  /** Time of the last change, ms. */
  lastChangeMs: number;
}

export function initialTunerState(plan: TunerPlan, nowMs = 0): TunerState {
  return { replicas: Object.fromEntries(Object.entries(plan.models).map(([m, p]) => [m, p.plannedReplicas])), lastChangeMs: nowMs };
}

export interface TunerOptions {
  /**
   * "paper": k_m = ⌈r_max·s_m / (μ_m·ρ_m)⌉ with r_max the exceeding live rate itself (§5).
   * "relative": r_max replaced by λ_plan · max_i(r_i,live / r_i,planned), i.e. the planned load scaled
   * by the worst relative exceedance; it differs from "paper" when the exceeding window is short, where
   * even the planned trace's rate is far above its mean λ and the paper's rule provisions for the burst
   * rate itself. @default "paper"
   */
  scaleUpRule?: "paper" | "relative";
  /**
   * "min": ρ_p = min over all models (§5). "min-replicated": min over models planned with more than one
   * replica, whose utilisation reflects the Planner's slack rather than the one-replica floor (a cheap
   * stage at 10% utilisation on its single replica would otherwise keep every other model from ever
   * scaling down). @default "min"
   */
  scaleDownRho?: "min" | "min-replicated";
  /** Quiet period before scaling down, ms. @default 15000 */
  scaleDownDelayMs?: number;
  /** Look-back for λ_new, ms. @default 30000 */
  scaleDownLookbackMs?: number;
  /** Window for λ_new, ms. @default 5000 */
  scaleDownWindowMs?: number;
}

export interface TunerInput {
  nowMs: number;
  /** Arrival times (ms, sorted) covering at least the last 60 s; older ones are ignored. */
  recentArrivalsMs: ArrayLike<number>;
  plan: TunerPlan;
  state: TunerState;
}

export interface TunerDecision {
  state: TunerState;
  changed: boolean;
  reason: string;
}

/** Largest rate over consecutive windows of `windowMs` in [from, to), queries per second. */
function maxWindowRate(arrivalsMs: ArrayLike<number>, fromMs: number, toMs: number, windowMs: number): number {
  const bins = Math.max(1, Math.round((toMs - fromMs) / windowMs));
  const counts = new Array<number>(bins).fill(0);
  for (let i = 0; i < arrivalsMs.length; i++) {
    const t = arrivalsMs[i]!;
    if (t < fromMs || t >= toMs) continue;
    const b = Math.min(bins - 1, Math.floor((t - fromMs) / windowMs));
    counts[b]!++;
  }
  return (1000 * Math.max(...counts)) / windowMs;
}

/** One Tuner step (call it every second or so). */
export function tunerStep(input: TunerInput, options: TunerOptions = {}): TunerDecision {
  const { plan, state, nowMs } = input;
  const maxWindow = plan.windowsMs[plan.windowsMs.length - 1] ?? 60_000;
  const live = trafficEnvelope(input.recentArrivalsMs, plan.windowsMs, nowMs - maxWindow);
  let rMax = 0;
  let at = -1;
  let worstRatio = 0;
  live.forEach((r, i) => {
    const planned = plan.plannedEnvelopeQps[i]!;
    if (r > planned && r > rMax) {
      rMax = r;
      at = i;
    }
    if (r > planned && planned > 0) worstRatio = Math.max(worstRatio, r / planned);
  });
  if (at >= 0 && (options.scaleUpRule ?? "paper") === "relative") rMax = plan.plannedQps * worstRatio;
  // What the scale-up rule asks of each model for the current envelope (0 when it is within the plan's).
  const upTarget = (p: TunerModelPlan): number => (at >= 0 ? Math.ceil((rMax * p.scaleFactor) / (p.replicaQps * p.rho) - 1e-9) : 0);
  if (at >= 0) {
    const replicas = { ...state.replicas };
    const grown: string[] = [];
    for (const [m, p] of Object.entries(plan.models)) {
      const k = upTarget(p);
      if (k > (replicas[m] ?? 0)) {
        grown.push(`${m} ${replicas[m] ?? 0}→${k}`);
        replicas[m] = k;
      }
    }
    if (grown.length > 0) {
      return {
        state: { replicas, lastChangeMs: nowMs }, changed: true,
        reason: `envelope at ${(plan.windowsMs[at]! / 1000).toFixed(3)} s: ${live[at]!.toFixed(1)} qps > planned ${plan.plannedEnvelopeQps[at]!.toFixed(1)}; provision for ${rMax.toFixed(1)} qps: ${grown.join(", ")}`,
      };
    }
  }
  const delay = options.scaleDownDelayMs ?? 15_000;
  if (nowMs - state.lastChangeMs < delay) {
    return { state, changed: false, reason: at >= 0 ? "envelope exceeded, replicas already sufficient" : "within the planned envelope; waiting before any scale-down" };
  }
  const lookback = options.scaleDownLookbackMs ?? 30_000;
  const lambdaNew = maxWindowRate(input.recentArrivalsMs, nowMs - lookback, nowMs, options.scaleDownWindowMs ?? 5_000);
  const replicas = { ...state.replicas };
  const shrunk: string[] = [];
  const rhoP = (options.scaleDownRho ?? "min") === "min" ? plan.minRho : plan.minRhoReplicated;
  for (const [m, p] of Object.entries(plan.models)) {
    // Never below what the scale-up rule asks now: the envelope (up to 60 s) still holding a burst that
    // the 30 s look-back has forgotten would scale straight back up at the next tick.
    const k = Math.max(1, Math.ceil((lambdaNew * p.scaleFactor) / (p.replicaQps * rhoP) - 1e-9), upTarget(p));
    if (k < (replicas[m] ?? 0)) {
      shrunk.push(`${m} ${replicas[m]}→${k}`);
      replicas[m] = k;
    }
  }
  if (shrunk.length === 0) return { state, changed: false, reason: `λ_new ${lambdaNew.toFixed(1)} qps: no model over-provisioned` };
  return { state: { replicas, lastChangeMs: nowMs }, changed: true, reason: `λ_new ${lambdaNew.toFixed(1)} qps: ${shrunk.join(", ")}` };
}
