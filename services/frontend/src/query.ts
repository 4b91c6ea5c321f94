import {
  ErrorCode,
  ServeError,
  checkName,
  contentTypes,
  decodeTensors,
  describeZodError,
  headers,
  oipRequestToWire,
  oipTimeoutMs,
  servingStates,
  sloSchema,
  subjects,
  repositoryIndex,
  tritonModelConfig,
  tritonModelStatistics,
  type ApiKeyGrant,
  type Clock,
  type ModelRecord,
  type RepositoryIndexEntry,
  type TritonModelConfig,
  type TritonModelStatistics,
  type OipRequest,
  type Slo,
  type Tensor,
} from "@sloserve/contracts";
import { backoffMs, errorFromReply, makeHeaders, type Bus } from "@sloserve/bus";
import type { Catalog, MetadataStore } from "@sloserve/store";
import { canSee, type QuotaTicket } from "@sloserve/policy";
import type { ReplyMeta } from "./infer.js";
import type { FrontendQuotas } from "./quotas.js";
import { NO_COUNTS, type InferenceStatistics } from "./statistics.js";

/**
 * The Open Inference Protocol's meaning, whatever carries it (HTTP JSON, the HTTP binary extension,
 * gRPC): `model_name` resolved to a model or, model-less, to an app with its requirements; the
 * request checked and sent on the bus; the answer or the error the caller gets. The HTTP routes
 * (oip-http.ts) and the gRPC service (grpc.ts) only translate their encoding to and from this.
 */

export interface QueryDeps {
  bus: Bus;
  store: MetadataStore;
  catalog: Catalog;
  clock: Clock;
  /** Time a query may take when the caller gives none, ms. */
  defaultTimeoutMs: number;
  /** This process's counts of the queries it served (statistics.ts), shared by HTTP and gRPC. */
  stats: InferenceStatistics;
  /** Apps' and API keys' quotas: this frontend's admission (quotas.ts), shared by HTTP and gRPC. */
  quotas: FrontendQuotas;
}

/** The only version each model has: every model is served as version "1". */
export const MODEL_VERSION = "1";

/** What a `model_name` names: a registered model, or an app (a model-less query; its models share their inputs). */
export type QueryTarget = { kind: "model"; name: string; model: ModelRecord } | { kind: "app"; name: string; models: readonly ModelRecord[] };

/** Resolves `model_name` (and `model_version`, empty or "1") to a model or, failing that (or with `appOnly`), an app. */
export async function resolveTarget(catalog: Catalog, name: string, version?: string, appOnly = false): Promise<QueryTarget> {
  checkName(appOnly ? "app" : "model", name);
  // From memory when known (no await on the query path), else from Redis.
  const model = appOnly ? undefined : (catalog.models.get(name) ?? (await catalog.getModel(name)));
  let target: QueryTarget | undefined = model ? { kind: "model", name, model } : undefined;
  if (!target) {
    if (catalog.modelsOfApp(name).length === 0) await catalog.load();
    const models = catalog.modelsOfApp(name);
    if (models.length > 0) target = { kind: "app", name, models };
  }
  if (!target) throw appOnly ? new ServeError(ErrorCode.unknownApp, `no app named '${name}' (it has no models)`) : new ServeError(ErrorCode.unknownModel, `no model named '${name}' (nor an app)`);
  if (version !== undefined && version !== "" && version !== MODEL_VERSION) {
    throw new ServeError(ErrorCode.unknownModel, `${target.kind} '${name}' has no version '${version}'; its only version is "${MODEL_VERSION}"`);
  }
  return target;
}

/** A target's inputs and outputs (an app's: its first model's, in name order). */
function signatureOf(target: QueryTarget): ModelRecord {
  return target.kind === "model" ? target.model : (target.models[0] as ModelRecord);
}

