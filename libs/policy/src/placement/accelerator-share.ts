/**
 * Accelerators shared and priced by footprint (INFaaS §4.2.1 constraint 3, §6.2).
 *
 * INFaaS's ILP counts, per worker, the resources every variant instance takes — CPU cores, CPU memory,
 * GPU memory, Inferentia cores — against what the worker has (constraint 3), and prices a running
 * instance "proportional to its memory footprint" (§6.2). Here:
 *
 * - **Resources** of one instance ({@link variantResources}): a CPU variant takes its `threads` and its
 *   memory; a GPU variant takes its device memory (`acceleratorMemoryBytes`), its host memory and one of
 *   the worker's slots (`threads`: executor-gpu's WORKER_SLOTS), and no GPU whole, so variants whose
 *   footprints fit share one GPU; an Inferentia variant takes the NeuronCores its Neuron model is
 *   compiled for (`accelerators`; the variant's `settings.neuronCores`, 1 by default), a slot and its
 *   host memory.
 * - **Free** resources of a worker ({@link workerFreeResources}), from its report: GPU memory is the
 *   worker's GPUs × each GPU's memory less what its instances take.
 * - **Price** ({@link footprintPricePerSecond}): the instance type's price × the instance's share of it —
 *   threads / vCPUs, device memory / the GPUs' memory, NeuronCores / the chip's NeuronCores.
 *
 * Caveats: the profiler measures host memory (RSS growth); a GPU variant's device memory is that figure
 * unless the profile records `acceleratorMemoryBytes`. A worker's GPU memory is counted as one pool:
 * with several GPUs per worker an instance could be admitted whose footprint fits the sum but no one
 * GPU (the executors here offer one GPU by default, `ACCELERATORS=1`). Compute is not priced: a GPU
 * variant with a small footprint is cheap even when it keeps the GPU busy (INFaaS §6.2 does the same).
 */
import type { HardwareSettings, VariantRecord } from "@sloserve/contracts";
import { DEFAULT_TYPE_FOR_KIND, INSTANCE_PRICES, pricePerSecond, type HardwareKind } from "../costs/costs.js";

const GiB = 1024 ** 3;

/** Memory of one GPU of each GPU instance type: K80 (one half of the board) 12 GiB, V100 16 GiB, T4 16 GiB. */
export const GPU_MEMORY_BYTES: Readonly<Record<string, number>> = {
  "p2.xlarge": 12 * GiB,
  "p3.2xlarge": 16 * GiB,
  "g4dn.xlarge": 16 * GiB,
};

/** What one instance of a variant takes, for resources and price. */
export interface VariantFootprint {
  hardware: HardwareKind;
  /** CPU threads (CPU variants). */
  threads: number;
  /** Host memory, bytes (its profile; 0 when unknown). */
  memoryBytes: number;
  /** Device memory on its GPU, bytes. @default memoryBytes */
  acceleratorMemoryBytes?: number;
  /** NeuronCores its Neuron model is compiled for. @default 1 */
  neuronCores?: number;
}

/** The footprint of a registered variant: its profile's memory and its hardware settings. */
export function footprintOf(v: Pick<VariantRecord, "hardware" | "threads"> & { profile?: Pick<NonNullable<VariantRecord["profile"]>, "memoryBytes" | "acceleratorMemoryBytes"> | null | undefined; settings?: HardwareSettings | undefined }): VariantFootprint {
  const memoryBytes = v.profile?.memoryBytes ?? 0;
  return {
    hardware: v.hardware,
    threads: v.threads,
    memoryBytes,
    acceleratorMemoryBytes: v.profile?.acceleratorMemoryBytes ?? memoryBytes,
    neuronCores: v.settings?.neuronCores ?? 1,
  };
}

/** What one instance takes of a worker (INFaaS's R^type): see the header. */
export function variantResources(f: VariantFootprint): Record<string, number> {
  if (f.hardware === "gpu") return { threads: f.threads, acceleratorMemoryBytes: f.acceleratorMemoryBytes ?? f.memoryBytes, memoryBytes: f.memoryBytes };
  if (f.hardware === "inferentia") return { threads: f.threads, accelerators: f.neuronCores ?? 1, memoryBytes: f.memoryBytes };
  return { threads: f.threads, memoryBytes: f.memoryBytes };
}

/**
 * The share of its instance type one instance pays for, as numerator / denominator: threads / vCPUs
 * (CPU), device memory / the type's GPU memory (GPU; a whole GPU when the footprint is unknown),
 * NeuronCores / the type's NeuronCores (Inferentia).
 */
