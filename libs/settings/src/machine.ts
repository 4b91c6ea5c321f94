import { totalmem } from "node:os";

/** What an executor offers its variant instances by default: 80% of the machine's memory, MiB. */
export function defaultWorkerMemoryMb(): number {
  return Math.floor((totalmem() * 0.8) / 1048576);
}
