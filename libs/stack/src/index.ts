export * from "./processes.js";
export * from "./stack.js";
export * from "./bundled.js";
export * from "./nats-auth.js";
