/**
 * Live SLO-aware batching: which Wbatch each profiled variant runs with (MArk §4.3, DESIGN §3
 * "Batching"). The registrar calls these after a model's variants are profiled and whenever the
 * tightest latency SLO of the model's queries changes; it stores the result on the variant records and
 * announces them (`registry.event.tuned.<model>`), and running executors apply it without a reload.
 *
 * - **The SLO**: the dispatchers report, every second, the tightest latency SLO among the queries they
 *   routed to each model (`metrics.arrivals.<app>`, `models[m].minSloMs`); the registrar keeps, per
 *   model, the tightest one of the last minute (observation/slo-window.ts `SloWindow`, the one meaning
 *   every reader of those reports uses).
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
