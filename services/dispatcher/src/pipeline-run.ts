import { ErrorCode, ServeError, type Clock, type PipelineParamValue, type Tensor } from "@sloserve/contracts";
import { PipelineRun, isTensor, substituteParams, type CompiledPipeline, type PipelineTask, type StageResult, type StageValue } from "@sloserve/policy";
import type { StepRegistry } from "./pipeline-steps.js";

/**
 * Runs one pipeline query: libs/policy `PipelineRun` says which stages are ready (InferLine's routing
 * through `pipelineRoute`), this sends each ready stage off at once (so independent branches run in
 * parallel), feeds each result back, and assembles the answer. Model and app stages go through a
 * {@link ModelStageBackend} (over the bus: a query on `infer.model.<m>` / `infer.app.<a>` that the
 * dispatchers route like any other); steps run here, from the step registry.
 *
 * Every stage query carries the pipeline's end-to-end deadline (arrival + SLO), so each stage's queue sees
 * the query's whole budget, and may run late (InferLine keeps its SLO by re-scaling, not by shedding): a
 * late pipeline query is answered and counted as a miss. Stage queries give up only when the caller
 * does (`giveUpAtMs`).
 */

export interface StageCall {
  pipeline: string;
  stage: string;
  item: number | null;
  /** Request id of the stage query (the pipeline query's, with the stage and item). */
  requestId: string | undefined;
  /** The pipeline query's SLO deadline (arrival + SLO), epoch ms. */
  deadlineMs: number;
  /** When the caller stops waiting, epoch ms. */
  giveUpAtMs: number;
}

export interface StageAnswer {
  outputs: Tensor[];
  /** Who served it (the executor's served_by). */
  servedBy?: Record<string, unknown> | undefined;
  costDollars: number;
}

/** Model-less requirements of an app stage (latency defaults to what is left of the pipeline's budget). */
export interface AppRequirements {
  latencyMs: number;
  minAccuracy: number;
  maxCost: number | undefined;
}

export interface ModelStageBackend {
  model(model: string, inputs: Tensor[], call: StageCall): Promise<StageAnswer>;
  app(app: string, requirements: AppRequirements, inputs: Tensor[], call: StageCall): Promise<StageAnswer>;
}

export interface PipelineQuery {
  compiled: CompiledPipeline;
  /** The query's inputs (checked against the pipeline's input signature). */
  inputs: readonly Tensor[];
  params: Readonly<Record<string, PipelineParamValue>>;
  /** When the query entered the system, epoch ms: the SLO counts from here. */
  receivedAtMs: number;
  giveUpAtMs: number;
  requestId?: string | undefined;
}

export interface PipelineAnswer {
  /** The answer's tensors. */
  outputs: Tensor[];
  /** Per output tensor, the stage it came from. */
  outputStages: string[];
  /** The answer's outputs that are not tensors (objects from steps, e.g. recognised text), as JSON values. */
  values: Record<string, unknown>;
  /** Stages the query ran: 1, or for stages inside a fan-out the items they ran for. */
  visits: Record<string, number>;
  /** Per stage: the executor's served_by (a model), { step } (a step); a list over items inside a fan-out. */
  servedBy: Record<string, unknown>;
  timingMs: { total: number; stages: Record<string, number | Array<number | null>> };
  costDollars: number;
  latencyMs: number;
  sloMs: number;
  missedSlo: boolean;
}

function stageError(stage: string, what: string, err: unknown): ServeError {
  if (err instanceof ServeError) return new ServeError(err.code, `stage ${stage} (${what}): ${err.message}`, err.details);
  return new ServeError(ErrorCode.invalidData, `stage ${stage} (${what}) failed: ${err instanceof Error ? err.message : String(err)}`);
}

function tensorsOf(stage: string, inputs: Record<string, StageValue>): Tensor[] {
  return Object.entries(inputs).map(([name, v]) => {
    if (Array.isArray(v)) throw new ServeError(ErrorCode.invalidData, `stage ${stage}: input '${name}' is a list of items; only a step can gather items`);
    const d = v as Exclude<StageValue, readonly unknown[]>;
    if (!isTensor(d)) throw new ServeError(ErrorCode.invalidData, `stage ${stage}: input '${name}' is an object from a step, not a tensor; a model reads tensors`);
    return d;
  });
}

