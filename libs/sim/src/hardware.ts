/**
 * Hardware and variant profiles for the simulator (DESIGN §6), from the papers' numbers
 * (the papers' tables; docs/DESIGN.md) and from our own profiler.
 *
 * - {@link INFAAS_TABLE2}: INFaaS Table 2's three ResNet50 variants (latency, saturation QPS,
 *   normalised cost per second).
 * - {@link infaasResnet50Variants}: the ResNet50 variants of INFaaS §6.2 (TensorFlow CPU batch 1,
 *   Neuron Inferentia batch 1, TensorRT GPU batch 1 and batch 8), priced by §6.2's normalised cost per
 *   GB-second of memory footprint. The paper does not print footprints: we assume 1 GB for every
 *   variant (so the prices are 0.031, 0.190 and 0.498 per second) and say so in the scenario's notes.
 * - {@link MARK_CAPACITIES}: MArk's per-instance-type capacities (requests per minute; GPU entries are
 *   per batch, so capacity = rpm × batch), batching parameters and SLOs.
 * - {@link INFERLINE_PROFILES}: the InferLine numbers that survive extraction (ResNet152 on CPU vs K80).
 * - {@link loadProfilerResults}: our profiler's JSON results → {@link VariantProfile}s.
 *
 * {@link replicaOptionsFor} turns a profile into the simulator's replica options: latency table, batch
 * size, and a concurrency chosen so that the replica's saturation throughput matches the profiled peak
 * QPS when the peak exceeds batch / latency (a pipelined accelerator).
 */
import { acceleratorPerHour, vcpuPerHour, type VariantProfile } from "@sloserve/policy";
import type { ReplicaOptions } from "./entities.js";

/** INFaaS Table 2 (cost in normalised units per second). */
export const INFAAS_TABLE2: readonly VariantProfile[] = [
  { name: "A", model: "resnet50", app: "classify", hardware: "cpu", batchSize: 1, accuracy: 0.76, latencyMs: { 1: 200 }, peakQps: 5, loadLatencyMs: 2000, pricePerS: 1, profiled: true, resources: { threads: 4 } },
  { name: "B", model: "resnet50", app: "classify", hardware: "inferentia", batchSize: 1, accuracy: 0.76, latencyMs: { 1: 20 }, peakQps: 100, loadLatencyMs: 3000, pricePerS: 3, profiled: true, resources: { accelerators: 1 } },
  { name: "C", model: "resnet50", app: "classify", hardware: "gpu", batchSize: 1, accuracy: 0.76, latencyMs: { 1: 15 }, peakQps: 800, loadLatencyMs: 5000, pricePerS: 16, profiled: true, resources: { accelerators: 1 } },
];

/** INFaaS §6.2: normalised cost per GB-second of a running variant's memory footprint. */
export const INFAAS_COST_PER_GB_S: Readonly<Record<string, number>> = { cpu: 0.031, inferentia: 0.19, gpu: 0.498 };

/** Assumed memory footprint of every ResNet50 variant (the paper does not print it). */
export const ASSUMED_FOOTPRINT_GB = 1;

/** Bytes in a GiB (GPU memory is counted in GiB, as libs/policy `GPU_MEMORY_BYTES` counts it). */
const GiB = 1024 ** 3;

/**
 * ResNet50 variants for INFaaS §6.2. CPU: Table 2's A (200 ms, 5 QPS, 4 cores). Inferentia: Table 2's B
 * (20 ms, 100 QPS, one NeuronCore). GPU batch 1: 3.3 ms, 300 QPS (from §6.2: two batch-1 GPU instances
 * served ~15% less than 650-700 QPS). GPU batch 8: 10 ms per batch of 8, 800 QPS (Table 2's C). Load
 * latencies (2 s CPU, 3 s Inferentia, 5 s GPU) are assumptions inside INFaaS's 0.59-11 s range.
 * Resources, by the live names (libs/policy accelerator-share.ts `variantResources`): a CPU instance
 * takes 4 threads (cores), an Inferentia instance one accelerator (a NeuronCore), a GPU instance 1 GiB
 * of GPU memory (`acceleratorMemoryBytes`; §6.2 runs two GPU instances on one GPU, which a
 * whole-accelerator count cannot express) and one slot (`threads`, executor-gpu's WORKER_SLOTS).
 */
