/**
 * The variant generator (INFaaS §3, "model-variants"): from one registered model, the ways of
 * running it that the system may choose between — hardware kind × quantisation × CPU threads × max
 * batch size. Variants of one (binary, hardware, threads) differ only in their max batch, so they
 * share one profiling run (`profileGroups`). Pure: names and objects come in, records go out.
 */

import type { HardwareKind } from "./costs.js";
export type Quantization = "fp32" | "int8";

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
}

export const DEFAULT_BATCH_SIZES = [1, 2, 4, 8, 16, 32, 64];

export function variantName(model: string, hardware: HardwareKind, quantization: Quantization, maxBatch: number, threads: number): string {
  return `${model}--${hardware}-${quantization}-b${maxBatch}-t${threads}`;
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
      for (const threads of threadCounts) {
        for (const maxBatch of batchSizes) {
          out.push({
            name: variantName(input.model, hw, quantization, maxBatch, threads),
            model: input.model,
            app: input.app,
            hardware: hw,
            maxBatch,
            batchWaitMs: 0,
            quantization,
            threads,
            object,
            accuracy: null,
            profiled: false,
            profile: null,
          });
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
  variants: string[];
}

/** Groups variants that one profiling run measures: same binary, hardware and threads. */
export function profileGroups(variants: ReadonlyArray<Pick<GeneratedVariant, "name" | "hardware" | "quantization" | "threads" | "object">>): ProfileGroup[] {
  const groups = new Map<string, ProfileGroup>();
  for (const v of variants) {
    const key = `${v.hardware}|${v.quantization}|${v.threads}|${v.object}`;
    const g = groups.get(key);
    if (g) g.variants.push(v.name);
    else groups.set(key, { hardware: v.hardware, quantization: v.quantization, threads: v.threads, object: v.object, variants: [v.name] });
  }
  return [...groups.values()];
}
