import { basename, extname } from "node:path";
import type { PipelinePlanStatus, PipelineSpec, TensorSpec } from "@sloserve/contracts";
import { CliError, exitCodes, seg, type Api } from "./client.js";
import { clockTime, readJsonFile, readLocalFile, section, textTable, type Out } from "./output.js";
import { describeAnswer, requestBody, type InputArgs } from "./infer.js";
import { signature } from "./views.js";

/**
 * `sloserve pipelines …`: the frontend's pipeline API (services/frontend pipelines.ts): list, show (with
 * the controller's plan), register a spec from a JSON file, delete, and query, with OIP JSON, a generated
 * input, or a file sent as itself (the OCR pipeline's image) with its parameters in `x-pipeline-params`.
 */

interface PipelineView {
  name: string;
  registered_at_ms: number;
  slo: { p99_ms: number };
  inputs: TensorSpec[];
  spec: PipelineSpec;
  plan?: PipelinePlanStatus | null;
}

const stageOf = (s: PipelineSpec["stages"][number]): string => (s.model !== undefined ? `model ${s.model}` : s.app !== undefined ? `app ${s.app}` : `step ${s.step ?? "?"}`);

export async function listPipelines(api: Api, out: Out): Promise<void> {
  const { pipelines } = await api.get<{ pipelines: PipelineView[] }>("/v1/pipelines");
  out.emit({ pipelines }, () =>
    pipelines.length === 0
      ? "no pipelines registered"
      : textTable(pipelines.map((p) => ({ pipeline: p.name, "p99 SLO ms": p.slo.p99_ms, stages: p.spec.stages.map((s) => s.name).join(" "), inputs: signature(p.inputs), registered: clockTime(p.registered_at_ms) }))),
  );
}

export async function showPipeline(api: Api, out: Out, name: string): Promise<void> {
  const p = await api.get<PipelineView>(`/v1/pipelines/${seg(name)}`);
  out.emit(p, () => {
    const lines = [`${p.name}: p99 SLO ${p.slo.p99_ms} ms; inputs ${signature(p.inputs)}`];
    if (p.spec.description) lines.push(p.spec.description);
    lines.push("", textTable(p.spec.stages.map((s) => ({ stage: s.name, runs: stageOf(s) }))));
    const plan = p.plan;
    if (!plan) lines.push("", "plan: none yet");
    else {
      const est = plan.estimatedP99Ms === null ? "" : `; estimated p99 ${plan.estimatedP99Ms.toFixed(1)} ms`;
      const cost = plan.costPerHour === null ? "" : `; $${plan.costPerHour.toFixed(4)}/h`;
      lines.push("", `plan: ${plan.state} (${plan.reason})${est}${cost}`);
      const stages = Object.entries(plan.stages).map(([stage, s]) => ({ stage, model: s.model, variant: s.variant, hardware: s.hardware, batch: s.maxBatch, replicas: s.replicas, "scale factor": s.scaleFactor }));
      if (stages.length) lines.push(section("Planned stages", stages));
    }
    return lines.join("\n");
  });
}

export async function registerPipeline(api: Api, out: Out, file: string, name: string | undefined): Promise<void> {
  const spec = readJsonFile(file, "pipeline spec");
  if (!spec || typeof spec !== "object" || Array.isArray(spec)) throw new CliError(`the pipeline spec ${file} must be a JSON object`, exitCodes.usage);
  const given = (spec as { name?: unknown }).name;
  const pipeline = name ?? (typeof given === "string" ? given : undefined);
  if (!pipeline) throw new CliError(`the pipeline spec ${file} has no "name": give one with --name`, exitCodes.usage);
  const registered = await api.json<PipelineView>("POST", `/v1/pipelines/${seg(pipeline)}`, { json: { ...spec, name: pipeline } });
  out.emit(registered, () => `registered pipeline ${registered.name} (p99 SLO ${registered.slo.p99_ms} ms; inputs ${signature(registered.inputs)})`);
}

export async function deletePipeline(api: Api, out: Out, name: string): Promise<void> {
  const answer = await api.json<unknown>("DELETE", `/v1/pipelines/${seg(name)}`);
  out.emit(answer, () => `deleted pipeline ${name}`);
}

const mediaTypes: Record<string, string> = { ".png": "image/png", ".jpg": "image/jpeg", ".jpeg": "image/jpeg" };

/** `k=v` pipeline parameters; values are JSON where they parse (numbers, booleans), else strings. */
function parseParams(given: readonly string[] | undefined): Record<string, unknown> {
  const params: Record<string, unknown> = {};
  for (const p of given ?? []) {
    const at = p.indexOf("=");
    if (at <= 0) throw new CliError(`--param takes name=value (e.g. threshold=0.95), got ${JSON.stringify(p)}`, exitCodes.usage);
    const raw = p.slice(at + 1);
    try {
      params[p.slice(0, at)] = JSON.parse(raw);
    } catch {
      params[p.slice(0, at)] = raw;
    }
  }
  return params;
}

export interface PipelineInferArgs extends InputArgs {
  /** A file sent as the body (e.g. a PNG for the ocr pipeline). */
  file?: string;
  contentType?: string;
  param?: string[];
}

export async function inferPipeline(api: Api, out: Out, name: string, args: PipelineInferArgs): Promise<void> {
  const params = parseParams(args.param);
  const path = `/v1/pipelines/${seg(name)}/infer`;
  let answer: Parameters<typeof describeAnswer>[0];
  if (args.file) {
    if (args.input || args.generate) throw new CliError("give one input: --file, --input or --generate", exitCodes.usage);
    const type = args.contentType ?? mediaTypes[extname(args.file).toLowerCase()];
    if (!type) throw new CliError(`cannot tell the media type of ${basename(args.file)}: give --content-type`, exitCodes.usage);
    const headers: Record<string, string> = { "content-type": type };
    if (Object.keys(params).length) headers["x-pipeline-params"] = JSON.stringify(params);
    answer = await api.json("POST", path, { body: new Uint8Array(readLocalFile(args.file, "input file")), headers });
  } else {
    const body = await requestBody(args, async () => (await api.get<PipelineView>(`/v1/pipelines/${seg(name)}`)).inputs);
    if (Object.keys(params).length) body.parameters = { ...(body.parameters as Record<string, unknown> | undefined), ...params };
    answer = await api.json("POST", path, { json: body });
  }
  out.emit(answer, () => describeAnswer(answer));
}
