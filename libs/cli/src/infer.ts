import type { TensorSpec } from "@sloserve/contracts";
import { CliError, exitCodes, seg, type Api } from "./client.js";
import { readJsonFile, textTable, type Out } from "./output.js";
import type { ModelView } from "./views.js";

/**
 * `sloserve infer`: a query to a model (`POST /v2/models/{model}/infer`) or, with requirements, a
 * model-less query to an app (`POST /v1/apps/{app}/infer` with `slo`: INFaaS). The input is an Open
 * Inference Protocol JSON file, or generated from the model's (or app's) input signature.
 */

export interface InputArgs {
  /** An Open Inference Protocol request body (`{"inputs": [...]}`) or the list of inputs alone. */
  input?: string;
  /** Generate random inputs from the signature. */
  generate?: boolean;
  /** Rows of a generated input (its first dimension when that is dynamic). */
  batch?: number;
  /** Full shapes of generated inputs with dynamic dimensions past the first: `name=3,48,320`. */
  shape?: string[];
}

export interface InferArgs extends InputArgs {
  sloMs?: number;
  minAccuracy?: number;
  maxCost?: number;
  timeoutMs?: number;
}

interface InferAnswer {
  model_name?: string;
  id?: string;
  served_by?: Record<string, unknown>;
  timing_ms?: Record<string, number>;
  outputs: Array<{ name: string; datatype: string; shape: number[]; data: unknown[] }>;
}

/** `name=3,48,320` options as a map of shapes. */
function parseShapes(given: readonly string[] | undefined): Map<string, number[]> {
  const shapes = new Map<string, number[]>();
  for (const s of given ?? []) {
    const m = /^([^=]+)=(\d+(?:,\d+)*)$/.exec(s.trim());
    if (!m) throw new CliError(`--shape takes name=d1,d2,... (e.g. x=1,3,48,320), got ${JSON.stringify(s)}`, exitCodes.usage);
    shapes.set(m[1]!, m[2]!.split(",").map(Number));
  }
  return shapes;
}

function randomValues(spec: TensorSpec, n: number): unknown[] {
  const t = spec.datatype;
  if (t.startsWith("FP")) return Array.from({ length: n }, () => Math.round(Math.random() * 1000) / 1000);
  if (t.startsWith("INT") || t.startsWith("UINT")) return Array.from({ length: n }, () => Math.floor(Math.random() * 10));
  if (t === "BOOL") return Array.from({ length: n }, () => Math.random() < 0.5);
  throw new CliError(`cannot generate input '${spec.name}' of datatype ${t}: give it in a file with --input`, exitCodes.usage);
}

/** Random inputs for a signature: the dynamic first dimension is `batch`; other dynamic dimensions come from --shape. */
export function generateInputs(signature: readonly TensorSpec[], batch: number, shapes: Map<string, number[]>): Array<{ name: string; datatype: string; shape: number[]; data: unknown[] }> {
  for (const name of shapes.keys()) {
    if (!signature.some((s) => s.name === name)) throw new CliError(`--shape names input '${name}'; the inputs are ${signature.map((s) => s.name).join(", ")}`, exitCodes.usage);
  }
  return signature.map((spec) => {
    let shape = shapes.get(spec.name);
    if (shape) {
      const fits = shape.length === spec.shape.length && shape.every((d, i) => spec.shape[i] === -1 || spec.shape[i] === d);
      if (!fits) throw new CliError(`--shape ${spec.name}=${shape.join(",")} does not fit the input's shape [${spec.shape.join(", ")}]`, exitCodes.usage);
    } else {
      shape = spec.shape.map((d, i) => (d >= 0 ? d : i === 0 ? batch : -1));
      if (shape.includes(-1)) throw new CliError(`input '${spec.name}' has dynamic dimensions [${spec.shape.join(", ")}]: give its shape with --shape ${spec.name}=d1,d2,...`, exitCodes.usage);
    }
    return { name: spec.name, datatype: spec.datatype, shape, data: randomValues(spec, shape.reduce((a, b) => a * b, 1)) };
  });
}

/** The request body from --input or --generate (exactly one of them). */
export async function requestBody(args: InputArgs, signature: () => Promise<readonly TensorSpec[]>): Promise<Record<string, unknown>> {
  if (args.input && args.generate) throw new CliError("give --input FILE or --generate, not both", exitCodes.usage);
  if (args.input) {
    const body = readJsonFile(args.input, "input file");
    if (Array.isArray(body)) return { inputs: body };
    if (!body || typeof body !== "object" || !Array.isArray((body as { inputs?: unknown }).inputs)) {
      throw new CliError(`the input file ${args.input} must hold an Open Inference Protocol request ({"inputs": [{"name", "datatype", "shape", "data"}, ...]}) or the list of inputs`, exitCodes.usage);
    }
    return body as Record<string, unknown>;
  }
  if (args.generate) return { inputs: generateInputs(await signature(), args.batch ?? 1, parseShapes(args.shape)) };
  throw new CliError("give the query's input: --input FILE (Open Inference Protocol JSON) or --generate", exitCodes.usage);
}

