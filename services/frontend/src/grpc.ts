import { randomUUID } from "node:crypto";
import * as grpc from "@grpc/grpc-js";
import * as protoLoader from "@grpc/proto-loader";
import { ErrorCode, ServeError, httpStatusOf, oipGrpcProtoPath, tensorBytes, type ApiKeyGrant, type OipInput, type OipRequest } from "@sloserve/contracts";
import type { Logger } from "@sloserve/bus";
import { modelConfig, modelMetadata, modelReady, modelStatistics, repositoryIndexOf, serveOipQuery, serverMetadata, serverReady, type QueryDeps } from "./query.js";
import { checkGrpcCall, grpcRules, type AccessControl } from "./access.js";

/**
 * The Open Inference Protocol over gRPC: `inference.GRPCInferenceService` of
 * libs/contracts/proto/open_inference_grpc.proto (loaded at run time, no generated code), with
 * Triton's ModelConfig, ModelStatistics and RepositoryIndex. Every call
 * is translated to and from the protocol-neutral path of query.ts, which the HTTP routes share;
 * errors become gRPC status codes (with our error code in the `x-error-code` trailer).
 */

/** proto-loader options: field names as in the .proto, 64-bit integers as JS numbers, oneofs named. */
export const protoLoaderOptions: protoLoader.Options = { keepCase: true, longs: Number, enums: String, defaults: false, oneofs: true };

/** gRPC statuses by the HTTP status of our error codes (libs/contracts errors.ts), and the exceptions. */
const grpcStatusByHttp: Record<number, grpc.status> = {
  400: grpc.status.INVALID_ARGUMENT,
  401: grpc.status.UNAUTHENTICATED,
  403: grpc.status.PERMISSION_DENIED,
  404: grpc.status.NOT_FOUND,
  409: grpc.status.ALREADY_EXISTS,
  413: grpc.status.RESOURCE_EXHAUSTED,
  // Over its app's or its API key's quota (quota_exceeded).
  429: grpc.status.RESOURCE_EXHAUSTED,
  415: grpc.status.INVALID_ARGUMENT,
  422: grpc.status.FAILED_PRECONDITION,
  503: grpc.status.UNAVAILABLE,
  504: grpc.status.DEADLINE_EXCEEDED,
};
const grpcStatusExceptions: Partial<Record<ErrorCode, grpc.status>> = { [ErrorCode.noCapacity]: grpc.status.RESOURCE_EXHAUSTED };

/** The gRPC status of one of our error codes: no capacity is RESOURCE_EXHAUSTED, the rest follow their HTTP status. */
export function grpcStatusOf(code: ErrorCode): grpc.status {
  return grpcStatusExceptions[code] ?? grpcStatusByHttp[httpStatusOf(code)] ?? grpc.status.INTERNAL;
}

// ---- messages as proto-loader gives them (keepCase, longs as numbers, oneofs named) ----
type InferParameter = { parameter_choice?: string } & Record<string, unknown>;
type Parameters = Record<string, InferParameter> | undefined;
interface TensorContents {
  bool_contents?: boolean[];
  int_contents?: number[];
  int64_contents?: number[];
  uint_contents?: number[];
  uint64_contents?: number[];
  fp32_contents?: number[];
  fp64_contents?: number[];
  bytes_contents?: Buffer[];
}
interface InferRequestMessage {
  model_name: string;
  model_version?: string;
  id?: string;
  parameters?: Parameters;
  inputs?: Array<{ name: string; datatype: string; shape?: number[]; parameters?: Parameters; contents?: TensorContents | null }>;
  outputs?: Array<{ name: string; parameters?: Parameters }>;
  raw_input_contents?: Buffer[];
}

/** The typed-contents field of each datatype (FP16 has none: raw contents only). */
const CONTENTS_FIELD: Record<string, keyof TensorContents> = {
  BOOL: "bool_contents",
  INT8: "int_contents",
  INT16: "int_contents",
  INT32: "int_contents",
  INT64: "int64_contents",
  UINT8: "uint_contents",
  UINT16: "uint_contents",
  UINT32: "uint_contents",
  UINT64: "uint64_contents",
  FP32: "fp32_contents",
  FP64: "fp64_contents",
  BYTES: "bytes_contents",
};

/** InferParameter values as plain values (the oneof's chosen member). */
function plainParameters(parameters: Parameters): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [key, p] of Object.entries(parameters ?? {})) if (p.parameter_choice) out[key] = p[p.parameter_choice];
  return out;
}

