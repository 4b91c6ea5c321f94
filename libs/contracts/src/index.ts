export * from "./subjects.js";
export * from "./errors.js";
export * from "./names.js";
export * from "./tensors.js";
export * from "./wire.js";
export * from "./schemas.js";
export * from "./config.js";
export * from "./oip.js";
