import { availableParallelism, totalmem } from "node:os";
import { z } from "zod";

/** The share of a machine's memory an executor offers its variant instances by default. */
export const WORKER_MEMORY_SHARE = 0.8;

/** What an executor offers its variant instances by default: 80% of `machineBytes` (the machine's memory), MiB. */
export function defaultWorkerMemoryMb(machineBytes = totalmem()): number {
  return Math.floor((machineBytes * WORKER_MEMORY_SHARE) / 1048576);
}

/**
 * What a CPU executor offers by default: the default share of the machine's memory in proportion to
 * its share of the cores (all of it with all the cores, WORKER_THREADS's default), so that workers
 * sharing one host offer no more memory in all than one worker alone would. MiB.
 */
export function cpuWorkerMemoryMb(threads: number, cores = availableParallelism(), machineBytes = totalmem()): number {
  return Math.max(64, Math.floor(defaultWorkerMemoryMb(machineBytes) * Math.min(1, threads / Math.max(1, cores))));
}

/** The host's cores, as the local provider and the local function pool count them (vm-autoscaler, dispatcher). */
export const hostSettings = {
  HOST_CORES: z.coerce
    .number()
    .int()
    .min(1)
    .default(availableParallelism())
    .meta({
      description:
        "The cores of this host that its local workers (the vm-autoscaler's PROVIDER=local) and local function containers (the dispatcher's OVERFLOW=local) may use in all, counted as the threads the workers reporting from this host offer (libs/policy scaling/host-room.ts): a local launch waits while one more worker would go beyond them, and a query overflows to the local pool only onto a core no worker offers. Emulated workers and functions (LOCAL_WORKER_BACKEND, FUNCTION_BACKEND `emulated`) stand for machines of their own and are not limited. Set it above the machine's cores to oversubscribe on purpose.",
      defaultText: "the machine's cores",
    }),
};