/** A value on one line: numbers to 4 significant digits, objects as `key value, ...`. */
function compact(v: unknown): string {
  if (typeof v === "number") return Number.isInteger(v) ? String(v) : String(Number(v.toPrecision(4)));
  if (Array.isArray(v)) return `[${v.map(compact).join(", ")}]`;
  if (v && typeof v === "object") return Object.entries(v).map(([k, x]) => `${k} ${x && typeof x === "object" && !Array.isArray(x) ? `{${compact(x)}}` : compact(x)}`).join(", ");
  return String(v);
}

const clip = (s: string, max: number): string => (s.length > max ? `${s.slice(0, max - 3)}...` : s);

/** At most `max` values of a tensor, and for rows of scores the index of each row's largest. */
function summary(o: InferAnswer["outputs"][number], max = 8): string {
  const flat = (o.data as unknown[]).flat(Infinity as 1);
  const shown = flat.slice(0, max).map(compact);
  const more = flat.length > max ? `, ... (${flat.length} values)` : "";
  let best = "";
  const [rows = 0, cols = 0] = o.shape;
  if (o.shape.length === 2 && rows <= 8 && cols > 1 && flat.every((x) => typeof x === "number")) {
    const nums = flat as number[];
    const argmax = Array.from({ length: rows }, (_, r) => {
      const row = nums.slice(r * cols, (r + 1) * cols);
      return row.indexOf(Math.max(...row));
    });
    best = `; argmax ${argmax.join(", ")}`;
  }
  return `${shown.join(", ")}${more}${best}`;
}

/** An answer for people: its fields (served by, timing, cost, ...) a line each, then its outputs. */
export function describeAnswer(a: InferAnswer): string {
  const { outputs, ...rest } = a;
  const head = Object.entries(rest).map(([k, v]) => `${k.replace(/_/g, " ")}: ${clip(compact(v), 400)}`);
  const table = (outputs ?? []).length ? textTable(outputs.map((o) => ({ output: o.name, datatype: o.datatype, shape: `[${o.shape.join(", ")}]`, values: summary(o) }))) : "";
  return [...head, table].filter(Boolean).join("\n");
}

export async function infer(api: Api, out: Out, name: string, args: InferArgs): Promise<void> {
  const modelless = args.sloMs !== undefined || args.minAccuracy !== undefined || args.maxCost !== undefined;
  if (modelless && args.sloMs === undefined) throw new CliError("a model-less query needs its latency SLO: --slo-ms N (with --min-accuracy and --max-cost if you like)", exitCodes.usage);
  const withTimeout = (body: Record<string, unknown>): Record<string, unknown> =>
    args.timeoutMs === undefined ? body : { ...body, parameters: { ...(body.parameters as Record<string, unknown> | undefined), timeout_ms: args.timeoutMs } };
  let answer: InferAnswer;
  if (modelless) {
    const body = await requestBody(args, async () => {
      const listed = await api.get<{ models: ModelView[] }>(`/v1/apps/${seg(name)}/models`);
      return listed.models[0]?.inputs ?? [];
    });
    const slo = { latency_ms: args.sloMs, ...(args.minAccuracy !== undefined ? { min_accuracy: args.minAccuracy } : {}), ...(args.maxCost !== undefined ? { max_cost: args.maxCost } : {}) };
    answer = await api.json<InferAnswer>("POST", `/v1/apps/${seg(name)}/infer`, { json: { ...withTimeout(body), slo } });
  } else {
    try {
      const body = await requestBody(args, async () => (await api.get<{ inputs: TensorSpec[] }>(`/v2/models/${seg(name)}`)).inputs);
      answer = await api.json<InferAnswer>("POST", `/v2/models/${seg(name)}/infer`, { json: withTimeout(body) });
    } catch (err) {
      throw await withAppHint(api, name, err);
    }
  }
  out.emit(answer, () => describeAnswer(answer));
}

/** A model query to an app's name (refused: unknown model, or a model-less query without its SLO): say how to query the app. */
async function withAppHint(api: Api, name: string, err: unknown): Promise<unknown> {
  if (!(err instanceof CliError) || !/\[unknown_model\]|is an app/.test(err.message)) return err;
  const isApp = await api.get(`/v1/apps/${seg(name)}/models`).then(
    () => true,
    () => false,
  );
  return isApp ? new CliError(`${err.message}; '${name}' is an app: query it model-less with --slo-ms N`, err.exitCode) : err;
}
