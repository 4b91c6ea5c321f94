/**
 * Reactive SLO monitor: MArk §4.4, with the constants of the authors' code (NUMBERS.md [repo]).
 *
 * The monitor keeps an exponentially weighted miss fraction over recent requests,
 *   f ← 0.999·f + 0.001·[request missed its SLO]
 * (an effective memory of ~1000 requests), and on each control cycle launches one instance when
 * f > 0.02 (more than 2% of recent requests missed, i.e. the 98% service level is at risk), then waits
 * a cool-down of 5 cycles before it may act again. Pure: the state goes in and comes out.
 */

export interface SloMonitorOptions {
  /** EWMA weight kept per request. @default 0.999 */
  decay?: number;
  /** Act when the weighted miss fraction exceeds this. @default 0.02 */
  threshold?: number;
  /** Cycles to wait after acting. @default 5 */
  cooldownCycles?: number;
}

export interface SloMonitorState {
  /** Weighted miss fraction f. */
  missFraction: number;
  /** Cycles left before the monitor may act again. */
  cooldownLeft: number;
}

export interface SloMonitorDecision {
  state: SloMonitorState;
  /** Instances to launch now (0 or 1). */
  launch: number;
  reason: string;
}

export const initialSloMonitorState: SloMonitorState = { missFraction: 0, cooldownLeft: 0 };

/** One request's outcome: f ← d·f + (1 − d)·[missed]. */
export function observeRequest(state: SloMonitorState, missed: boolean, options: SloMonitorOptions = {}): SloMonitorState {
  const d = options.decay ?? 0.999;
  return { ...state, missFraction: d * state.missFraction + (1 - d) * (missed ? 1 : 0) };
}

/**
 * n requests of which k missed, order unknown: f ← dⁿ·f + (1 − dⁿ)·k/n. Exact when the misses are
 * spread evenly through the n requests (the per-request rule applied to the mean outcome), and close
 * otherwise for n ≪ 1000; callers with the exact order should use observeRequest.
 */
export function observeRequests(state: SloMonitorState, total: number, missed: number, options: SloMonitorOptions = {}): SloMonitorState {
  if (total <= 0) return state;
  const dn = Math.pow(options.decay ?? 0.999, total);
  return { ...state, missFraction: dn * state.missFraction + (1 - dn) * (missed / total) };
}

/** One control cycle: act when f exceeds the threshold and no cool-down is running. */
export function sloMonitorTick(state: SloMonitorState, options: SloMonitorOptions = {}): SloMonitorDecision {
  const threshold = options.threshold ?? 0.02;
  const f = state.missFraction;
  if (state.cooldownLeft > 0) {
    return { state: { ...state, cooldownLeft: state.cooldownLeft - 1 }, launch: 0, reason: `cool-down: ${state.cooldownLeft} cycle(s) left` };
  }
  if (f > threshold) {
    return {
      state: { ...state, cooldownLeft: options.cooldownCycles ?? 5 },
      launch: 1,
      reason: `miss fraction ${(100 * f).toFixed(2)}% > ${(100 * threshold).toFixed(2)}%: launch one instance`,
    };
  }
  return { state, launch: 0, reason: `miss fraction ${(100 * f).toFixed(2)}% within ${(100 * threshold).toFixed(2)}%` };
}
