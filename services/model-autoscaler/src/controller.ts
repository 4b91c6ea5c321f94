import { randomUUID } from "node:crypto";
import { subjects, type ArrivalsReport, type ScaleCommand, type WorkerReport } from "@sloserve/contracts";
import type { Bus, Logger } from "@sloserve/bus";
import type { Catalog } from "@sloserve/store";
import {
  chooseWorker,
  modelAutoscale,
  toVariantProfile,
  WORKER_STALE_MS,
  type ModelAutoscalerConfig,
  type ModelAutoscalerState,
  type ModelScalingDecision,
  type RunningVariant,
  type VariantProfile,
} from "@sloserve/policy";

/**
 * The stateful shell around the pure model autoscaler (libs/policy/model-autoscaler, INFaaS §4.2):
 * keeps each worker's latest report, the tightest latency SLO per model from the dispatchers'
 * arrival reports, and the policy's state per worker; every second it builds each worker's context,
 * calls the policy, publishes every decision with its reason, and turns decisions into commands.
 */

interface Pending {
  /** Instances being added (> 0) or removed (< 0) by a command in flight. */
  delta: number;
  sinceMs: number;
  /** Instances of the variant on the worker when the command was sent. */
  baseline: number;
}

/** How long a model's SLO seen in arrival reports is remembered. */
const SLO_MEMORY_MS = 60_000;
/** A command not reflected in the worker's report by then is forgotten. */
const PENDING_TIMEOUT_MS = 30_000;

export class ModelAutoscalerController {
  private readonly reports = new Map<string, { report: WorkerReport; seenAtMs: number }>();
  private readonly slo = new Map<string, { ms: number; atMs: number }>();
  private readonly states = new Map<string, ModelAutoscalerState>();
  private readonly pending = new Map<string, Pending>();
  /** Scale-down of a variant to 0 on a worker waits until its replacement is active there. */
  private readonly lastHold = new Map<string, string>();

  constructor(
    private readonly bus: Bus,
    private readonly catalog: Catalog,
    private readonly log: Logger,
    private readonly config: Partial<ModelAutoscalerConfig> = {},
  ) {}

  applyReport(report: WorkerReport, nowMs: number): void {
    const prev = this.reports.get(report.worker);
    if (prev && prev.report.atMs > report.atMs) return;
    this.reports.set(report.worker, { report, seenAtMs: nowMs });
    for (const [key, p] of this.pending) {
      const [worker, variant] = key.split("|");
      if (worker !== report.worker) continue;
      const now = report.variants.find((v) => v.variant === variant)?.instances ?? 0;
      if (now !== p.baseline || nowMs - p.sinceMs > PENDING_TIMEOUT_MS) this.pending.delete(key);
    }
  }

  applyArrivals(report: ArrivalsReport): void {
    for (const [model, m] of Object.entries(report.models)) {
      if (m.minSloMs === null) continue;
      const prev = this.slo.get(model);
      if (!prev || report.atMs - prev.atMs > SLO_MEMORY_MS || m.minSloMs <= prev.ms) this.slo.set(model, { ms: m.minSloMs, atMs: report.atMs });
    }
  }

  private sloByModel(nowMs: number): Record<string, number> {
    const out: Record<string, number> = {};
    for (const [model, s] of this.slo) if (nowMs - s.atMs <= SLO_MEMORY_MS) out[model] = s.ms;
    return out;
  }

  /** One controller tick: the policy for every live worker. Errors on one worker don't stop the others. */
  async tick(nowMs: number): Promise<ModelScalingDecision[]> {
    const all: ModelScalingDecision[] = [];
    const slo = this.sloByModel(nowMs);
    for (const [id, { report, seenAtMs }] of this.reports) {
      if (nowMs - seenAtMs > WORKER_STALE_MS) {
        this.reports.delete(id);
        this.states.delete(id);
        continue;
      }
      try {
        const decisions = this.decideFor(report, slo, nowMs);
        for (const d of decisions) await this.act(d, report, nowMs);
        all.push(...decisions);
      } catch (err) {
        this.log.error({ err, worker: id }, "model autoscaling failed for a worker");
      }
    }
    return all;
  }

