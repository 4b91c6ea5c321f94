/**
 * One pipeline query as it runs: which stages are ready, which are skipped, what each reads, and what
 * the answer is (InferLine §2: a DAG with conditional edges; DESIGN §3 "Pipelines"). Pure and
 * synchronous: the dispatcher's shell (services/dispatcher pipeline-run.ts) sends the ready stages to
 * the models and steps, feeds their results back with {@link PipelineRun.complete}, and asks again.
 *
 * Routing is InferLine's, through `pipelineRoute` (pipeline.ts, the rule the Estimator and the simulator
 * follow): a conditional edge is taken when its condition holds on its source's output, which sets the
 * edge's bit in the query's mask; a stage runs when it is in `pipelineRoute(graph, mask).visited`, which
 * is decided once every parent of the stage has settled (run, or been skipped). A skipped stage settles
 * at once, so skips cascade. A fan-out's items each get their own mask over the region's graph; the
 * fan-out settles in the query's graph once every item has settled, and its join then runs once.
 */
import { ServeError, ErrorCode, type EdgeCondition, type PipelineParamValue, type Tensor } from "@sloserve/contracts";
import { pipelineRoute } from "./pipeline.js";
import { refText, type CompiledPipeline, type RouteGraph, type StageRef } from "./pipeline-spec.js";

/**
 * A value a step passes on that is not a tensor (a decoded image, text boxes, recognised text): steps
 * read it, model stages cannot, and in the answer it is JSON. Numbers and booleans may drive conditions.
 */
export interface StepObject {
  readonly name: string;
  readonly object: unknown;
}
/** One output of a stage: a tensor, or (from a step) an object. */
export type StageDatum = Tensor | StepObject;
/** A stage's outputs by name. */
export type StageOutputs = Readonly<Record<string, StageDatum>>;
/** What a stage reads for one input: a datum, or for a join the list over items (null where an item had none). */
export type StageValue = StageDatum | ReadonlyArray<StageDatum | null>;

export function isTensor(d: StageDatum): d is Tensor {
  return "datatype" in d && "data" in d;
}
/** A stage's result: outputs, or for a fan-out its items. */
export type StageResult = { outputs: StageOutputs } | { items: readonly StageOutputs[] };

export interface PipelineTask {
  stage: string;
  /** The item of the stage's fan-out this task is for; null for stages outside fan-outs. */
  item: number | null;
}

interface Context {
  graph: RouteGraph;
  mask: number;
  started: Set<string>;
  settled: Set<string>;
  outputs: Map<string, StageOutputs>;
}

function newContext(graph: RouteGraph): Context {
  return { graph, mask: 0, started: new Set(), settled: new Set(), outputs: new Map() };
}

/** The numbers of a datum, for conditions: a tensor's elements, or a step's number or boolean. */
function numbers(d: StageDatum): ArrayLike<number> {
  if (!isTensor(d)) {
    if (typeof d.object === "number") return [d.object];
    if (typeof d.object === "boolean") return [d.object ? 1 : 0];
    throw new Error(`a condition cannot read '${d.name}': it is neither a tensor, a number nor a boolean`);
  }
  const t = d;
  if (t.datatype === "FP16") throw new Error(`a condition cannot read FP16 tensor '${t.name}'`);
  if (t.data instanceof BigInt64Array || t.data instanceof BigUint64Array) return Array.from(t.data, Number);
  return t.data as ArrayLike<number>;
}

/** reduce(tensor) for a condition; NaN for an empty tensor (except count). A step's number or boolean is a one-element tensor. */
export function reduceTensor(t: StageDatum, reduce: EdgeCondition["reduce"]): number {
  const xs = numbers(t);
  const n = xs.length;
  if (reduce === "count") return n;
  if (n === 0) return NaN;
  switch (reduce) {
    case "max": {
      let m = -Infinity;
      for (let i = 0; i < n; i++) if (xs[i]! > m) m = xs[i]!;
      return m;
    }
    case "min": {
      let m = Infinity;
      for (let i = 0; i < n; i++) if (xs[i]! < m) m = xs[i]!;
      return m;
    }
    case "sum":
    case "mean": {
      let s = 0;
      for (let i = 0; i < n; i++) s += xs[i]!;
      return reduce === "sum" ? s : s / n;
    }
    case "first":
      return xs[0]!;
    case "argmax": {
      let best = 0;
      for (let i = 1; i < n; i++) if (xs[i]! > xs[best]!) best = i;
      return best;
    }
    case "max_softmax": {
      // Softmax over the last axis, row by row; the largest probability of any row.
      const cols = isTensor(t) && t.shape.length > 0 ? Math.max(1, t.shape[t.shape.length - 1]!) : n;
      let top = 0;
      for (let r = 0; r + cols <= n; r += cols) {
        let m = -Infinity;
        for (let j = 0; j < cols; j++) m = Math.max(m, xs[r + j]!);
        let z = 0;
        for (let j = 0; j < cols; j++) z += Math.exp(xs[r + j]! - m);
        top = Math.max(top, 1 / z);
      }
      return top;
    }
    default:
      throw new Error(`unknown reducer ${String(reduce)}`);
  }
}

