// Pipelines (InferLine): specs, runs, the estimator, the planner, the tuner, live control.
export * from "./pipeline.js";
export * from "./pipeline-spec.js";
export * from "./pipeline-run.js";
export * from "./estimator.js";
export * from "./planner.js";
export * from "./tuner.js";
export * from "./pipeline-control.js";
