/**
 * INFaaS as a simulated system (papers/infaas.txt §3-5): the same pure policies the services run,
 * wired to the simulator.
 *
 * - **Dispatcher**: every query goes through {@link SelectionIndex.select} (Algorithm 1). "active" →
 *   the variant's queue; "load" → the variant's queue, and a load of the variant on the lowest-utilised
 *   worker of its hardware (unless one is already loading); "infeasible" → dropped with the reason.
 * - **Monitor** (every `modelPeriodMs`, 1 s): per variant, the state machine of variant-state.ts
 *   (Active/Overloaded/Interfered/Loading/Inactive) feeds the selection index. Load is the variant's
 *   arrival rate over `monitorWindowMs` (5 s: a 1 s Poisson count at 4 QPS exceeds a 5 QPS peak 37% of
 *   the time); observed latency is the mean observed/profiled batch time ratio of the last second (a
 *   stand-in for the p50).
 * - **Model autoscaler** (every 1 s, per worker): {@link modelAutoscale}; upgrades and downgrades load
 *   the new variant first and unload the old instances once the new ones are ready; queries still
 *   waiting on an unloaded variant are routed again. Placements that fit nowhere go to the VM autoscaler.
 * - **VM autoscaler** (every 2 s): {@link vmAutoscale} over the machines; a machine lost with
 *   `sim.killMachine` stops heartbeating and is replaced with the variants it ran.
 *
 * Modes: "infaas" (all of it), "horizontal" (SM+: one fixed variant, replicas only), "static"
 * (Clipper+: pre-loaded instances, no scaling).
 */
import {
  DEFAULT_VARIANT_STATE_CONFIG,
  SelectionIndex,
  initialVariantState,
  modelAutoscale,
  nextState,
  vmAutoscale,
  type ModelAutoscalerConfig,
  type ModelAutoscalerState,
  type ModelScalingDecision,
  type PendingPlacement,
  type QueryRequirements,
  type RunningVariant,
  type VariantProfile,
  type VariantStateConfig,
  type VariantStateMemory,
  type VmAutoscalerConfig,
  type VmAutoscalerState,
  type VmWorkerView,
} from "@sloserve/policy";
import { drop, type Simulator } from "../engine.js";
import type { Machine, MachineOptions, Queue, Replica } from "../entities.js";
import { replicaOptionsFor } from "../hardware.js";

export type InfaasMode = "infaas" | "horizontal" | "static";

export interface InfaasSystemOptions {
  mode: InfaasMode;
  /** Variants the system may use (baselines: the one they are configured with). */
  variants: readonly VariantProfile[];
  /** Machines present from t = 0 (booted). */
  workers: readonly MachineOptions[];
  /** Machine to launch per kind when the VM autoscaler adds one. @default the first initial worker of the kind */
  templates?: Readonly<Record<string, MachineOptions>>;
  /** Machine kind that hosts a variant. @default variant.hardware */
  kindOf?: (v: VariantProfile) => string;
  /** Instances loaded at t = 0 (on the first worker of the variant's kind that fits). */
  preload?: ReadonlyArray<{ variant: string; count: number }>;
  /** Latency SLO per model, for the autoscaler's candidate variants. */
  sloMsByModel: Readonly<Record<string, number>>;
  /** Bill each running variant instance at its own price (INFaaS §6.2). @default false */
  billReplicas?: boolean;
  /** Executors shed queries that can no longer meet their deadline (DESIGN §3 batching). @default true */
  shedLate?: boolean;
  /** Wbatch for variants with batch > 1. @default 0 (a batch leaves at once when a replica is idle) */
  waitMs?: number;
  modelConfig?: Partial<ModelAutoscalerConfig>;
  vmConfig?: Partial<VmAutoscalerConfig>;
  stateConfig?: VariantStateConfig;
  /** @default 5000 */
  monitorWindowMs?: number;
  /** @default 1000 */
  modelPeriodMs?: number;
  /** @default 2000 */
  vmPeriodMs?: number;
  /** Most log entries kept. @default 5000 */
  maxLog?: number;
}

export interface DecisionLogEntry {
  tMs: number;
  source: "dispatcher" | "model-autoscaler" | "vm-autoscaler" | "monitor";
  action: string;
  reason: string;
}