/** Whether a conditional edge is taken: `reduce(output) op value`, "$name" values from the query's parameters. */
export function evaluateCondition(c: EdgeCondition, output: StageDatum, params: Readonly<Record<string, PipelineParamValue>>): boolean {
  const value = typeof c.value === "number" ? c.value : params[c.value.slice(1)];
  if (typeof value !== "number") throw new Error(`condition value ${String(c.value)} is not a number`);
  const x = reduceTensor(output, c.reduce);
  switch (c.op) {
    case "<":
      return x < value;
    case "<=":
      return x <= value;
    case ">":
      return x > value;
    case ">=":
      return x >= value;
    case "==":
      return x === value;
    case "!=":
      return x !== value;
    default:
      throw new Error(`unknown comparison ${String(c.op)}`);
  }
}

function renamed<T extends StageDatum>(t: T, name: string): T {
  return t.name === name ? t : { ...t, name };
}

export class PipelineRun {
  private readonly global: Context;
  /** Per fan-out: its items' contexts. */
  private readonly items = new Map<string, Context[]>();
  /** Fan-outs that returned items not all settled yet. */
  private readonly pendingFanOuts = new Set<string>();

  /**
   * @param inputs the query's inputs by pipeline input name (checked against the pipeline's signature)
   * @param params the query's parameters (resolvePipelineParams)
   */
  constructor(
    readonly compiled: CompiledPipeline,
    private readonly inputs: Readonly<Record<string, Tensor>>,
    private readonly params: Readonly<Record<string, PipelineParamValue>>,
  ) {
    this.global = newContext(compiled.global);
  }

  private context(task: PipelineTask): Context {
    if (task.item === null) return this.global;
    const region = this.compiled.stages.get(task.stage)?.region;
    const ctx = region ? this.items.get(region)?.[task.item] : undefined;
    if (!ctx) throw new Error(`no item ${task.item} for stage ${task.stage}`);
    return ctx;
  }

  /** Stages that may start now (each returned once); skipped stages settle on the way. */
  next(): PipelineTask[] {
    const out: PipelineTask[] = [];
    for (;;) {
      this.advance(this.global, null, out);
      for (const ctxs of this.items.values()) ctxs.forEach((c, i) => this.advance(c, i, out));
      let settledFanOut = false;
      for (const f of this.pendingFanOuts) {
        const ctxs = this.items.get(f) ?? [];
        if (ctxs.every((c) => c.settled.size === c.graph.pipeline.models.length)) {
          this.pendingFanOuts.delete(f);
          this.global.settled.add(f);
          settledFanOut = true;
        }
      }
      if (!settledFanOut) return out;
    }
  }

  private advance(ctx: Context, item: number | null, out: PipelineTask[]): void {
    if (ctx.settled.size === ctx.graph.pipeline.models.length) return;
    for (let changed = true; changed; ) {
      changed = false;
      const visited = new Set(pipelineRoute(ctx.graph.pipeline, ctx.mask).visited);
      for (const s of ctx.graph.pipeline.models) {
        if (ctx.started.has(s) || ctx.settled.has(s)) continue;
        if (!(ctx.graph.parents[s] ?? []).every((p) => ctx.settled.has(p))) continue;
        if (visited.has(s)) {
          ctx.started.add(s);
          out.push({ stage: s, item });
        } else {
          ctx.settled.add(s);
          changed = true;
        }
      }
    }
  }

  /** Sets the bits of the conditional edges leaving `stage` in `ctx` from its outputs. */
  private decideEdges(ctx: Context, stage: string, outputs: StageOutputs): void {
    ctx.graph.pipeline.edges.forEach((e, i) => {
      const c = ctx.graph.conditions[i];
      if (e.from !== stage || !c) return;
      const t = outputs[c.output];
      if (!t) throw new ServeError(ErrorCode.invalidData, `stage ${stage} gave no output '${c.output}' for the condition of edge ${e.from} → ${e.to}`);
      if (evaluateCondition(c, t, this.params)) this.ctxSetBit(ctx, ctx.graph.bits[i]!);
    });
  }

  private ctxSetBit(ctx: Context, bit: number): void {
    ctx.mask = (ctx.mask | (1 << bit)) >>> 0;
  }

