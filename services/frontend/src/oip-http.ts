import type { OutgoingHttpHeaders } from "node:http";
import type { FastifyInstance, FastifyReply, FastifyRequest, RawReplyDefaultExpression, RawRequestDefaultExpression, RawServerDefault } from "fastify";
import {
  ErrorCode,
  ServeError,
  describeZodError,
  headers,
  oipResponseParts,
  parseOipBinaryBody,
  parseOipJson,
  sloSchema,
  wantsBinaryOutput,
  type OipRequest,
  type Slo,
  type Tensor,
} from "@sloserve/contracts";
import type { Logger } from "@sloserve/bus";
import { modelConfig, modelMetadata, modelReady, modelStatistics, repositoryIndexOf, serveOipQuery, type QueryDeps } from "./query.js";

/**
 * The Open Inference Protocol over HTTP (KServe v2 REST): model metadata and readiness (with and
 * without `/versions/{v}`), inference in JSON or in the binary tensor extension
 * (`Inference-Header-Content-Length`, input `binary_data_size`, output `binary_data`, request
 * `binary_data_output`), requested outputs, the request id echoed, and model-less queries (an app's
 * name as the model, its requirements as the request parameters `slo_latency_ms`, `min_accuracy`,
 * `max_cost`; or `POST /v1/apps/{app}/infer` with `"slo"` in the body). Triton's extensions that its
 * clients call: `GET /v2/models/{m}[/versions/{v}]/config` (model_configuration),
 * `GET /v2/models[/{m}[/versions/{v}]]/stats` (statistics: this frontend's counts) and
 * `POST /v2/repository/index` (model_repository; body `{"ready": true}` optional, or none). The meaning
 * lives in query.ts, shared with the gRPC service.
 */

type App = FastifyInstance<RawServerDefault, RawRequestDefaultExpression, RawReplyDefaultExpression, Logger>;

/** The header that marks a binary-extension body and gives its JSON header's length, in requests and answers. */
const HEADER_LENGTH = "inference-header-content-length";

/** Binary answers from this size on are written in pieces rather than concatenated (writing pieces costs more per answer than a small copy). */
const PIECES_FROM_BYTES = 64 * 1024;

/**
 * Sends an answer: JSON, or the binary tensor extension when an output goes back binary. A large
 * binary answer (ocr-rec's 1 MB) is written as its pieces, the outputs straight from the bus message:
 * concatenating them first cost the frontend a copy of every byte (bench/README.md, "the data path").
 * The pieces go to the response directly (the reply hijacked: status and headers as Fastify would
 * have sent them, the onResponse hooks still run when it finishes), not through a stream piped into
 * it (an async iterator, listeners and microtasks on every answer: bench/README.md, "HTTP binary").
 */
export function sendOipAnswer(reply: FastifyReply, header: Record<string, unknown>, outputs: readonly Tensor[], binary: (name: string) => boolean): FastifyReply {
  const { parts, byteLength, headerLength } = oipResponseParts(header, outputs, binary);
  if (headerLength === undefined) return reply.type("application/json").send(parts[0]);
  reply.header(HEADER_LENGTH, headerLength).type("application/octet-stream");
  if (byteLength < PIECES_FROM_BYTES) return reply.send(Buffer.concat(parts, byteLength));
  reply.header("content-length", byteLength).hijack();
  const res = reply.raw;
  res.writeHead(reply.statusCode, reply.getHeaders() as OutgoingHttpHeaders);
  const last = parts.length - 1;
  for (let i = 0; i < last; i++) res.write(parts[i]);
  res.end(parts[last]);
  return reply;
}

/** The request in either encoding; `json` is the parsed body when it came in JSON. */
function requestOf(req: FastifyRequest): { request: OipRequest; json?: unknown } {
  const body = req.body as Buffer | undefined;
  const given = req.headers[HEADER_LENGTH];
  if (given !== undefined) {
    if (!body) throw new ServeError(ErrorCode.badRequest, `${HEADER_LENGTH} is ${String(given)} but the request has no body`);
    return { request: parseOipBinaryBody(body, /^\s*\d+\s*$/.test(String(given)) ? Number(given) : NaN) };
  }
  if (!body || body.length === 0) throw new ServeError(ErrorCode.malformedJson, "the request body is empty: send an inference request in JSON, or in the binary tensor extension with Inference-Header-Content-Length");
  let json: unknown;
  try {
    json = JSON.parse(body.toString("utf8"));
  } catch (err) {
    throw new ServeError(ErrorCode.malformedJson, `the request body is not valid JSON: ${(err as Error).message}`);
  }
  return { request: parseOipJson(json), json };
}

