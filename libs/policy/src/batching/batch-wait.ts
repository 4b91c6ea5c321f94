/**
 * Live SLO-aware batching: which Wbatch each profiled variant runs with (MArk §4.3, DESIGN §3
 * "Batching"). The registrar calls these after a model's variants are profiled and whenever the
 * tightest latency SLO of the model's queries changes; it stores the result on the variant records and
 * announces them (`registry.event.tuned.<model>`), and running executors apply it without a reload.
 *
 * - **The SLO**: the dispatchers report, every second, the tightest latency SLO among the queries they
 *   routed to each model (`metrics.arrivals.<app>`, `models[m].minSloMs`). {@link observeTightestSlo}
 *   keeps, per model, the tightest one seen: a tighter (or equal) SLO replaces it at once; a looser one
 *   only once the kept one has not been seen for `memoryMs` (60 s), so queries with a tight SLO are not
 *   put at risk by a second of loose ones.
 * - **Wbatch**: {@link tunedBatching} (batch-tuning.ts) on the variant's profiled latencies, with
 *   Nbatch capped by the variant's max batch. Variants are enumerated by max batch (variant-generator.ts),
 *   so the executor's Nbatch stays the variant's max batch; the tuned Wbatch is that of the tuned
 *   Nbatch ≤ max batch (a batch larger than the tuned one forms only while the executor is busy, when
 *   its queries wait anyway).
 * - Unprofiled variants keep their Wbatch (0 from the generator); a model whose queries carry no SLO
 *   (model- or variant-specific queries without `x-slo-latency-ms`) is not tuned; a variant whose
 *   batch of one is slower than the SLO gets 0 (it is not selected for such queries anyway).
 *
 * Pure: variants and the SLO come in, decisions with their reasons go out.
 */
import { tunedBatching, type TunableProfile } from "./batch-tuning.js";

/** What the plan reads of a variant record (libs/contracts `VariantRecord` fits). */
export interface BatchWaitVariant {
  name: string;
  maxBatch: number;
  batchWaitMs: number;
  profiled: boolean;
  profile: { latencyMs: Readonly<Record<string, number>> } | null;
}

export interface BatchWaitDecision {
  variant: string;
  /** The new Wbatch, ms (rounded to 0.01 ms). */
  batchWaitMs: number;
  previousMs: number;
  /** Nbatch and μ* of the tuning. */
  nbatch: number;
  throughputQps: number;
  reason: string;
}

const round2 = (x: number): number => Math.round(x * 100) / 100;

/**
 * The Wbatch of each profiled variant under `sloMs`; only the variants whose Wbatch changes (by more
 * than the 0.01 ms rounding) are returned.
 */
export function planBatchWaits(variants: readonly BatchWaitVariant[], sloMs: number): BatchWaitDecision[] {
  const out: BatchWaitDecision[] = [];
  for (const v of variants) {
    if (!v.profiled || !v.profile || Object.keys(v.profile.latencyMs).length === 0) continue;
    const profile: TunableProfile = { latencyMs: v.profile.latencyMs, maxBatch: v.maxBatch };
    const t = tunedBatching(profile, sloMs);
    const batchWaitMs = t.nbatch === 0 ? 0 : round2(t.wbatchMs);
    if (Math.abs(batchWaitMs - v.batchWaitMs) < 0.005) continue;
    const why = t.nbatch === 0 ? t.reason : `Nbatch ${t.nbatch} of max ${v.maxBatch}, T(${t.nbatch}) = ${round2(t.batchLatencyMs)} ms, μ* = ${round2(t.throughputQps)} qps (${t.reason})`;
    out.push({
      variant: v.name,
      batchWaitMs,
      previousMs: v.batchWaitMs,
      nbatch: t.nbatch,
      throughputQps: t.throughputQps,
      reason: `SLO ${round2(sloMs)} ms: Wbatch ${round2(v.batchWaitMs)} → ${batchWaitMs} ms; ${why}`,
    });
  }
  return out;
}

/** The tightest latency SLO kept for a model, and when it was last seen. */
export interface SloMemory {
  ms: number;
  atMs: number;
}

/** How long a tighter SLO is kept against looser ones. @default 60 s */
export const SLO_MEMORY_MS = 60_000;

/**
 * One second's tightest SLO of a model (`minSloMs` of an arrival report stamped `atMs`) against the
 * one kept: the new one when it is as tight or tighter, or when the kept one is older than `memoryMs`;
 * else the kept one.
 */
export function observeTightestSlo(kept: SloMemory | undefined, minSloMs: number, atMs: number, memoryMs = SLO_MEMORY_MS): SloMemory {
  if (!kept || minSloMs <= kept.ms || atMs - kept.atMs > memoryMs) return { ms: minSloMs, atMs };
  return kept;
}
