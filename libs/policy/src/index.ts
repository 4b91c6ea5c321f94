// Pure decision code, by concern (one folder each, with its own index). No I/O, no clock: time comes
// in as an argument (milliseconds or seconds, named in each signature).
export * from "./common/index.js";
export * from "./costs/index.js";
export * from "./batching/index.js";
export * from "./placement/index.js";
export * from "./selection/index.js";
export * from "./scaling/index.js";
export * from "./forecasting/index.js";
export * from "./overflow/index.js";
export * from "./baselines/index.js";
export * from "./pipelines/index.js";
export * from "./variants/index.js";
export * from "./access/index.js";
export * from "./observation/index.js";
