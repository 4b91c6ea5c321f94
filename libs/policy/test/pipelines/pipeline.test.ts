import { describe, expect, it } from "vitest";
import { pipelineSpecSchema, type PipelineSpec, type PipelineSpecInput, type Tensor } from "@sloserve/contracts";
import {
  configCostPerHour, pipelineRoute, replicaThroughputQps, rootModels, scaleFactors, serviceTimeMs, topologicalOrder, validatePipeline,
  type Pipeline, type ProfileSet,
} from "../../src/pipelines/pipeline.js";
import {
  checkPipelineSpec, compilePipeline, pipelineInputSignature, resolvePipelineParams, specToPipeline, type PipelineEnvironment, type StepDescriptor,
} from "../../src/pipelines/pipeline-spec.js";
import { PipelineRun, evaluateCondition, reduceTensor, type PipelineTask, type StageResult } from "../../src/pipelines/pipeline-run.js";

// Social-media-like: preprocess → {language id → translate (30%), image classifier}.
const social: Pipeline = {
  name: "social",
  models: ["pre", "lang", "nmt", "img"],
  edges: [{ from: "pre", to: "lang" }, { from: "lang", to: "nmt", probability: 0.3 }, { from: "pre", to: "img" }],
};
const profiles: ProfileSet = {
  pre: [{ hardware: "cpu", pricePerHour: 0.1, batchLatencyMs: [[1, 2], [2, 4]] }],
  lang: [{ hardware: "gpu", pricePerHour: 0.9, batchLatencyMs: [[1, 5], [4, 8]] }],
  nmt: [{ hardware: "gpu", pricePerHour: 0.9, batchLatencyMs: [[1, 40], [8, 68]] }],
  img: [{ hardware: "gpu", pricePerHour: 0.9, batchLatencyMs: [[1, 20], [8, 34]] }],
};

describe("pipeline", () => {
  it("pipeline - a valid pipeline has no errors and a topological order", () => {
    expect(validatePipeline(social, profiles)).toEqual([]);
    expect(topologicalOrder(social)).toEqual(["pre", "lang", "img", "nmt"]);
    expect(rootModels(social)).toEqual(["pre"]);
  });

  it("pipeline - validation reports every error", () => {
    const bad: Pipeline = {
      name: "bad",
      models: ["a", "b", "a"],
      edges: [{ from: "a", to: "x" }, { from: "b", to: "b", probability: 1.5 }],
    };
    expect(validatePipeline(bad, { a: [{ hardware: "cpu", pricePerHour: 1, batchLatencyMs: [[2, 0]] }] })).toEqual([
      "model a is declared twice",
      "edge a → x: unknown model x",
      "edge b → b: probability 1.5 is not in (0, 1]",
      "edge b → b: a model cannot feed itself",
      "model a on cpu: no latency for batch 1",
      "model a on cpu: latency 0 ms at batch 2 is not positive",
      "model b has no profile",
    ]);
    expect(validatePipeline({ name: "cyc", models: ["a", "b"], edges: [{ from: "a", to: "b" }, { from: "b", to: "a" }] }))
      .toEqual(["pipeline cyc: the edges form a cycle"]);
  });

  it("pipeline - scale factors follow conditional edges", () => {
    expect(scaleFactors(social)).toEqual({ pre: 1, lang: 1, nmt: 0.3, img: 1 });
    // Diamond with two conditional branches into d: s_d = 1 − (1 − 0.5)(1 − 0.2) = 0.6; e after d at 50%: 0.3.
    const diamond: Pipeline = {
      name: "diamond", models: ["a", "b", "c", "d", "e"],
      edges: [{ from: "a", to: "b" }, { from: "a", to: "c" }, { from: "b", to: "d", probability: 0.5 }, { from: "c", to: "d", probability: 0.2 }, { from: "d", to: "e", probability: 0.5 }],
    };
    const s = scaleFactors(diamond);
    expect(s.d).toBeCloseTo(0.6, 12);
    expect(s.e).toBeCloseTo(0.3, 12);
  });

  it("pipeline - service time is the longest path; cost and throughput per replica", () => {
    const config = {
      pre: { hardware: "cpu", maxBatch: 1, replicas: 2 },
      lang: { hardware: "gpu", maxBatch: 4, replicas: 1 },
      nmt: { hardware: "gpu", maxBatch: 8, replicas: 3 },
      img: { hardware: "gpu", maxBatch: 1, replicas: 1 },
    };
    // pre 2 → lang T(4) = 8 → nmt T(8) = 68: 78 ms; pre → img T(1) = 20: 22 ms.
    expect(serviceTimeMs(social, profiles, config)).toBe(78);
    // 2·0.1 + 0.9 + 3·0.9 + 0.9 = 4.7 $/h
    expect(configCostPerHour(profiles, config)).toBeCloseTo(4.7, 12);
    expect(replicaThroughputQps(profiles, "nmt", config.nmt)).toBeCloseTo(8000 / 68, 12);
  });
});

