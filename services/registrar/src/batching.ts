import { subjects, type ArrivalsReport, type BatchingTunedEvent, type Clock, type VariantRecord } from "@sloserve/contracts";
import type { Bus, Logger } from "@sloserve/bus";
import type { MetadataStore } from "@sloserve/store";
import { SLO_MEMORY_MS, SloWindow, planBatchWaits } from "@sloserve/policy";

/**
 * The registrar's batch tuner (MArk §4.3; the rule is libs/policy batch-wait.ts): keeps each model's
 * tightest latency SLO of the last minute from the dispatchers' arrival reports (libs/policy `SloWindow`), and re-tunes the Wbatch of the model's
 * profiled variants when that SLO changes or when the model's variants are (re)profiled. Changed
 * variants are written to Redis, then announced on `registry.event.tuned.<model>` (catalogs update;
 * running executors apply the new Wbatch without a reload). Work per model is serialised, so two
 * re-tunings of one model never interleave their read and write.
 *
 * Several registrars each run one: they compute the same Wbatch from the same records and SLO, so the
 * second finds nothing to change (or writes the same values).
 */
export interface BatchTunerOptions {
  /** How long a tighter SLO is kept against looser ones, ms. @default 60 000 */
  sloMemoryMs?: number;
}

export class BatchTuner {
  private readonly slo: SloWindow;
  /** The latest report time seen: the window ends there (the reports' clock, as the dispatchers stamp them). */
  private lastReportMs = -Infinity;
  /** The SLO each model's variants were last tuned for. */
  private readonly tunedFor = new Map<string, number>();
  private readonly queues = new Map<string, Promise<void>>();

  constructor(
    private readonly bus: Bus,
    private readonly store: MetadataStore,
    private readonly clock: Clock,
    private readonly log: Logger,
    private readonly options: BatchTunerOptions = {},
  ) {
    this.slo = new SloWindow(options.sloMemoryMs ?? SLO_MEMORY_MS);
  }

  /** The SLO kept for a model, if any. */
  sloOf(model: string): number | undefined {
    return this.slo.tightest(model, this.lastReportMs);
  }

  /** One dispatcher's second: each model's tightest SLO; re-tunes the models whose kept SLO changed. */
  applyArrivals(report: ArrivalsReport): Promise<void> {
    const work: Promise<void>[] = [];
    for (const [model, m] of Object.entries(report.models)) {
      if (m.minSloMs === null || !(m.minSloMs > 0)) continue;
      this.slo.observe(model, m.minSloMs, report.atMs);
      this.lastReportMs = Math.max(this.lastReportMs, report.atMs);
      const kept = this.sloOf(model);
      if (kept !== undefined && this.tunedFor.get(model) !== kept) work.push(this.retune(model));
    }
    return Promise.all(work).then(() => undefined);
  }

  /** A model's variants were profiled: tune them if its SLO is known. */
  applyProfiled(model: string): Promise<void> {
    return this.sloOf(model) !== undefined ? this.retune(model) : Promise.resolve();
  }

  /** Re-tunes a model's variants for its kept SLO (serialised per model); resolves with what changed. */
  retune(model: string): Promise<void> {
    const previous = this.queues.get(model) ?? Promise.resolve();
    const next = previous.then(() => this.tune(model));
    const settled = next.catch((err: unknown) => this.log.error({ err, model }, "batch tuning failed"));
    this.queues.set(model, settled);
    void settled.finally(() => {
      if (this.queues.get(model) === settled) this.queues.delete(model);
    });
    return settled;
  }

  private async tune(model: string): Promise<void> {
    const sloMs = this.sloOf(model);
    if (sloMs === undefined) return;
    this.tunedFor.set(model, sloMs);
    try {
      await this.apply(model, sloMs);
    } catch (err) {
      this.tunedFor.delete(model); // tried again on the next report
      throw err;
    }
  }

  private async apply(model: string, sloMs: number): Promise<void> {
    const variants = await this.store.listVariants(model);
    const decisions = planBatchWaits(variants, sloMs);
    if (decisions.length === 0) return;
    const byName = new Map(variants.map((v) => [v.name, v]));
    const updated: VariantRecord[] = [];
    const reasons: Record<string, string> = {};
    for (const d of decisions) {
      const v = byName.get(d.variant);
      if (!v) continue;
      const record: VariantRecord = { ...v, batchWaitMs: d.batchWaitMs };
      await this.store.putVariant(record);
      updated.push(record);
      reasons[d.variant] = d.reason;
      this.log.info({ model, variant: d.variant, batchWaitMs: d.batchWaitMs, previousMs: d.previousMs, reason: d.reason }, "Wbatch tuned");
    }
    const event: BatchingTunedEvent = { model, sloMs, variants: updated, reasons, atMs: this.clock.now() };
    await this.bus.js.publish(subjects.batchingTuned(model), JSON.stringify(event));
  }
}
