// Observation: worker reports and arrival reports in, the views every rule reads out (utilisation, machine views, liveness, SLO memory and samples, per-worker runs). The services and the simulator call these alike.
export * from "./utilization.js";
export * from "./slo-window.js";
export * from "./worker-views.js";
export * from "./fleet.js";
export * from "./holds.js";
