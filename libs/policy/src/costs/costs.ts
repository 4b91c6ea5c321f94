/**
 * Prices and billing arithmetic (DESIGN §3 "Costs").
 *
 * - {@link INSTANCE_PRICES}: AWS EC2 on-demand Linux prices in us-east-1 ($/hour, as published for
 *   these types in 2019-2023; they have been stable), converted to $/second. Spot prices vary by the
 *   hour; `spotPerHour` is a typical level (about 30-35% of on-demand) used only when a caller asks for
 *   spot, and is marked as an assumption.
 * - {@link DEFAULT_TYPE_FOR_KIND}: which instance type stands for each hardware kind: `cpu` → c5.xlarge
 *   (4 vCPU, INFaaS Table 2's "4 CPUs"), `gpu` → p3.2xlarge (1 V100, INFaaS Table 2 variant C; INFaaS
 *   §1 quotes $3.06/h), `inferentia` → inf1.xlarge (4 NeuronCores).
 * - {@link ec2Cost}: EC2 bills per second with a 60 s minimum, from launch (start-up time is billed)
 *   to termination.
 * - {@link lambdaCost}: AWS Lambda bills $0.20 per million requests plus $0.0000166667 per GB-second
 *   (x86), with duration rounded up to 1 ms (since December 2020; MArk's era rounded to 100 ms, which
 *   callers can ask for).
 */

export type HardwareKind = "cpu" | "gpu" | "inferentia";

export interface InstancePrice {
  type: string;
  kind: HardwareKind;
  vcpus: number;
  memoryGb: number;
  /** Accelerators on the instance: GPUs or NeuronCores. */
  accelerators: number;
  onDemandPerHour: number;
  /** Typical spot price (assumption: prices move hourly). */
  spotPerHour: number;
}

export const INSTANCE_PRICES: Readonly<Record<string, InstancePrice>> = {
  "t2.micro": { type: "t2.micro", kind: "cpu", vcpus: 1, memoryGb: 1, accelerators: 0, onDemandPerHour: 0.0116, spotPerHour: 0.0035 },
  "t2.small": { type: "t2.small", kind: "cpu", vcpus: 1, memoryGb: 2, accelerators: 0, onDemandPerHour: 0.023, spotPerHour: 0.0069 },
  "t2.medium": { type: "t2.medium", kind: "cpu", vcpus: 2, memoryGb: 4, accelerators: 0, onDemandPerHour: 0.0464, spotPerHour: 0.0139 },
  "t2.large": { type: "t2.large", kind: "cpu", vcpus: 2, memoryGb: 8, accelerators: 0, onDemandPerHour: 0.0928, spotPerHour: 0.0278 },
  "m5.large": { type: "m5.large", kind: "cpu", vcpus: 2, memoryGb: 8, accelerators: 0, onDemandPerHour: 0.096, spotPerHour: 0.035 },
  "c5.large": { type: "c5.large", kind: "cpu", vcpus: 2, memoryGb: 4, accelerators: 0, onDemandPerHour: 0.085, spotPerHour: 0.03 },
  "c5.xlarge": { type: "c5.xlarge", kind: "cpu", vcpus: 4, memoryGb: 8, accelerators: 0, onDemandPerHour: 0.17, spotPerHour: 0.06 },
  "c5.2xlarge": { type: "c5.2xlarge", kind: "cpu", vcpus: 8, memoryGb: 16, accelerators: 0, onDemandPerHour: 0.34, spotPerHour: 0.12 },
  "c5.4xlarge": { type: "c5.4xlarge", kind: "cpu", vcpus: 16, memoryGb: 32, accelerators: 0, onDemandPerHour: 0.68, spotPerHour: 0.24 },
  "p2.xlarge": { type: "p2.xlarge", kind: "gpu", vcpus: 4, memoryGb: 61, accelerators: 1, onDemandPerHour: 0.9, spotPerHour: 0.27 },
  "p3.2xlarge": { type: "p3.2xlarge", kind: "gpu", vcpus: 8, memoryGb: 61, accelerators: 1, onDemandPerHour: 3.06, spotPerHour: 0.918 },
  "g4dn.xlarge": { type: "g4dn.xlarge", kind: "gpu", vcpus: 4, memoryGb: 16, accelerators: 1, onDemandPerHour: 0.526, spotPerHour: 0.158 },
  "inf1.xlarge": { type: "inf1.xlarge", kind: "inferentia", vcpus: 4, memoryGb: 8, accelerators: 4, onDemandPerHour: 0.228, spotPerHour: 0.068 },
  // INFaaS §6's workers (m5.2xlarge CPU, inf1.2xlarge: one Inferentia chip, 4 NeuronCores); spot ~30%.
  "m5.2xlarge": { type: "m5.2xlarge", kind: "cpu", vcpus: 8, memoryGb: 32, accelerators: 0, onDemandPerHour: 0.384, spotPerHour: 0.115 },
  "inf1.2xlarge": { type: "inf1.2xlarge", kind: "inferentia", vcpus: 8, memoryGb: 16, accelerators: 4, onDemandPerHour: 0.362, spotPerHour: 0.109 },
  // InferLine §6's cluster (8 K80s) and its non-GPU equivalent (the same 32 Broadwell vCPUs), for
  // {@link acceleratorPerHour}; spot levels are the usual ~30% assumption.
  "p2.8xlarge": { type: "p2.8xlarge", kind: "gpu", vcpus: 32, memoryGb: 488, accelerators: 8, onDemandPerHour: 7.2, spotPerHour: 2.16 },
  "r4.8xlarge": { type: "r4.8xlarge", kind: "cpu", vcpus: 32, memoryGb: 244, accelerators: 0, onDemandPerHour: 2.128, spotPerHour: 0.64 },
};