  decideFor(report: WorkerReport, sloMsByModel: Record<string, number>, nowMs: number): ModelScalingDecision[] {
    const running: RunningVariant[] = [];
    const models = new Set<string>();
    // What the worker reports, corrected by the commands still in flight: instances being added count
    // as loading, instances being removed are gone already (the report may be a second behind).
    const seen = new Set<string>();
    for (const v of report.variants) {
      const record = this.catalog.variants.get(v.variant);
      const profile = record ? toVariantProfile(record) : undefined;
      if (!profile) continue; // unprofiled: nothing to reason with
      seen.add(v.variant);
      const delta = this.pending.get(`${report.worker}|${v.variant}`)?.delta ?? 0;
      const reported = v.state === "loading" || v.state === "unloading" ? 0 : v.instances;
      const instances = Math.max(0, reported + Math.min(0, delta));
      const loading = (v.state === "loading" ? 1 : 0) + Math.max(0, delta);
      if (instances + loading > 0) running.push({ variant: profile, instances, loading, loadQps: v.arrivals });
      models.add(profile.model);
    }
    for (const [key, p] of this.pending) {
      const [worker, variant] = key.split("|");
      if (worker !== report.worker || seen.has(variant ?? "") || p.delta <= 0) continue;
      const record = this.catalog.variants.get(variant ?? "");
      const profile = record ? toVariantProfile(record) : undefined;
      if (!profile) continue;
      running.push({ variant: profile, instances: 0, loading: p.delta, loadQps: 0 });
      models.add(profile.model);
    }
    const catalog: VariantProfile[] = [];
    for (const model of models) {
      for (const v of this.catalog.variantsByModel.get(model) ?? []) {
        const p = v.hardware === report.hardware ? toVariantProfile(v) : undefined;
        if (p) catalog.push(p);
      }
    }
    const result = modelAutoscale({
      nowMs,
      worker: { name: report.worker, free: { threads: Math.max(0, report.threads - report.threadsUsed), memoryBytes: Math.max(0, report.memoryBytes - report.memoryUsedBytes) } },
      running,
      catalog,
      sloMsByModel,
      config: this.config,
      state: this.states.get(report.worker),
    });
    this.states.set(report.worker, result.state);
    return result.decisions;
  }

  private async send(worker: string, command: Omit<ScaleCommand, "id" | "atMs">, nowMs: number, baseline: number): Promise<void> {
    const full: ScaleCommand = { ...command, id: randomUUID(), atMs: nowMs };
    await this.bus.js.publish(subjects.scaleModel(worker), JSON.stringify(full));
    const count = command.count ?? (command.action === "unload" ? baseline : 1);
    this.pending.set(`${worker}|${command.variant}`, { delta: command.action === "unload" ? -count : count, sinceMs: nowMs, baseline });
  }

  private instancesOn(report: WorkerReport, variant: string): number {
    return report.variants.find((v) => v.variant === variant)?.instances ?? 0;
  }

  private async act(d: ModelScalingDecision, report: WorkerReport, nowMs: number): Promise<void> {
    if (d.action === "hold") {
      const key = `${d.worker}|${d.model}`;
      if (this.lastHold.get(key) === d.reason) return; // publish a hold only when its reason changes
      this.lastHold.set(key, d.reason);
    } else this.lastHold.delete(`${d.worker}|${d.model}`);
    await this.bus.js.publish(subjects.decision("model", d.worker), JSON.stringify({ ...d, atMs: nowMs }));
    if (d.action !== "hold") this.log.info({ decision: d.action, worker: d.worker, model: d.model, variant: "variant" in d ? d.variant : undefined, reason: d.reason }, "model scaling decision");
    switch (d.action) {
      case "replicate":
        await this.send(d.worker, { action: "add", variant: d.variant, count: d.count, reason: d.reason }, nowMs, this.instancesOn(report, d.variant));
        break;
      case "upgrade":
      case "downgrade":
        // Add the new instances first; the old ones go once the worker reports the new variant
        // active (the policy sees both and removes the surplus on a later tick).
        await this.send(d.worker, { action: "add", variant: d.variant, count: d.count, reason: d.reason }, nowMs, this.instancesOn(report, d.variant));
        for (const r of d.remove) {
          if (this.instancesOn(report, d.variant) > 0) await this.send(d.worker, { action: "unload", variant: r.variant, count: r.count, reason: d.reason }, nowMs, this.instancesOn(report, r.variant));
        }
        break;
      case "remove":
        await this.send(d.worker, { action: "unload", variant: d.variant, count: d.count, reason: d.reason }, nowMs, this.instancesOn(report, d.variant));
        break;
      case "place-elsewhere": {
        const record = this.catalog.variants.get(d.variant);
        const others = [...this.reports.values()]
          .filter((r) => r.report.worker !== d.worker)
          .map(({ report: r, seenAtMs }) => ({
            worker: r.worker,
            hardware: r.hardware,
            utilisation: r.variants.reduce((s, v) => s + v.utilisation, 0) / Math.max(1, r.threads),
            threads: r.threads,
            threadsUsed: r.threadsUsed,
            memoryBytes: r.memoryBytes,
            memoryUsedBytes: r.memoryUsedBytes,
            variants: [] as string[],
            seenAtMs,
          }));
        const placement = record ? chooseWorker(others, { variant: d.variant, hardware: record.hardware, threads: record.threads, memoryBytes: record.profile?.memoryBytes ?? 0 }, nowMs) : { worker: undefined, reason: "unknown variant" };
        if (placement.worker) {
          const target = this.reports.get(placement.worker)?.report;
          await this.send(placement.worker, { action: "add", variant: d.variant, count: d.count, reason: `${d.reason}; placed on ${placement.worker}: ${placement.reason}` }, nowMs, target ? this.instancesOn(target, d.variant) : 0);
        } else {
          const request = { action: "add", hardware: record?.hardware ?? report.hardware, variant: d.variant, count: d.count, reason: `${d.reason}; no other worker can take it (${placement.reason})`, atMs: nowMs };
          await this.bus.js.publish(subjects.scaleVm, JSON.stringify(request));
          await this.bus.js.publish(subjects.decision("model", d.worker), JSON.stringify({ ...request, action: "escalate" }));
          this.log.info(request, "asked the VM autoscaler for a worker");
        }
        break;
      }
    }
  }
}
