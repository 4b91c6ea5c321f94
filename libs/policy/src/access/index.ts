// Access decisions of the frontend's API keys; per-app quotas and their admission.
export * from "./access.js";
export * from "./quota.js";
