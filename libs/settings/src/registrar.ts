import { z } from "zod";
import { commonEnvSchema, hardwareSchema } from "@sloserve/contracts";
import { SLO_MEMORY_MS } from "@sloserve/policy";

/** A comma-separated list: its items, trimmed, empty ones dropped. */
const commaList = (defaultValue: string) =>
  z
    .string()
    .default(defaultValue)
    .transform((s) => s.split(",").map((x) => x.trim()).filter(Boolean));
/** The same, as numbers. */
const numberList = (defaultValue: string) => commaList(defaultValue).transform((xs) => xs.map(Number));

/**
 * registrar: registers models (`registry.request.register`) and removes them
 * (`registry.request.unregister`), answering each request with the result or an error code; and tunes
 * the variants' Wbatch to their models' tightest SLO (MArk §4.3, batching.ts).
 */
export const registrarSettings = commonEnvSchema.extend({
  VARIANT_HARDWARE: commaList("cpu,gpu,inferentia").pipe(z.array(hardwareSchema).min(1)).meta({ description: "Hardware kinds to generate variants for, comma-separated.", defaultText: "cpu,gpu,inferentia" }),
  VARIANT_BATCH_SIZES: numberList("1,2,4,8,16,32,64").pipe(z.array(z.number().int().min(1).max(1024)).min(1)).meta({ description: "Max batch sizes of the generated variants, comma-separated.", defaultText: "1,2,4,8,16,32,64" }),
  VARIANT_CPU_THREADS: numberList("1,2").pipe(z.array(z.number().int().min(1).max(256)).min(1)).meta({ description: "CPU thread counts of the generated variants, comma-separated.", defaultText: "1,2" }),
  VARIANT_TENSORRT_PRECISIONS: commaList("fp16").pipe(z.array(z.enum(["fp32", "fp16", "int8"]))).meta({ description: "TensorRT precisions of the GPU variants beside the CUDA ones, comma-separated; empty: CUDA only.", defaultText: "fp16" }),
  VARIANT_NEURON_CORES: numberList("1").pipe(z.array(z.number().int().min(1).max(16)).min(1)).meta({ description: "NeuronCore counts of the Inferentia variants (each a Neuron model compiled for them), comma-separated.", defaultText: "1" }),
  PROFILE_SIZE_CLASSES: numberList("").pipe(z.array(z.number().positive().max(16))).meta({ description: "Models with dynamic non-batch input dimensions (OCR's text width): scales of the profile shape's dynamic dimensions also profiled, one input size class each (INFaaS §5), comma-separated, e.g. 0.25,0.5,1,2; empty: one size.", defaultText: "\"\" (each class adds a profiling run per batch size)" }),
  PROFILE_ON_REGISTER: z.enum(["true", "false"]).default("true").transform((v) => v === "true").describe("Queue profiling jobs at registration."),
  BATCH_TUNING: z.enum(["true", "false"]).default("true").transform((v) => v === "true").describe("Tune each profiled variant's Wbatch to its model's tightest SLO (MArk §4.3); false keeps the generator's 0."),
  SLO_MEMORY_MS: z.coerce.number().int().min(1000).default(SLO_MEMORY_MS).describe("How long a model's tightest SLO is kept against looser ones, ms."),
});
export type RegistrarSettings = z.infer<typeof registrarSettings>;
