// The baselines the papers compare against (SageMaker-style, coarse-grained, AutoScale).
export * from "./baselines-sagemaker.js";
export * from "./baselines-cg.js";
export * from "./baselines-autoscale.js";