/** Records a per-stage value: a number outside fan-outs, a list over items inside. */
function put<T>(into: Record<string, T | Array<T | null>>, task: PipelineTask, value: T): void {
  if (task.item === null) {
    into[task.stage] = value;
    return;
  }
  const list = (Array.isArray(into[task.stage]) ? into[task.stage] : []) as Array<T | null>;
  while (list.length <= task.item) list.push(null);
  list[task.item] = value;
  into[task.stage] = list;
}

export async function runPipelineQuery(q: PipelineQuery, backend: ModelStageBackend, steps: StepRegistry, clock: Clock): Promise<PipelineAnswer> {
  const { compiled } = q;
  const sloMs = compiled.spec.slo.p99_ms;
  const deadlineMs = q.receivedAtMs + sloMs;
  const run = new PipelineRun(compiled, Object.fromEntries(q.inputs.map((t) => [t.name, t])), q.params);
  const servedBy: Record<string, unknown> = {};
  const timing: Record<string, number | Array<number | null>> = {};
  let cost = 0;

  const execute = async (task: PipelineTask): Promise<StageResult> => {
    const stage = compiled.stages.get(task.stage)!;
    const what = `${stage.kind} ${stage.target}`;
    const started = clock.now();
    try {
      const inputs = run.inputsOf(task);
      const call: StageCall = {
        pipeline: compiled.spec.name,
        stage: task.stage,
        item: task.item,
        requestId: q.requestId ? `${q.requestId}/${task.stage}${task.item === null ? "" : `/${task.item}`}` : undefined,
        deadlineMs,
        giveUpAtMs: q.giveUpAtMs,
      };
      let result: StageResult;
      if (stage.kind === "step") {
        const step = steps.get(stage.target);
        if (!step) throw new ServeError(ErrorCode.invalidPipeline, `unknown step '${stage.target}'`);
        const spec = compiled.spec.stages.find((s) => s.name === task.stage);
        result = await step.run(inputs, substituteParams(spec?.params ?? {}, q.params));
        put(servedBy, task, { step: stage.target });
      } else {
        let answer: StageAnswer;
        if (stage.kind === "model") answer = await backend.model(stage.target, tensorsOf(task.stage, inputs), call);
        else {
          const r = compiled.spec.stages.find((s) => s.name === task.stage)?.requirements;
          const left = Math.max(1, deadlineMs - clock.now());
          answer = await backend.app(stage.target, { latencyMs: r?.latency_ms ?? left, minAccuracy: r?.min_accuracy ?? 0, maxCost: r?.max_cost }, tensorsOf(task.stage, inputs), call);
        }
        cost += answer.costDollars;
        put(servedBy, task, answer.servedBy ?? { [stage.kind]: stage.target });
        result = { outputs: Object.fromEntries(answer.outputs.map((t) => [t.name, t])) };
      }
      put(timing, task, clock.now() - started);
      return result;
    } catch (err) {
      throw stageError(task.stage, what, err);
    }
  };

  await new Promise<void>((resolve, reject) => {
    let running = 0;
    let failed = false;
    const fail = (err: unknown): void => {
      if (failed) return;
      failed = true;
      reject(err instanceof ServeError ? err : new ServeError(ErrorCode.internal, err instanceof Error ? err.message : String(err)));
    };
    const pump = (): void => {
      if (failed) return;
      let ready: PipelineTask[];
      try {
        ready = run.next();
      } catch (err) {
        return fail(err);
      }
      for (const task of ready) {
        running++;
        execute(task).then(
          (result) => {
            running--;
            if (failed) return;
            try {
              run.complete(task, result);
            } catch (err) {
              return fail(stageError(task.stage, "result", err));
            }
            pump();
          },
          (err: unknown) => {
            running--;
            fail(err);
          },
        );
      }
      if (running === 0) {
        if (run.done) resolve();
        else fail(new ServeError(ErrorCode.internal, `pipeline ${compiled.spec.name} stalled: no stage is ready or running`));
      }
    };
    pump();
  });

  const outputs = run.outputs();
  const finished = clock.now();
  const latencyMs = finished - q.receivedAtMs;
  const tensors = outputs.filter((o) => isTensor(o.output));
  const values: Record<string, unknown> = {};
  for (const o of outputs) if (!isTensor(o.output)) values[o.output.name] = o.output.object;
  return {
    outputs: tensors.map((o) => o.output as Tensor),
    outputStages: tensors.map((o) => o.stage),
    values,
    visits: run.visits(),
    servedBy,
    timingMs: { total: latencyMs, stages: timing },
    costDollars: cost,
    latencyMs,
    sloMs,
    missedSlo: latencyMs > sloMs,
  };
}

