// Variants of a registered model: generation, profiles, profiling arithmetic, hardware settings, input classes, engine threads.
export * from "./variant-generator.js";
export * from "./profiling.js";
export * from "./variant-profile.js";
export * from "./hardware-settings.js";
export * from "./input-classes.js";
export * from "./engine-thread.js";
