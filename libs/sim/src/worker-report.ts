/**
 * A simulated machine's worker report: what a live executor publishes every second on
 * `metrics.worker.<worker>` (libs/contracts `WorkerReport`), built from the machine's replicas, so that
 * the simulator's systems read their machines through the services' own observation code (libs/policy
 * observation/: `FleetObservation`, `machineView`, `reportUtilization`).
 *
 * Per variant on the machine, over the report's period (since the machine's previous report):
 * - instances: ready replicas; loading: replicas still loading;
 * - utilisation: Σ over its replicas of the busy share of the replica's slots (a replica running
 *   `concurrency` batches at once is 100% busy when all of them run), as an executor reports its busy
 *   fraction per instance;
 * - served, sloMisses (answered after their SLO), errors (shed as late: the executors answer those
 *   deadline_exceeded): the replicas' counts;
 * - arrivals: what the caller attributes to this machine (the simulator's systems share a variant's
 *   arrivals among its machines);
 * - state: what the caller's variant-state monitor says of the variant on this machine.
 * The machine offers `threads` (its `threads` or `cores` resource; else its replicas' slots) and its
 * `accelerators`; memory figures are its `memoryBytes` resource (0 when it names none). A machine of a
 * kind the live system does not have (cpu, gpu, inferentia) reports its ready replicas' slots as its
 * accelerators, so the one utilisation formula (libs/policy `reportUtilization`: Σ busy / accelerators
 * for a non-CPU worker) reads its busy share of what it runs.
 */
import type { Hardware, VariantState, WorkerReport } from "@sloserve/contracts";
import type { Machine, Replica } from "./entities.js";

const LIVE_KINDS: ReadonlySet<string> = new Set(["cpu", "gpu", "inferentia"]);

export interface SimulatedReportInput {
  /** The variant's state on this machine (the monitor's). */
  stateOf(variant: string, m: Machine): VariantState;
  /** Queries of the variant that arrived for this machine over the period. */
  arrivalsOf(variant: string, m: Machine, fromMs: number, toMs: number): number;
}

/** Each replica's counts at the machine's previous report (for the period's differences). */
export type ReplicaReadings = WeakMap<Replica, { busyMs: number; served: number; sloMisses: number; shed: number }>;

/** The report of machine `m` at `nowMs` for the period since `fromMs`; `readings` is updated. */
export function simulatedWorkerReport(m: Machine, nowMs: number, fromMs: number, readings: ReplicaReadings, input: SimulatedReportInput): WorkerReport {
  const periodMs = Math.max(1, nowMs - fromMs);
  const byVariant = new Map<string, WorkerReport["variants"][number]>();
  let slots = 0;
  for (const r of m.replicas) {
    if (r.state === "removed") continue;
    const busyMs = r.busyMsAt(nowMs);
    const prev = readings.get(r) ?? { busyMs: 0, served: 0, sloMisses: 0, shed: 0 };
    readings.set(r, { busyMs, served: r.served, sloMisses: r.sloMisses, shed: r.shed });
    if (r.state === "draining") continue;
    let v = byVariant.get(r.label);
    if (v === undefined) {
      // (queueLength: the queries a worker holds, not yet running; a simulated replica takes queries only as it starts a batch)
      v = { variant: r.label, state: "active", instances: 0, loading: 0, sloMisses: 0, batchP50Ms: 0, batchSizeP50: 0, arrivals: 0, served: 0, errors: 0, batches: 0, queueLength: 0, latencyP50Ms: 0, latencyP99Ms: 0, utilisation: 0 };
      byVariant.set(r.label, v);
    }
    if (r.state === "ready") {
      v.instances++;
      slots += r.concurrency;
    } else v.loading = (v.loading ?? 0) + 1;
    v.utilisation += Math.max(0, busyMs - prev.busyMs) / (periodMs * r.concurrency);
    v.served += r.served - prev.served;
    v.sloMisses += r.sloMisses - prev.sloMisses;
    v.errors += r.shed - prev.shed;
  }
  for (const v of byVariant.values()) {
    v.state = v.instances === 0 ? "loading" : input.stateOf(v.variant, m);
    v.arrivals = Math.round(input.arrivalsOf(v.variant, m, fromMs, nowMs));
  }
  const threads = m.resources["threads"] ?? m.resources["cores"] ?? Math.max(1, slots);
  const memoryBytes = m.resources["memoryBytes"];
  // A machine of a kind the live system does not have (a paper's mixed worker, an instance type as the
  // kind) offers, as far as a reading of its busy share goes, the slots of what it runs.
  const accelerators = LIVE_KINDS.has(m.kind) ? m.resources["accelerators"] : Math.max(1, slots);
  return {
    worker: m.name,
    hardware: m.kind as Hardware,
    atMs: nowMs,
    startedAtMs: m.readyMs,
    threads: Math.max(1, Math.round(threads)),
    threadsUsed: Math.round(m.used["threads"] ?? m.used["cores"] ?? 0),
    memoryBytes: memoryBytes !== undefined && Number.isFinite(memoryBytes) ? memoryBytes : 0,
    memoryUsedBytes: m.used["memoryBytes"] ?? 0,
    ...(accelerators !== undefined ? { accelerators, acceleratorsUsed: Math.round(m.used["accelerators"] ?? 0) } : {}),
    rssBytes: 0,
    variants: [...byVariant.values()],
  };
}
