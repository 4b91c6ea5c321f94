import { describe, expect, it } from "vitest";
import { describeZodError, pipelineSpecSchema } from "../src/index.js";

/** The shape of a pipeline spec (zod); its meaning is checked in libs/policy `checkPipelineSpec`. */

const base = {
  name: "cascade",
  slo: { p99_ms: 100 },
  params: { threshold: 0.9 },
  stages: [{ name: "fast", model: "digits-mlp-s" }, { name: "accurate", model: "digits-cnn-m" }],
  edges: [{ from: "fast", to: "accurate", when: { output: "probabilities", op: "<", value: "$threshold" } }],
};

function problems(spec: unknown): string {
  const r = pipelineSpecSchema.safeParse(spec);
  return r.success ? "" : describeZodError(r.error);
}

describe("pipeline spec schema", () => {
  it("pipeline spec schema - a valid spec parses, with defaults", () => {
    const parsed = pipelineSpecSchema.parse(base);
    expect(parsed.edges[0]!.when).toEqual({ output: "probabilities", reduce: "max", op: "<", value: "$threshold" });
    expect(pipelineSpecSchema.parse({ ...base, params: undefined, edges: undefined })).toMatchObject({ params: {}, edges: [] });
    // The planner's sample trace: CV 1 unless given.
    expect(pipelineSpecSchema.parse({ ...base, planning: { rate_qps: 20 } }).planning).toEqual({ rate_qps: 20, cv: 1 });
    expect(pipelineSpecSchema.parse(base).planning).toBeUndefined();
  });

  const cases: Array<[string, unknown, string]> = [
    ["invalid pipeline name", { ...base, name: "a.b" }, "name: use 1-64 letters, digits, '_' or '-', starting with a letter or digit"],
    ["stage name with a dot", { ...base, stages: [{ name: "fa.st", model: "m" }] }, "stages.0.name: use 1-64 letters, digits, '_' or '-', starting with a letter or digit"],
    ["stage named input", { ...base, stages: [{ name: "input", model: "m" }] }, "stages.0.name: 'input' is reserved for the pipeline's inputs"],
    ["stage with two kinds", { ...base, stages: [{ name: "s", model: "m", step: "argmax" }] }, "stages.0: stage s must name exactly one of model, app or step"],
    ["stage with none", { ...base, stages: [{ name: "s" }] }, "stages.0: stage s must name exactly one of model, app or step"],
    ["requirements on a model stage", { ...base, stages: [{ name: "s", model: "m", requirements: { min_accuracy: 0.9 } }] }, "stages.0: stage s: requirements apply to app stages only"],
    ["a misspelt field", { ...base, stage: [] }, '(body): Unrecognized key: "stage"'],
    ["no SLO", { ...base, slo: undefined }, "slo: Invalid input: expected object, received undefined"],
    ["a negative SLO", { ...base, slo: { p99_ms: -5 } }, "slo.p99_ms: Too small: expected number to be >0"],
    ["no stages", { ...base, stages: [] }, "stages: Too small: expected array to have >=1 items"],
    ["a bad reference", { ...base, stages: [{ name: "s", model: "m", inputs: { x: "nodot" } }] }, 'stages.0.inputs.x: a reference is "<stage>.<output>" or "input.<name>"'],
    ["an unknown comparison", { ...base, edges: [{ from: "fast", to: "accurate", when: { output: "p", op: "=~", value: 1 } }] }, 'edges.0.when.op: Invalid option: expected one of "<"|"<="|">"|">="|"=="|"!="'],
    ["a bad parameter reference", { ...base, edges: [{ from: "fast", to: "accurate", when: { output: "p", op: "<", value: "threshold" } }] }, 'edges.0.when.value: a parameter reference is "$<name>"'],
    ["an expected share without a condition", { ...base, edges: [{ from: "fast", to: "accurate", expected_share: 0.3 }] }, "edges.0: edge fast → accurate: expected_share applies to conditional edges (with \"when\") only"],
    ["an expected share of 1", { ...base, edges: [{ ...base.edges[0], expected_share: 1 }] }, "edges.0.expected_share: Too big: expected number to be <1"],
    ["a planning rate of 0", { ...base, planning: { rate_qps: 0 } }, "planning.rate_qps: Too small: expected number to be >0"],
    ["a misspelt planning field", { ...base, planning: { rate: 10 } }, 'planning.rate_qps: Invalid input: expected number, received undefined; planning: Unrecognized key: "rate"'],
  ];
  it.each(cases)("pipeline spec schema - %s", (_what, spec, message) => {
    expect(problems(spec)).toBe(message);
  });
});
