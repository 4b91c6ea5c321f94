/**
 * Pipeline specs, checked and compiled for live execution (InferLine §2-3, DESIGN §3 "Pipelines").
 *
 * A spec (libs/contracts `PipelineSpec`) names stages (models, model-less apps, built-in steps), edges
 * (some conditional, decided at run time by an output of their source) and an end-to-end P99 SLO.
 * `checkPipelineSpec` lists every problem of a spec against what exists (models, apps, steps), in a
 * stable order, each naming the stage, edge or reference at fault. `compilePipeline` turns a valid spec
 * into the route graphs the run follows (pipeline-run.ts), which are plain {@link Pipeline}s: the live
 * run decides where a query goes with `pipelineRoute`, the rule the Estimator and the simulator follow.
 *
 * Fan-out and join. A step of kind "fan_out" returns items (e.g. one crop per detected text box); the
 * stages reachable from it up to a step of kind "join" form its *region* and run once per item, each
 * item with its own conditional edges; the join runs once, after every item has finished, with each of
 * its inputs as the list over items. The run keeps one route graph for the query (the stages outside
 * regions, with an edge fan-out → join standing for the region) and one per region (the fan-out as the
 * root, then the region's stages), each routed by `pipelineRoute` with its own conditional-edge mask.
 * Restrictions: no fan-out inside a region; a region's stages take edges only from the fan-out or from
 * each other (they read earlier outputs through input references); every region stage leads to a join;
 * no condition on an edge into a join; the answer's outputs come from stages outside regions.
 *
 * `specToPipeline` gives the whole DAG with each conditional edge's `expected_share` as its probability,
 * for the planner and the tuner (fan-outs are not modelled there: a region's stages count once per query).
 *
 * Caveat (live vs. estimator): a stage waits for all its parents to settle, as it can only know whether
 * a conditional edge into it is taken once the edge's source has run; the estimator, which draws the
 * edges before the query starts, lets it start once its taken parents are done.
 */
import type { EdgeCondition, PipelineParamValue, PipelineSpec, StageRefs, TensorSpec } from "@sloserve/contracts";
import { topologicalOrder, type Pipeline, type PipelineEdge } from "./pipeline.js";

export type StepKind = "map" | "fan_out" | "join";

/** What validation needs to know of a built-in step (the dispatcher's step registry holds the code). */
export interface StepDescriptor {
  name: string;
  kind: StepKind;
  description: string;
  /** Input names the step needs, or "any" (one or more inputs of any name). */
  inputs: readonly string[] | "any";
  /** Inputs it reads when given. */
  optionalInputs?: readonly string[];
  /** Output names (of each item, for a fan-out). */
  outputs: readonly string[];
  /** Checks the stage's params (pipeline parameters substituted); a message naming the problem, or undefined. */
  checkParams?(params: Readonly<Record<string, unknown>>): string | undefined;
}

/** A model's (or an app's) signature, as validation sees it. */
export interface SignatureView {
  inputs: readonly TensorSpec[];
  outputs: readonly TensorSpec[];
}

/** What exists: looked up while checking a spec. */
export interface PipelineEnvironment {
  model(name: string): SignatureView | undefined;
  /** An app's signature (its models share their inputs; outputs of its first model). */
  app(name: string): SignatureView | undefined;
  step(name: string): StepDescriptor | undefined;
  /** Every step name, for messages. */
  stepNames(): readonly string[];
}

/** "input" for the pipeline's inputs, else a stage. */
export interface StageRef {
  stage: string;
  output: string;
}

export interface CompiledStage {
  name: string;
  kind: "model" | "app" | "step";
  /** The model, app or step name. */
  target: string;
  /** The step's kind; null for model and app stages. */
  stepKind: StepKind | null;
  /** Input name → references, in order of preference. */
  inputs: Readonly<Record<string, readonly StageRef[]>>;
  /** The fan-out whose items this stage runs for; null outside regions (the fan-out itself is outside). */
  region: string | null;
  /** For a join: the fan-out it gathers. */
  gathers: string | null;
}

