import { machinePlanRulesOf, type MachinePlanConfig } from "@sloserve/policy";
import type { VmAutoscalerSettings } from "@sloserve/settings";

/**
 * The machine plan's settings from the service's (libs/settings vm-autoscaler.ts): the INFaaS rules'
 * limits and reading, the cool-down, billing minimum, periods, SLmin, and SCALING_POLICY's rule
 * switches (libs/policy scaling-policy.ts `machinePlanRulesOf`).
 */
export function planConfigOf(o: VmAutoscalerSettings): Partial<MachinePlanConfig> {
  return {
    vm: { heartbeatTimeoutMs: o.HEARTBEAT_TIMEOUT_MS, minWorkersPerKind: o.MIN_WORKERS, maxWorkersPerKind: o.MAX_WORKERS, readingTicks: o.READING_TICKS },
    cooldownMs: o.COOLDOWN_MS,
    billingMinimumMs: o.BILLING_MINIMUM_MS,
    planPeriodMs: o.PLAN_PERIOD_MS,
    sloPeriodMs: o.SLO_PERIOD_MS,
    slMin: o.SL_MIN,
    slMinByApp: o.SL_MIN_BY_APP,
    targetUtilization: o.TARGET_UTILIZATION,
    ...machinePlanRulesOf(o.SCALING_POLICY),
  };
}