/** The repository index request's `ready` (Triton's model_repository extension): an empty body is `{}`. */
function readyOnly(body: Buffer | undefined): boolean {
  if (!body || body.length === 0) return false;
  let json: unknown;
  try {
    json = JSON.parse(body.toString("utf8"));
  } catch (err) {
    throw new ServeError(ErrorCode.malformedJson, `the repository index request is not valid JSON: ${(err as Error).message}`);
  }
  const ready = (json as { ready?: unknown } | null)?.ready;
  if (ready !== undefined && typeof ready !== "boolean") throw new ServeError(ErrorCode.badRequest, `"ready" must be true or false, got ${JSON.stringify(ready)}`);
  return ready === true;
}

export function registerOipHttpRoutes(app: App, deps: QueryDeps, options: { maxBodyBytes: number }): void {
  const { catalog } = deps;
  type ModelParams = { Params: { model: string; version?: string } };

  const metadata = async (req: FastifyRequest<ModelParams>) => modelMetadata(catalog, req.params.model, req.params.version);
  app.get<ModelParams>("/v2/models/:model", metadata);
  app.get<ModelParams>("/v2/models/:model/versions/:version", metadata);

  const ready = async (req: FastifyRequest<ModelParams>, reply: FastifyReply) => {
    const active = await modelReady(deps, req.params.model, req.params.version);
    return reply.code(active ? 200 : 503).send({ name: req.params.model, ready: active });
  };
  app.get<ModelParams>("/v2/models/:model/ready", ready);
  app.get<ModelParams>("/v2/models/:model/versions/:version/ready", ready);

  // ---- Triton's extensions: model configuration, statistics (the repository index is below: it has a body) ----
  const config = async (req: FastifyRequest<ModelParams>) => modelConfig(catalog, req.params.model, req.params.version);
  app.get<ModelParams>("/v2/models/:model/config", config);
  app.get<ModelParams>("/v2/models/:model/versions/:version/config", config);
  type StatsParams = { Params: { model?: string; version?: string } };
  const stats = async (req: FastifyRequest<StatsParams>) => modelStatistics(deps, req.params.model, req.params.version, req.apiKey ?? undefined);
  app.get<StatsParams>("/v2/models/stats", stats);
  app.get<StatsParams>("/v2/models/:model/stats", stats);
  app.get<StatsParams>("/v2/models/:model/versions/:version/stats", stats);

  const answer = async (req: FastifyRequest, reply: FastifyReply, model: string, version: string | undefined, read: () => { request: OipRequest; slo?: Slo | undefined }, appOnly = false) => {
    const result = await serveOipQuery(deps, model, version, read, { requestId: req.id, appOnly, keyId: req.apiKey?.id });
    reply.header(headers.requestId, req.id);
    return sendOipAnswer(reply, result.header, result.outputs, (name) => wantsBinaryOutput(result.request, name));
  };

  // Inference bodies are read as bytes whatever their content type (JSON, application/octet-stream,
  // or none, as some binary-extension clients send), then told apart by Inference-Header-Content-Length.
  app.register(async (scope) => {
    scope.removeAllContentTypeParsers();
    // The same parser by name for the usual types as well as for any ("*"): Fastify remembers the
    // parser found for a content type only when it was found by name, and looked the catch-all up
    // anew for every request (parsing the Content-Type header each time).
    const asBytes = (_req: FastifyRequest, body: Buffer, done: (err: null, body: Buffer) => void): void => done(null, body);
    for (const type of ["application/json", "application/octet-stream", "*"]) scope.addContentTypeParser(type, { parseAs: "buffer", bodyLimit: options.maxBodyBytes }, asBytes);
    // Triton's clients send the index request with an empty body (or {"ready": true}), with or without a JSON content type.
    scope.post("/v2/repository/index", async (req) => repositoryIndexOf(deps.store, req.apiKey ?? undefined, readyOnly(req.body as Buffer | undefined)));
    scope.post<ModelParams>("/v2/models/:model/infer", (req, reply) => answer(req, reply, req.params.model, undefined, () => requestOf(req)));
    scope.post<ModelParams>("/v2/models/:model/versions/:version/infer", (req, reply) => answer(req, reply, req.params.model, req.params.version, () => requestOf(req)));
    // Model-less query (INFaaS) with the requirements in the JSON body: {"inputs": …, "slo": {"latency_ms", "min_accuracy"?, "max_cost"?}},
    // or as the request parameters slo_latency_ms, min_accuracy, max_cost (as over /v2 and gRPC).
    scope.post<{ Params: { app: string } }>("/v1/apps/:app/infer", (req, reply) =>
      answer(req, reply, req.params.app, undefined, () => {
        const { request, json } = requestOf(req);
        const given = (json as { slo?: unknown } | null | undefined)?.slo;
        if (given === undefined) return { request };
        const slo = sloSchema.safeParse(given);
        if (!slo.success) throw new ServeError(ErrorCode.badRequest, `a model-less query needs "slo": {"latency_ms", "min_accuracy"?, "max_cost"?}: ${describeZodError(slo.error)}`);
        return { request, slo: slo.data };
      }, true),
    );
  });
}