/** A route graph: a Pipeline for `pipelineRoute`, with the condition of each of its edges. */
export interface RouteGraph {
  pipeline: Pipeline;
  /** Per edge of `pipeline.edges`: its condition; undefined when unconditional. */
  conditions: ReadonlyArray<EdgeCondition | undefined>;
  /** Per edge: its bit in `pipelineRoute`'s mask (its index among the conditional edges), or -1. */
  bits: readonly number[];
  /** Per stage: the sources of its edges in this graph. */
  parents: Readonly<Record<string, readonly string[]>>;
}

export interface CompiledPipeline {
  spec: PipelineSpec;
  stages: ReadonlyMap<string, CompiledStage>;
  /** The stages outside regions, with an edge fan-out → join for each region. */
  global: RouteGraph;
  /** Per fan-out: the fan-out (root) and its region's stages. */
  regions: ReadonlyMap<string, RouteGraph>;
  /** The answer's outputs (spec.outputs), or null: every output of the stages where the query ended. */
  outputs: ReadonlyArray<{ name: string; refs: readonly StageRef[] }> | null;
}

/** A conditional edge's probability for the planner when the spec gives none. */
export const DEFAULT_EXPECTED_SHARE = 0.5;
/** Most conditional edges in a route graph (`pipelineRoute` masks are 32-bit; InferLine's scale factors enumerate them). */
export const MAX_CONDITIONAL_EDGES = 20;

const arrow = (from: string, to: string): string => `${from} → ${to}`;

export function parseRef(ref: string): StageRef {
  const dot = ref.indexOf(".");
  return { stage: ref.slice(0, dot), output: ref.slice(dot + 1) };
}

export function refText(r: StageRef): string {
  return `${r.stage}.${r.output}`;
}

function refList(refs: StageRefs): StageRef[] {
  return (Array.isArray(refs) ? refs : [refs]).map(parseRef);
}

/** The whole DAG as a Pipeline (conditional edges at their expected share): for the planner, the estimator and the tuner. */
export function specToPipeline(spec: PipelineSpec): Pipeline {
  return {
    name: spec.name,
    models: spec.stages.map((s) => s.name),
    edges: spec.edges.map((e) => (e.when ? { from: e.from, to: e.to, probability: e.expected_share ?? DEFAULT_EXPECTED_SHARE } : { from: e.from, to: e.to })),
  };
}

function kindOf(s: PipelineSpec["stages"][number]): { kind: CompiledStage["kind"]; target: string } {
  if (s.model !== undefined) return { kind: "model", target: s.model };
  if (s.app !== undefined) return { kind: "app", target: s.app };
  return { kind: "step", target: s.step ?? "" };
}

function describeStage(s: { name: string; kind: CompiledStage["kind"]; target: string }): string {
  return `stage ${s.name} (${s.kind} ${s.target})`;
}

function routeGraph(name: string, stages: readonly string[], edges: ReadonlyArray<{ from: string; to: string; when?: EdgeCondition | undefined; expected_share?: number | undefined }>): RouteGraph {
  const pipelineEdges: PipelineEdge[] = [];
  const conditions: Array<EdgeCondition | undefined> = [];
  const bits: number[] = [];
  let nextBit = 0;
  const parents: Record<string, string[]> = Object.fromEntries(stages.map((s) => [s, []]));
  for (const e of edges) {
    pipelineEdges.push(e.when ? { from: e.from, to: e.to, probability: e.expected_share ?? DEFAULT_EXPECTED_SHARE } : { from: e.from, to: e.to });
    conditions.push(e.when);
    bits.push(e.when ? nextBit++ : -1);
    parents[e.to]?.push(e.from);
  }
  return { pipeline: { name, models: [...stages], edges: pipelineEdges }, conditions, bits, parents };
}

