export * from "./backend.js";
export * from "./instance.js";
export * from "./worker.js";
export * from "./onnx-backend.js";
export * from "./profiler.js";
export * from "./metrics.js";
export * from "./emulated-backend.js";
export * from "./emulated-latency.js";