// ---------------------------------------------------------------------------------------------------
// Pipeline specs (pipeline-spec.ts) and live runs (pipeline-run.ts)

const digitsSignature = { inputs: [{ name: "input", datatype: "FP32" as const, shape: [-1, 1, 28, 28] }], outputs: [{ name: "probabilities", datatype: "FP32" as const, shape: [-1, 10] }] };
const clsSignature = { inputs: [{ name: "x", datatype: "FP32" as const, shape: [-1, 3, 48, 192] }], outputs: [{ name: "y", datatype: "FP32" as const, shape: [-1, 2] }] };
const models: Record<string, typeof digitsSignature> = { "digits-mlp-s": digitsSignature, "digits-cnn-m": digitsSignature, "ocr-cls": clsSignature };
const stepDescriptors: Record<string, StepDescriptor> = {
  "split-rows": { name: "split-rows", kind: "fan_out", description: "", inputs: ["x"], outputs: ["x"] },
  "concat-rows": { name: "concat-rows", kind: "join", description: "", inputs: ["x"], outputs: ["x"], checkParams: (p) => (p["skip_missing"] !== undefined && typeof p["skip_missing"] !== "boolean" ? "skip_missing must be true or false" : undefined) },
  mean: { name: "mean", kind: "map", description: "", inputs: "any", outputs: ["y"] },
  argmax: { name: "argmax", kind: "map", description: "", inputs: ["x"], outputs: ["class", "score"] },
};
const env: PipelineEnvironment = {
  model: (n) => models[n],
  app: (a) => (a === "digits" ? digitsSignature : undefined),
  step: (s) => stepDescriptors[s],
  stepNames: () => Object.keys(stepDescriptors).sort(),
};
const stepOf = (s: string): StepDescriptor | undefined => stepDescriptors[s];

const cascade: PipelineSpecInput = {
  name: "cascade",
  slo: { p99_ms: 100 },
  params: { threshold: 0.9 },
  stages: [{ name: "fast", model: "digits-mlp-s" }, { name: "accurate", model: "digits-cnn-m" }],
  edges: [{ from: "fast", to: "accurate", when: { output: "probabilities", reduce: "max", op: "<", value: "$threshold" } }],
  outputs: { probabilities: ["accurate.probabilities", "fast.probabilities"] },
};
/** Per item: split → fast → (unsure) accurate → join. */
const perItem: PipelineSpecInput = {
  name: "per-item",
  slo: { p99_ms: 100 },
  params: { threshold: 0.9 },
  inputs: [{ name: "batch", datatype: "FP32", shape: [-1, 1, 28, 28] }],
  stages: [
    { name: "split", step: "split-rows", inputs: { x: "input.batch" } },
    { name: "fast", model: "digits-mlp-s", inputs: { input: "split.x" } },
    { name: "accurate", model: "digits-cnn-m", inputs: { input: "split.x" } },
    { name: "join", step: "concat-rows", inputs: { x: ["accurate.probabilities", "fast.probabilities"] } },
  ],
  edges: [
    { from: "split", to: "fast" },
    { from: "fast", to: "accurate", when: { output: "probabilities", reduce: "max", op: "<", value: "$threshold" } },
    { from: "fast", to: "join" },
    { from: "accurate", to: "join" },
  ],
  outputs: { probabilities: "join.x" },
};

