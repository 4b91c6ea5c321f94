// Model- and machine-level scaling: INFaaS's autoscalers and their actions, the exact mix, MArk's provisioning and SLO monitor, the machine plan, the scaling policies that select its rules, and the shares of one host.
export * from "./model-autoscaler.js";
export * from "./mix-optimizer.js";
export * from "./vm-autoscaler.js";
export * from "./provisioning.js";
export * from "./slo-monitor.js";
export * from "./model-actions.js";
export * from "./machine-plan.js";
export * from "./scaling-policy.js";
export * from "./host-room.js";
