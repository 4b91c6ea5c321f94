export * from "./log.js";
export * from "./connection.js";
export * from "./replies.js";
export * from "./service.js";
export * from "./clock.js";
export * from "./ticker.js";
export * from "./resend.js";
