// Every service's settings: one zod schema each, with its defaults and the meaning of each variable.
// The services compile their environment through these (libs/contracts compileOptions), and
// docs/CONFIGURATION.md is generated from them (`npm run docs:config`).
export * from "./dispatcher.js";
export * from "./executor-cpu.js";
export * from "./executor-gpu.js";
export * from "./executor-inferentia.js";
export * from "./forecaster.js";
export * from "./frontend.js";
export * from "./model-autoscaler.js";
export * from "./registrar.js";
export * from "./vm-autoscaler.js";
export * from "./machine.js";
export * from "./emulation.js";
export * from "./profiling.js";
export * from "./document.js";
export * from "./catalog.js";
export * from "./configuration-doc.js";
