import type { FastifyInstance, RawReplyDefaultExpression, RawRequestDefaultExpression, RawServerDefault } from "fastify";
import {
  ErrorCode,
  ServeError,
  encodeTensors,
  headers,
  pipelineNameSchema,
  pipelineRecordSchema,
  subjects,
  type PipelineRecord,
} from "@sloserve/contracts";
import { errorFromReply, makeHeaders, type Bus, type Logger } from "@sloserve/bus";
import type { Catalog, MetadataStore } from "@sloserve/store";
import { canSee, pipelineApps, pipelineInputSignature, resolvePipelineParams } from "@sloserve/policy";
import { jsonToWire } from "./infer.js";
import { acceptFileBodies, fileInput, isJsonType, mediaTypeOf } from "./pipeline-files.js";

/**
 * The pipeline API (InferLine pipelines, DESIGN §3): register, list, show and delete specs (the
 * dispatchers hold the registry: `registry.request.pipeline.*`), and query a pipeline
 * (`POST /v1/pipelines/{name}/infer`: Open Inference Protocol JSON in, checked here against the
 * pipeline's input signature and converted to binary tensors, then `infer.pipeline.<name>`).
 * `parameters` of the query body override the pipeline's parameters (e.g. `{"threshold": 0.95}`),
 * besides `timeout_ms`.
 */

/** The frontend's query helper (app.ts): sends on the bus, turns the answer or its error into the HTTP reply body. */
export type Ask = (subject: string, payload: Uint8Array, requestId: string, timeoutMs: number | undefined, extra: Record<string, string | number | undefined>) => Promise<Record<string, unknown>>;

export interface PipelineRouteDeps {
  bus: Bus;
  store: MetadataStore;
  catalog: Catalog;
  log: Logger;
}

function checkPipelineName(name: string): string {
  if (!pipelineNameSchema.safeParse(name).success) {
    throw new ServeError(ErrorCode.invalidName, `invalid pipeline name ${JSON.stringify(name)}: use 1-64 letters, digits, '_' or '-', starting with a letter or digit`);
  }
  return name;
}

function describe(record: PipelineRecord, catalog: Catalog): Record<string, unknown> {
  const env = { model: (m: string) => catalog.signature(m), app: (a: string) => catalog.appSignature(a) };
  return { name: record.spec.name, registered_at_ms: record.registeredAtMs, slo: record.spec.slo, inputs: pipelineInputSignature(record.spec, env), spec: record.spec };
}

