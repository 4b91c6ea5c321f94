export * from "./store.js";
export * from "./catalog.js";