function shareOf(f: VariantFootprint, type: string): [number, number] {
  const info = INSTANCE_PRICES[type];
  if (!info) throw new Error(`unknown instance type "${type}"`);
  if (f.hardware === "cpu") return [Math.min(f.threads, info.vcpus), info.vcpus];
  const devices = Math.max(1, info.accelerators);
  if (f.hardware === "inferentia") return [Math.min(f.neuronCores ?? 1, devices), devices];
  const perGpu = GPU_MEMORY_BYTES[type];
  const bytes = f.acceleratorMemoryBytes ?? f.memoryBytes;
  if (perGpu === undefined || !(bytes > 0)) return [1, devices];
  return [Math.min(bytes, perGpu * devices), perGpu * devices];
}

/** The share of its instance type one instance pays for, 0..1 (see {@link footprintPricePerSecond}). */
export function instanceShare(f: VariantFootprint, type: string): number {
  const [n, d] = shareOf(f, type);
  return n / d;
}

/**
 * $/s of one instance: the price of the type standing for its hardware × its share of it — threads /
 * vCPUs (CPU), device memory / the type's GPU memory (GPU; a whole GPU when the footprint is unknown),
 * NeuronCores / the type's NeuronCores (Inferentia).
 */
export function footprintPricePerSecond(f: VariantFootprint, types: Readonly<Record<HardwareKind, string>> = DEFAULT_TYPE_FOR_KIND, market: "on-demand" | "spot" = "on-demand"): number {
  const type = types[f.hardware];
  const [n, d] = shareOf(f, type);
  return (pricePerSecond(type, market) * n) / d;
}

/** What a worker's report says it has and holds (the fields of `WorkerReport` this needs). */
export interface WorkerCapacity {
  hardware: string;
  threads: number;
  threadsUsed: number;
  memoryBytes: number;
  memoryUsedBytes: number;
  accelerators?: number | undefined;
  acceleratorsUsed?: number | undefined;
  acceleratorMemoryBytes?: number | undefined;
  acceleratorMemoryUsedBytes?: number | undefined;
}

/**
 * Free amount of each resource of a worker: threads, memory (no limit when the worker accounts none),
 * accelerators (NeuronCores; GPUs), and on a GPU worker its GPUs' memory (each GPU's memory: the report's,
 * else that of the GPU instance type `gpuType`). A worker of another kind whose report gives its
 * accelerators' memory (the simulator's mixed worker, libs/sim worker-report.ts) has it counted the same
 * way.
 */
export function workerFreeResources(w: WorkerCapacity, gpuType: string = DEFAULT_TYPE_FOR_KIND.gpu): Record<string, number> {
  const free: Record<string, number> = {
    threads: Math.max(0, w.threads - w.threadsUsed),
    memoryBytes: w.memoryBytes > 0 ? Math.max(0, w.memoryBytes - w.memoryUsedBytes) : Infinity,
    accelerators: Math.max(0, (w.accelerators ?? 0) - (w.acceleratorsUsed ?? 0)),
  };
  if (w.hardware === "gpu" || w.acceleratorMemoryBytes !== undefined) {
    const perGpu = w.acceleratorMemoryBytes ?? GPU_MEMORY_BYTES[gpuType] ?? 0;
    free.acceleratorMemoryBytes = Math.max(0, (w.accelerators ?? 0) * perGpu - (w.acceleratorMemoryUsedBytes ?? 0));
  }
  return free;
}

/** What a worker's instances hold, summed: threads (slots: every variant takes its `threads`), memory, accelerators, GPU memory. */
export function heldResources(instances: Iterable<{ footprint: VariantFootprint; count: number }>): { threads: number; memoryBytes: number; accelerators: number; acceleratorMemoryBytes: number } {
  const sum = { threads: 0, memoryBytes: 0, accelerators: 0, acceleratorMemoryBytes: 0 };
  for (const { footprint, count } of instances) {
    const r = variantResources(footprint);
    sum.threads += footprint.threads * count;
    sum.memoryBytes += footprint.memoryBytes * count;
    sum.accelerators += (r.accelerators ?? 0) * count;
    sum.acceleratorMemoryBytes += (r.acceleratorMemoryBytes ?? 0) * count;
  }
  return sum;
}

/**
 * What a new worker of `kind` on instance type `type` offers its variants (the VM autoscaler's plan):
 * threads (slots, for accelerator workers) and memory, NeuronCores, GPUs and their memory. Caveat: the
 * plan counts a worker's capacity as instances × throughput, and GPU instances that share a GPU share
 * its compute too; the slots bound how many it counts.
 */
export function instanceOffer(kind: HardwareKind, type: string, threads: number, memoryBytes: number): Record<string, number> {
  if (kind === "cpu") return { threads, memoryBytes };
  const devices = INSTANCE_PRICES[type]?.accelerators ?? 1;
  if (kind === "inferentia") return { threads, accelerators: devices, memoryBytes };
  return { threads, accelerators: devices, acceleratorMemoryBytes: devices * (GPU_MEMORY_BYTES[type] ?? 0), memoryBytes };
}
