export * from "./server.js";
export * from "./families.js";
export * from "./bound.js";
export { default as client } from "prom-client";
