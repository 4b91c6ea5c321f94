export * from "./scenario.js";
export * from "./engine.js";
export * from "./workload.js";
export * from "./billing.js";
export * from "./hardware.js";
export * from "./stats.js";
