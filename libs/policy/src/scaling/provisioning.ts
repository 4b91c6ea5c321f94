/**
 * Predictive instance provisioning: MArk §4.3 "Instance provisioning", Algorithm 1 (SCHEDULE + FILL),
 * with the constants of the authors' code (NUMBERS.md [repo]).
 *
 * Every minute, given the forecast F₁…F_m of the per-minute maximum arrival rate, the running
 * instances R and the instance types I that can meet the SLO, FILL builds a plan for the load at
 * t0 + τ (τ = 5 min, the time a new machine needs): while the planned capacity is below F_τ, let e be
 * the last step of the run τ…e over which demand stays unmet, and add the candidate with the lowest
 *
 *   cost per request = (O_i + span · P_i) / N_i
 *
 * where the candidates are each running instance not yet in the plan (O = 0) and every type (O_i = the
 * price of 180 s, the launch overhead), span = (e − τ + 1) steps, and N_i = Σ_{t=τ..e} min(C_i, Λ_t)·step
 * the unmet requests the instance would absorb. New instances in the plan are launched at once; running
 * ones left out are destroyed, but never below the largest count of their type in the last 6 plans
 * (the current one included), which is MArk's cool-down against flapping.
 *
 * Spot instances are just other types with their own price (the algorithm does not tell them apart,
 * §4.5); the caller handles the 2-minute interruption notice by leaving the doomed instance out of
 * `running`, so the next plan replaces its capacity.
 *
 * Caveats: the paper's "e − τ" span is read as the number of steps covered (e − τ + 1), otherwise a
 * one-step shortfall would price every candidate at its launch overhead alone; capacity C_i is the
 * instance's peak throughput with tuned batching (MArk plans at full utilisation and leaves bursts to
 * Lambda), scaled by `targetUtilization` when the caller wants headroom.
 */

export interface InstanceTypeSpec {
  name: string;
  pricePerHour: number;
  /** Peak throughput for the model with tuned batching, queries per second. */
  capacityQps: number;
  /** Launch overhead in seconds of the instance's price. @default 180 */
  launchOverheadS?: number;
  /** False when the type cannot meet the SLO (e.g. T(1) > RTmax); such types are never chosen. @default true */
  meetsSlo?: boolean;
  spot?: boolean;
}

export interface RunningInstance {
  id: string;
  type: string;
}

export interface ProvisioningState {
  /** Instance counts per type of the most recent plans, newest last. */
  recentPlans: Array<Record<string, number>>;
}

export const initialProvisioningState: ProvisioningState = { recentPlans: [] };

export interface ProvisioningInput {
  /** F₁…F_m: forecast maximum rate (queries per second) of the steps after now. */
  forecastQps: readonly number[];
  types: readonly InstanceTypeSpec[];
  running: readonly RunningInstance[];
  state: ProvisioningState;
  /** Step of the forecast, seconds. @default 60 */
  stepS?: number;
  /** Lead time in steps: provision for F_τ. @default 5 */
  tau?: number;
  /** Plans remembered for the destroy limit (the current one included). @default 6 */
  planHistory?: number;
  /** Fraction of C_i planned for. @default 1 */
  targetUtilization?: number;
}

export interface LaunchDecision {
  type: string;
  reason: string;
}

export interface DestroyDecision {
  id: string;
  type: string;
  reason: string;
}

export interface ProvisioningDecision {
  launches: LaunchDecision[];
  destroys: DestroyDecision[];
  /** Instance counts per type of this plan. */
  plan: Record<string, number>;
  /** Running instances the plan keeps. */
  kept: string[];
  state: ProvisioningState;
  reason: string;
}

interface Candidate {
  type: InstanceTypeSpec;
  runningId?: string;
}

