/**
 * The lifecycle of one variant instance: INFaaS's state machine (papers/infaas.txt §4.1, Fig. 4;
 * DESIGN §3 "Variant states").
 *
 * ```
 *            load                loaded
 * Inactive ────────> Loading ──────────> Active ──(QPS ≥ profiled peak)──> Overloaded
 *    ^                                    │  ^  <──(QPS < profiled peak)──
 *    │ unloaded (from any state)          │  │
 *    └────────────────────────────────────┘  └── Interfered (mean observed batch time > mean profiled ×
 *                                                 (1 + margin) + floor for `interferenceSeconds`
 *                                                 consecutive observations; back to Active on the first
 *                                                 observation within the margin, or after
 *                                                 `interferenceSeconds` observations without evidence)
 * ```
 *
 * One set of units and thresholds, live and simulated: the executor's worker (libs/executor) and the
 * simulator's INFaaS monitor (libs/sim systems/infaas.ts) both build their observation with
 * {@link observeWindow} from the same figures (arrivals over `loadWindowMs`; batches, Σ observed and Σ
 * profiled batch time over the last period) and step it with {@link nextState} under
 * {@link DEFAULT_VARIANT_STATE_CONFIG}.
 *
 * Margin: 20% plus 2 ms for 3 consecutive 1-second observations (our choice; INFaaS does not publish
 * its threshold). 20% is well above the run-to-run noise of a profiled batch latency on an idle machine
 * (a few percent) and well below what interference does to a small model (Fig. 1: several ×); the 2 ms
 * floor covers what the executor's span adds to the profiler's (decode, concatenate, split) and timer
 * noise on sub-millisecond models; 3 s keeps a single slow batch or a GC pause from flipping the state.
 * Fewer than 10 batches in a period is too little evidence of interference either way (and at low
 * rates caches go cold between queries, which is no interference). Load is the arrival rate over the
 * last 5 s: a 1 s Poisson count at 4 QPS exceeds a 5 QPS peak 37% of the time.
 *
 * Overloaded takes precedence over Interfered: an instance at its peak QPS queues, so its latency
 * rises for a reason that scaling, not migration, fixes. `nextState` is pure: the memory (consecutive
 * count, since when) comes in and goes out.
 */
import type { VariantState } from "./selection.js";

export interface VariantStateConfig {
  /** Relative latency margin for Interfered. @default 0.2 */
  interferenceMargin: number;
  /** Consecutive observations above the margin before Interfered. @default 3 */
  interferenceSeconds: number;
  /**
   * Absolute slack added to the margin, ms: for sub-millisecond models a relative margin alone
   * flags timer and scheduling noise as interference. @default 2
   */
  interferenceFloorMs?: number;
  /** Fewest batches in a period that count as evidence of (no) interference. @default 10 */
  minBatches?: number;
  /** Window of the arrival rate compared with the profiled peak, ms. @default 5000 */
  loadWindowMs?: number;
}

export const DEFAULT_VARIANT_STATE_CONFIG: Required<VariantStateConfig> = {
  interferenceMargin: 0.2,
  interferenceSeconds: 3,
  interferenceFloorMs: 2,
  minBatches: 10,
  loadWindowMs: 5000,
};

/** What a variant (on a worker, or in the whole cluster) did: the input of {@link observeWindow}. */
export interface VariantWindow {
  /** Ready instances (0: not loaded). */
  instances: number;
  /** Instances loading. */
  loading: number;
  /** Arrivals per second over the last `loadWindowMs`. */
  qps: number;
  /** Profiled peak throughput of one instance. */
  peakQpsPerInstance: number;
  /** Batches that finished in the last period, with their Σ observed and Σ profiled run times, ms. */
  batches: number;
  observedBatchMs: number;
  profiledBatchMs: number;
}

/** The observation {@link nextState} steps on, built the same way live and in the simulator. */
export function observeWindow(w: VariantWindow, config: VariantStateConfig = DEFAULT_VARIANT_STATE_CONFIG): VariantObservation {
  const enough = w.batches > 0 && w.batches >= (config.minBatches ?? DEFAULT_VARIANT_STATE_CONFIG.minBatches);
  return {
    loaded: w.instances > 0,
    loading: w.loading > 0,
    qps: w.qps,
    peakQps: w.instances * w.peakQpsPerInstance,
    observedMs: enough ? w.observedBatchMs / w.batches : null,
    profiledMs: w.batches > 0 ? w.profiledBatchMs / w.batches : 0,
  };
}

