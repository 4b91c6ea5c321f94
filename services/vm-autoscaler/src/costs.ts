import { client, createRegistry } from "@sloserve/metrics";
import type { CostSummary } from "@sloserve/contracts";
import type { MachineDecision } from "@sloserve/policy";
import { instanceCost, type WorkerInstance } from "@sloserve/providers";

/**
 * Machines and money (DESIGN §3 "Costs"): what every instance the autoscaler launched has cost, from
 * the provider's record (price per hour, launch, end), billed as EC2 bills — per second from the launch
 * (boot included), at least 60 s (libs/providers `instanceCost` over libs/policy `ec2Cost`) — and the
 * Prometheus metrics that export it with the fleet and the decisions.
 */

export type WorkerState = "booting" | "running" | "draining" | "lost";

/** The summary published on `metrics.cost`: dollars so far and per hour, by provider and market, the fleet, each instance. */
export function costSummary(instances: readonly WorkerInstance[], workers: ReadonlyArray<{ kind: string; state: WorkerState }>, nowMs: number): CostSummary {
  const groups = new Map<string, CostSummary["byMarket"][number]>();
  const rows: CostSummary["instances"] = [];
  let totalDollars = 0;
  let dollarsPerHour = 0;
  for (const i of instances) {
    const dollars = instanceCost(i, nowMs);
    const running = i.endedAtMs === null && i.state !== "terminated";
    const key = `${i.provider}|${i.market}`;
    const g = groups.get(key) ?? { provider: i.provider, market: i.market, dollars: 0, dollarsPerHour: 0, running: 0 };
    g.dollars += dollars;
    if (running) {
      g.dollarsPerHour += i.pricePerHour;
      g.running++;
      dollarsPerHour += i.pricePerHour;
    }
    groups.set(key, g);
    totalDollars += dollars;
    rows.push({ id: i.id, worker: i.workerId, kind: i.kind, instanceType: i.instanceType, market: i.market, state: i.state, pricePerHour: i.pricePerHour, launchedAtMs: i.launchedAtMs, endedAtMs: i.endedAtMs, dollars });
  }
  const counts = new Map<string, number>();
  for (const w of workers) counts.set(`${w.kind}|${w.state}`, (counts.get(`${w.kind}|${w.state}`) ?? 0) + 1);
  return {
    atMs: nowMs,
    totalDollars,
    dollarsPerHour,
    byMarket: [...groups.values()].sort((a, b) => (a.provider + a.market < b.provider + b.market ? -1 : 1)),
    workers: [...counts].map(([k, count]) => {
      const [kind = "", state = ""] = k.split("|");
      return { kind, state, count };
    }).sort((a, b) => (a.kind + a.state < b.kind + b.state ? -1 : 1)),
    instances: rows,
  };
}

/** The service's Prometheus metrics (its own registry, served on METRICS_PORT). */
export class VmMetrics {
  private readonly costTotal: client.Counter<"provider" | "market">;
  private readonly costPerHour: client.Gauge<"provider" | "market">;
  private readonly workers: client.Gauge<"kind" | "state">;
  private readonly decisions: client.Counter<"action" | "trigger">;
  private readonly planned: client.Gauge<"kind">;
  /** Dollars already counted per provider|market (the counter only goes up by the difference). */
  private readonly counted = new Map<string, number>();
  private readonly workerLabels = new Set<string>();

  constructor(readonly registry: client.Registry = createRegistry()) {
    const registers = [this.registry];
    this.costTotal = new client.Counter({ name: "sloserve_cost_dollars_total", help: "Dollars the instances launched by the VM autoscaler have cost (per second from launch, 60 s minimum)", labelNames: ["provider", "market"], registers });
    this.costPerHour = new client.Gauge({ name: "sloserve_cost_dollars_per_hour", help: "What the running instances cost per hour", labelNames: ["provider", "market"], registers });
    this.workers = new client.Gauge({ name: "sloserve_workers", help: "Workers by hardware kind and state (booting, running, draining, lost)", labelNames: ["kind", "state"], registers });
    this.decisions = new client.Counter({ name: "sloserve_vm_decisions_total", help: "VM autoscaler decisions by action and trigger", labelNames: ["action", "trigger"], registers });
    this.planned = new client.Gauge({ name: "sloserve_vm_planned_workers", help: "Workers the predictive plan wants at now + boot time, by kind", labelNames: ["kind"], registers });
  }

  observe(summary: CostSummary): void {
    for (const g of summary.byMarket) {
      const key = `${g.provider}|${g.market}`;
      const delta = g.dollars - (this.counted.get(key) ?? 0);
      if (delta > 0) {
        this.costTotal.inc({ provider: g.provider, market: g.market }, delta);
        this.counted.set(key, g.dollars);
      }
      this.costPerHour.set({ provider: g.provider, market: g.market }, g.dollarsPerHour);
    }
    const seen = new Set<string>();
    for (const w of summary.workers) {
      this.workers.set({ kind: w.kind, state: w.state }, w.count);
      seen.add(`${w.kind}|${w.state}`);
      this.workerLabels.add(`${w.kind}|${w.state}`);
    }
    for (const k of this.workerLabels) {
      if (seen.has(k)) continue;
      const [kind = "", state = ""] = k.split("|");
      this.workers.set({ kind, state }, 0);
    }
  }

  decision(d: MachineDecision): void {
    const trigger = d.action === "launch" || d.action === "terminate" ? d.trigger : d.action === "replace" ? "lost" : "";
    this.decisions.inc({ action: d.action, trigger });
    if (d.action === "plan") this.planned.set({ kind: d.kind }, d.workers);
  }
}