/** Model metadata as the protocol reports it; for an app, its models' shared signature. */
export async function modelMetadata(catalog: Catalog, name: string, version?: string): Promise<{ name: string; versions: string[]; platform: string; inputs: ModelRecord["inputs"]; outputs: ModelRecord["outputs"]; parameters: Record<string, unknown> }> {
  const target = await resolveTarget(catalog, name, version);
  const m = signatureOf(target);
  const parameters: Record<string, unknown> = target.kind === "model"
    ? { app: m.app, task: m.task, dataset: m.dataset, variants: (catalog.variantsByModel.get(m.name) ?? []).map((v) => v.name) }
    : { app: target.name, models: target.models.map((x) => x.name), model_less: "send the request parameters slo_latency_ms, min_accuracy, max_cost" };
  return { name: target.name, versions: [MODEL_VERSION], platform: target.kind === "model" ? m.platform : "sloserve-app", inputs: m.inputs, outputs: m.outputs, parameters };
}

/** Whether a model (an app: any of its models) has an instance loaded and active. */
export async function modelReady(deps: Pick<QueryDeps, "catalog" | "store">, name: string, version?: string): Promise<boolean> {
  const target = await resolveTarget(deps.catalog, name, version);
  const names = new Set(target.kind === "model" ? [target.name] : target.models.map((m) => m.name));
  return (await deps.store.listInstances()).some((i) => names.has(i.model) && servingStates.has(i.state));
}

/** Server readiness: NATS connected and Redis answering. */
export async function serverReady(deps: Pick<QueryDeps, "bus" | "store">): Promise<{ ready: boolean; nats: boolean; redis: boolean }> {
  const nats = !deps.bus.nc.isClosed();
  const redis = await deps.store.ping();
  return { ready: nats && redis, nats, redis };
}

/**
 * A model's configuration in Triton's terms (the model_configuration extension): its record, as the
 * metadata reports it, with the largest batch of its variants (an app's: of all its models' variants).
 */
export async function modelConfig(catalog: Catalog, name: string, version?: string): Promise<TritonModelConfig> {
  const target = await resolveTarget(catalog, name, version);
  const models = target.kind === "model" ? [target.model] : target.models;
  const batches = models.flatMap((m) => (catalog.variantsByModel.get(m.name) ?? []).map((v) => v.maxBatch));
  const m = signatureOf(target);
  return tritonModelConfig(target.name, { platform: target.kind === "model" ? m.platform : "sloserve-app", inputs: m.inputs, outputs: m.outputs }, batches);
}

/**
 * Triton's statistics of one model or app (404 for another name), or with no name of every registered
 * model and every app queried, those a key limited to some apps may see only: what this frontend
 * counted of the queries it served (statistics.ts; all its processes').
 */
export async function modelStatistics(deps: Pick<QueryDeps, "catalog" | "stats">, name: string | undefined, version: string | undefined, grant?: ApiKeyGrant | undefined): Promise<{ model_stats: TritonModelStatistics[] }> {
  // This process's counts, or with several frontend processes every one's summed (statistics.ts).
  const { catalog } = deps;
  const stats = await deps.stats.view();
  const of = (n: string) => tritonModelStatistics(n, MODEL_VERSION, stats.get(n) ?? NO_COUNTS);
  if (name !== undefined && name !== "") return { model_stats: [of((await resolveTarget(catalog, name, version)).name)] };
  // A registered model belongs to its app; a name queried that is no model is an app (or one gone since: left out).
  const appOf = (n: string): string | undefined => catalog.models.get(n)?.app ?? (catalog.modelsOfApp(n).length > 0 ? n : undefined);
  const names = [...new Set([...catalog.models.keys(), ...stats.names()])].sort();
  const visible = names.filter((n) => {
    const app = appOf(n);
    return app !== undefined && canSee(grant, [app]);
  });
  return { model_stats: visible.map(of) };
}

/** The repository index (models with their state; libs/contracts triton.ts), those a key limited to some apps may see only. */
export async function repositoryIndexOf(store: MetadataStore, grant: ApiKeyGrant | undefined, readyOnly: boolean): Promise<RepositoryIndexEntry[]> {
  const [models, instances] = await Promise.all([store.listModels(), store.listInstances()]);
  return repositoryIndex(models.filter((m) => canSee(grant, [m.app])), instances, MODEL_VERSION, readyOnly);
}