export interface InfaasSystem {
  readonly log: DecisionLogEntry[];
  queueOf(variant: string): Queue;
  /** Per-variant state (from the monitor). */
  stateOf(variant: string): VariantStateMemory;
  /** Seconds each variant spent with at least one ready instance. */
  readonly activeSeconds: Map<string, number>;
}

interface Swap {
  machine: Machine;
  model: string;
  added: Replica[];
  remove: Array<{ variant: string; count: number }>;
}

export function installInfaas(sim: Simulator, opts: InfaasSystemOptions): InfaasSystem {
  const kindOf = opts.kindOf ?? ((v: VariantProfile) => String(v.hardware));
  const windowMs = opts.monitorWindowMs ?? 10_000;
  const stateCfg = opts.stateConfig ?? DEFAULT_VARIANT_STATE_CONFIG;
  const maxLog = opts.maxLog ?? 5000;
  const log: DecisionLogEntry[] = [];
  const note = (source: DecisionLogEntry["source"], action: string, reason: string): void => {
    if (log.length < maxLog) log.push({ tMs: sim.nowMs, source, action, reason });
  };

  const profiles = new Map<string, VariantProfile>();
  const queues = new Map<string, Queue>();
  const states = new Map<string, VariantStateMemory>();
  const activeSeconds = new Map<string, number>();
  for (const v of opts.variants) {
    profiles.set(v.name, v);
    queues.set(v.name, sim.addQueue({ name: v.name, maxBatch: v.batchSize, waitMs: opts.waitMs ?? 0, shedLate: opts.shedLate ?? true }));
    states.set(v.name, initialVariantState(0));
  }
  const index = new SelectionIndex(opts.variants);
  const machines: Machine[] = opts.workers.map((w) => sim.launchMachine({ ...w, bootMs: 0 }));
  const templates: Record<string, MachineOptions> = { ...(opts.templates ?? {}) };
  for (const w of opts.workers) templates[w.kind] ??= w;

  const queueOf = (name: string): Queue => {
    const q = queues.get(name);
    if (!q) throw new Error(`unknown variant "${name}"`);
    return q;
  };
  const profileOf = (name: string): VariantProfile => {
    const v = profiles.get(name);
    if (!v) throw new Error(`unknown variant "${name}"`);
    return v;
  };
  const live = (): Machine[] => machines.filter((m) => m.state === "running" || m.state === "booting");
  const load = (v: VariantProfile, m: Machine, preloaded = false): Replica | null =>
    sim.addReplica(queueOf(v.name), m, replicaOptionsFor(v, { pricePerS: opts.billReplicas ? v.pricePerS : 0, ...(preloaded ? { loadMs: 0 } : {}) }));
  const placeAnywhere = (v: VariantProfile, prefer?: string): Replica | null => {
    const kind = kindOf(v);
    const candidates = live().filter((m) => m.kind === kind);
    candidates.sort((a, b) => (a.name === prefer ? -1 : b.name === prefer ? 1 : utilization(a) - utilization(b)));
    for (const m of candidates) {
      const r = load(v, m);
      if (r) return r;
    }
    return null;
  };

  for (const p of opts.preload ?? []) {
    const v = profileOf(p.variant);
    for (let i = 0; i < p.count; i++) {
      const m = machines.find((mm) => mm.kind === kindOf(v) && mm.fits(v.resources ?? {}));
      if (!m || !load(v, m, true)) throw new Error(`preload: no ${kindOf(v)} worker has room for ${v.name}`);
    }
  }

  // Pre-loaded variants are Active from the start (the monitor confirms it at its first tick).
  for (const name of new Set((opts.preload ?? []).map((p) => p.variant))) {
    const q = queueOf(name);
    states.set(name, { state: "active", sinceMs: 0, slowCount: 0 });
    const workers = [...new Set(q.replicas.map((r) => r.machine?.name ?? ""))].map((worker) => ({ worker, qps: 0 }));
    index.setRuntime(name, { state: "active", instances: q.replicas.length, qps: 0, workers });
  }

  // Utilisation of a machine over the last VM interval.
  const busyPrev = new Map<Machine, { t: number; busy: number }>();
  const utilCache = new Map<Machine, number>();
  function utilization(m: Machine): number {
    return utilCache.get(m) ?? 0;
  }
  const measureUtilization = (nowMs: number): void => {
    for (const m of machines) {
      const busy = m.busyMsAt(nowMs);
      const prev = busyPrev.get(m);
      busyPrev.set(m, { t: nowMs, busy });
      let slots = 0;
      for (const r of m.replicas) if (r.state === "ready") slots += r.concurrency;
      // Removed replicas take their busy time with them: clamp at 0.
      utilCache.set(m, prev && nowMs > prev.t && slots > 0 ? Math.min(1, Math.max(0, (busy - prev.busy) / ((nowMs - prev.t) * slots))) : 0);
    }
  };

  // ------------------------------------------------------------------ dispatcher
  const pendingPlacements: PendingPlacement[] = [];
  /** Variants with a placement request outstanding (one request per variant until the VM tick). */
  const pendingVariants = new Set<string>();
  // One requirements object, refilled per query (select keeps no reference to it).
  const req: QueryRequirements = { latencyMs: 0, minAccuracy: 0 };
  sim.setRouter((q, _from, cause) => {
    if (cause === "served") return null;
    if (cause === "late") return drop("deadline: cannot finish within the SLO");
    req.latencyMs = q.sloMs;
    req.minAccuracy = q.minAccuracy;
    if (Number.isFinite(q.maxCostPerQuery)) req.maxCostPerQuery = q.maxCostPerQuery;
    else delete req.maxCostPerQuery;
    const d = index.select(q.app, req);
    if (d.kind === "infeasible") return drop(d.reason);
    const queue = queueOf(d.variant.name);
    if (d.kind === "load" && !d.alreadyLoading && opts.mode === "infaas") {
      const r = placeAnywhere(d.variant, d.worker);
      if (r) {
        note("dispatcher", `load ${d.variant.name} on ${r.machine?.name ?? "?"}`, d.reason);
        index.setRuntime(d.variant.name, { state: "loading", instances: 0, qps: 0, workers: [{ worker: r.machine?.name ?? "", qps: 0 }] });
      } else if (!pendingVariants.has(d.variant.name)) {
        pendingVariants.add(d.variant.name);
        pendingPlacements.push({ kind: kindOf(d.variant), variant: d.variant.name, count: 1 });
        note("dispatcher", `no room for ${d.variant.name}`, `${d.reason}; asking the VM autoscaler`);
      }
    }
    return queue;
  });

  // ------------------------------------------------------------------ monitor + model autoscaler
  /** Upgrades/downgrades and placements elsewhere still loading, by the worker that asked for them. */
  const swaps: Swap[] = [];
  let modelState = new Map<string, ModelAutoscalerState>();
  const removeInstances = (m: Machine, variant: string, count: number): void => {
    const mine = [...m.replicas].filter((r) => r.label === variant && r.state !== "draining" && r.state !== "removed");
    mine.sort((a, b) => (a.state === "loading" ? -1 : 0) - (b.state === "loading" ? -1 : 0) || a.inFlight - b.inFlight);
    for (const r of mine.slice(0, count)) sim.removeReplica(r);
    const q = queueOf(variant);
    if (q.replicas.every((r) => r.state === "draining") && q.length > 0) {
      const n = sim.rerouteQueued(q);
      note("monitor", `reroute ${n} queued queries`, `${variant} has no instance left`);
    }
  };

  const monitorTick = (nowMs: number): void => {
    // Finish upgrades/downgrades whose new instances are ready.
    for (let i = swaps.length - 1; i >= 0; i--) {
      const s = swaps[i] as Swap;
      if (s.added.some((r) => r.state === "loading")) continue;
      swaps.splice(i, 1);
      for (const rm of s.remove) removeInstances(s.machine, rm.variant, rm.count);
    }
    // States → selection index.
    const workerRates = new Map<string, number>();
    for (const [name, v] of profiles) {
      const q = queueOf(name);
      const ready = q.replicas.filter((r) => r.state === "ready");
      const loadingN = q.replicas.filter((r) => r.state === "loading").length;
      const rate = q.rateQps(nowMs, windowMs);
      workerRates.set(name, rate);
      const sec = Math.floor(nowMs / 1000) * 1000;
      const profiled = q.profiledMs.sum(sec - 1000, sec);
      const prev = states.get(name) ?? initialVariantState(nowMs);
      const step = nextState(
        prev,
        {
          loaded: ready.length > 0,
          loading: loadingN > 0,
          qps: rate,
          peakQps: ready.length * v.peakQps,
          observedP50Ms: profiled > 0 ? q.observedLatencyRatio(nowMs, 1000) : null,
          profiledMs: 1,
        },
        nowMs,
        stateCfg,
      );
      states.set(name, step.memory);
      if (step.changed) note("monitor", `${name}: ${prev.state} → ${step.memory.state}`, step.reason);
      if (ready.length > 0) activeSeconds.set(name, (activeSeconds.get(name) ?? 0) + (opts.modelPeriodMs ?? 1000) / 1000);
      const workers = new Map<string, number>();
      for (const r of q.replicas) if (r.machine && r.state !== "draining") workers.set(r.machine.name, (workers.get(r.machine.name) ?? 0) + (ready.length > 0 && r.state === "ready" ? rate / ready.length : 0));
      index.setRuntime(name, { state: step.memory.state, instances: ready.length, qps: rate, workers: [...workers].map(([worker, qps]) => ({ worker, qps })) });
    }
    index.setWorkers(live().map((m) => ({ worker: m.name, hardware: m.kind, utilization: utilization(m) })));
    if (opts.mode === "static") return;

    const next = new Map<string, ModelAutoscalerState>();
    for (const m of live()) {
      // A model whose new instances (here or elsewhere) are still loading waits for them.
      const busyModels = new Set(swaps.filter((sw) => sw.machine === m).map((sw) => sw.model));
      const running: RunningVariant[] = [];
      const byVariant = new Map<string, { ready: number; loading: number }>();
      for (const r of m.replicas) {
        if (r.state === "draining" || r.state === "removed") continue;
        const e = byVariant.get(r.label) ?? { ready: 0, loading: 0 };
        if (r.state === "ready") e.ready++;
        else e.loading++;
        byVariant.set(r.label, e);
      }
      for (const [name, e] of byVariant) {
        const v = profileOf(name);
        if (busyModels.has(v.model)) continue;
        const q = queueOf(name);
        const readyAll = q.replicas.filter((r) => r.state === "ready").length;
        const loadingAll = q.replicas.filter((r) => r.state === "loading").length;
        const rate = workerRates.get(name) ?? 0;
        const share = readyAll > 0 ? e.ready / readyAll : loadingAll > 0 ? e.loading / loadingAll : 0;
        running.push({ variant: v, instances: e.ready, loading: e.loading, loadQps: rate * share });
      }
      const free: Record<string, number> = {};
      for (const k of Object.keys(m.resources)) free[k] = m.free(k);
      const res = modelAutoscale({
        nowMs,
        worker: { name: m.name, free },
        running,
        catalog: opts.variants,
        sloMsByModel: opts.sloMsByModel,
        config: { ...(opts.modelConfig ?? {}), ...(opts.mode === "horizontal" ? { allowVertical: false } : {}) },
        state: modelState.get(m.name) ?? { downSinceMs: {} },
      });
      next.set(m.name, res.state);
      for (const d of res.decisions) apply(m, d);
    }
    modelState = next;
  };

  const apply = (m: Machine, d: ModelScalingDecision): void => {
    if (d.action === "hold") return;
    note("model-autoscaler", `${d.action} ${"variant" in d ? `${d.variant}${"count" in d ? ` ×${d.count}` : ""}` : ""} on ${m.name}`, d.reason);
    switch (d.action) {
      case "replicate":
        for (let i = 0; i < d.count; i++) load(profileOf(d.variant), m);
        break;
      case "upgrade":
      case "downgrade": {
        const added: Replica[] = [];
        for (let i = 0; i < d.count; i++) {
          const r = load(profileOf(d.variant), m);
          if (r) added.push(r);
        }
        if (added.length > 0) swaps.push({ machine: m, model: d.model, added, remove: d.remove });
        break;
      }
      case "remove":
        removeInstances(m, d.variant, d.count);
        break;
      case "place-elsewhere": {
        const v = profileOf(d.variant);
        const added: Replica[] = [];
        for (let i = 0; i < d.count; i++) {
          const others = live().filter((o) => o !== m && o.kind === kindOf(v));
          const r = others.map((o) => load(v, o)).find((x) => x !== null) ?? null;
          if (r) added.push(r);
          else pendingPlacements.push({ kind: kindOf(v), variant: v.name, count: 1 });
        }
        if (added.length > 0) swaps.push({ machine: m, model: d.model, added, remove: d.remove });
        break;
      }
    }
  };

  // ------------------------------------------------------------------ VM autoscaler
  let vmState: VmAutoscalerState = { idleSinceMs: {} };
  const replaced = new Set<Machine>();
  /** What each machine ran, remembered at every tick (the metadata store), to restore a lost one. */
  const lostVariants = new Map<Machine, string[]>();
  const vmTick = (nowMs: number): void => {
    measureUtilization(nowMs);
    for (const m of live()) lostVariants.set(m, [...new Set([...m.replicas].map((r) => r.label))]);
    if (opts.mode === "static") return;
    // Lost machines (killed, not yet replaced) stop sending heartbeats at the moment they died.
    const lost = machines.filter((m) => m.failed && !replaced.has(m));
    const views: VmWorkerView[] = [...live(), ...lost].map((m) => {
      const labels = new Set<string>();
      let capacityQps = 0;
      let serving = false;
      for (const r of m.replicas) {
        labels.add(r.label);
        if (r.state === "ready") {
          capacityQps += r.peakQps();
          if (r.queue.rateQps(nowMs, windowMs) > 0) serving = true;
        }
      }
      const st = [...labels].map((l) => states.get(l)?.state);
      return {
        name: m.name,
        kind: m.kind,
        booting: m.state === "booting",
        utilization: utilization(m),
        interfered: st.includes("interfered"),
        overloaded: st.includes("overloaded"),
        serving,
        capacityQps,
        lastHeartbeatMs: m.failed ? (m.billedToMs ?? nowMs) : nowMs,
        variants: m.failed ? (lostVariants.get(m) ?? []) : [...labels],
      };
    });
    const loadQpsByKind: Record<string, number> = {};
    for (const [name, v] of profiles) {
      const k = kindOf(v);
      loadQpsByKind[k] = (loadQpsByKind[k] ?? 0) + queueOf(name).rateQps(nowMs, windowMs);
    }
    const pending = pendingPlacements.splice(0);
    pendingVariants.clear();
    const res = vmAutoscale({ nowMs, workers: views, pending, loadQpsByKind, config: opts.vmConfig ?? {}, state: vmState });
    vmState = res.state;
    for (const d of res.decisions) {
      if (d.action === "hold") continue;
      note("vm-autoscaler", `${d.action} ${d.kind}`, d.reason);
      if (d.action === "add") {
        const tpl = templates[d.kind];
        if (!tpl) continue;
        const nm = sim.launchMachine(tpl);
        machines.push(nm);
        for (const p of pending.filter((pp) => pp.kind === d.kind)) for (let i = 0; i < p.count; i++) load(profileOf(p.variant), nm);
      } else if (d.action === "replace") {
        const old = machines.find((mm) => mm.name === d.worker);
        const tpl = templates[d.kind];
        if (!old || !tpl) continue;
        replaced.add(old);
        const nm = sim.launchMachine(tpl);
        machines.push(nm);
        for (const v of d.restore) load(profileOf(v), nm);
      } else if (d.action === "remove") {
        const m = machines.find((mm) => mm.name === d.worker);
        if (!m) continue;
        const labels = [...m.replicas].map((r) => r.label);
        sim.terminateMachine(m);
        for (const l of new Set(labels)) {
          const q = queueOf(l);
          if (q.replicas.every((r) => r.state === "draining") && q.length > 0) sim.rerouteQueued(q);
        }
      }
    }
  };

  measureUtilization(0);
  sim.every(opts.modelPeriodMs ?? 1000, monitorTick);
  sim.every(opts.vmPeriodMs ?? 2000, vmTick);

  return {
    log,
    queueOf,
    stateOf: (v) => states.get(v) ?? initialVariantState(0),
    activeSeconds,
  };
}