interface Analysis {
  problems: string[];
  compiled?: CompiledPipeline;
}

/**
 * The structure of a spec: names, edges, cycle, regions, references and conditions between stages, and
 * the route graphs. Needs only the steps (their kinds and outputs); model outputs are checked by
 * {@link checkPipelineSpec}.
 */
function analyse(spec: PipelineSpec, step: (name: string) => StepDescriptor | undefined): Analysis {
  const problems: string[] = [];
  const stages = new Map<string, CompiledStage>();
  for (const s of spec.stages) {
    if (stages.has(s.name)) {
      problems.push(`stage ${s.name} is declared twice`);
      continue;
    }
    const { kind, target } = kindOf(s);
    const descriptor = kind === "step" ? step(target) : undefined;
    const inputs: Record<string, StageRef[]> = {};
    for (const [input, refs] of Object.entries(s.inputs ?? {})) inputs[input] = refList(refs);
    stages.set(s.name, { name: s.name, kind, target, stepKind: descriptor?.kind ?? (kind === "step" ? "map" : null), inputs, region: null, gathers: null });
  }
  const seenEdges = new Set<string>();
  for (const e of spec.edges) {
    const key = arrow(e.from, e.to);
    if (!stages.has(e.from)) problems.push(`edge ${key}: unknown stage ${e.from}`);
    if (!stages.has(e.to)) problems.push(`edge ${key}: unknown stage ${e.to}`);
    if (e.from === e.to) problems.push(`edge ${key}: a stage cannot feed itself`);
    if (seenEdges.has(key)) problems.push(`edge ${key} is declared twice`);
    seenEdges.add(key);
  }
  if (problems.length > 0) return { problems };
  const whole = specToPipeline(spec);
  try {
    topologicalOrder(whole);
  } catch {
    return { problems: [`the edges form a cycle through stages ${stagesOnCycles(whole).join(", ")}`] };
  }
  const children = new Map<string, string[]>([...stages.keys()].map((s) => [s, []]));
  for (const e of spec.edges) children.get(e.from)!.push(e.to);

  // Regions: from each fan-out, every stage reachable without passing a join.
  const order = topologicalOrder(whole);
  for (const f of order) {
    const fan = stages.get(f)!;
    if (fan.stepKind !== "fan_out") continue;
    if (fan.region !== null) {
      problems.push(`${describeStage(fan)} fans out inside the fan-out of ${fan.region}: nested fan-outs are not supported`);
      continue;
    }
    const queue = [...children.get(f)!];
    const joins: string[] = [];
    while (queue.length > 0) {
      const c = queue.shift()!;
      const st = stages.get(c)!;
      if (st.stepKind === "join") {
        if (st.gathers !== null && st.gathers !== f) problems.push(`${describeStage(st)} gathers two fan-outs (${st.gathers}, ${f}): a join gathers one`);
        else if (st.gathers === null) {
          st.gathers = f;
          joins.push(c);
        }
        continue;
      }
      if (st.region === f) continue;
      if (st.region !== null) {
        problems.push(`stage ${c} is reached from two fan-outs (${st.region}, ${f})`);
        continue;
      }
      st.region = f;
      queue.push(...children.get(c)!);
    }
    if (joins.length === 0) problems.push(`${describeStage(fan)} fans out, but no join gathers its items: add a join step after it`);
  }
  for (const st of stages.values()) {
    if (st.stepKind === "join" && st.gathers === null) problems.push(`${describeStage(st)} is a join but gathers no fan-out: put it after a fan-out step`);
    if (st.region !== null && children.get(st.name)!.length === 0) problems.push(`stage ${st.name} runs once per item of fan-out ${st.region}, but no join gathers it: add an edge to a join`);
  }
  for (const e of spec.edges) {
    const from = stages.get(e.from)!;
    const to = stages.get(e.to)!;
    if (to.region !== null && from.name !== to.region && from.region !== to.region) {
      problems.push(`edge ${arrow(e.from, e.to)} enters the fan-out of ${to.region} from outside: a stage that runs per item takes edges only from the fan-out or from stages after it (read ${e.from}'s outputs with an input reference instead)`);
    }
    if (to.gathers !== null && e.when) problems.push(`edge ${arrow(e.from, e.to)}: a condition on an edge into a join is not supported`);
  }
  if (problems.length > 0) return { problems };

  // Route graphs.
  const globalStages = spec.stages.map((s) => s.name).filter((s) => stages.get(s)!.region === null);
  const globalEdges: Array<{ from: string; to: string; when?: EdgeCondition; expected_share?: number }> = spec.edges.filter(
    (e) => stages.get(e.from)!.region === null && stages.get(e.to)!.region === null,
  );
  for (const st of stages.values()) {
    if (st.gathers !== null && !globalEdges.some((e) => e.from === st.gathers && e.to === st.name)) globalEdges.push({ from: st.gathers, to: st.name });
  }
  const graphs = new Map<string, RouteGraph>();
  const global = routeGraph(spec.name, globalStages, globalEdges);
  for (const f of order) {
    if (stages.get(f)!.stepKind !== "fan_out") continue;
    const members = order.filter((s) => stages.get(s)!.region === f);
    const inRegion = new Set([f, ...members]);
    graphs.set(f, routeGraph(`${spec.name}/${f}`, [f, ...members], spec.edges.filter((e) => inRegion.has(e.from) && stages.get(e.to)!.region === f)));
  }
  for (const [name, g] of [["the pipeline", global] as const, ...[...graphs].map(([f, g]) => [`the fan-out of ${f}`, g] as const)]) {
    const n = g.bits.filter((b) => b >= 0).length;
    if (n > MAX_CONDITIONAL_EDGES) problems.push(`${name} has ${n} conditional edges; at most ${MAX_CONDITIONAL_EDGES}`);
  }

  // References between stages: upstream, and per item only within the same fan-out.
  const ancestors = ancestorSets(order, spec.edges);
  const checkRef = (where: string, consumer: CompiledStage, r: StageRef): void => {
    if (r.stage === "input") return;
    const source = stages.get(r.stage);
    if (!source) return void problems.push(`${where} refers to unknown stage ${r.stage}`);
    if (!ancestors.get(consumer.name)!.has(r.stage)) return void problems.push(`${where} refers to stage ${r.stage}, which is not upstream of ${consumer.name} (add an edge)`);
    const perItem = source.region !== null || source.stepKind === "fan_out";
    const fan = source.region ?? source.name;
    if (perItem && consumer.region !== fan && consumer.gathers !== fan) {
      problems.push(`${where} refers to ${r.stage}, which runs once per item of fan-out ${fan}: only stages after ${fan} or its join can read it`);
    }
  };
  for (const st of stages.values()) {
    for (const [input, refs] of Object.entries(st.inputs)) for (const r of refs) checkRef(`stage ${st.name}: input '${input}'`, st, r);
  }
  const outputs = spec.outputs ? Object.entries(spec.outputs).map(([name, refs]) => ({ name, refs: refList(refs) })) : null;
  for (const o of outputs ?? []) {
    for (const r of o.refs) {
      if (r.stage === "input") continue;
      const source = stages.get(r.stage);
      if (!source) problems.push(`output '${o.name}' refers to unknown stage ${r.stage}`);
      else if (source.region !== null || source.stepKind === "fan_out") problems.push(`output '${o.name}' refers to ${r.stage}, which runs once per item of fan-out ${source.region ?? source.name}: answer with its join's outputs`);
    }
  }
  if (problems.length > 0) return { problems };
  return { problems, compiled: { spec, stages, global, regions: graphs, outputs } };
}

