// Access decisions of the frontend's API keys; per-app quotas and their admission; weighted fair admission between apps.
export * from "./access.js";
export * from "./quota.js";
export * from "./fair-share.js";