/** BYTES elements as raw contents: each a 4-byte little-endian length, then its bytes. */
function lengthPrefixed(elements: readonly Uint8Array[]): Uint8Array {
  const out = Buffer.alloc(elements.reduce((n, e) => n + 4 + e.byteLength, 0));
  let offset = 0;
  for (const e of elements) {
    out.writeUInt32LE(e.byteLength, offset);
    out.set(e, offset + 4);
    offset += 4 + e.byteLength;
  }
  return out;
}

/** A ModelInferRequest as the protocol-neutral request: raw_input_contents, or each input's typed contents. */
export function requestFromGrpc(message: InferRequestMessage): OipRequest {
  const inputs = message.inputs ?? [];
  const raw = message.raw_input_contents ?? [];
  if (raw.length > 0 && raw.length !== inputs.length) {
    throw new ServeError(ErrorCode.badRequest, `raw_input_contents has ${raw.length} entries for ${inputs.length} inputs; send one per input, in the order of inputs`);
  }
  const converted = inputs.map((i, k): OipInput => {
    const base = { name: i.name, datatype: i.datatype, shape: i.shape ?? [], parameters: plainParameters(i.parameters) };
    const field = CONTENTS_FIELD[i.datatype];
    const typed = field ? i.contents?.[field] : undefined;
    if (raw.length > 0) {
      if (typed && typed.length > 0) throw new ServeError(ErrorCode.badRequest, `input '${i.name}' has contents although raw_input_contents is used; send one or the other`);
      return { ...base, raw: raw[k] as Buffer };
    }
    if (i.datatype === "BYTES") return { ...base, raw: lengthPrefixed((typed ?? []) as Buffer[]) };
    if (!field) throw new ServeError(ErrorCode.invalidDatatype, `input '${i.name}': ${i.datatype} has no typed contents in the protocol; send it in raw_input_contents`);
    return { ...base, data: typed ?? [] };
  });
  return {
    ...(message.id ? { id: message.id } : {}),
    parameters: plainParameters(message.parameters),
    inputs: converted,
    ...(message.outputs && message.outputs.length > 0 ? { outputs: message.outputs.map((o) => ({ name: o.name, parameters: plainParameters(o.parameters) })) } : {}),
  };
}

/** A gRPC error for a failed call: our code's status, the message, the code in the `x-error-code` trailer. */
function toGrpcError(err: unknown, log: Logger): Partial<grpc.StatusObject> {
  const serveError = err instanceof ServeError ? err : new ServeError(ErrorCode.internal, (err as Error).message);
  if (serveError.code === ErrorCode.internal) log.error({ err }, "gRPC call failed");
  const metadata = new grpc.Metadata();
  metadata.set("x-error-code", serveError.code);
  const retryAfter = serveError.details?.["retry_after_s"];
  if (typeof retryAfter === "number") metadata.set("retry-after", String(retryAfter));
  return { code: grpcStatusOf(serveError.code), details: serveError.message, metadata };
}

/** A unary handler from an async function; its errors become gRPC statuses. */
function unary<Req, Res>(log: Logger, fn: (request: Req, call: grpc.ServerUnaryCall<Req, Res>) => Promise<Res>): grpc.handleUnaryCall<Req, Res> {
  return (call, callback) => {
    fn(call.request, call).then(
      (response) => callback(null, response),
      (err: unknown) => callback(toGrpcError(err, log)),
    );
  };
}

export interface GrpcServer {
  port: number;
  stop(): Promise<void>;
}

/** Loads the service definition from the .proto (also what the tests' clients do). */
export function loadInferenceService(): grpc.ServiceDefinition {
  const definition = grpc.loadPackageDefinition(protoLoader.loadSync(oipGrpcProtoPath, protoLoaderOptions));
  const service = (definition.inference as grpc.GrpcObject).GRPCInferenceService as grpc.ServiceClientConstructor;
  return service.service;
}

/** The key each call was checked with (guarded calls only), for the listings that show a key's apps only. */
const grants = new WeakMap<object, ApiKeyGrant>();
const grantOf = (call: object): ApiKeyGrant | undefined => grants.get(call);

/**
 * Every method checked against its access rule (access.ts `grpcRules`) before it runs: a refusal is
 * UNAUTHENTICATED or PERMISSION_DENIED with the reason. A method without a rule fails the start.
 */