export const DEFAULT_TYPE_FOR_KIND: Readonly<Record<HardwareKind, string>> = {
  cpu: "c5.xlarge",
  gpu: "p3.2xlarge",
  inferentia: "inf1.xlarge",
};

/** $/second of an instance type; throws on an unknown type so that typos surface. */
export function pricePerSecond(type: string, market: "on-demand" | "spot" = "on-demand"): number {
  const p = INSTANCE_PRICES[type];
  if (!p) throw new Error(`unknown instance type "${type}"`);
  return (market === "spot" ? p.spotPerHour : p.onDemandPerHour) / 3600;
}

/**
 * InferLine §6's price of one accelerator: the accelerator instance's hourly price minus that of its
 * non-accelerator equivalent (all other hardware the same), divided by its accelerators. Example:
 * (p2.8xlarge $7.20 − r4.8xlarge $2.128) / 8 K80s = $0.634/h per K80.
 */
export function acceleratorPerHour(acceleratorType: string, equivalentType: string): number {
  const a = INSTANCE_PRICES[acceleratorType];
  const e = INSTANCE_PRICES[equivalentType];
  if (!a || !e) throw new Error(`unknown instance type "${a ? equivalentType : acceleratorType}"`);
  if (a.accelerators < 1) throw new Error(`instance type "${acceleratorType}" has no accelerators`);
  return (a.onDemandPerHour - e.onDemandPerHour) / a.accelerators;
}

/** InferLine §6's price of one CPU: the instance's hourly price divided by its vCPUs (r4.8xlarge: $2.128 / 32 = $0.0665/h). */
export function vcpuPerHour(type: string): number {
  const p = INSTANCE_PRICES[type];
  if (!p) throw new Error(`unknown instance type "${type}"`);
  return p.onDemandPerHour / p.vcpus;
}

export interface Ec2BillingOptions {
  /** @default 60 */
  minimumS?: number;
}

/**
 * Dollars for one instance that ran from `launchedMs` (the launch request: start-up is billed) to
 * `endedMs`: per-second billing, whole seconds rounded up, at least `minimumS` seconds.
 * Example: 30 s at $0.36/h → max(60, 30) · 0.0001 = $0.006.
 */
export function ec2Cost(pricePerS: number, launchedMs: number, endedMs: number, options: Ec2BillingOptions = {}): number {
  const minimumS = options.minimumS ?? 60;
  const seconds = Math.max(minimumS, Math.ceil(Math.max(0, endedMs - launchedMs) / 1000 - 1e-9));
  return seconds * pricePerS;
}

export interface LambdaPricing {
  /** @default 0.0000002 ($0.20 per million) */
  perRequest: number;
  /** @default 0.0000166667 */
  perGbSecond: number;
  /** Duration granularity in ms. @default 1 */
  roundingMs: number;
}

export const LAMBDA_PRICING: LambdaPricing = { perRequest: 0.0000002, perGbSecond: 0.0000166667, roundingMs: 1 };

/**
 * Dollars for one Lambda invocation of `durationMs` at `memoryGb`.
 * Example: 380 ms at 3 GB → 2e-7 + 3 · 0.380 · 1.66667e-5 = $0.0000192.
 */
export function lambdaCost(durationMs: number, memoryGb: number, pricing: LambdaPricing = LAMBDA_PRICING): number {
  return pricing.perRequest + memoryGb * (lambdaBilledMs(durationMs, pricing) / 1000) * pricing.perGbSecond;
}

/** The duration Lambda bills for a run of `durationMs`: rounded up to `roundingMs` (380.2 ms → 381 ms). */
export function lambdaBilledMs(durationMs: number, pricing: LambdaPricing = LAMBDA_PRICING): number {
  return Math.ceil(Math.max(0, durationMs) / pricing.roundingMs - 1e-9) * pricing.roundingMs;
}
