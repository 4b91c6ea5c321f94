export * from "./store.js";
export * from "./catalog.js";
export * from "./api-keys.js";
export * from "./quotas.js";
