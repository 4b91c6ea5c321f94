import type { BackendFactory, BackendHealth, ModelBackend } from "@sloserve/executor";
import { runConcatenated } from "@sloserve/runtime";
import { neuronModelFor } from "@sloserve/policy";
import type { OipClient } from "./oip-client.js";

/**
 * Variants run by the Neuron-backed inference server on this host, over the Open Inference Protocol's
 * gRPC API. A Neuron model is compiled ahead of time for the NeuronCores (neuronx-cc), so the server
 * holds its own copy under a name; the ONNX binary in the repository is what it was compiled from.
 * Loading a variant checks that the server has its model ready (ModelReady) and reads its signature
 * (ModelMetadata); a batch is one ModelInfer with the queries concatenated along the batch dimension
 * (the rule onnxruntime's runner follows, libs/runtime `runConcatenated`); each report period the
 * worker asks ModelReady again (`health`), so that a server that went away makes the variant Failed
 * and one that came back makes it Active.
 */

export interface NeuronBackendOptions {
  client: OipClient;
  /**
   * The server's model for a registered model: `models["<model>:<quantization>[:nc<n>]"]`, else for fp32
   * `models["<model>[:nc<n>]"]`, else the registered name itself. An int8 variant, or one compiled for
   * n > 1 NeuronCores (its `settings.neuronCores`), needs its own entry; without one its load is refused
   * (libs/policy `neuronModelFor`).
   */
  models: Readonly<Record<string, string>>;
  /** NeuronCores this worker offers (ACCELERATORS): a variant compiled for more is refused. */
  neuronCores: number;
  /** The model version asked for; "" lets the server choose. */
  version: string;
  /** Deadline of a batch whose queries have none, ms. */
  timeoutMs: number;
  /** Deadline of ModelReady and ModelMetadata, ms. */
  probeTimeoutMs: number;
}

export function neuronModelName(models: Readonly<Record<string, string>>, model: string, quantization: "fp32" | "int8", neuronCores = 1): string | undefined {
  const plan = neuronModelFor({ model, quantization, settings: { neuronCores } }, models, Infinity);
  return plan.ok ? plan.serverModel : undefined;
}

export function neuronBackend(options: NeuronBackendOptions): BackendFactory {
  const { client, version } = options;
  return {
    hardware: "inferentia",
    async load(_bytes, { model, quantization, settings }): Promise<ModelBackend> {
      const plan = neuronModelFor({ model, quantization, settings }, options.models, options.neuronCores);
      if (!plan.ok) throw new Error(plan.reason);
      const remote = plan.serverModel;
      if (!(await client.modelReady(remote, version, options.probeTimeoutMs))) throw new Error(`${client.label} has no model ${remote} ready (for ${model}, ${quantization})`);
      const signature = await client.modelMetadata(remote, version, options.probeTimeoutMs);
      const batchable = [...signature.inputs, ...signature.outputs].every((s) => s.shape.length > 0 && s.shape[0] === -1);
      const health = async (): Promise<BackendHealth> => {
        try {
          return (await client.modelReady(remote, version, options.probeTimeoutMs)) ? { ok: true } : { ok: false, reason: `${client.label} has model ${remote} no longer ready` };
        } catch (err) {
          return { ok: false, reason: (err as Error).message };
        }
      };
      return {
        runBatch: (queries, run) => runConcatenated(queries, signature.inputs, batchable, (feeds) => client.infer(remote, version, feeds, run?.deadlineMs ?? Date.now() + options.timeoutMs)),
        // The server keeps its model loaded for other clients; nothing is held here.
        release: () => Promise.resolve(),
        health,
      };
    },
  };
}
