import { describe, expect, it } from "vitest";
import { batchAnswerFields, type BatchFacts } from "../src/answer-meta.js";

describe("answer meta", () => {
  it("answer meta - is JSON.stringify of the answer's fields, byte for byte, in their order (served_by.backend only when emulated)", () => {
    const facts: BatchFacts[] = [
      { model: "digits-tiny", variant: "digits-tiny--cpu-fp32-b8-t1", hardware: "cpu", accuracy: 0.9125, worker: "executor-cpu-1", batchSize: 8, inferenceMs: 0.123, costDollars: 1.2345e-9 },
      { model: "m \"quoted\" ü", variant: "v", hardware: "gpu", accuracy: null, worker: "w", batchSize: 1, inferenceMs: 12, costDollars: 0 },
      { model: "m", variant: "v", hardware: "cpu", accuracy: undefined, worker: "w", batchSize: 3, inferenceMs: Number.NaN, costDollars: Infinity },
      // An emulated engine's answers (BACKEND=emulated) say so.
      { model: "m", variant: "v", hardware: "inferentia", accuracy: 0.5, worker: "w", batchSize: 2, inferenceMs: 4.5, costDollars: 1e-7, backend: "emulated" },
    ];
    for (const f of facts) {
      const fields = batchAnswerFields(f);
      for (const [id, deliveries, timing] of [
        [undefined, 1, { queue: 0, batch_wait: 2, total: 3 }],
        ["q-1", 2, { queue: 1.5, batch_wait: 0, total: 1e21 }],
        ["", 10, { queue: -0, batch_wait: Number.NaN, total: 4 }],
      ] as const) {
        const object = {
          model_name: f.model,
          model_version: "1",
          id,
          served_by: { model: f.model, variant: f.variant, hardware: f.hardware, accuracy: f.accuracy, worker: f.worker, batch_size: f.batchSize, backend: f.backend, deliveries },
          timing_ms: { queue: timing.queue, batch_wait: timing.batch_wait, inference: f.inferenceMs, total: timing.total },
          cost_dollars: f.costDollars,
        };
        expect(fields(id, deliveries, timing)).toBe(JSON.stringify(object));
      }
    }
  });
});