/** Server metadata; the extensions are Triton's names of those served (tritonclient reads them). */
export const serverMetadata = { name: "sloserve", version: "0.1.0", extensions: ["model_repository", "model_configuration", "statistics", "binary_tensor_data", "parameters"] };

/**
 * A model-less query's requirements from the request parameters `slo_latency_ms`, `min_accuracy`,
 * `max_cost` (numbers; gRPC's int64 and double parameters alike).
 */
export function requirementsFromParameters(app: string, parameters: Record<string, unknown>): Slo {
  const parsed = sloSchema.safeParse({ latency_ms: parameters["slo_latency_ms"], min_accuracy: parameters["min_accuracy"], max_cost: parameters["max_cost"] });
  if (!parsed.success) {
    throw new ServeError(ErrorCode.badRequest, `'${app}' is an app: a model-less query needs the request parameter slo_latency_ms (a positive number of ms) and optionally min_accuracy (0..1) and max_cost: ${describeZodError(parsed.error)}`);
  }
  return parsed.data;
}

/** The answer to a query: the reply's fields (model_name, id, served_by, timing_ms) and the outputs asked for. */
export interface QueryAnswer {
  header: ReplyMeta & Record<string, unknown>;
  outputs: Tensor[];
}

/**
 * How long a query waits for a dispatcher when none answers (NATS "no responders"), within its own
 * deadline: a dispatcher whose connection was on a lost NATS node has no subscription until it
 * reconnects to another (about a second; test/fault-nats-cluster.test.ts), and a restarted one until it
 * has started. Past this the caller gets `unavailable` at once rather than at its deadline.
 */
export const NO_DISPATCHER_WAIT_MS = 5_000;

/**
 * Sends one query on the bus and returns the reply, or throws its error (a ServeError with the code
 * the caller gets): a timeout is deadline_exceeded, no dispatcher (after {@link NO_DISPATCHER_WAIT_MS}
 * of asking again) is unavailable.
 */
export async function askBus(deps: Pick<QueryDeps, "bus" | "clock" | "defaultTimeoutMs">, subject: string, payload: Uint8Array, requestId: string, timeoutMs: number | undefined, extra: Record<string, string | number | undefined>): Promise<{ data: Uint8Array; contentType: string | undefined }> {
  const now = deps.clock.now();
  const timeout = Math.min(timeoutMs ?? deps.defaultTimeoutMs, 600_000);
  const deadline = now + timeout;
  let answer;
  for (let attempt = 0; ; attempt++) {
    try {
      answer = await deps.bus.request(subject, payload, {
        timeout: Math.max(1, deadline - deps.clock.now()),
        headers: makeHeaders({ [headers.requestId]: requestId, [headers.contentType]: contentTypes.wire, [headers.deadline]: deadline, [headers.receivedAt]: now, ...extra }),
      });
      break;
    } catch (err) {
      const e = err as Error;
      if (/timeout/i.test(e.name) || /timeout/i.test(e.message)) throw new ServeError(ErrorCode.deadlineExceeded, `no answer within ${timeout} ms`);
      if (/no ?responders/i.test(e.name + e.message)) {
        const delayMs = backoffMs(attempt, 25, 500);
        const at = deps.clock.now();
        if (at + delayMs - now > NO_DISPATCHER_WAIT_MS || at + delayMs >= deadline) throw new ServeError(ErrorCode.unavailable, "no dispatcher is running");
        await new Promise((r) => setTimeout(r, delayMs));
        continue;
      }
      throw err;
    }
  }
  const failure = errorFromReply(answer.headers, answer.data);
  if (failure) throw failure;
  return { data: answer.data, contentType: answer.headers?.get(headers.contentType) };
}

