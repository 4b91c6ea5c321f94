import { z } from "zod";
import { tensorSpecSchema } from "./schemas.js";

/**
 * Pipeline specs (InferLine §2-3; DESIGN §3 "Pipelines"): what a user registers on
 * `POST /v1/pipelines/{name}` or `registry.request.pipeline.register`, validated here for its shape and
 * in libs/policy `checkPipelineSpec` for its meaning (models exist, no cycle, references resolve).
 *
 * A pipeline is a DAG of stages. A stage is a model (`model`), a model-less app with requirements
 * (`app`, INFaaS) or a built-in processing step (`step`, e.g. OCR's image decoding; the dispatcher's step
 * registry lists them). Each stage names where each of its inputs comes from: `"input.<name>"` (the
 * pipeline's input) or `"<stage>.<output>"` (an upstream stage's output), or a list of such references,
 * the first one whose stage ran giving the value. An edge may carry a condition (`when`) evaluated on an
 * output of its source stage at run time: the edge is taken only when it holds (InferLine's conditional
 * edge; `expected_share` is the planner's guess of how often, s_m). A step of kind "fan_out" turns one
 * result into many items; the stages after it run once per item until a step of kind "join" gathers
 * them. `slo.p99_ms` is the end-to-end latency objective.
 *
 * Example (the bundled cascade, libs/stack `digitsCascadeSpec`):
 *
 *   { "name": "digits-cascade", "slo": { "p99_ms": 200 }, "params": { "threshold": 0.9 },
 *     "stages": [ { "name": "fast", "model": "digits-mlp-s" }, { "name": "accurate", "model": "digits-cnn-m" } ],
 *     "edges": [ { "from": "fast", "to": "accurate", "expected_share": 0.25,
 *                  "when": { "output": "probabilities", "reduce": "max", "op": "<", "value": "$threshold" } } ],
 *     "outputs": { "probabilities": ["accurate.probabilities", "fast.probabilities"] } }
 */

const NAME_PATTERN = /^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$/;
const NAME_HINT = "use 1-64 letters, digits, '_' or '-', starting with a letter or digit";

export const pipelineNameSchema = z.string().regex(NAME_PATTERN, NAME_HINT);
/** Stage names become parts of references ("<stage>.<output>"): no dots. "input" is the pipeline's inputs. */
export const stageNameSchema = z
  .string()
  .regex(NAME_PATTERN, NAME_HINT)
  .refine((s) => s !== "input", "'input' is reserved for the pipeline's inputs");

/** "<stage>.<output>" or "input.<name>"; the stage is everything before the first dot. */
export const stageRefSchema = z
  .string()
  .max(300)
  .regex(/^[A-Za-z0-9][A-Za-z0-9_-]{0,63}\..+$/, 'a reference is "<stage>.<output>" or "input.<name>"');
/** One reference, or alternatives in order of preference (the first whose stage ran). */
export const stageRefsSchema = z.union([stageRefSchema, z.array(stageRefSchema).min(1).max(16)]);
export type StageRefs = z.infer<typeof stageRefsSchema>;

/** A pipeline parameter's value; referenced as "$name" in conditions and step params. */
export const pipelineParamValueSchema = z.union([z.number(), z.string().max(1000), z.boolean()]);
export type PipelineParamValue = z.infer<typeof pipelineParamValueSchema>;
const paramNameSchema = z.string().regex(/^[A-Za-z_][A-Za-z0-9_]{0,63}$/, "parameter names are 1-64 letters, digits or '_', not starting with a digit");
export const paramRefSchema = z.string().regex(/^\$[A-Za-z_][A-Za-z0-9_]{0,63}$/, 'a parameter reference is "$<name>"');

/** How a tensor is reduced to one number for a condition. */
export const CONDITION_REDUCERS = ["max", "min", "mean", "sum", "first", "argmax", "max_softmax", "count"] as const;
export const CONDITION_OPS = ["<", "<=", ">", ">=", "==", "!="] as const;

/**
 * A run-time condition on an output of the edge's source stage: `reduce(tensor) op value`, e.g. the top
 * class probability below a threshold. Reducers run over every element of the tensor (a pipeline query
 * carries one item; send one row per query for per-row decisions); `max_softmax` applies a softmax over
 * the last axis first (for models that output logits); `count` is the number of elements.
 */
export const edgeConditionSchema = z.strictObject({
  output: z.string().min(1).max(256),
  reduce: z.enum(CONDITION_REDUCERS).default("max"),
  op: z.enum(CONDITION_OPS),
  value: z.union([z.number(), paramRefSchema]),
});
export type EdgeCondition = z.infer<typeof edgeConditionSchema>;

const requirementsSchema = z.strictObject({
  /** Latency SLO of this stage's model-less query, ms. @default what is left of the pipeline's budget */
  latency_ms: z.number().positive().max(3_600_000).optional(),
  min_accuracy: z.number().min(0).max(1).default(0),
  max_cost: z.number().positive().optional(),
});

