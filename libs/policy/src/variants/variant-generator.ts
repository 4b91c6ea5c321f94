/**
 * The variant generator (INFaaS §3, "model-variants"): from one registered model, the ways of
 * running it that the system may choose between — hardware kind × quantisation × CPU threads × max
 * batch size, and per hardware its own settings (INFaaS §3.2: "hardware-specific optimisations"):
 *
 * - **GPU**: the CUDA execution provider (no settings), and onnxruntime's TensorRT execution provider at
 *   each precision of `tensorrtPrecisions` (default fp16), built from the fp32 binary: TensorRT builds
 *   its engine when the session opens, on the GPU worker (`settings.tensorrt.precision`; int8 needs a
 *   calibration table or a quantised model).
 * - **Inferentia**: one variant per NeuronCore count of `neuronCores` (default 1), the cores its Neuron
 *   model is compiled for (`settings.neuronCores`; compiled ahead of time, held by the Neuron server).
 *
 * The settings are recorded in every variant, also on a machine without the hardware; the executor of
 * that hardware applies them (libs/policy hardware-settings.ts) or refuses the load saying why.
 * Variants of one (binary, hardware, threads, settings) differ only in their max batch, so they share
 * one profiling run (`profileGroups`). Pure: names and objects come in, records go out.
 */

import type { HardwareSettings } from "@sloserve/contracts";
import type { HardwareKind } from "../costs/costs.js";
export type Quantization = "fp32" | "int8";
export type TensorRtPrecision = "fp32" | "fp16" | "int8";

export interface GeneratedVariant {
  name: string;
  model: string;
  app: string;
  hardware: HardwareKind;
  maxBatch: number;
  batchWaitMs: number;
  quantization: Quantization;
  threads: number;
  object: string;
  /** Hardware-specific settings; absent for CPU and CUDA variants. */
  settings?: HardwareSettings;
  accuracy: null;
  profiled: false;
  profile: null;
}

export interface GeneratorInput {
  model: string;
  app: string;
  /** True when every input and output has a dynamic first dimension (queries can be batched). */
  batchable: boolean;
  /** Object names of the binaries: fp32 always, int8 when the quantiser could rewrite the model. */
  objects: { fp32: string; int8?: string | undefined };
}

export interface GeneratorOptions {
  /** @default ["cpu", "gpu", "inferentia"] */
  hardware?: HardwareKind[];
  /** Max batch sizes. @default [1, 2, 4, 8, 16, 32, 64] (powers of two, INFaaS §5) */
  batchSizes?: number[];
  /** CPU thread counts. @default [1, 2] */
  cpuThreads?: number[];
  /** TensorRT precisions of the GPU variants beside the CUDA ones ([]: CUDA only). @default ["fp16"] */
  tensorrtPrecisions?: TensorRtPrecision[];
  /** NeuronCore counts of the Inferentia variants. @default [1] */
  neuronCores?: number[];
}

export const DEFAULT_BATCH_SIZES = [1, 2, 4, 8, 16, 32, 64];

export function variantName(model: string, hardware: HardwareKind, quantization: Quantization, maxBatch: number, threads: number, settings?: HardwareSettings): string {
  const engine = settings?.tensorrt ? `trt${settings.tensorrt.precision}` : quantization;
  const cores = settings?.neuronCores !== undefined && settings.neuronCores !== 1 ? `-nc${settings.neuronCores}` : "";
  return `${model}--${hardware}-${engine}${cores}-b${maxBatch}-t${threads}`;
}

/** The hardware settings a kind's variants are generated with, for one binary (undefined: none). */
function settingsFor(hw: HardwareKind, quantization: Quantization, options: GeneratorOptions): Array<HardwareSettings | undefined> {
  if (hw === "gpu") return [undefined, ...(quantization === "fp32" ? (options.tensorrtPrecisions ?? ["fp16"]).map((precision) => ({ tensorrt: { precision } })) : [])];
  if (hw === "inferentia") return (options.neuronCores ?? [1]).map((neuronCores) => ({ neuronCores }));
  return [undefined];
}

export function generateVariants(input: GeneratorInput, options: GeneratorOptions = {}): GeneratedVariant[] {
  const hardware = options.hardware ?? ["cpu", "gpu", "inferentia"];
  const batchSizes = input.batchable ? (options.batchSizes ?? DEFAULT_BATCH_SIZES) : [1];
  const quantizations: Quantization[] = input.objects.int8 ? ["fp32", "int8"] : ["fp32"];
  const out: GeneratedVariant[] = [];
  for (const hw of hardware) {
    const threadCounts = hw === "cpu" ? (options.cpuThreads ?? [1, 2]) : [1];
    for (const quantization of quantizations) {
      const object = quantization === "int8" ? (input.objects.int8 as string) : input.objects.fp32;
      for (const settings of settingsFor(hw, quantization, options)) {
        for (const threads of threadCounts) {
          for (const maxBatch of batchSizes) {
            out.push({
              name: variantName(input.model, hw, quantization, maxBatch, threads, settings),
              model: input.model,
              app: input.app,
              hardware: hw,
              maxBatch,
              batchWaitMs: 0,
              quantization,
              threads,
              object,
              ...(settings ? { settings } : {}),
              accuracy: null,
              profiled: false,
              profile: null,
            });
          }
        }
      }
    }
  }
  return out;
}

export interface ProfileGroup {
  hardware: HardwareKind;
  quantization: Quantization;
  threads: number;
  object: string;
  settings?: HardwareSettings;
  variants: string[];
}

/** Groups variants that one profiling run measures: same binary, hardware, threads and settings. */
export function profileGroups(variants: ReadonlyArray<Pick<GeneratedVariant, "name" | "hardware" | "quantization" | "threads" | "object"> & { settings?: HardwareSettings | undefined }>): ProfileGroup[] {
  const groups = new Map<string, ProfileGroup>();
  for (const v of variants) {
    const key = `${v.hardware}|${v.quantization}|${v.threads}|${v.object}|${JSON.stringify(v.settings ?? {})}`;
    const g = groups.get(key);
    if (g) g.variants.push(v.name);
    else groups.set(key, { hardware: v.hardware, quantization: v.quantization, threads: v.threads, object: v.object, ...(v.settings ? { settings: v.settings } : {}), variants: [v.name] });
  }
  return [...groups.values()];
}
