// Per-query variant selection (INFaaS Algorithm 1), the dispatcher's decisions, model routing, the variant state machine.
export * from "./routing.js";
export * from "./selection.js";
export * from "./variant-state.js";
export * from "./dispatch.js";
