// Serverless overflow (MArk §4.1, §4.5): per-query overflow, pre-warming, the function pool.
export * from "./overflow.js";
export * from "./function-pool.js";
export * from "./overflow-prewarm.js";