/** MArk Algorithm 1. Throws when no instance type can meet the SLO. */
export function planProvisioning(input: ProvisioningInput): ProvisioningDecision {
  const stepS = input.stepS ?? 60;
  const tau = input.tau ?? 5;
  const util = input.targetUtilization ?? 1;
  const history = input.planHistory ?? 6;
  const usable = input.types.filter((t) => (t.meetsSlo ?? true) && t.capacityQps > 0);
  if (usable.length === 0) throw new Error("provisioning: no instance type can meet the SLO");
  const byName = new Map(usable.map((t) => [t.name, t]));
  // F is 1-based in the paper: F[τ] is forecastQps[τ − 1]; steps past the forecast repeat its last value.
  const m = Math.max(input.forecastQps.length, tau);
  const demand = (t: number): number => input.forecastQps[Math.min(t, input.forecastQps.length) - 1] ?? 0;

  const runningFree: Candidate[] = [];
  for (const r of input.running) {
    const type = byName.get(r.type);
    if (type) runningFree.push({ type, runningId: r.id });
  }
  const chosen: Candidate[] = [];
  const launches: LaunchDecision[] = [];
  let capacity = 0;
  for (let guard = 0; guard < 100_000; guard++) {
    const unmet = (t: number): number => demand(t) - capacity;
    if (unmet(tau) <= 0) break;
    let e = tau;
    while (e + 1 <= m && unmet(e + 1) > 0) e++;
    const spanS = (e - tau + 1) * stepS;
    let best: { c: Candidate; cost: number; n: number } | undefined;
    const consider = (c: Candidate): void => {
      const cap = c.type.capacityQps * util;
      let n = 0;
      for (let t = tau; t <= e; t++) n += Math.min(cap, unmet(t)) * stepS;
      const overhead = c.runningId ? 0 : ((c.type.launchOverheadS ?? 180) * c.type.pricePerHour) / 3600;
      const cost = (overhead + (spanS * c.type.pricePerHour) / 3600) / n;
      if (!best || cost < best.cost) best = { c, cost, n };
    };
    for (const c of runningFree) if (!chosen.includes(c)) consider(c);
    for (const type of usable) consider({ type });
    const pick = best!;
    const need = unmet(tau);
    chosen.push(pick.c);
    capacity += pick.c.type.capacityQps * util;
    if (!pick.c.runningId) {
      launches.push({
        type: pick.c.type.name,
        reason: `${need.toFixed(1)} qps unmet at t0+${tau}; cheapest at $${(pick.cost * 1e6).toFixed(2)} per 1M requests over steps ${tau}-${e}`,
      });
    }
  }

  const plan: Record<string, number> = {};
  for (const c of chosen) plan[c.type.name] = (plan[c.type.name] ?? 0) + 1;
  const recentPlans = [...input.state.recentPlans, plan].slice(-history);
  const keep: Record<string, number> = {};
  for (const p of recentPlans) for (const [k, v] of Object.entries(p)) keep[k] = Math.max(keep[k] ?? 0, v);

  const keptIds = new Set(chosen.flatMap((c) => (c.runningId ? [c.runningId] : [])));
  const runningByType = new Map<string, number>();
  for (const r of input.running) runningByType.set(r.type, (runningByType.get(r.type) ?? 0) + 1);
  const launchedByType = new Map<string, number>();
  for (const l of launches) launchedByType.set(l.type, (launchedByType.get(l.type) ?? 0) + 1);
  const destroys: DestroyDecision[] = [];
  const extraKept: string[] = [];
  const left = new Map<string, number>();
  for (const r of input.running) {
    if (keptIds.has(r.id)) continue;
    const type = r.type;
    // Instances of this type after the plan: running + launched − destroyed so far.
    const after = (runningByType.get(type) ?? 0) + (launchedByType.get(type) ?? 0) - (left.get(type) ?? 0);
    if (!byName.has(type) || after > (keep[type] ?? 0)) {
      left.set(type, (left.get(type) ?? 0) + 1);
      destroys.push({
        id: r.id, type,
        reason: byName.has(type)
          ? `not in the plan; ${after - 1} ${type} remain ≥ max of the last ${recentPlans.length} plans (${keep[type] ?? 0})`
          : `${type} cannot meet the SLO`,
      });
    } else {
      extraKept.push(r.id);
    }
  }
  const kept = [...keptIds, ...extraKept];
  const summary = Object.entries(plan).map(([k, v]) => `${v}×${k}`).join(" + ") || "nothing";
  return {
    launches, destroys, plan, kept,
    state: { recentPlans },
    reason: `plan for ${demand(tau).toFixed(1)} qps at t0+${tau}: ${summary}; launch ${launches.length}, destroy ${destroys.length}` +
      (extraKept.length > 0 ? `, ${extraKept.length} kept by the cool-down` : ""),
  };
}
