/**
 * The coarse-grained reactive tuner InferLine compares against (§6, after AutoScale [Gandhi et al.,
 * TOCS 2012]): whole pipeline units are added as soon as the measured request rate exceeds the
 * capacity of the running units (i.e. once the pipeline is overloaded), and removed only after the
 * lower demand has lasted a wait timer (AutoScale's t_wait, 120 s by default here), which is
 * AutoScale's defence against flapping.
 *
 * The unit count targets the same headroom as the starting plan: units = ⌈rate / (unit qps · ρ)⌉ with
 * ρ = planned rate / (planned units · unit qps). The rate is measured over the last `windowMs`.
 * Pure: state in, state out.
 *
 * A unit is any configuration ({@link autoScaleUnitPlan}): the CG baselines' one replica of every model
 * on its fastest hardware, or a Planner's configuration (InferLine §7.3's "InferLine Plan + Baseline
 * Tune"), whose replicas are then multiplied by the unit count ({@link unitsConfig}).
 */
import { replicaThroughputQps, scaleFactors, type Pipeline, type PipelineConfig, type ProfileSet } from "../pipelines/pipeline.js";

export interface AutoScaleOptions {
  /** Rate measurement window, ms. @default 10000 */
  windowMs?: number;
  /** Time demand must stay lower before units are removed, ms. @default 120000 */
  waitMs?: number;
}

export interface AutoScalePlan {
  unitQps: number;
  /** Planned utilisation ρ of the starting plan (≤ 1). */
  rho: number;
}

export interface AutoScaleState {
  units: number;
  /** Since when fewer units have sufficed, ms; null when not. */
  lowerSinceMs: number | null;
}

export interface AutoScaleInput {
  nowMs: number;
  /** Arrival times (ms, sorted) covering at least the last window. */
  recentArrivalsMs: ArrayLike<number>;
  plan: AutoScalePlan;
  state: AutoScaleState;
}

export interface AutoScaleDecision {
  state: AutoScaleState;
  changed: boolean;
  reason: string;
}

export function autoScaleStep(input: AutoScaleInput, options: AutoScaleOptions = {}): AutoScaleDecision {
  const windowMs = options.windowMs ?? 10_000;
  const waitMs = options.waitMs ?? 120_000;
  const { nowMs, plan, state } = input;
  let count = 0;
  for (let i = input.recentArrivalsMs.length - 1; i >= 0; i--) {
    const t = input.recentArrivalsMs[i]!;
    if (t > nowMs) continue;
    if (t <= nowMs - windowMs) break;
    count++;
  }
  const rate = (1000 * count) / windowMs;
  const capacity = state.units * plan.unitQps;
  const wanted = Math.max(1, Math.ceil(rate / (plan.unitQps * plan.rho) - 1e-9));
  if (rate > capacity) {
    return {
      state: { units: Math.max(wanted, state.units + 1), lowerSinceMs: null }, changed: true,
      reason: `overloaded: ${rate.toFixed(1)} qps > capacity ${capacity.toFixed(1)}: ${Math.max(wanted, state.units + 1)} units`,
    };
  }
  if (wanted >= state.units) return { state: { ...state, lowerSinceMs: null }, changed: false, reason: `${rate.toFixed(1)} qps: ${state.units} units needed` };
  const since = state.lowerSinceMs ?? nowMs;
  if (nowMs - since >= waitMs) {
    return { state: { units: wanted, lowerSinceMs: null }, changed: true, reason: `${wanted} units have sufficed for ${((nowMs - since) / 1000).toFixed(0)} s: scale in` };
  }
  return { state: { ...state, lowerSinceMs: since }, changed: false, reason: `${wanted} units would suffice; waiting ${((waitMs - (nowMs - since)) / 1000).toFixed(0)} s more` };
}

/**
 * The AutoScale plan for `units` copies of the unit `unit` provisioned for `rateQps`: unit throughput
 * min over models of replicas·μ_m / s_m (a unit is as fast as its slowest stage), ρ = rate / capacity
 * (at most 1). Example: a unit of 2 replicas at 20 qps each behind one at 100 qps (every query visits
 * both) sustains 40 qps; planned for 60 qps with 2 units, ρ = 60 / 80 = 0.75.
 */
export function autoScaleUnitPlan(pipeline: Pipeline, profiles: ProfileSet, unit: PipelineConfig, units: number, rateQps: number): AutoScalePlan {
  const s = scaleFactors(pipeline);
  let unitQps = Infinity;
  for (const m of pipeline.models) {
    const c = unit[m];
    if (!c) throw new Error(`unit configuration has no entry for model ${m}`);
    unitQps = Math.min(unitQps, (c.replicas * replicaThroughputQps(profiles, m, c)) / (s[m] || 1));
  }
  return { unitQps, rho: Math.min(1, rateQps / (Math.max(1, units) * unitQps)) };
}

/** `units` copies of the unit configuration: every model's replicas multiplied by `units`. */
export function unitsConfig(unit: PipelineConfig, units: number): PipelineConfig {
  return Object.fromEntries(Object.entries(unit).map(([m, c]) => [m, { ...c, replicas: c.replicas * units }]));
}