export function infaasResnet50Variants(app = "classify"): VariantProfile[] {
  const price = (hw: string): number => (INFAAS_COST_PER_GB_S[hw] ?? 0) * ASSUMED_FOOTPRINT_GB;
  const gpu = (): Record<string, number> => ({ threads: 1, acceleratorMemoryBytes: ASSUMED_FOOTPRINT_GB * GiB });
  return [
    { name: "resnet50-tf-cpu-b1", model: "resnet50", app, hardware: "cpu", batchSize: 1, accuracy: 0.76, latencyMs: { 1: 200 }, peakQps: 5, loadLatencyMs: 2000, pricePerS: price("cpu"), profiled: true, resources: { threads: 4 } },
    { name: "resnet50-neuron-inf-b1", model: "resnet50", app, hardware: "inferentia", batchSize: 1, accuracy: 0.76, latencyMs: { 1: 20 }, peakQps: 100, loadLatencyMs: 3000, pricePerS: price("inferentia"), profiled: true, resources: { accelerators: 1 } },
    { name: "resnet50-trt-gpu-b1", model: "resnet50", app, hardware: "gpu", batchSize: 1, accuracy: 0.76, latencyMs: { 1: 3.3 }, peakQps: 300, loadLatencyMs: 5000, pricePerS: price("gpu"), profiled: true, resources: gpu() },
    { name: "resnet50-trt-gpu-b8", model: "resnet50", app, hardware: "gpu", batchSize: 8, accuracy: 0.76, latencyMs: { 1: 3.3, 2: 4, 4: 6, 8: 10 }, peakQps: 800, loadLatencyMs: 5000, pricePerS: price("gpu"), profiled: true, resources: gpu() },
  ];
}

/** Simulator replica options for a variant profile. */
export function replicaOptionsFor(v: VariantProfile, extra: Partial<ReplicaOptions> = {}): ReplicaOptions {
  const tb = v.latencyMs[v.batchSize] ?? Object.values(v.latencyMs).reduce((a, b) => Math.max(a, b), 0);
  const concurrency = v.concurrency ?? Math.max(1, Math.round((v.peakQps * tb) / (1000 * v.batchSize)));
  return {
    latencyMs: v.latencyMs,
    maxBatch: v.batchSize,
    concurrency,
    loadMs: v.loadLatencyMs,
    uses: v.resources ?? {},
    label: v.name,
    ...extra,
  };
}

export interface MarkCapacity {
  model: string;
  type: string;
  /** Requests per minute (per batch for GPU entries). */
  rpm: number;
  /** Batch the rpm refers to (1 for CPU). */
  batch: number;
}

/** MArk [repo] capacities per instance type (NUMBERS.md). */
export const MARK_CAPACITIES: readonly MarkCapacity[] = [
  { model: "inception-v3", type: "c5.large", rpm: 284, batch: 1 },
  { model: "inception-v3", type: "c5.xlarge", rpm: 490, batch: 1 },
  { model: "inception-v3", type: "c5.2xlarge", rpm: 771, batch: 1 },
  { model: "inception-v3", type: "c5.4xlarge", rpm: 1080, batch: 1 },
  { model: "inception-v3", type: "p2.xlarge", rpm: 415, batch: 8 },
  { model: "nasnet", type: "c5.xlarge", rpm: 85, batch: 1 },
  { model: "nasnet", type: "c5.2xlarge", rpm: 135, batch: 1 },
  { model: "nasnet", type: "c5.4xlarge", rpm: 187, batch: 1 },
  { model: "nasnet", type: "p2.xlarge", rpm: 95, batch: 8 },
  { model: "lstm-ptb", type: "c5.xlarge", rpm: 3100, batch: 1 },
  { model: "opennmt", type: "c5.xlarge", rpm: 40, batch: 2 },
  { model: "opennmt", type: "c5.2xlarge", rpm: 54, batch: 2 },
  { model: "opennmt", type: "c5.4xlarge", rpm: 75, batch: 2 },
  { model: "opennmt", type: "p2.xlarge", rpm: 80, batch: 8 },
];

/** Capacity in queries per second (rpm × batch / 60). */
export function markCapacityQps(c: MarkCapacity): number {
  return (c.rpm * c.batch) / 60;
}

/** MArk's batching on p2.xlarge and SLOs (98% of requests within). */
export const MARK_BATCHING: Readonly<Record<string, { waitMs: number; maxBatch: number; sloMs: number }>> = {
  "inception-v3": { waitMs: 200, maxBatch: 8, sloMs: 600 },
  nasnet: { waitMs: 750, maxBatch: 16, sloMs: 1000 },
  opennmt: { waitMs: 490, maxBatch: 16, sloMs: 1400 },
  "lstm-ptb": { waitMs: 0, maxBatch: 1, sloMs: 100 },
};

