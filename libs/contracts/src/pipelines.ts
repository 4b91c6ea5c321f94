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

/**
 * One of the pipeline's inputs: a tensor spec; an input that takes a file (UINT8 [-1], its bytes) may
 * list the media types it accepts as an HTTP body (`POST /v1/pipelines/{name}/infer` with
 * `Content-Type: image/png` and the file as the body), e.g. the OCR pipeline's image.
 */
export const pipelineInputSchema = tensorSpecSchema
  .extend({
    content_types: z
      .array(z.string().regex(/^[a-z0-9][a-z0-9.+-]*\/[a-z0-9][a-z0-9.+-]*$/, "a media type is '<type>/<subtype>' in lower case, e.g. image/png"))
      .min(1)
      .max(16)
      .optional(),
  })
  .superRefine((i, ctx) => {
    if (i.content_types && !(i.datatype === "UINT8" && i.shape.length === 1 && i.shape[0] === -1)) {
      ctx.addIssue({ code: "custom", message: `input ${i.name}: content_types apply to an input that takes a file's bytes (UINT8 [-1]), not ${i.datatype} [${i.shape.join(", ")}]` });
    }
  });
export type PipelineInputSpec = z.infer<typeof pipelineInputSchema>;

export const pipelineSpecSchema = z.strictObject({
  name: pipelineNameSchema,
  description: z.string().max(2000).optional(),
  slo: z.strictObject({ p99_ms: z.number().positive().max(3_600_000) }),
  params: z.record(paramNameSchema, pipelineParamValueSchema).default({}),
  /** The pipeline's inputs; @default derived from the model stages that read "input.<name>". */
  inputs: z.array(pipelineInputSchema).max(64).optional(),
  stages: z.array(pipelineStageSchema).min(1).max(64),
  edges: z.array(pipelineEdgeSchema).max(256).default([]),
  /** The answer's outputs: name → reference(s); @default every output of the stages where the query ended. */
  outputs: z.record(z.string().min(1).max(256), stageRefsSchema).optional(),
  /**
   * The planner's sample trace until live traffic replaces it (InferLine §4.3): Gamma arrivals at
   * `rate_qps` with inter-arrival CV `cv` (σ/μ; 1 is Poisson). `cv` also shapes the traces rebuilt from
   * live per-second counts. @default a plan for 1 query per second, CV 1
   */
  planning: z.strictObject({ rate_qps: z.number().positive().max(1_000_000), cv: z.number().min(0).max(10).default(1) }).optional(),
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
  /**
   * This window: per stage, the items that reached it, summed over queries (above `visits` behind a
   * fan-out: one query, many items). Absent from reports of dispatchers that predate it.
   */
  items: z.record(z.string(), z.number().int().nonnegative()).optional(),
  /**
   * The arrival process: queries received this window (profiling ones aside), counted by the second in
   * which they arrived — key: that second's start, epoch ms, as a string; arrival: `x-received-ms` (the
   * frontend's receipt), else the dispatcher's. Unlike `queries` (answered in the window), a stall does
   * not bunch them. Absent from reports of dispatchers that predate it.
   */
  arrivals: z.record(z.string(), z.number().int().nonnegative()).optional(),
  /** Since this dispatcher started: queries, misses, and per stage the share of queries that visited it (s_m). */
  totalQueries: z.number().int().nonnegative(),
  totalMisses: z.number().int().nonnegative(),
  shares: z.record(z.string(), z.number().min(0).max(1)),
  /** P99 latency over the last (up to) 1000 queries, ms. */
  recentP99Ms: z.number().nonnegative().nullable(),
});
export type PipelineReport = z.infer<typeof pipelineReportSchema>;

/** One stage of a pipeline's deployment as the planner or the tuner set it (InferLine's control parameters). */
export const pipelineStagePlanSchema = z.object({
  model: z.string(),
  /** The variant chosen: its hardware, threads and max batch are the plan's hardware and batch size. */
  variant: z.string(),
  hardware: z.string(),
  maxBatch: z.number().int().positive(),
  replicas: z.number().int().nonnegative(),
  /** Share of queries that reach the stage × items per visit (InferLine's s_m; above 1 behind a fan-out). */
  scaleFactor: z.number().nonnegative(),
});
export type PipelineStagePlan = z.infer<typeof pipelineStagePlanSchema>;

/**
 * The pipeline controller's current view of a pipeline (services/model-autoscaler pipelines.ts), kept in
 * Redis and shown by `GET /v1/pipelines/{name}` as `plan`: planned (stages with their variant and
 * replicas), infeasible (the reason names the stage that cannot fit) or waiting (e.g. for profiles).
 */
export const pipelinePlanStatusSchema = z.object({
  pipeline: z.string(),
  state: z.enum(["planned", "infeasible", "waiting"]),
  reason: z.string(),
  atMs: z.number(),
  stages: z.record(z.string(), pipelineStagePlanSchema).default({}),
  /** The Estimator's P99 for the planning trace under the plan, ms; null when not planned. */
  estimatedP99Ms: z.number().nullable().default(null),
  costPerHour: z.number().nullable().default(null),
  /** Where the scale factors came from: the spec's expected shares, a sample run, or live counts. */
  scaleFactorSource: z.enum(["spec", "sample", "live"]).default("spec"),
  /** The planning trace: declared (the spec's `planning`) or live (recent arrivals); its mean rate and length. */
  trace: z.object({ source: z.enum(["declared", "live"]), qps: z.number(), cv: z.number(), seconds: z.number() }).nullable().default(null),
  /** Stages the plan does not scale (steps run in the dispatcher; app stages are INFaaS's), with why. */
  unplanned: z.record(z.string(), z.string()).default({}),
});
export type PipelinePlanStatus = z.infer<typeof pipelinePlanStatusSchema>;

/**
 * A pipeline controller's decision on `decision.pipeline.<name>`: a plan (the Planner, at registration
 * and periodically), a Tuner scale-up or scale-down, or why there is no plan (infeasible, waiting).
 */
export const pipelineDecisionSchema = z.object({
  pipeline: z.string(),
  source: z.enum(["planner", "tuner"]),
  decision: z.enum(["plan", "scale-up", "scale-down", "infeasible", "waiting", "removed"]),
  reason: z.string(),
  /** The stages after the decision. */
  stages: z.record(z.string(), pipelineStagePlanSchema).default({}),
  /** Replicas per stage before it (tuner decisions and re-plans). */
  previous: z.record(z.string(), z.number().int().nonnegative()).default({}),
  atMs: z.number(),
});
export type PipelineDecision = z.infer<typeof pipelineDecisionSchema>;
