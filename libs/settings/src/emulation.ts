import { z } from "zod";
import { linearLatencySchema } from "@sloserve/contracts";

/**
 * The executors' emulated engine (`BACKEND=emulated`, libs/executor emulated-backend.ts): each
 * executor's schema takes these beside its own BACKEND.
 */

/** The meaning of an executor's BACKEND, whose own engine is `engine` (`what`). */
export function backendDescription(engine: string, what: string): string {
  return `The engine: \`${engine}\` (${what}) or \`emulated\`: each variant served by its latency distribution instead of its model (answers are zeros, \`served_by.backend\` says \`emulated\`; no accelerator needed, the worker still reports its kind and what it offers), for fleet-scale runs of the control plane on a small machine; never for real queries.`;
}

/** The emulated engine's settings, the same for every executor. */
export const emulationSettings = {
  EMULATED_CALIBRATION: z.string().optional().meta({
    description:
      'BACKEND=emulated (the dispatcher: FUNCTION_BACKEND=emulated): a JSON file of latencies that win over the variants\' profiles: `{"variants": {"<variant>": E}, "models": {"<model>": {"<cpu|gpu|inferentia>": E}}}`, E = `{"batches": {"<batch size>": {"p50": ms, "p99": ms}}, "loadMs": ms, "accuracy": 0..1}` (p99, loadMs, accuracy optional); libs/executor emulated-latency.ts.',
    defaultText: "none (each variant's profile)",
  }),
  EMULATED_LATENCY_MS: linearLatencySchema.describe(
    "BACKEND=emulated (the dispatcher: FUNCTION_BACKEND=emulated): the median latency of a batch of a variant with neither calibration nor profile (a first profiling), `<ms per batch>+<ms per row>`; its P99 is 1.2× the median.",
  ),
};
