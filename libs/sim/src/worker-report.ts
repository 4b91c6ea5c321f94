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
 * The machine's resources and what its replicas hold of them are named as the live workers name them
 * (the machine's `resources` and `used`): `threads` and `threadsUsed` (a GPU or Inferentia worker's
 * threads are its slots; a machine that names none offers its ready replicas' slots), `memoryBytes` and
 * `memoryUsedBytes` (0 when it names no finite memory: not accounted), `accelerators` and
 * `acceleratorsUsed` (GPUs, NeuronCores), and the memory of each accelerator (its
 * `acceleratorMemoryBytes` ÷ its accelerators; one when it names none) and `acceleratorMemoryUsedBytes`,
 * so that the readers' free resources (libs/policy `workerFreeResources`: accelerators × each one's
 * memory less what is held) are the machine's. A machine of a kind the live system does not have (cpu,
 * gpu, inferentia; e.g. a paper's mixed worker, an instance type as the kind) is read, as far as its busy
 * share goes, as offering the slots of what it runs: one that names no accelerators reports its ready
 * replicas' slots as its accelerators; one that names them reports them, and each variant's
 * utilisation in units of its accelerators (its busy share × accelerators ÷ slots), so that the one
 * utilisation formula (libs/policy `reportUtilization`: Σ busy / accelerators for a non-CPU worker)
 * reads its busy share of the slots of what it runs either way.
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
  const res = m.resources;
  const threads = res["threads"] ?? Math.max(1, slots);
  const memoryBytes = res["memoryBytes"];
  const acceleratorMemoryBytes = res["acceleratorMemoryBytes"];
  let accelerators = res["accelerators"] ?? (acceleratorMemoryBytes !== undefined ? 1 : undefined);
  if (!LIVE_KINDS.has(m.kind)) {
    // (a kind the live system does not have: its busy share of the slots of what it runs, see the header)
    if (accelerators === undefined) accelerators = Math.max(1, slots);
    else {
      const scale = Math.max(1, accelerators) / Math.max(1, slots);
      if (scale !== 1) for (const v of byVariant.values()) v.utilisation *= scale;
    }
  }
  return {
    worker: m.name,
    hardware: m.kind as Hardware,
    atMs: nowMs,
    startedAtMs: m.readyMs,
    threads: Math.max(1, Math.round(threads)),
    threadsUsed: Math.round(m.used["threads"] ?? 0),
    memoryBytes: memoryBytes !== undefined && Number.isFinite(memoryBytes) ? memoryBytes : 0,
    memoryUsedBytes: m.used["memoryBytes"] ?? 0,
    ...(accelerators !== undefined ? { accelerators, acceleratorsUsed: Math.round(m.used["accelerators"] ?? 0) } : {}),
    ...(acceleratorMemoryBytes !== undefined
      ? { acceleratorMemoryBytes: acceleratorMemoryBytes / Math.max(1, accelerators ?? 1), acceleratorMemoryUsedBytes: m.used["acceleratorMemoryBytes"] ?? 0 }
      : {}),
    rssBytes: 0,
    variants: [...byVariant.values()],
  };
}
