import type { ModelRecord, VariantRecord } from "@sloserve/contracts";

/** One variant as `GET /v1/apps/{app}/models` shows it. */
export function describeVariant(v: VariantRecord): Record<string, unknown> {
  const p = v.profile;
  return {
    name: v.name,
    hardware: v.hardware,
    batch_size: v.maxBatch,
    /** Wbatch: tuned to the model's tightest SLO once profiled (MArk §4.3); 0 until then. */
    batch_wait_ms: v.batchWaitMs,
    quantization: v.quantization,
    threads: v.threads,
    accuracy: v.accuracy,
    load_latency_ms: p ? round(p.loadLatencyMs) : null,
    latency_ms: p ? Object.fromEntries(Object.entries(p.latencyMs).map(([b, ms]) => [b, round(ms)])) : null,
    peak_qps: p ? round(p.peakQps) : null,
    memory_bytes: p ? p.memoryBytes : null,
    profiled: v.profiled,
    profiled_on: p?.worker ?? null,
  };
}

export function describeModel(m: ModelRecord, variants: readonly VariantRecord[]): Record<string, unknown> {
  return {
    name: m.name,
    app: m.app,
    task: m.task,
    dataset: m.dataset,
    inputs: m.inputs,
    outputs: m.outputs,
    validation_set_size: m.validationCount,
    variants: [...variants].sort((a, b) => a.name.localeCompare(b.name, "en", { numeric: true })).map(describeVariant),
  };
}

const round = (x: number): number => Math.round(x * 1000) / 1000;