export async function registerPipelineRoutes(app: FastifyInstance<RawServerDefault, RawRequestDefaultExpression, RawReplyDefaultExpression, Logger>, deps: PipelineRouteDeps, ask: Ask): Promise<void> {
  const { bus, store, catalog, log } = deps;
  /** Specs by name, kept current by registry events (a miss reads Redis). */
  const cache = new Map<string, PipelineRecord>();
  const events = bus.nc.subscribe(subjects.pipelineEvents, {
    callback: (_err, msg) => {
      try {
        const [, , , kind, name] = msg.subject.split(".");
        if (kind === "registered") {
          const record = pipelineRecordSchema.parse(msg.json());
          cache.set(record.spec.name, record);
        } else if (name) cache.delete(name);
      } catch (err) {
        log.warn({ err, subject: msg.subject }, "ignoring malformed pipeline event");
      }
    },
  });
  app.addHook("onClose", async () => events.unsubscribe());

  const recordOr404 = async (name: string): Promise<PipelineRecord> => {
    checkPipelineName(name);
    let record = cache.get(name);
    if (!record) {
      record = await store.getPipeline(name);
      if (record) cache.set(name, record);
    }
    if (!record) throw new ServeError(ErrorCode.unknownPipeline, `no pipeline named '${name}'`);
    return record;
  };

  /** Makes sure the catalog knows the models and apps a spec names (their signatures give the pipeline's inputs). */
  const ensureKnown = async (spec: PipelineRecord["spec"]): Promise<void> => {
    let reload = false;
    for (const s of spec.stages) {
      if (s.model !== undefined && !catalog.models.has(s.model)) await catalog.getModel(s.model);
      if (s.app !== undefined && catalog.modelsOfApp(s.app).length === 0) reload = true;
    }
    if (reload) await catalog.load();
  };

  /** A registry request to the dispatchers; their error reply becomes this request's error. */
  const registry = async (subject: string, body: unknown, requestId: string): Promise<unknown> => {
    let answer;
    try {
      answer = await bus.nc.request(subject, JSON.stringify(body), { timeout: 30_000, headers: makeHeaders({ [headers.requestId]: requestId }) });
    } catch (err) {
      const e = err as Error;
      if (/no ?responders/i.test(e.name + e.message)) throw new ServeError(ErrorCode.unavailable, "no dispatcher is running");
      throw err;
    }
    const failure = errorFromReply(answer.headers, answer.data);
    if (failure) throw failure;
    return answer.json();
  };

  app.post<{ Params: { name: string } }>("/v1/pipelines/:name", async (req, reply) => {
    const name = checkPipelineName(req.params.name);
    const body = req.body;
    if (!body || typeof body !== "object" || Array.isArray(body)) throw new ServeError(ErrorCode.invalidPipeline, "send the pipeline spec as a JSON object (Content-Type: application/json)");
    const given = (body as { name?: unknown }).name;
    if (given !== undefined && given !== name) throw new ServeError(ErrorCode.invalidPipeline, `the spec names pipeline ${JSON.stringify(given)} but the path names '${name}'`);
    const record = pipelineRecordSchema.parse(await registry(subjects.registerPipeline, { spec: { ...body, name } }, req.id));
    cache.set(name, record);
    await ensureKnown(record.spec);
    return reply.code(201).send(describe(record, catalog));
  });

  app.get("/v1/pipelines", async (req) => {
    const records = await store.listPipelines();
    for (const r of records) await ensureKnown(r.spec);
    // With access control on, a key limited to some apps sees the pipelines within them only (access.ts).
    const visible = records.filter((r) => canSee(req.apiKey ?? undefined, pipelineApps(r.spec.stages, (m) => catalog.models.get(m)?.app)));
    return { pipelines: visible.map((r) => describe(r, catalog)) };
  });

  app.get<{ Params: { name: string } }>("/v1/pipelines/:name", async (req) => {
    const record = await recordOr404(req.params.name);
    await ensureKnown(record.spec);
    // The pipeline controller's plan (model-autoscaler): planned stages, or why it is infeasible or waiting.
    const plan = await store.getPipelinePlan(record.spec.name);
    return { ...describe(record, catalog), plan: plan ?? null };
  });

  app.delete<{ Params: { name: string } }>("/v1/pipelines/:name", async (req) => {
    const name = checkPipelineName(req.params.name);
    const answer = await registry(subjects.unregisterPipeline, { pipeline: name }, req.id);
    cache.delete(name);
    return answer;
  });

  // Queries: Open Inference Protocol JSON, or for a pipeline whose one input takes a file (the ocr
  // pipeline's image) the file itself as the body (pipeline-files.ts; its parsers in this scope only).
  await app.register(async (scope) => {
    acceptFileBodies(scope);
    scope.post<{ Params: { name: string } }>("/v1/pipelines/:name/infer", async (req, reply) => {
      const record = await recordOr404(req.params.name);
      await ensureKnown(record.spec);
      const type = mediaTypeOf(req.headers["content-type"]);
      let payload: Uint8Array;
      let timeoutMs: number | undefined;
      let overrides: Record<string, unknown>;
      if (isJsonType(type)) {
        const signature = pipelineInputSignature(record.spec, { model: (m) => catalog.signature(m), app: (a) => catalog.appSignature(a) });
        ({ payload, timeoutMs } = jsonToWire(req.body, signature));
        const { timeout_ms: _timeout, ...rest } = (req.body as { parameters?: Record<string, unknown> }).parameters ?? {};
        overrides = rest;
      } else {
        payload = encodeTensors([fileInput(record.spec.name, type, req.body, record.spec.inputs)]);
        // A file body has no room for parameters: they come in the header, as over NATS.
        overrides = paramsHeader(req.headers[headers.pipelineParams]);
      }
      try {
        resolvePipelineParams(record.spec, overrides);
      } catch (err) {
        throw new ServeError(ErrorCode.badRequest, `pipeline ${record.spec.name}: ${(err as Error).message}`);
      }
      const extra = Object.keys(overrides).length > 0 ? { [headers.pipelineParams]: JSON.stringify(overrides) } : {};
      return reply.type("application/json").send(await ask(subjects.inferPipeline(record.spec.name), payload, req.id, timeoutMs, extra));
    });
  });
}

/** Pipeline parameters from the `x-pipeline-params` header (a JSON object), or none. */
function paramsHeader(value: string | string[] | undefined): Record<string, unknown> {
  if (value === undefined) return {};
  let parsed: unknown;
  try {
    parsed = JSON.parse(Array.isArray(value) ? value.join(",") : value);
  } catch {
    throw new ServeError(ErrorCode.badRequest, `header ${headers.pipelineParams} is not valid JSON`);
  }
  if (!parsed || typeof parsed !== "object" || Array.isArray(parsed)) throw new ServeError(ErrorCode.badRequest, `header ${headers.pipelineParams} must be a JSON object`);
  return parsed as Record<string, unknown>;
}