  /** A started stage finished with `result`. */
  complete(task: PipelineTask, result: StageResult): void {
    const ctx = this.context(task);
    if (!ctx.started.has(task.stage) || ctx.settled.has(task.stage)) throw new Error(`stage ${task.stage} was not running`);
    const stage = this.compiled.stages.get(task.stage)!;
    if ("items" in result) {
      if (stage.stepKind !== "fan_out" || task.item !== null) throw new ServeError(ErrorCode.invalidData, `stage ${task.stage} returned items but is not a fan-out`);
      const graph = this.compiled.regions.get(task.stage)!;
      const ctxs = result.items.map((itemOutputs) => {
        const c = newContext(graph);
        c.started.add(task.stage);
        c.settled.add(task.stage);
        c.outputs.set(task.stage, itemOutputs);
        this.decideEdges(c, task.stage, itemOutputs);
        return c;
      });
      this.items.set(task.stage, ctxs);
      this.pendingFanOuts.add(task.stage);
      return;
    }
    if (stage.stepKind === "fan_out") throw new ServeError(ErrorCode.invalidData, `stage ${task.stage} is a fan-out but returned no items`);
    ctx.outputs.set(task.stage, result.outputs);
    this.decideEdges(ctx, task.stage, result.outputs);
    ctx.settled.add(task.stage);
  }

  /** Every stage of the query's graph settled (and every fan-out's items). */
  get done(): boolean {
    return this.global.settled.size === this.global.graph.pipeline.models.length && this.pendingFanOuts.size === 0;
  }

  /** One reference's value for a stage running for `item` (null: outside fan-outs), or undefined when its stage did not run. */
  private valueOf(r: StageRef, item: number | null): StageDatum | undefined {
    if (r.stage === "input") return this.inputs[r.output];
    const source = this.compiled.stages.get(r.stage)!;
    if ((source.region !== null || source.stepKind === "fan_out") && item !== null) {
      return this.items.get(source.region ?? source.name)?.[item]?.outputs.get(r.stage)?.[r.output];
    }
    return this.global.outputs.get(r.stage)?.[r.output];
  }

  /** What a started stage reads: its inputs by name, renamed to them; a join's per-item inputs as lists. */
  inputsOf(task: PipelineTask): Record<string, StageValue> {
    const stage = this.compiled.stages.get(task.stage)!;
    const out: Record<string, StageValue> = {};
    for (const [name, refs] of Object.entries(stage.inputs)) {
      const perItem = stage.gathers !== null && refs.some((r) => r.stage === stage.gathers || this.compiled.stages.get(r.stage)?.region === stage.gathers);
      if (perItem) {
        out[name] = (this.items.get(stage.gathers!) ?? []).map((_, i) => {
          for (const r of refs) {
            const v = this.valueOf(r, i);
            if (v) return renamed(v, name);
          }
          return null;
        });
        continue;
      }
      let value: StageDatum | undefined;
      for (const r of refs) if ((value = this.valueOf(r, task.item))) break;
      if (!value) throw new ServeError(ErrorCode.invalidData, `stage ${task.stage}: input '${name}' has no value: ${refs.map(refText).join(", ")} did not run for this query`);
      out[name] = renamed(value, name);
    }
    return out;
  }

  /** The stages this query ran: 1 for those outside fan-outs; for those inside, the items they ran for. */
  visits(): Record<string, number> {
    const out: Record<string, number> = {};
    for (const s of this.global.started) out[s] = 1;
    for (const [fanOut, ctxs] of this.items) {
      for (const c of ctxs) for (const s of c.started) if (s !== fanOut) out[s] = (out[s] ?? 0) + 1;
    }
    return out;
  }

  /**
   * The answer's outputs once done: spec.outputs (each from its first reference that ran), or every
   * output of the stages where the query ended (visited, no taken edge onwards), named by output name,
   * or "<stage>.<output>" when two such stages give the same name.
   */
  outputs(): Array<{ stage: string; output: StageDatum }> {
    if (!this.done) throw new Error("the pipeline query has not finished");
    if (this.compiled.outputs) {
      return this.compiled.outputs.map((o) => {
        for (const r of o.refs) {
          const v = this.valueOf(r, null);
          if (v) return { stage: r.stage, output: renamed(v, o.name) };
        }
        throw new ServeError(ErrorCode.invalidData, `output '${o.name}' has no value: ${o.refs.map(refText).join(", ")} did not run for this query`);
      });
    }
    const route = pipelineRoute(this.global.graph.pipeline, this.global.mask);
    const leaves = route.visited.filter((s) => (route.children[s] ?? []).length === 0);
    const all = leaves.flatMap((stage) => Object.values(this.global.outputs.get(stage) ?? {}).map((output) => ({ stage, output })));
    const count = new Map<string, number>();
    for (const o of all) count.set(o.output.name, (count.get(o.output.name) ?? 0) + 1);
    return all.map((o) => ((count.get(o.output.name) ?? 0) > 1 ? { stage: o.stage, output: renamed(o.output, `${o.stage}.${o.output.name}`) } : o));
  }
}
