import { ec2Cost } from "@sloserve/policy";
import type { WorkerInstance } from "./types.js";

/**
 * Dollars an instance has cost by `nowMs` (or by its end): per-second billing from launch (boot time
 * is billed), with EC2's 60 s minimum (libs/policy `ec2Cost`).
 */
export function instanceCost(instance: WorkerInstance, nowMs: number): number {
  return ec2Cost(instance.pricePerHour / 3600, instance.launchedAtMs, instance.endedAtMs ?? nowMs);
}

/** Dollars the instances have cost by `nowMs`, all together. */
export function fleetCost(instances: readonly WorkerInstance[], nowMs: number): number {
  return instances.reduce((sum, instance) => sum + instanceCost(instance, nowMs), 0);
}