/** MArk Table 2: cost per 1M requests ($) and latency (ms) on c5.large, ECS and Lambda (3 GB). */
export const MARK_TABLE2: Readonly<Record<string, { ec2: [number, number]; ecs: [number, number]; lambda: [number, number] }>> = {
  "inception-v3": { ec2: [5.0, 210], ecs: [9.17, 217], lambda: [19.0, 380] },
  "inception-resnet": { ec2: [9.3, 398], ecs: [16.4, 411], lambda: [39.3, 785] },
  opennmt: { ec2: [51.5, 2180], ecs: [96.3, 2280], lambda: [155, 3100] },
};

/** InferLine §6 profile numbers that survive extraction. */
export const INFERLINE_PROFILES = {
  resnet152: { cpuQps: 0.6, k80Qps: 50.6, k80BestBatch: 32 },
  /** InferLine §6's cost model: a K80 is (p2.8xlarge − r4.8xlarge) / 8 GPUs, a CPU one vCPU of r4.8xlarge. */
  pricePerS: { k80: acceleratorPerHour("p2.8xlarge", "r4.8xlarge") / 3600, cpu: vcpuPerHour("r4.8xlarge") / 3600 },
} as const;

/** One record of our profiler's output. */
export interface ProfilerResult {
  variant: string;
  hardware: string;
  latency_ms: Record<string, number>;
  peak_qps: number;
  load_latency_ms: number;
  price: number;
  model?: string;
  app?: string;
  accuracy?: number;
  batch_size?: number;
  resources?: Record<string, number>;
}

/**
 * Parse our profiler's results (already-parsed JSON: an array of {@link ProfilerResult}) into variant
 * profiles. Collects every problem and throws one error listing them all.
 */
export function loadProfilerResults(json: unknown, defaults: { app?: string; model?: string; accuracy?: number } = {}): VariantProfile[] {
  if (!Array.isArray(json)) throw new Error("profiler results: expected an array");
  const errors: string[] = [];
  const out: VariantProfile[] = [];
  json.forEach((raw: unknown, i) => {
    const r = raw as Partial<ProfilerResult> | null;
    const at = `profiler results[${i}]`;
    if (!r || typeof r !== "object") return void errors.push(`${at}: not an object`);
    const problems: string[] = [];
    if (typeof r.variant !== "string" || r.variant === "") problems.push("variant must be a non-empty string");
    if (typeof r.hardware !== "string" || r.hardware === "") problems.push("hardware must be a non-empty string");
    if (typeof r.peak_qps !== "number" || !(r.peak_qps > 0)) problems.push("peak_qps must be a positive number");
    if (typeof r.load_latency_ms !== "number" || !(r.load_latency_ms >= 0)) problems.push("load_latency_ms must be a number ≥ 0");
    if (typeof r.price !== "number" || !(r.price >= 0)) problems.push("price must be a number ≥ 0");
    const latency: Record<number, number> = {};
    if (!r.latency_ms || typeof r.latency_ms !== "object") problems.push("latency_ms must map batch sizes to milliseconds");
    else {
      for (const [k, v] of Object.entries(r.latency_ms)) {
        const b = Number(k);
        if (!Number.isInteger(b) || b < 1 || typeof v !== "number" || !(v > 0)) problems.push(`latency_ms["${k}"] must be a positive number at an integer batch size ≥ 1`);
        else latency[b] = v;
      }
      if (Object.keys(latency).length === 0 && problems.length === 0) problems.push("latency_ms is empty");
    }
    if (problems.length > 0) return void errors.push(...problems.map((p) => `${at}: ${p}`));
    const sizes = Object.keys(latency).map(Number);
    const p = r as ProfilerResult;
    out.push({
      name: p.variant,
      model: p.model ?? defaults.model ?? p.variant,
      app: p.app ?? defaults.app ?? p.model ?? p.variant,
      hardware: p.hardware,
      batchSize: p.batch_size ?? Math.max(...sizes),
      accuracy: p.accuracy ?? defaults.accuracy ?? 0,
      latencyMs: latency,
      peakQps: p.peak_qps,
      loadLatencyMs: p.load_latency_ms,
      pricePerS: p.price,
      profiled: true,
      ...(p.resources ? { resources: p.resources } : {}),
    });
  });
  if (errors.length > 0) throw new Error(errors.join("\n"));
  return out;
}