function guarded(access: AccessControl, log: Logger, handlers: grpc.UntypedServiceImplementation): grpc.UntypedServiceImplementation {
  const out: grpc.UntypedServiceImplementation = {};
  for (const [method, handler] of Object.entries(handlers)) {
    if (!grpcRules[method]) throw new Error(`gRPC method ${method} has no access rule: add one to services/frontend/src/access.ts`);
    const unaryHandler = handler as unknown as grpc.handleUnaryCall<unknown, unknown>;
    out[method] = ((call: grpc.ServerUnaryCall<unknown, unknown>, callback: grpc.sendUnaryData<unknown>) => {
      checkGrpcCall(access, method, call.metadata, call.request).then(
        (grant) => {
          if (grant) grants.set(call, grant);
          unaryHandler(call, callback);
        },
        (err: unknown) => callback(toGrpcError(err, log)),
      );
    }) as grpc.UntypedHandleCall;
  }
  return out;
}

/**
 * Starts the gRPC inference service on host:port (0: a free port); over TLS with `tls` (PEM
 * certificate chain and key), and with every call checked against its access rule with `access`.
 */
export async function startGrpcServer(
  deps: QueryDeps & { log: Logger; maxMessageBytes: number; access?: AccessControl | undefined; tls?: { cert: Buffer; key: Buffer } | undefined },
  host: string,
  port: number,
): Promise<GrpcServer> {
  const { log, clock } = deps;
  const server = new grpc.Server({ "grpc.max_receive_message_length": deps.maxMessageBytes, "grpc.max_send_message_length": -1 });
  type NameRequest = { name: string; version?: string };
  const handlers: grpc.UntypedServiceImplementation = {
    ServerLive: unary(log, async () => ({ live: true })),
    ServerReady: unary(log, async () => ({ ready: (await serverReady(deps)).ready })),
    ServerMetadata: unary(log, async () => serverMetadata),
    ModelReady: unary(log, async (r: NameRequest) => ({ ready: await modelReady(deps, r.name, r.version) })),
    ModelMetadata: unary(log, async (r: NameRequest) => modelMetadata(deps.catalog, r.name, r.version)),
    // Triton's extensions (tritonclient's get_model_config, get_inference_statistics, get_model_repository_index).
    ModelConfig: unary(log, async (r: NameRequest) => ({ config: await modelConfig(deps.catalog, r.name, r.version) })),
    ModelStatistics: unary(log, async (r: NameRequest, call) => modelStatistics(deps, r.name, r.version, grantOf(call))),
    RepositoryIndex: unary(log, async (r: { repository_name?: string; ready?: boolean }, call) => ({ models: await repositoryIndexOf(deps.store, grantOf(call), r.ready === true) })),
    ModelInfer: unary(log, async (message: InferRequestMessage, call) => {
      const deadline = call.getDeadline();
      const deadlineMs = deadline instanceof Date ? deadline.getTime() : deadline;
      const timeoutMs = Number.isFinite(deadlineMs) ? Math.max(1, deadlineMs - clock.now()) : undefined;
      const answer = await serveOipQuery(deps, message.model_name, message.model_version, () => ({ request: requestFromGrpc(message) }), { requestId: message.id || randomUUID(), timeoutMs, keyId: grantOf(call)?.id });
      const { model_name, model_version, id, ...rest } = answer.header;
      return {
        model_name: model_name ?? message.model_name,
        model_version: model_version ?? "",
        id: id ?? "",
        parameters: serverParameters(rest),
        outputs: answer.outputs.map((t) => ({ name: t.name, datatype: t.datatype, shape: t.shape })),
        raw_output_contents: answer.outputs.map((t) => tensorBytes(t.data)),
      };
    }),
  };
  server.addService(loadInferenceService(), deps.access ? guarded(deps.access, log, handlers) : handlers);
  const credentials = deps.tls ? grpc.ServerCredentials.createSsl(null, [{ cert_chain: deps.tls.cert, private_key: deps.tls.key }], false) : grpc.ServerCredentials.createInsecure();
  const bound = await new Promise<number>((resolve, reject) => {
    server.bindAsync(`${host}:${port}`, credentials, (err, p) => (err ? reject(err) : resolve(p)));
  });
  return {
    port: bound,
    stop: () =>
      new Promise<void>((resolve) => {
        const force = setTimeout(() => server.forceShutdown(), 5_000);
        server.tryShutdown(() => {
          clearTimeout(force);
          resolve();
        });
      }),
  };
}

/** The reply's other fields (served_by, timing_ms) as response parameters, objects as JSON strings. */
function serverParameters(fields: Record<string, unknown>): Record<string, InferParameter> {
  const out: Record<string, InferParameter> = {};
  for (const [key, value] of Object.entries(fields)) {
    if (value === undefined) continue;
    if (typeof value === "boolean") out[key] = { bool_param: value };
    else if (typeof value === "number") out[key] = Number.isInteger(value) ? { int64_param: value } : { double_param: value };
    else out[key] = { string_param: typeof value === "string" ? value : JSON.stringify(value) };
  }
  return out;
}
