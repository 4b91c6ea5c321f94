import type { CostSummary, ModelRecord, TensorSpec, VariantRecord, WorkerReport } from "@sloserve/contracts";
import { CliError, seg, type Api } from "./client.js";
import { clockTime, fixed, megabytes, section, textTable, type Out, type Row } from "./output.js";

/**
 * The read-only commands: apps, models, variants (with profiles and states), workers, scaling
 * decisions and cost. Each reads the frontend's JSON and prints it as tables, or as it came (`--json`).
 */

interface InstanceRecord {
  variant: string;
  model: string;
  worker: string;
  hardware: string;
  state: string;
  reason: string;
  atMs: number;
}

/** `GET /v1/status`. */
export interface Status {
  atMs: number;
  models: ModelRecord[];
  variants: VariantRecord[];
  instances: InstanceRecord[];
  workers: WorkerReport[];
}

/** One variant as `GET /v1/apps/{app}/models` describes it (services/frontend listing.ts). */
export interface VariantView {
  name: string;
  hardware: string;
  batch_size: number;
  batch_wait_ms: number;
  quantization: string;
  threads: number;
  accuracy: number | null;
  load_latency_ms: number | null;
  latency_ms: Record<string, number> | null;
  peak_qps: number | null;
  memory_bytes: number | null;
  profiled: boolean;
  profiled_on: string | null;
}

export interface ModelView {
  name: string;
  app: string;
  task: string;
  dataset: string;
  inputs: TensorSpec[];
  outputs: TensorSpec[];
  validation_set_size: number;
  variants: VariantView[];
}

export const signature = (specs: readonly TensorSpec[]): string => specs.map((s) => `${s.name} ${s.datatype}[${s.shape.join(",")}]`).join(", ");

const status = (api: Api): Promise<Status> => api.get<Status>("/v1/status");

export async function listApps(api: Api, out: Out): Promise<void> {
  const s = await status(api);
  const apps = new Map<string, { app: string; models: string[]; variants: number; profiled: number; active: number }>();
  for (const m of s.models) {
    const a = apps.get(m.app) ?? { app: m.app, models: [], variants: 0, profiled: 0, active: 0 };
    a.models.push(m.name);
    apps.set(m.app, a);
  }
  for (const v of s.variants) {
    const a = apps.get(v.app);
    if (!a) continue;
    a.variants++;
    if (v.profiled) a.profiled++;
  }
  for (const i of s.instances) {
    const app = s.models.find((m) => m.name === i.model)?.app;
    if (app && i.state === "active") apps.get(app)!.active++;
  }
  const list = [...apps.values()].sort((a, b) => a.app.localeCompare(b.app));
  out.emit({ apps: list }, () =>
    list.length === 0
      ? "no apps: register a model with `sloserve register <app> <model> <file.onnx>`"
      : textTable(list.map((a) => ({ app: a.app, models: a.models.sort().join(", "), variants: a.variants, profiled: a.profiled, "active instances": a.active }))),
  );
}

/** The models of one app (with their variants' profiles), or of every app. */
export async function listModels(api: Api, out: Out, app: string | undefined): Promise<void> {
  if (app !== undefined) {
    const listed = await api.get<{ app: string; models: ModelView[] }>(`/v1/apps/${seg(app)}/models`);
    out.emit(listed, () =>
      textTable(listed.models.map((m) => ({ model: m.name, app: m.app, task: m.task, dataset: m.dataset, inputs: signature(m.inputs), validation: m.validation_set_size, variants: m.variants.length, profiled: m.variants.filter((v) => v.profiled).length }))),
    );
    return;
  }
  const s = await status(api);
  const models = [...s.models].sort((a, b) => a.app.localeCompare(b.app) || a.name.localeCompare(b.name));
  out.emit({ models }, () =>
    models.length === 0
      ? "no models registered"
      : textTable(
          models.map((m) => {
            const vs = s.variants.filter((v) => v.model === m.name);
            return { model: m.name, app: m.app, task: m.task, dataset: m.dataset, inputs: signature(m.inputs), validation: m.validationCount, variants: vs.length, profiled: vs.filter((v) => v.profiled).length };
          }),
        ),
  );
}

/** A model's description with its variants (`GET /v1/apps/{app}/models`, found through the model's metadata). */
export async function fetchModel(api: Api, model: string): Promise<ModelView> {
  const meta = await api.get<{ parameters?: { app?: string } }>(`/v2/models/${seg(model)}`);
  const app = meta.parameters?.app;
  if (!app) throw new CliError(`the frontend did not say which app model '${model}' is in`);
  const listed = await api.get<{ models: ModelView[] }>(`/v1/apps/${seg(app)}/models`);
  const found = listed.models.find((m) => m.name === model);
  if (!found) throw new CliError(`model '${model}' is not among the models of app '${app}'`);
  return found;
}

