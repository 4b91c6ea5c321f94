import { z } from "zod";
import { commonEnvSchema } from "@sloserve/contracts";
import { defaultWorkerMemoryMb } from "./machine.js";
import { backendDescription, emulationSettings } from "./emulation.js";
import { profilingSettings } from "./profiling.js";

/** `model=name,model:int8=name,model:nc4=name` → { model: name, "model:int8": name, "model:nc4": name }. */
export const modelMap = z
  .string()
  .default("")
  .transform((s, ctx) => {
    const out: Record<string, string> = {};
    for (const entry of s.split(",").map((e) => e.trim()).filter(Boolean)) {
      const m = /^([A-Za-z0-9][A-Za-z0-9_.-]*(?::(?:fp32|int8))?(?::nc[1-9][0-9]?)?)=([^\s=,]+)$/.exec(entry);
      if (!m) {
        ctx.addIssue({ code: "custom", message: `entry ${JSON.stringify(entry)}: use <model>=<name on the server>, <model>:int8=<name on the server> or <model>[:int8]:nc<NeuronCores>=<name on the server>` });
        return z.NEVER;
      }
      out[m[1] as string] = m[2] as string;
    }
    return out;
  });

/** executor-inferentia's environment (README, docs/ARCHITECTURE.md). */
export const executorInferentiaSettings = commonEnvSchema.extend({
  WORKER_ID: z.string().regex(/^[A-Za-z0-9][A-Za-z0-9_-]{0,127}$/).optional().describe("Worker id; a fresh one per process by default."),
  NEURON_SERVER: z.string().regex(/^[^\s/]+:\d{1,5}$/, "use host:port").default("127.0.0.1:8001").describe("The Neuron-backed inference server's gRPC address (Open Inference Protocol), host:port."),
  NEURON_MODELS: modelMap.meta({ description: "The server's model for each registered model, when the names differ: `model=name,model:int8=name`; for variants compiled for n > 1 NeuronCores `model:nc<n>=name`.", defaultText: "each model under its own name (fp32, one NeuronCore)" }),
  NEURON_MODEL_VERSION: z.string().default("").describe("The model version asked of the server; empty: the server's choice."),
  NEURON_TIMEOUT_MS: z.coerce.number().int().min(1).default(30_000).describe("Deadline of a batch whose queries carry none, ms."),
  NEURON_PROBE_TIMEOUT_MS: z.coerce.number().int().min(1).default(2_000).describe("Deadline of the readiness and metadata calls (each report period, and at load), ms."),
  WORKER_SLOTS: z.coerce.number().int().min(1).default(4).describe("Variant instances the server takes at once."),
  ACCELERATORS: z.coerce.number().int().min(1).default(4).describe("NeuronCores this worker offers (inf1.xlarge: 4); each instance of a variant holds the NeuronCores it is compiled for (settings.neuronCores, 1 by default)."),
  WORKER_MEMORY_MB: z.coerce.number().int().min(64).default(defaultWorkerMemoryMb()).meta({ description: "Host memory offered to variant instances, MiB.", defaultText: "80% of the machine's memory" }),
  BACKEND: z.enum(["neuron", "emulated"]).default("neuron").describe(backendDescription("neuron", "the Neuron-backed server at NEURON_SERVER")),
  ...emulationSettings,
  ...profilingSettings,
});


export type ExecutorInferentiaSettings = z.infer<typeof executorInferentiaSettings>;
