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

/** SLO outcomes of one app's queries over an interval (answered, and those that missed or failed). */
export interface AppSloSample {
  app: string;
  total: number;
  missed: number;
}

/** The monitor's state across an app set, as its caller keeps it between ticks. */
export interface SloCycleState {
  slo: Record<string, SloMonitorState>;
  /** Misses per app since the last cycle. */
  missedSinceCycle: Record<string, number>;
  /** When the last cycle ran; null before the first. */
  lastCycleAtMs: number | null;
}

export const initialSloCycleState: SloCycleState = { slo: {}, missedSinceCycle: {}, lastCycleAtMs: null };

export interface SloCycleConfig {
  /** A cycle runs at most this often. */
  periodMs: number;
  decay: number;
  cooldownCycles: number;
  /** The service level an app must keep (0.98: act above a 2% miss fraction). */
  slMinOf: (app: string) => number;
}

export interface SloCycleResult {
  state: SloCycleState;
  /** Apps above their threshold whose queries still miss (a plan should give none of their capacity back). */
  short: Array<{ app: string; reason: string }>;
  /** Whether a cycle ran at this call. */
  cycled: boolean;
  /**
   * The cycle's acts, in app order: launch one instance for an app, or hold for one above its threshold
   * whose misses have stopped; with why.
   */
  acts: Array<{ app: string; act: "launch" | "hold"; reason: string }>;
}

const r1 = (x: number): number => Math.round(x * 10) / 10;
const r2 = (x: number): number => Math.round(x * 100) / 100;

/**
 * The SLO monitor over an app set (MArk §4.4), as the VM autoscaler's tick runs it: observe every
 * call's samples, run a cycle every `periodMs`. A cycle acts only while queries still miss (some
 * missed since its last cycle): the miss fraction remembers ~1000 queries, which at a low rate spans
 * minutes after a transient has passed, and an instance launched for misses that have stopped serves
 * none of them. Pure: the state goes in and comes out.
 */
export function sloMonitorCycle(prev: SloCycleState, samples: readonly AppSloSample[], nowMs: number, cfg: SloCycleConfig): SloCycleResult {
  const opts = { decay: cfg.decay, cooldownCycles: cfg.cooldownCycles };
  const slo: Record<string, SloMonitorState> = { ...prev.slo };
  let missed: Record<string, number> = { ...prev.missedSinceCycle };
  for (const s of samples) {
    slo[s.app] = observeRequests(slo[s.app] ?? initialSloMonitorState, s.total, s.missed, opts);
    missed[s.app] = (missed[s.app] ?? 0) + s.missed;
  }
  const apps = Object.keys(slo).sort();
  const short: SloCycleResult["short"] = [];
  for (const app of apps) {
    const threshold = 1 - cfg.slMinOf(app);
    const f = slo[app]?.missFraction ?? 0;
    if (f > threshold && (missed[app] ?? 0) > 0) short.push({ app, reason: `queries of app ${app} still miss their SLO (miss fraction ${r2(f * 100)}% > ${r2(threshold * 100)}%)` });
  }
  const acts: SloCycleResult["acts"] = [];
  let lastCycleAtMs = prev.lastCycleAtMs;
  const cycled = lastCycleAtMs === null || nowMs - lastCycleAtMs >= cfg.periodMs;
  if (cycled) {
    const sinceS = lastCycleAtMs === null ? undefined : r1((nowMs - lastCycleAtMs) / 1000);
    lastCycleAtMs = nowMs;
    for (const app of apps) {
      const slMin = cfg.slMinOf(app);
      const st = slo[app] ?? initialSloMonitorState;
      if (st.cooldownLeft <= 0 && st.missFraction > 1 - slMin && (missed[app] ?? 0) === 0) {
        acts.push({ app, act: "hold", reason: `SLO monitor: app ${app}: miss fraction ${r2(st.missFraction * 100)}% > ${r2((1 - slMin) * 100)}%, but no query missed ${sinceS === undefined ? "yet" : `in the last ${sinceS} s`}: the misses have stopped, and a worker launched now would serve none of them` });
        continue;
      }
      const d = sloMonitorTick(st, { ...opts, threshold: 1 - slMin });
      slo[app] = d.state;
      if (d.launch > 0) acts.push({ app, act: "launch", reason: `app ${app}: ${d.reason} (SLmin ${r2(slMin * 100)}%)` });
    }
    missed = {};
  }
  return { state: { slo, missedSinceCycle: missed, lastCycleAtMs }, short, cycled, acts };
}