/**
 * One Open Inference Protocol inference, whatever the transport: resolves `model_name` (a model, or
 * with `appOnly` or failing that an app), then reads the request (`read`: after resolution, so that an
 * unknown model is reported as such whatever the body), checks the requested outputs and the inputs
 * against the signature, sends the query on the bus (`infer.model.<m>`, or `infer.app.<a>` with the
 * x-slo-* headers: the requirements from `read`'s `slo` or else from the request parameters) and
 * returns the answer's outputs, those asked for only, with the request. The deadline is the request
 * parameter `timeout_ms`, else the transport's (`context.timeoutMs`), else the default. Errors are
 * ServeErrors; each transport maps their code to its status. Once the target is found, the query is
 * counted under its name in `deps.stats` (a success with its timings, or a failure): a few additions.
 * Before its body is read it is admitted under its API key's quota (`context.keyId`, access control
 * on) and its app's, or refused `quota_exceeded` (quotas.ts); admitted, it holds its slots until it
 * ends, and goes out on the `….admitted` subject.
 */
export async function serveOipQuery(
  deps: QueryDeps,
  modelName: string,
  modelVersion: string | undefined,
  read: () => { request: OipRequest; slo?: Slo | undefined },
  context: { requestId: string; timeoutMs?: number | undefined; appOnly?: boolean; keyId?: string | undefined },
): Promise<QueryAnswer & { request: OipRequest }> {
  const started = performance.now();
  const target = await resolveTarget(deps.catalog, modelName, modelVersion, context.appOnly === true);
  const counters = deps.stats.of(target.name);
  let ticket: QuotaTicket | undefined;
  try {
    ticket = deps.quotas.admit(target.kind === "model" ? target.model.app : target.name, context.keyId);
    const { request, slo: given } = read();
    const signature = signatureOf(target);
    const requested = request.outputs?.map((o) => o.name);
    for (const name of requested ?? []) {
      if (!signature.outputs.some((o) => o.name === name)) {
        throw new ServeError(ErrorCode.badRequest, `${target.kind} '${target.name}' has no output named '${name}'; its outputs are: ${signature.outputs.map((o) => o.name).join(", ")}`);
      }
    }
    const payload = oipRequestToWire(request, signature.inputs);
    let subject: string;
    let extra: Record<string, number | undefined> = {};
    if (target.kind === "model") subject = subjects.admitted(subjects.inferModel(target.name));
    else {
      const slo = given ?? requirementsFromParameters(target.name, request.parameters);
      subject = subjects.admitted(subjects.inferApp(target.name));
      extra = { [headers.sloLatencyMs]: slo.latency_ms, [headers.sloMinAccuracy]: slo.min_accuracy, [headers.sloMaxCost]: slo.max_cost };
    }
    const sent = performance.now();
    const reply = await askBus(deps, subject, payload, context.requestId, oipTimeoutMs(request.parameters) ?? context.timeoutMs, extra);
    const replied = performance.now();
    if (reply.contentType === contentTypes.json) throw new ServeError(ErrorCode.internal, `${subject} answered in JSON; the frontend asked for binary tensors`);
    const { meta, tensors } = decodeTensors<ReplyMeta>(reply.data);
    const { tensors: _t, ...header } = meta;
    if (request.id !== undefined) header.id = request.id;
    header.model_version ??= MODEL_VERSION;
    const outputs = requested ? tensors.filter((t) => requested.includes(t.name)) : tensors;
    // Statistics: a batch's rows when the first input has a variable first dimension, else one inference.
    const done = performance.now();
    const timing = header.timing_ms;
    const rows = signature.inputs[0]?.shape[0] === -1 ? (request.inputs[0]?.shape[0] ?? 1) : 1;
    counters.success(done - started, sent - started, (timing?.queue ?? 0) + (timing?.batch_wait ?? 0), timing?.inference ?? 0, done - replied, rows, deps.clock.now());
    return { header, outputs, request };
  } catch (err) {
    counters.failure(performance.now() - started);
    throw err;
  } finally {
    ticket?.release();
  }
}