/** Stages that lie on a cycle (each reaches itself), in declaration order. */
function stagesOnCycles(p: Pipeline): string[] {
  const next = new Map(p.models.map((m) => [m, p.edges.filter((e) => e.from === m).map((e) => e.to)]));
  return p.models.filter((m) => {
    const seen = new Set<string>();
    const stack = [...(next.get(m) ?? [])];
    while (stack.length > 0) {
      const x = stack.pop()!;
      if (x === m) return true;
      if (seen.has(x)) continue;
      seen.add(x);
      stack.push(...(next.get(x) ?? []));
    }
    return false;
  });
}

function ancestorSets(order: readonly string[], edges: ReadonlyArray<{ from: string; to: string }>): Map<string, Set<string>> {
  const out = new Map<string, Set<string>>();
  for (const s of order) {
    const set = new Set<string>();
    for (const e of edges) {
      if (e.to !== s) continue;
      set.add(e.from);
      for (const a of out.get(e.from) ?? []) set.add(a);
    }
    out.set(s, set);
  }
  return out;
}

/** The names a stage reads from "input.<name>" references (and, for model/app stages without a mapping, its inputs). */
function stageInputMap(s: PipelineSpec["stages"][number], signature: SignatureView | undefined): Record<string, StageRef[]> {
  if (s.inputs) return Object.fromEntries(Object.entries(s.inputs).map(([k, v]) => [k, refList(v)]));
  if (signature && (s.model !== undefined || s.app !== undefined)) return Object.fromEntries(signature.inputs.map((i) => [i.name, [{ stage: "input", output: i.name }]]));
  return {};
}

