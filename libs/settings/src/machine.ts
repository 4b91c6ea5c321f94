import { totalmem } from "node:os";

/** The share of a machine's memory an executor offers its variant instances by default. */
export const WORKER_MEMORY_SHARE = 0.8;

/** What an executor offers its variant instances by default: 80% of `machineBytes` (the machine's memory), MiB. */
export function defaultWorkerMemoryMb(machineBytes = totalmem()): number {
  return Math.floor((machineBytes * WORKER_MEMORY_SHARE) / 1048576);
}