export const pipelineStageSchema = z
  .strictObject({
    name: stageNameSchema,
    /** A registered model, queried on `infer.model.<model>`. */
    model: pipelineNameSchema.optional(),
    /** A model-less app, queried on `infer.app.<app>` with `requirements` (INFaaS picks the variant). */
    app: pipelineNameSchema.optional(),
    requirements: requirementsSchema.optional(),
    /** A built-in processing step (the dispatcher's step registry). */
    step: z.string().min(1).max(64).optional(),
    /** The step's parameters; string values "$name" take the pipeline parameter `name`. */
    params: z.record(z.string().max(64), z.unknown()).optional(),
    /** This stage's input name → where its value comes from. @default each model input <n> from "input.<n>" */
    inputs: z.record(z.string().min(1).max(256), stageRefsSchema).optional(),
  })
  .superRefine((s, ctx) => {
    const kinds = [s.model !== undefined, s.app !== undefined, s.step !== undefined].filter(Boolean).length;
    if (kinds !== 1) ctx.addIssue({ code: "custom", message: `stage ${s.name} must name exactly one of model, app or step` });
    if (s.requirements && s.app === undefined) ctx.addIssue({ code: "custom", message: `stage ${s.name}: requirements apply to app stages only` });
    if (s.params && s.step === undefined) ctx.addIssue({ code: "custom", message: `stage ${s.name}: params apply to step stages only` });
  });
export type PipelineStageSpec = z.infer<typeof pipelineStageSchema>;

export const pipelineEdgeSchema = z
  .strictObject({
    from: stageNameSchema,
    to: stageNameSchema,
    /** Taken only when this holds on the source's output (a conditional edge). */
    when: edgeConditionSchema.optional(),
    /** The planner's estimate of how often a conditional edge is taken, in (0, 1). @default 0.5 */
    expected_share: z.number().gt(0).lt(1).optional(),
  })
  .superRefine((e, ctx) => {
    if (e.expected_share !== undefined && !e.when) ctx.addIssue({ code: "custom", message: `edge ${e.from} → ${e.to}: expected_share applies to conditional edges (with "when") only` });
  });
export type PipelineEdgeSpec = z.infer<typeof pipelineEdgeSchema>;

export const pipelineSpecSchema = z.strictObject({
  name: pipelineNameSchema,
  description: z.string().max(2000).optional(),
  slo: z.strictObject({ p99_ms: z.number().positive().max(3_600_000) }),
  params: z.record(paramNameSchema, pipelineParamValueSchema).default({}),
  /** The pipeline's inputs; @default derived from the model stages that read "input.<name>". */
  inputs: z.array(tensorSpecSchema).max(64).optional(),
  stages: z.array(pipelineStageSchema).min(1).max(64),
  edges: z.array(pipelineEdgeSchema).max(256).default([]),
  /** The answer's outputs: name → reference(s); @default every output of the stages where the query ended. */
  outputs: z.record(z.string().min(1).max(256), stageRefsSchema).optional(),
});
export type PipelineSpec = z.infer<typeof pipelineSpecSchema>;
/** A spec as a user writes it (defaults not yet applied). */
export type PipelineSpecInput = z.input<typeof pipelineSpecSchema>;

/** What the store keeps and the registry announces. */
export const pipelineRecordSchema = z.object({
  spec: pipelineSpecSchema,
  registeredAtMs: z.number(),
});
export type PipelineRecord = z.infer<typeof pipelineRecordSchema>;

/** `registry.request.pipeline.register` body. */
export const registerPipelineRequestSchema = z.object({ spec: z.unknown() });
/** `registry.request.pipeline.unregister` body. */
export const unregisterPipelineRequestSchema = z.object({ pipeline: z.string() });

/** Published every second on `metrics.pipeline.<name>` by each dispatcher that ran the pipeline. */
export const pipelineReportSchema = z.object({
  pipeline: z.string(),
  dispatcher: z.string(),
  atMs: z.number(),
  windowMs: z.number().nonnegative(),
  sloMs: z.number().positive(),
  /** This window: queries answered, those answered after the SLO, failed ones; latency percentiles. */
  queries: z.number().int().nonnegative(),
  misses: z.number().int().nonnegative(),
  errors: z.number().int().nonnegative(),
  latencyP50Ms: z.number().nonnegative().nullable(),
  latencyP99Ms: z.number().nonnegative().nullable(),
  /** This window: per stage, the queries that visited it. */
  visits: z.record(z.string(), z.number().int().nonnegative()),
  /** Since this dispatcher started: queries, misses, and per stage the share of queries that visited it (s_m). */
  totalQueries: z.number().int().nonnegative(),
  totalMisses: z.number().int().nonnegative(),
  shares: z.record(z.string(), z.number().min(0).max(1)),
  /** P99 latency over the last (up to) 1000 queries, ms. */
  recentP99Ms: z.number().nonnegative().nullable(),
});
export type PipelineReport = z.infer<typeof pipelineReportSchema>;
