import { DEFAULT_TYPE_FOR_KIND, INSTANCE_PRICES, pricePerSecond, type HardwareKind } from "./costs.js";

/**
 * What one running instance of a variant costs per second: its share of the instance type that
 * stands for its hardware kind (DESIGN §3 "Costs"). A CPU variant pays for the vCPUs it uses
 * (threads), a GPU variant for one GPU, an Inferentia variant for one NeuronCore.
 */
export function variantPricePerSecond(hardware: HardwareKind, threads: number, types: Readonly<Record<HardwareKind, string>> = DEFAULT_TYPE_FOR_KIND): number {
  const type = types[hardware];
  const info = INSTANCE_PRICES[type];
  if (!info) throw new Error(`unknown instance type "${type}"`);
  const perS = pricePerSecond(type);
  if (hardware === "cpu") return (perS * Math.min(threads, info.vcpus)) / info.vcpus;
  return perS / Math.max(1, info.accelerators);
}
