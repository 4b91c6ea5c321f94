import { DEFAULT_TYPE_FOR_KIND, type HardwareKind } from "./costs.js";
import { footprintPricePerSecond } from "../placement/accelerator-share.js";

/**
 * What one running instance of a variant costs per second when only its hardware and threads are
 * known: its share of the instance type that stands for its hardware kind (DESIGN §3 "Costs") — the
 * vCPUs it uses (threads), one GPU, one NeuronCore. With the variant's memory footprint and NeuronCores,
 * `footprintPricePerSecond` (accelerator-share.ts) prices a GPU instance by its share of the GPU's memory.
 */
export function variantPricePerSecond(hardware: HardwareKind, threads: number, types: Readonly<Record<HardwareKind, string>> = DEFAULT_TYPE_FOR_KIND): number {
  return footprintPricePerSecond({ hardware, threads, memoryBytes: 0 }, types);
}
