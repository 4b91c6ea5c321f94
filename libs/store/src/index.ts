export * from "./store.js";
export * from "./catalog.js";
export * from "./api-keys.js";