function outputsOf(stage: CompiledStage, env: PipelineEnvironment): readonly string[] | undefined {
  if (stage.kind === "model") return env.model(stage.target)?.outputs.map((o) => o.name);
  if (stage.kind === "app") return env.app(stage.target)?.outputs.map((o) => o.name);
  return env.step(stage.target)?.outputs;
}

function paramProblem(where: string, value: unknown, params: Readonly<Record<string, PipelineParamValue>>, numeric: boolean): string | undefined {
  if (typeof value !== "string" || !value.startsWith("$")) return undefined;
  const name = value.slice(1);
  const declared = Object.keys(params);
  if (!(name in params)) return `${where}: ${value} names no pipeline parameter; declared: ${declared.length > 0 ? declared.join(", ") : "none"}`;
  if (numeric && typeof params[name] !== "number") return `${where}: parameter ${name} is ${JSON.stringify(params[name])}, not a number`;
  return undefined;
}

/** Replaces "$name" string values with the pipeline parameter `name`. */
export function substituteParams(values: Readonly<Record<string, unknown>>, params: Readonly<Record<string, PipelineParamValue>>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(values)) out[k] = typeof v === "string" && v.startsWith("$") && v.slice(1) in params ? params[v.slice(1)] : v;
  return out;
}

/**
 * Every problem of a spec, in a stable order (structure first, then what each stage needs); empty when
 * it can be registered. Each message names the stage, edge, reference or output at fault.
 */
