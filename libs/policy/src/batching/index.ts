// SLO-aware batching (MArk §4.3): the executor's batch rule, batch tuning, live batch waits.
export * from "./batching.js";
export * from "./batch-tuning.js";
export * from "./batch-wait.js";
