/**
 * The scaling policy: which of the machine plan's rules run (machine-plan.ts), and whether queries
 * overflow to functions (the dispatcher's OVERFLOW). One name per policy, the same live (the
 * vm-autoscaler's `SCALING_POLICY`) and in the simulator (libs/sim systems/infaas.ts `scalingPolicy`),
 * so that a policy's live run and its prediction run the same rules with no retuning.
 *
 * - `combined` (the default, the system as designed): INFaaS's VM rules (add on utilisation,
 *   Interfered, Overloaded or an unplaceable load; remove idle workers), MArk's predictive plan from
 *   the forecasts, MArk's SLO monitor, serverless overflow.
 * - `infaas`: INFaaS's VM rules alone. No predictive plan, no SLO monitor, no overflow; the forecasts
 *   are not read at all (the idle rule measures the rest of a kind against the current load).
 * - `mark`: MArk alone: the predictive plan (launches at once, destroys by the plan after its
 *   cool-down, papers/mark.txt §4.2-4.3), the SLO monitor (§4.4) and overflow (§4.1). INFaaS's adds
 *   (all four: utilisation, Interfered, Overloaded, placements no worker could take) and its idle
 *   removal are off: MArk destroys instances by its plan, and without forecasts it gives none back.
 * - `static`: a fixed fleet (the workers started beside the autoscaler, MIN_WORKERS of each kind): no
 *   rule launches or terminates; no overflow.
 *
 * In every policy, lost workers are replaced (with the variants they ran), a failed boot backs its
 * kind off, spot notices get their standby and drain, and the guards on terminations (managed workers
 * only, the billing minimum, `minWorkers`) and the `maxWorkers` limit hold: these keep a fleet what it
 * is, they are no scaling rule.
 *
 * Overflow is the dispatcher's (its own setting, OVERFLOW): a launcher that runs `infaas` or `static`
 * sets OVERFLOW=off for the dispatcher as well (`scalingRulesOf(p).overflow`); no service reads
 * another's setting.
 */
import type { MachinePlanConfig } from "./machine-plan.js";

export const SCALING_POLICIES = ["combined", "infaas", "mark", "static"] as const;
export type ScalingPolicy = (typeof SCALING_POLICIES)[number];
export const DEFAULT_SCALING_POLICY: ScalingPolicy = "combined";

/** The machine plan's switches (MachinePlanConfig fields; all on by default). */
export type MachinePlanRules = Pick<MachinePlanConfig, "infaasAdd" | "infaasRemoveIdle" | "markPlan" | "markSloMonitor">;

/** What a policy runs: the machine plan's switches and the dispatcher's overflow. */
export interface ScalingRules extends MachinePlanRules {
  /** Serverless overflow (the dispatcher's OVERFLOW on; the simulator's function pool used). */
  overflow: boolean;
}

const RULES: Readonly<Record<ScalingPolicy, Readonly<ScalingRules>>> = {
  combined: { infaasAdd: true, infaasRemoveIdle: true, markPlan: true, markSloMonitor: true, overflow: true },
  infaas: { infaasAdd: true, infaasRemoveIdle: true, markPlan: false, markSloMonitor: false, overflow: false },
  mark: { infaasAdd: false, infaasRemoveIdle: false, markPlan: true, markSloMonitor: true, overflow: true },
  static: { infaasAdd: false, infaasRemoveIdle: false, markPlan: false, markSloMonitor: false, overflow: false },
};

export function isScalingPolicy(s: string): s is ScalingPolicy {
  return (SCALING_POLICIES as readonly string[]).includes(s);
}

/** The rules a policy runs (a fresh object). */
export function scalingRulesOf(policy: ScalingPolicy): ScalingRules {
  const r = RULES[policy];
  return { infaasAdd: r.infaasAdd, infaasRemoveIdle: r.infaasRemoveIdle, markPlan: r.markPlan, markSloMonitor: r.markSloMonitor, overflow: r.overflow };
}

/** The machine plan's switches for a policy, to put in its `MachinePlanConfig`. */
export function machinePlanRulesOf(policy: ScalingPolicy): MachinePlanRules {
  const r = RULES[policy];
  return { infaasAdd: r.infaasAdd, infaasRemoveIdle: r.infaasRemoveIdle, markPlan: r.markPlan, markSloMonitor: r.markSloMonitor };
}