export function checkPipelineSpec(spec: PipelineSpec, env: PipelineEnvironment): string[] {
  const problems: string[] = [];
  for (const s of spec.stages) {
    const { kind, target } = kindOf(s);
    if (kind === "model" && !env.model(target)) problems.push(`stage ${s.name}: unknown model '${target}'`);
    if (kind === "app" && !env.app(target)) problems.push(`stage ${s.name}: unknown app '${target}'`);
    if (kind === "step" && !env.step(target)) problems.push(`stage ${s.name}: unknown step '${target}'; the built-in steps are: ${env.stepNames().join(", ")}`);
  }
  const analysis = analyse(spec, (n) => env.step(n));
  problems.push(...analysis.problems);
  const compiled = analysis.compiled;
  if (!compiled || problems.length > 0) return problems;

  // Conditions: the output they read exists; their value's parameter exists and is a number.
  for (const e of spec.edges) {
    if (!e.when) continue;
    const from = compiled.stages.get(e.from)!;
    const outs = outputsOf(from, env) ?? [];
    if (!outs.includes(e.when.output)) problems.push(`edge ${arrow(e.from, e.to)}: the condition names output '${e.when.output}', but ${describeStage(from)} has outputs: ${outs.join(", ")}`);
    const p = paramProblem(`edge ${arrow(e.from, e.to)}: the condition's value`, e.when.value, spec.params, true);
    if (p) problems.push(p);
  }
  // Inputs: each stage gets what it needs, from outputs that exist.
  const declaredInputs = spec.inputs ? new Map(spec.inputs.map((i) => [i.name, i])) : undefined;
  // A body in a media type (an image sent as itself) carries one input: the pipeline's only one.
  for (const i of spec.inputs ?? []) {
    if (i.content_types && spec.inputs!.length > 1) problems.push(`input ${i.name}: content_types need it to be the pipeline's only input (a body in a media type carries one input); the pipeline has ${spec.inputs!.length}: ${spec.inputs!.map((x) => x.name).join(", ")}`);
  }
  const derived = new Map<string, { spec: TensorSpec; from: string }>();
  const stepOnly = new Set<string>();
  const checkSource = (where: string, r: StageRef): void => {
    if (r.stage === "input") {
      if (declaredInputs && !declaredInputs.has(r.output)) problems.push(`${where} refers to pipeline input '${r.output}', which is not declared; inputs: ${[...declaredInputs.keys()].join(", ")}`);
      return;
    }
    const outs = outputsOf(compiled.stages.get(r.stage)!, env) ?? [];
    if (!outs.includes(r.output)) problems.push(`${where} refers to output '${r.output}' of ${describeStage(compiled.stages.get(r.stage)!)}, which has outputs: ${outs.join(", ")}`);
  };
  for (const s of spec.stages) {
    const st = compiled.stages.get(s.name)!;
    const signature = st.kind === "model" ? env.model(st.target) : st.kind === "app" ? env.app(st.target) : undefined;
    const mapping = stageInputMap(s, signature);
    if (signature) {
      const names = signature.inputs.map((i) => i.name);
      for (const input of Object.keys(mapping)) if (!names.includes(input)) problems.push(`stage ${s.name}: ${st.kind} ${st.target} has no input '${input}'; its inputs are: ${names.join(", ")}`);
      for (const i of signature.inputs) {
        const refs = mapping[i.name];
        if (!refs) {
          problems.push(`stage ${s.name}: ${st.kind} ${st.target} needs input '${i.name}', which is not mapped`);
          continue;
        }
        for (const r of refs) {
          if (r.stage !== "input") continue;
          const seen = derived.get(r.output);
          const want: TensorSpec = { name: r.output, datatype: i.datatype, shape: i.shape };
          if (seen && (seen.spec.datatype !== want.datatype || seen.spec.shape.join(",") !== want.shape.join(","))) {
            problems.push(`pipeline input '${r.output}' feeds stages that expect different tensors: ${seen.from} ${seen.spec.datatype} [${seen.spec.shape.join(", ")}], ${s.name} ${want.datatype} [${want.shape.join(", ")}]`);
          } else if (!seen) derived.set(r.output, { spec: want, from: s.name });
        }
      }
    } else if (st.kind === "step") {
      const step = env.step(st.target)!;
      const given = Object.keys(mapping);
      if (step.inputs === "any") {
        if (given.length === 0) problems.push(`stage ${s.name}: step ${step.name} needs at least one input`);
      } else {
        for (const need of step.inputs) if (!given.includes(need)) problems.push(`stage ${s.name}: step ${step.name} needs input '${need}', which is not mapped`);
        const known = [...step.inputs, ...(step.optionalInputs ?? [])];
        for (const g of given) if (!known.includes(g)) problems.push(`stage ${s.name}: step ${step.name} has no input '${g}'; its inputs are: ${known.join(", ")}`);
      }
      for (const refs of Object.values(mapping)) for (const r of refs) if (r.stage === "input") stepOnly.add(r.output);
      const params = s.params ?? {};
      for (const [k, v] of Object.entries(params)) {
        const p = paramProblem(`stage ${s.name}: param ${k}`, v, spec.params, false);
        if (p) problems.push(p);
      }
      const bad = step.checkParams?.(substituteParams(params, spec.params));
      if (bad) problems.push(`stage ${s.name}: params: ${bad}`);
    }
    for (const [input, refs] of Object.entries(mapping)) for (const r of refs) checkSource(`stage ${s.name}: input '${input}'`, r);
  }
  if (!declaredInputs) {
    for (const name of stepOnly) if (!derived.has(name)) problems.push(`pipeline input '${name}' feeds only steps: declare its datatype and shape in "inputs"`);
  }
  for (const o of compiled.outputs ?? []) for (const r of o.refs) checkSource(`output '${o.name}'`, r);
  return problems;
}