const spec = (s: PipelineSpecInput): PipelineSpec => pipelineSpecSchema.parse(s);
const probs = (top: number, name = "probabilities"): Tensor => ({ name, datatype: "FP32", shape: [1, 10], data: Float32Array.from({ length: 10 }, (_, i) => (i === 3 ? top : (1 - top) / 9)) });
const image: Tensor = { name: "input", datatype: "FP32", shape: [1, 1, 28, 28], data: new Float32Array(784) };

describe("pipeline spec", () => {
  it("pipeline spec - the bundled shapes are valid", () => {
    expect(checkPipelineSpec(spec(cascade), env)).toEqual([]);
    expect(checkPipelineSpec(spec(perItem), env)).toEqual([]);
    expect(pipelineInputSignature(spec(cascade), env)).toEqual([{ name: "input", datatype: "FP32", shape: [-1, 1, 28, 28] }]);
    // The planner's view: the conditional edge at its expected share (0.5 when the spec gives none).
    expect(specToPipeline(spec(cascade))).toEqual({ name: "cascade", models: ["fast", "accurate"], edges: [{ from: "fast", to: "accurate", probability: 0.5 }] });
    expect(scaleFactors(specToPipeline(spec({ ...cascade, edges: [{ ...cascade.edges![0]!, expected_share: 0.24 }] })))).toEqual({ fast: 1, accurate: 0.24 });
  });

  const fastToAccurate = cascade.edges![0]!;
  const cases: Array<[string, Partial<PipelineSpecInput>, string[]]> = [
    ["unknown model", { stages: [{ name: "fast", model: "nope" }, { name: "accurate", model: "digits-cnn-m" }] }, ["stage fast: unknown model 'nope'"]],
    ["unknown app", { stages: [{ name: "fast", app: "letters" }, { name: "accurate", model: "digits-cnn-m" }] }, ["stage fast: unknown app 'letters'"]],
    ["unknown step", { stages: [...cascade.stages, { name: "blur", step: "gaussian", inputs: { x: "fast.probabilities" } }], edges: [fastToAccurate, { from: "fast", to: "blur" }] },
      ["stage blur: unknown step 'gaussian'; the built-in steps are: argmax, concat-rows, mean, split-rows"]],
    ["stage declared twice", { stages: [...cascade.stages, { name: "fast", model: "digits-cnn-m" }] }, ["stage fast is declared twice"]],
    ["edge to an unknown stage; self edge; duplicate", { edges: [fastToAccurate, { from: "fast", to: "slow" }, { from: "accurate", to: "accurate" }, { from: "fast", to: "accurate" }] },
      ["edge fast → slow: unknown stage slow", "edge accurate → accurate: a stage cannot feed itself", "edge fast → accurate is declared twice"]],
    ["cycle", { stages: [...cascade.stages, { name: "third", model: "digits-mlp-s" }], edges: [{ from: "third", to: "fast" }, fastToAccurate, { from: "accurate", to: "fast" }] },
      ["the edges form a cycle through stages fast, accurate"]],
    ["a condition that names no output", { edges: [{ ...fastToAccurate, when: { output: "probs", op: "<", value: 0.9 } }] },
      ["edge fast → accurate: the condition names output 'probs', but stage fast (model digits-mlp-s) has outputs: probabilities"]],
    ["a condition's parameter that does not exist", { edges: [{ ...fastToAccurate, when: { output: "probabilities", op: "<", value: "$thresh" } }] },
      ["edge fast → accurate: the condition's value: $thresh names no pipeline parameter; declared: threshold"]],
    ["a condition's parameter that is not a number", { params: { threshold: "high" } }, ['edge fast → accurate: the condition\'s value: parameter threshold is "high", not a number']],
    ["a model input that is not mapped, and one the model lacks", { stages: [{ name: "fast", model: "digits-mlp-s", inputs: { x: "input.input" } }, { name: "accurate", model: "digits-cnn-m" }] },
      ["stage fast: model digits-mlp-s has no input 'x'; its inputs are: input", "stage fast: model digits-mlp-s needs input 'input', which is not mapped"]],
    ["references to stages not upstream", { stages: [...cascade.stages, { name: "avg", step: "mean", inputs: { a: "fast.probabilities", b: "nowhere.y" } }] },
      ["stage avg: input 'a' refers to stage fast, which is not upstream of avg (add an edge)", "stage avg: input 'b' refers to unknown stage nowhere"]],
    ["a reference to an output that does not exist", { outputs: { p: "accurate.probs" } },
      ["output 'p' refers to output 'probs' of stage accurate (model digits-cnn-m), which has outputs: probabilities"]],
    ["a pipeline input two models read differently", { stages: [{ name: "fast", model: "digits-mlp-s" }, { name: "accurate", model: "ocr-cls", inputs: { x: "input.input" } }], outputs: { y: "accurate.y" } },
      ["pipeline input 'input' feeds stages that expect different tensors: fast FP32 [-1, 1, 28, 28], accurate FP32 [-1, 3, 48, 192]"]],
    ["an undeclared pipeline input that only steps read", { stages: [...cascade.stages, { name: "top", step: "argmax", inputs: { x: "input.scores" } }] },
      ["pipeline input 'scores' feeds only steps: declare its datatype and shape in \"inputs\""]],
    ["step params", { stages: [...cascade.stages, { name: "top", step: "argmax", inputs: { x: "fast.probabilities" }, params: { k: "$topk" } }], edges: [fastToAccurate, { from: "fast", to: "top" }] },
      ["stage top: param k: $topk names no pipeline parameter; declared: threshold"]],
    ["content types on one of two inputs", { inputs: [{ name: "input", datatype: "FP32", shape: [-1, 1, 28, 28] }, { name: "image", datatype: "UINT8", shape: [-1], content_types: ["image/png"] }] },
      ["input image: content_types need it to be the pipeline's only input (a body in a media type carries one input); the pipeline has 2: input, image"]],
  ];
  it.each(cases)("pipeline spec - %s", (_what, change, problems) => {
    expect(checkPipelineSpec(spec({ ...cascade, ...change }), env)).toEqual(problems);
  });

  const fanOutCases: Array<[string, Partial<PipelineSpecInput>, string[]]> = [
    ["a fan-out that nothing joins", { stages: perItem.stages.slice(0, 2), edges: [{ from: "split", to: "fast" }], outputs: {} },
      ["stage split (step split-rows) fans out, but no join gathers its items: add a join step after it", "stage fast runs once per item of fan-out split, but no join gathers it: add an edge to a join"]],
    ["a join that gathers no fan-out", { stages: [...cascade.stages, { name: "join", step: "concat-rows", inputs: { x: "fast.probabilities" } }], edges: [fastToAccurate, { from: "fast", to: "join" }] },
      ["stage join (step concat-rows) is a join but gathers no fan-out: put it after a fan-out step"]],
    ["an edge into a fan-out's region from outside", { stages: [{ name: "pre", model: "digits-mlp-s" }, ...perItem.stages], edges: [...perItem.edges!, { from: "pre", to: "accurate" }] },
      ["edge pre → accurate enters the fan-out of split from outside: a stage that runs per item takes edges only from the fan-out or from stages after it (read pre's outputs with an input reference instead)"]],
    ["a condition into a join", { edges: [...perItem.edges!.slice(0, 2), { from: "fast", to: "join", when: { output: "probabilities", op: ">", value: 0.5 } }, perItem.edges![3]!] },
      ["edge fast → join: a condition on an edge into a join is not supported"]],
    ["an output read per item", { outputs: { p: "fast.probabilities" } },
      ["output 'p' refers to fast, which runs once per item of fan-out split: answer with its join's outputs"]],
    ["a join's bad params", { stages: [...perItem.stages.slice(0, 3), { ...perItem.stages[3]!, params: { skip_missing: "yes" } }] },
      ["stage join: params: skip_missing must be true or false"]],
    ["a nested fan-out", { stages: [...perItem.stages, { name: "split2", step: "split-rows", inputs: { x: "fast.probabilities" } }], edges: [...perItem.edges!, { from: "fast", to: "split2" }, { from: "split2", to: "join" }] },
      ["stage split2 (step split-rows) fans out inside the fan-out of split: nested fan-outs are not supported"]],
  ];
  it.each(fanOutCases)("pipeline spec - fan-out: %s", (_what, change, problems) => {
    expect(checkPipelineSpec(spec({ ...perItem, ...change }), env)).toEqual(problems);
  });

  it("pipeline spec - an input that takes a file lists the media types it accepts as a body; other inputs cannot", () => {
    const file = { name: "image", datatype: "UINT8" as const, shape: [-1], content_types: ["image/png", "image/jpeg"] };
    const s = spec({ name: "files", slo: { p99_ms: 100 }, inputs: [file], stages: [{ name: "top", step: "argmax", inputs: { x: "input.image" } }] });
    expect(checkPipelineSpec(s, env)).toEqual([]);
    expect(pipelineInputSignature(s, env)).toEqual([file]);
    const refused = pipelineSpecSchema.safeParse({ ...cascade, inputs: [{ name: "input", datatype: "FP32", shape: [-1, 1, 28, 28], content_types: ["image/png"] }] });
    expect(refused.success).toBe(false);
    expect(refused.error?.issues.map((i) => i.message)).toEqual(["input input: content_types apply to an input that takes a file's bytes (UINT8 [-1]), not FP32 [-1, 1, 28, 28]"]);
    expect(pipelineSpecSchema.safeParse({ ...cascade, inputs: [{ ...file, content_types: ["PNG"] }] }).error?.issues.map((i) => i.message)).toEqual(["a media type is '<type>/<subtype>' in lower case, e.g. image/png"]);
  });

  it("pipeline spec - query parameters override the spec's, same names and types only", () => {
    const s = spec(cascade);
    expect(resolvePipelineParams(s, { threshold: 0.99 })).toEqual({ threshold: 0.99 });
    expect(() => resolvePipelineParams(s, { thresh: 0.5 })).toThrow("unknown parameter 'thresh'; the pipeline's parameters are: threshold");
    expect(() => resolvePipelineParams(s, { threshold: "0.5" })).toThrow('parameter \'threshold\' must be a number, got "0.5"');
  });
});

