import { z } from "zod";
import { commonEnvSchema } from "@sloserve/contracts";
import { defaultWorkerMemoryMb } from "./machine.js";
import { backendDescription, emulationSettings } from "./emulation.js";
import { profilingSettings } from "./profiling.js";

/** A GPU executor's settings (services/executor-gpu): the GPU it offers, CUDA and TensorRT. */
export const executorGpuSettings = commonEnvSchema.extend({
  WORKER_ID: z.string().regex(/^[A-Za-z0-9][A-Za-z0-9_-]{0,127}$/).optional().describe("Worker id; a fresh one per process by default."),
  WORKER_SLOTS: z.coerce.number().int().min(1).default(4).describe("Variant instances the GPU takes at once."),
  ACCELERATORS: z.coerce.number().int().min(1).default(1).describe("GPUs this worker offers to the model autoscaler: GPU variant instances share them by their memory footprint (libs/policy accelerator-share.ts), so with GPU_MEMORY_MB this bounds the instances it replicates here."),
  GPU_MEMORY_MB: z.coerce.number().int().min(1).optional().meta({ description: "Memory of each GPU, MB.", defaultText: "16384 (the V100 of p3.2xlarge)" }),
  TENSORRT_PRECISION: z.enum(["fp32", "fp16", "int8", "none"]).default("fp16").describe("Precision of the TensorRT engines this worker builds for TensorRT variants (onnxruntime-node sets it per process, libs/policy hardware-settings.ts); `none`: no TensorRT variants here."),
  GPU_DEVICE_ID: z.coerce.number().int().min(0).default(0).describe("CUDA device."),
  WORKER_MEMORY_MB: z.coerce.number().int().min(64).default(defaultWorkerMemoryMb()).meta({ description: "Host memory offered to variant instances, MiB.", defaultText: "80% of the machine's memory" }),
  BACKEND: z.enum(["onnx", "emulated"]).default("onnx").describe(backendDescription("onnx", "onnxruntime's CUDA and TensorRT providers")),
  ...emulationSettings,
  ...profilingSettings,
});
export type ExecutorGpuSettings = z.infer<typeof executorGpuSettings>;