/** A valid spec compiled for running (pipeline-run.ts); throws with every structural problem otherwise. */
export function compilePipeline(spec: PipelineSpec, step: (name: string) => StepDescriptor | undefined, env?: Pick<PipelineEnvironment, "model" | "app">): CompiledPipeline {
  const analysis = analyse(spec, step);
  if (!analysis.compiled) throw new Error(`pipeline ${spec.name}: ${analysis.problems.join("; ")}`);
  if (!env) return analysis.compiled;
  // Model and app stages without an input mapping read the pipeline inputs of the same names.
  const stages = new Map(analysis.compiled.stages);
  for (const s of spec.stages) {
    const st = stages.get(s.name)!;
    if (s.inputs || st.kind === "step") continue;
    const signature = st.kind === "model" ? env.model(st.target) : env.app(st.target);
    if (!signature) throw new Error(`pipeline ${spec.name}: stage ${s.name}: unknown ${st.kind} '${st.target}'`);
    stages.set(s.name, { ...st, inputs: stageInputMap(s, signature) });
  }
  return { ...analysis.compiled, stages };
}

/**
 * The pipeline's input signature: `spec.inputs` when declared, else each "input.<name>" a model or app
 * stage reads, with that model input's datatype and shape (checkPipelineSpec refuses conflicts).
 */
export function pipelineInputSignature(spec: PipelineSpec, env: Pick<PipelineEnvironment, "model" | "app">): TensorSpec[] {
  if (spec.inputs) return spec.inputs.map((i) => ({ ...i, shape: [...i.shape] }));
  const out = new Map<string, TensorSpec>();
  for (const s of spec.stages) {
    if (s.step !== undefined) continue;
    const signature = s.model !== undefined ? env.model(s.model) : env.app(s.app ?? "");
    if (!signature) continue;
    const mapping = stageInputMap(s, signature);
    for (const i of signature.inputs) {
      for (const r of mapping[i.name] ?? []) {
        if (r.stage === "input" && !out.has(r.output)) out.set(r.output, { name: r.output, datatype: i.datatype, shape: [...i.shape] });
      }
    }
  }
  return [...out.values()];
}

/**
 * The parameters of one query: the spec's, overridden by the query's (same names and types only).
 * Throws an Error naming the first bad override.
 */
export function resolvePipelineParams(spec: PipelineSpec, overrides: Readonly<Record<string, unknown>> | undefined): Record<string, PipelineParamValue> {
  const out: Record<string, PipelineParamValue> = { ...spec.params };
  for (const [k, v] of Object.entries(overrides ?? {})) {
    if (!(k in spec.params)) {
      const declared = Object.keys(spec.params);
      throw new Error(`unknown parameter '${k}'; the pipeline's parameters are: ${declared.length > 0 ? declared.join(", ") : "none"}`);
    }
    if (typeof v !== typeof spec.params[k]) throw new Error(`parameter '${k}' must be a ${typeof spec.params[k]}, got ${JSON.stringify(v)}`);
    out[k] = v as PipelineParamValue;
  }
  return out;
}