/** Runs a compiled pipeline to the end, answering each task with `answer` (pipeline order of tasks recorded). */
function drive(run: PipelineRun, answer: (task: PipelineTask) => StageResult): PipelineTask[][] {
  const rounds: PipelineTask[][] = [];
  for (let ready = run.next(); ready.length > 0; ready = run.next()) {
    rounds.push(ready);
    for (const t of ready) run.complete(t, answer(t));
  }
  return rounds;
}

describe("pipeline run", () => {
  const compiledCascade = compilePipeline(spec(cascade), stepOf, env);

  it("pipeline run - cascade: a sure fast model answers alone; an unsure one sends the query on", () => {
    const sure = new PipelineRun(compiledCascade, { input: image }, { threshold: 0.9 });
    expect(drive(sure, () => ({ outputs: { probabilities: probs(0.95) } }))).toEqual([[{ stage: "fast", item: null }]]);
    expect(sure.done).toBe(true);
    expect(sure.visits()).toEqual({ fast: 1 });
    expect(sure.outputs().map((o) => [o.stage, o.output.name, (o.output as Tensor).data[3]])).toEqual([["fast", "probabilities", expect.closeTo(0.95, 6)]]);

    const unsure = new PipelineRun(compiledCascade, { input: image }, { threshold: 0.9 });
    const rounds = drive(unsure, (t) => ({ outputs: { probabilities: probs(t.stage === "fast" ? 0.6 : 0.99) } }));
    expect(rounds).toEqual([[{ stage: "fast", item: null }], [{ stage: "accurate", item: null }]]);
    expect(unsure.inputsOf({ stage: "accurate", item: null })).toEqual({ input: image });
    expect(unsure.visits()).toEqual({ fast: 1, accurate: 1 });
    expect(unsure.outputs()[0]!.stage).toBe("accurate");

    // The threshold is the query's: at 0.99 the same 0.95 is not sure enough.
    const strict = new PipelineRun(compiledCascade, { input: image }, { threshold: 0.99 });
    drive(strict, () => ({ outputs: { probabilities: probs(0.95) } }));
    expect(strict.visits()).toEqual({ fast: 1, accurate: 1 });
  });

  it("pipeline run - visits exactly what pipelineRoute visits, for every outcome of the conditional edges", () => {
    // The diamond of 'scale factors' above, as a spec whose conditions read a 0/1 output of their source.
    const when = { output: "probabilities", reduce: "first" as const, op: "==" as const, value: 1 };
    const diamond = spec({
      name: "diamond",
      slo: { p99_ms: 50 },
      stages: ["a", "b", "c", "d", "e"].map((name) => ({ name, model: "digits-mlp-s" })),
      edges: [{ from: "a", to: "b" }, { from: "a", to: "c" }, { from: "b", to: "d", when }, { from: "c", to: "d", when }, { from: "d", to: "e", when }],
    });
    const compiled = compilePipeline(diamond, stepOf, env);
    const bitOf: Record<string, number> = { b: 0, c: 1, d: 2 }; // conditional edges in order: b→d, c→d, d→e
    for (let mask = 0; mask < 8; mask++) {
      const run = new PipelineRun(compiled, { input: image }, {});
      const rounds = drive(run, (t) => ({ outputs: { probabilities: { name: "probabilities", datatype: "FP32", shape: [1], data: Float32Array.of(t.stage in bitOf ? (mask >> bitOf[t.stage]!) & 1 : 0) } } }));
      expect(Object.keys(run.visits()).sort(), `mask ${mask}`).toEqual([...pipelineRoute(specToPipeline(diamond), mask).visited].sort());
      // b and c run side by side, as soon as a is done.
      expect(rounds[1]).toEqual([{ stage: "b", item: null }, { stage: "c", item: null }]);
    }
  });

  it("pipeline run - fan-out: each item takes its own conditional edges; the join gathers every item", () => {
    const compiled = compilePipeline(spec(perItem), stepOf, env);
    const batch: Tensor = { name: "batch", datatype: "FP32", shape: [3, 1, 28, 28], data: new Float32Array(3 * 784) };
    const run = new PipelineRun(compiled, { batch }, { threshold: 0.9 });
    const row = (i: number): Tensor => ({ name: "x", datatype: "FP32", shape: [1, 1, 28, 28], data: new Float32Array(784).fill(i) });
    const rounds = drive(run, (t): StageResult => {
      if (t.stage === "split") return { items: [0, 1, 2].map((i) => ({ x: row(i) })) };
      if (t.stage === "fast") return { outputs: { probabilities: probs(t.item === 1 ? 0.97 : 0.5) } }; // only item 1 is sure
      if (t.stage === "accurate") return { outputs: { probabilities: probs(0.99) } };
      const x = run.inputsOf(t)["x"] as Array<Tensor | null>;
      expect(x.map((p) => p?.data[3])).toEqual([expect.closeTo(0.99, 6), expect.closeTo(0.97, 6), expect.closeTo(0.99, 6)]);
      expect(x.every((p) => p?.name === "x")).toBe(true);
      return { outputs: { x: { name: "x", datatype: "FP32", shape: [3, 10], data: new Float32Array(30) } } };
    });
    expect(rounds).toEqual([
      [{ stage: "split", item: null }],
      [{ stage: "fast", item: 0 }, { stage: "fast", item: 1 }, { stage: "fast", item: 2 }],
      [{ stage: "accurate", item: 0 }, { stage: "accurate", item: 2 }],
      [{ stage: "join", item: null }],
    ]);
    expect(run.inputsOf({ stage: "accurate", item: 2 })["input"]).toEqual({ ...row(2), name: "input" });
    expect(run.visits()).toEqual({ split: 1, fast: 3, accurate: 2, join: 1 });
    expect(run.outputs().map((o) => [o.stage, o.output.name, (o.output as Tensor).shape])).toEqual([["join", "probabilities", [3, 10]]]);

    // No items: the join runs at once, with empty lists.
    const empty = new PipelineRun(compiled, { batch }, { threshold: 0.9 });
    const emptyRounds = drive(empty, (t): StageResult => (t.stage === "split" ? { items: [] } : { outputs: { x: { name: "x", datatype: "FP32", shape: [0], data: new Float32Array(0) } } }));
    expect(emptyRounds).toEqual([[{ stage: "split", item: null }], [{ stage: "join", item: null }]]);
  });

  it("pipeline run - without spec outputs, the answer is what the stages where the query ended gave", () => {
    const compiled = compilePipeline(spec({ ...cascade, outputs: undefined }), stepOf, env);
    const run = new PipelineRun(compiled, { input: image }, { threshold: 0.9 });
    drive(run, (t) => ({ outputs: { probabilities: probs(t.stage === "fast" ? 0.5 : 0.99) } }));
    expect(run.outputs().map((o) => [o.stage, o.output.name])).toEqual([["accurate", "probabilities"]]);
  });

  it("pipeline run - conditions reduce a tensor to one number", () => {
    const logits: Tensor = { name: "l", datatype: "FP32", shape: [1, 3], data: Float32Array.of(0, Math.log(2), Math.log(7)) };
    // softmax = [1, 2, 7] / 10 → top 0.7; argmax 2; mean (0 + ln 2 + ln 7) / 3.
    expect(reduceTensor(logits, "max_softmax")).toBeCloseTo(0.7, 6);
    expect(reduceTensor(logits, "argmax")).toBe(2);
    expect(reduceTensor(logits, "count")).toBe(3);
    expect(reduceTensor(logits, "mean")).toBeCloseTo((Math.log(2) + Math.log(7)) / 3, 6);
    expect(evaluateCondition({ output: "l", reduce: "argmax", op: "==", value: 2 }, logits, {})).toBe(true);
    expect(evaluateCondition({ output: "l", reduce: "max_softmax", op: ">=", value: "$t" }, logits, { t: 0.8 })).toBe(false);
    expect(reduceTensor({ name: "e", datatype: "FP32", shape: [0], data: new Float32Array(0) }, "max")).toBeNaN();
    // A step's number or boolean reads as a one-element tensor; other objects cannot drive a condition.
    expect(evaluateCondition({ output: "s", reduce: "max", op: "<", value: 0.9 }, { name: "s", object: 0.5 }, {})).toBe(true);
    expect(evaluateCondition({ output: "b", reduce: "first", op: "==", value: 1 }, { name: "b", object: true }, {})).toBe(true);
    expect(() => reduceTensor({ name: "t", object: "text" }, "max")).toThrow("a condition cannot read 't': it is neither a tensor, a number nor a boolean");
  });
});
