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
 */

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
