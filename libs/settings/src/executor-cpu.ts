import { availableParallelism } from "node:os";
import { z } from "zod";
import { commonEnvSchema } from "@sloserve/contracts";

import { backendDescription, emulationSettings } from "./emulation.js";
import { profilingSettings } from "./profiling.js";

/** A CPU executor's settings (services/executor-cpu): what the worker offers its variant instances. */
export const executorCpuSettings = commonEnvSchema.extend({
  WORKER_ID: z.string().regex(/^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$/).optional().describe("Worker id; a fresh one per process by default."),
  WORKER_THREADS: z.coerce.number().int().min(1).default(availableParallelism()).meta({ description: "Threads this worker offers to its variants.", defaultText: "the machine's cores" }),
  WORKER_MEMORY_MB: z.coerce.number().int().min(64).optional().meta({ description: "Memory offered to variant instances, MiB (libs/settings `cpuWorkerMemoryMb`).", defaultText: "80% of the machine's memory × WORKER_THREADS / the machine's cores (all of the 80% with all the cores)" }),
  BACKEND: z.enum(["onnx", "emulated"]).default("onnx").describe(backendDescription("onnx", "onnxruntime's CPU provider")),
  ...emulationSettings,
  ...profilingSettings,
});
export type ExecutorCpuSettings = z.infer<typeof executorCpuSettings>;
