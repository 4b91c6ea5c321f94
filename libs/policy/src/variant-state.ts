/**
 * The lifecycle of one variant instance: INFaaS's state machine (papers/infaas.txt §4.1, Fig. 4;
 * DESIGN §3 "Variant states").
 *
 * ```
 *            load                loaded
 * Inactive ────────> Loading ──────────> Active ──(QPS ≥ profiled peak)──> Overloaded
 *    ^                                    │  ^  <──(QPS < profiled peak)──
 *    │ unloaded (from any state)          │  │
 *    └────────────────────────────────────┘  └── Interfered (observed p50 > profiled × (1 + margin) for
 *                                                 `interferenceSeconds` consecutive observations; back to
 *                                                 Active on the first observation within the margin)
 * ```
 *
 * Margin: 20% for 3 consecutive 1-second observations (our choice; INFaaS does not publish its
 * threshold). 20% is well above the run-to-run noise of a profiled batch latency on an idle machine
 * (a few percent) and well below what interference does to a small model (Fig. 1: several ×); 3 s
 * keeps a single slow batch or a GC pause from flipping the state.
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
   * flags timer and scheduling noise as interference. @default 0
   */
  interferenceFloorMs?: number;
}

export const DEFAULT_VARIANT_STATE_CONFIG: VariantStateConfig = { interferenceMargin: 0.2, interferenceSeconds: 3 };

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
  /** Observed median batch latency over the last second, or null when it served nothing. */
  observedP50Ms: number | null;
  /** Profiled latency at the batch sizes it ran. */
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
  const limit = obs.profiledMs * (1 + config.interferenceMargin) + (config.interferenceFloorMs ?? 0);
  const slow = obs.observedP50Ms !== null && obs.observedP50Ms > limit;
  // With no query served this second there is no evidence either way: keep the count.
  const slowCount = obs.observedP50Ms === null ? prev.slowCount : slow ? prev.slowCount + 1 : 0;
  if (obs.qps >= obs.peakQps) {
    return to("overloaded", slowCount, `QPS ${round(obs.qps)} ≥ profiled peak ${round(obs.peakQps)}`);
  }
  if (slowCount >= config.interferenceSeconds) {
    return to(
      "interfered",
      slowCount,
      `observed p50 ${round(obs.observedP50Ms ?? 0)} ms > profiled ${round(obs.profiledMs)} ms × ${1 + config.interferenceMargin} for ${slowCount} s`,
    );
  }
  if (prev.state === "overloaded") return to("active", slowCount, `QPS ${round(obs.qps)} < profiled peak ${round(obs.peakQps)}`);
  if (prev.state === "interfered") return to("active", slowCount, `observed latency back within ${config.interferenceMargin * 100}% of profile`);
  return to("active", slowCount, prev.state === "active" ? "serving within profile" : "loaded");
}

function round(x: number): number {
  return Math.round(x * 100) / 100;
}
