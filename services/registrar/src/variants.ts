import type { ModelRecord, VariantRecord } from "@sloserve/contracts";

/**
 * The variants a new model starts with: one CPU fp32 variant that batches when every input and
 * output has a dynamic first dimension. (The variant generator and profiler extend this.)
 */
export function defaultVariants(model: ModelRecord): VariantRecord[] {
  const batchable = [...model.inputs, ...model.outputs].every((s) => s.shape.length > 0 && s.shape[0] === -1);
  const maxBatch = batchable ? 8 : 1;
  return [
    {
      name: `${model.name}--cpu-b${maxBatch}`,
      model: model.name,
      app: model.app,
      hardware: "cpu",
      maxBatch,
      batchWaitMs: 0,
      quantization: "fp32",
      threads: 1,
      object: model.object,
      accuracy: null,
      profiled: false,
    },
  ];
}
