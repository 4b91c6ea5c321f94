// Pure decision code: selection, batching, scaling, planning, forecasting. No I/O, no clock:
// time comes in as an argument (milliseconds or seconds, named in each signature).
// Each module appends its own export line below.
export * from "./rng.js";
export * from "./costs.js";
export * from "./batching.js";
export * from "./placement.js";
export * from "./routing.js";
export * from "./selection.js";
export * from "./variant-state.js";
export * from "./model-autoscaler.js";
export * from "./mix-optimizer.js";
export * from "./vm-autoscaler.js";
export * from "./batch-tuning.js";
export * from "./forecast.js";
export * from "./provisioning.js";
export * from "./overflow.js";
export * from "./slo-monitor.js";
export * from "./baselines-sagemaker.js";
export * from "./pipeline.js";
export * from "./pipeline-spec.js";
export * from "./pipeline-run.js";
export * from "./estimator.js";
export * from "./planner.js";
export * from "./tuner.js";
export * from "./baselines-cg.js";
export * from "./baselines-autoscale.js";
export * from "./variant-generator.js";
export * from "./profiling.js";
export * from "./variant-price.js";
export * from "./variant-profile.js";
export * from "./forecast-plan.js";
export * from "./dispatch.js";
export * from "./quantile.js";
export * from "./model-actions.js";
export * from "./function-pool.js";
export * from "./overflow-prewarm.js";
export * from "./machine-plan.js";