/** Latency at batch 1 and at the variant's largest batch, e.g. "1.2 / 8.4". */
function latencies(v: VariantView): string {
  if (!v.latency_ms) return "-";
  const one = v.latency_ms["1"];
  const max = v.latency_ms[String(v.batch_size)];
  return `${fixed(one, 2)} / ${fixed(max, 2)}`;
}

export function variantRows(variants: readonly VariantView[], instances: readonly InstanceRecord[]): Row[] {
  return variants.map((v) => ({
    variant: v.name,
    hw: v.hardware,
    quant: v.quantization,
    threads: v.threads,
    batch: v.batch_size,
    "wait ms": fixed(v.batch_wait_ms, 1),
    accuracy: fixed(v.accuracy, 4),
    "ms b1 / bmax": latencies(v),
    "peak qps": fixed(v.peak_qps, 0),
    "load ms": fixed(v.load_latency_ms, 0),
    "mem MB": megabytes(v.memory_bytes),
    profiled: v.profiled ? "yes" : "no",
    instances:
      instances
        .filter((i) => i.variant === v.name)
        .map((i) => `${i.worker}:${i.state}`)
        .join(" ") || "-",
  }));
}

export async function listVariants(api: Api, out: Out, model: string): Promise<void> {
  const [m, s] = await Promise.all([fetchModel(api, model), status(api)]);
  const instances = s.instances.filter((i) => i.model === model);
  out.emit({ model: m.name, app: m.app, variants: m.variants, instances }, () => `${m.name} (app ${m.app}; inputs ${signature(m.inputs)})\n${textTable(variantRows(m.variants, instances))}`);
}

export async function listWorkers(api: Api, out: Out): Promise<void> {
  const s = await status(api);
  out.emit({ workers: s.workers }, () => {
    if (s.workers.length === 0) return "no workers are reporting";
    const workers = textTable(
      s.workers.map((w) => ({
        worker: w.worker,
        hardware: w.hardware,
        threads: `${w.threadsUsed}/${w.threads}`,
        "memory MB": `${megabytes(w.memoryUsedBytes)}/${megabytes(w.memoryBytes)}`,
        "RSS MB": megabytes(w.rssBytes),
        "up s": Math.round((s.atMs - w.startedAtMs) / 1000),
        variants: w.variants.length,
      })),
    );
    const loaded: Row[] = s.workers.flatMap((w) =>
      w.variants.map((v) => ({ worker: w.worker, variant: v.variant, state: v.state, instances: v.instances, "arrivals/s": v.arrivals, "served/s": v.served, "errors/s": v.errors, queue: v.queueLength, "p50 ms": fixed(v.latencyP50Ms), "p99 ms": fixed(v.latencyP99Ms), busy: `${Math.round(v.utilisation * 100)}%` })),
    );
    return `${workers}\n\n${section("Loaded variants", loaded)}`;
  });
}

export interface Decision {
  source: string;
  target: string;
  at_ms: number;
  action?: string;
  decision?: string;
  reason?: string;
  worker?: string;
  model?: string;
  variant?: string;
  pipeline?: string;
  kind?: string;
  hardware?: string;
  count?: number;
}

export async function listDecisions(api: Api, out: Out, query: { limit?: number; sinceS?: number; source?: string }): Promise<void> {
  const answer = await api.get<{ at_ms: number; since_s: number; decisions: Decision[] }>("/v1/decisions", { limit: query.limit, since_s: query.sinceS, source: query.source });
  out.emit(answer, () =>
    answer.decisions.length === 0
      ? `no scaling decisions in the last ${answer.since_s} s`
      : textTable(
          answer.decisions.map((d) => ({
            time: clockTime(d.at_ms),
            source: d.source,
            action: d.action ?? d.decision ?? "-",
            of: d.variant ?? d.pipeline ?? d.model ?? d.hardware ?? d.kind ?? "-",
            count: d.count ?? "",
            worker: d.worker ?? "-",
            reason: d.reason ?? "",
          })),
        ),
  );
}

export async function showCost(api: Api, out: Out): Promise<void> {
  const c = await api.get<CostSummary>("/v1/cost");
  out.emit(c, () =>
    [
      `$${c.totalDollars.toFixed(4)} so far, $${c.dollarsPerHour.toFixed(4)} per hour now (as of ${clockTime(c.atMs)})`,
      section("By market", c.byMarket.map((m) => ({ provider: m.provider, market: m.market, running: m.running, "$/h": m.dollarsPerHour.toFixed(4), $: m.dollars.toFixed(4) }))),
      section("Workers", c.workers.map((w) => ({ kind: w.kind, state: w.state, count: w.count }))),
      section(
        "Instances",
        c.instances.map((i) => ({ id: i.id, worker: i.worker, kind: i.kind, type: i.instanceType, market: i.market, state: i.state, "$/h": i.pricePerHour.toFixed(4), launched: clockTime(i.launchedAtMs), ended: i.endedAtMs === null ? "-" : clockTime(i.endedAtMs), $: i.dollars.toFixed(4) })),
      ),
    ].join("\n\n"),
  );
}