/** One monitoring observation of an instance (every second). */
export interface VariantObservation {
  /** The instance is loaded and serving. */
  loaded: boolean;
  /** A load is in progress. */
  loading: boolean;
  /** Queries per second arriving at the instance. */
  qps: number;
  /** Profiled saturation throughput. */
  peakQps: number;
  /** Mean observed batch time over the last period, ms, or null with too few batches to tell. */
  observedMs: number | null;
  /** Mean profiled latency of the same batches at their sizes, ms. */
  profiledMs: number;
}

export interface VariantStateMemory {
  state: VariantState;
  /** When the current state was entered. */
  sinceMs: number;
  /** Consecutive observations above the interference margin. */
  slowCount: number;
}

export interface VariantStateStep {
  memory: VariantStateMemory;
  changed: boolean;
  reason: string;
}

/** The batch time above which a run counts as interfered: profiled × (1 + margin) + floor, ms. */
export function interferenceLimitMs(profiledMs: number, config: VariantStateConfig = DEFAULT_VARIANT_STATE_CONFIG): number {
  return profiledMs * (1 + config.interferenceMargin) + (config.interferenceFloorMs ?? 0);
}

export function initialVariantState(nowMs: number): VariantStateMemory {
  return { state: "inactive", sinceMs: nowMs, slowCount: 0 };
}

export function nextState(
  prev: VariantStateMemory,
  obs: VariantObservation,
  nowMs: number,
  config: VariantStateConfig = DEFAULT_VARIANT_STATE_CONFIG,
): VariantStateStep {
  const to = (state: VariantState, slowCount: number, reason: string): VariantStateStep => {
    const changed = state !== prev.state;
    return { memory: { state, sinceMs: changed ? nowMs : prev.sinceMs, slowCount }, changed, reason };
  };
  if (!obs.loaded) {
    if (obs.loading) return to("loading", 0, "load in progress");
    return to("inactive", 0, prev.state === "inactive" ? "not loaded" : "unloaded");
  }
  const limit = interferenceLimitMs(obs.profiledMs, config);
  const slow = obs.observedMs !== null && obs.observedMs > limit;
  // The count of slow periods is capped at interferenceSeconds (it is only compared with it). With too
  // few batches this period there is no evidence either way: an Active variant keeps its count; an
  // Interfered one loses one from it, because selection sends it no queries and evidence would never
  // come back: it returns to Active after interferenceSeconds periods without evidence.
  const cap = config.interferenceSeconds;
  const slowCount =
    obs.observedMs === null ? (prev.state === "interfered" ? Math.max(0, prev.slowCount - 1) : prev.slowCount) : slow ? Math.min(cap, prev.slowCount + 1) : 0;
  if (prev.state === "interfered" && obs.observedMs === null && obs.qps < obs.peakQps) {
    return slowCount > 0
      ? to("interfered", slowCount, `no evidence this period; back to Active after ${slowCount} more without`)
      : to("active", 0, `no evidence of interference for ${cap} periods`);
  }
  if (obs.qps >= obs.peakQps) {
    return to("overloaded", slowCount, `QPS ${round(obs.qps)} ≥ profiled peak ${round(obs.peakQps)}`);
  }
  if (slowCount >= config.interferenceSeconds) {
    return to(
      "interfered",
      slowCount,
      `observed ${round(obs.observedMs ?? 0)} ms per batch > profiled ${round(obs.profiledMs)} ms × ${1 + config.interferenceMargin}${config.interferenceFloorMs ? ` + ${config.interferenceFloorMs} ms` : ""} for ${slowCount} s`,
    );
  }
  if (prev.state === "overloaded") return to("active", slowCount, `QPS ${round(obs.qps)} < profiled peak ${round(obs.peakQps)}`);
  if (prev.state === "interfered") return to("active", slowCount, `observed latency back within ${config.interferenceMargin * 100}% of profile`);
  return to("active", slowCount, prev.state === "active" ? "serving within profile" : "loaded");
}

function round(x: number): number {
  return Math.round(x * 100) / 100;
}
