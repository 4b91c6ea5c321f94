import * as grpc from "@grpc/grpc-js";
import * as protoLoader from "@grpc/proto-loader";
import {
  ErrorCode,
  ServeError,
  bytesPerElement,
  elementCount,
  isDatatype,
  oipGrpcProtoPath,
  tensorBytes,
  viewOf,
  type Datatype,
  type Tensor,
  type TensorData,
  type TensorSpec,
} from "@sloserve/contracts";

/**
 * A client of an Open Inference Protocol server over gRPC (`inference.GRPCInferenceService` of
 * libs/contracts/proto/open_inference_grpc.proto, loaded at run time): the Neuron-backed inference
 * server on an Inferentia host, or any other OIP server (Triton, KServe, our frontend). Tensors go as
 * `raw_input_contents` and come back from `raw_output_contents` (or, from a server that answers with
 * typed `contents`, from those). gRPC failures become ServeErrors with the protocol's meaning:
 * UNAVAILABLE → `unavailable`, DEADLINE_EXCEEDED → `deadline_exceeded`, NOT_FOUND → `unknown_model`,
 * INVALID_ARGUMENT → `invalid_data`, RESOURCE_EXHAUSTED → `no_capacity`, anything else → `internal`.
 */

interface TensorMetadata {
  name: string;
  datatype: string;
  shape: string[];
}

interface ModelMetadataResponse {
  name: string;
  versions: string[];
  platform: string;
  inputs: TensorMetadata[];
  outputs: TensorMetadata[];
}

interface InferTensorContents {
  bool_contents: boolean[];
  int_contents: number[];
  int64_contents: string[];
  uint_contents: number[];
  uint64_contents: string[];
  fp32_contents: number[];
  fp64_contents: number[];
}

interface InferOutputTensor {
  name: string;
  datatype: string;
  shape: string[];
  contents: InferTensorContents | null;
}

interface ModelInferResponse {
  model_name: string;
  outputs: InferOutputTensor[];
  raw_output_contents: Buffer[];
}

type Unary<Req, Res> = (request: Req, options: grpc.CallOptions, callback: (err: grpc.ServiceError | null, response?: Res) => void) => grpc.ClientUnaryCall;

interface InferenceServiceClient extends grpc.Client {
  ServerReady: Unary<Record<string, never>, { ready: boolean }>;
  ModelReady: Unary<{ name: string; version: string }, { ready: boolean }>;
  ModelMetadata: Unary<{ name: string; version: string }, ModelMetadataResponse>;
  ModelInfer: Unary<Record<string, unknown>, ModelInferResponse>;
}

type ClientConstructor = new (address: string, credentials: grpc.ChannelCredentials, options?: grpc.ClientOptions) => InferenceServiceClient;

let serviceConstructor: ClientConstructor | undefined;

/** The generated-at-run-time client class (int64 as strings, so that no value loses precision). */
function inferenceService(): ClientConstructor {
  if (!serviceConstructor) {
    const definition = protoLoader.loadSync(oipGrpcProtoPath, { keepCase: true, longs: String, enums: String, defaults: true, oneofs: true });
    const pkg = grpc.loadPackageDefinition(definition) as unknown as { inference: { GRPCInferenceService: ClientConstructor } };
    serviceConstructor = pkg.inference.GRPCInferenceService;
  }
  return serviceConstructor;
}

const CODE_BY_STATUS: Partial<Record<grpc.status, ErrorCode>> = {
  [grpc.status.UNAVAILABLE]: ErrorCode.unavailable,
  [grpc.status.DEADLINE_EXCEEDED]: ErrorCode.deadlineExceeded,
  [grpc.status.NOT_FOUND]: ErrorCode.unknownModel,
  [grpc.status.INVALID_ARGUMENT]: ErrorCode.invalidData,
  [grpc.status.RESOURCE_EXHAUSTED]: ErrorCode.noCapacity,
};

export interface OipClientOptions {
  /** What the server is called in error messages. @default "the OIP server at <address>" */
  label?: string;
  /** Most bytes of one message either way. @default 64 MiB */
  maxMessageBytes?: number;
}

export class OipClient {
  private readonly client: InferenceServiceClient;
  readonly label: string;

  constructor(
    readonly address: string,
    options: OipClientOptions = {},
  ) {
    this.label = options.label ?? `the OIP server at ${address}`;
    const max = options.maxMessageBytes ?? 64 * 1024 * 1024;
    const Service = inferenceService();
    this.client = new Service(address, grpc.credentials.createInsecure(), {
      "grpc.max_send_message_length": max,
      "grpc.max_receive_message_length": max,
      // Reconnect soon after the server comes back (grpc-js backs off up to 120 s by default).
      "grpc.initial_reconnect_backoff_ms": 200,
      "grpc.max_reconnect_backoff_ms": 2000,
    });
  }

  /** A unary call with a deadline (epoch ms), its gRPC failure turned into a ServeError naming the call and the server. */
  private call<Req, Res>(method: Unary<Req, Res>, what: string, request: Req, deadlineMs: number): Promise<Res> {
    return new Promise((resolve, reject) => {
      method.call(this.client, request, { deadline: new Date(deadlineMs) }, (err, response) => {
        if (err) {
          const code = CODE_BY_STATUS[err.code] ?? ErrorCode.internal;
          const name = grpc.status[err.code] ?? String(err.code);
          // grpc-js ends a connection failure's details with an empty "Resolution note: ".
          const details = (err.details || name).replace(/\.?\s*Resolution note:\s*$/, "");
          const message =
            code === ErrorCode.unavailable
              ? `${this.label} is unavailable (${what}: ${details})`
              : code === ErrorCode.deadlineExceeded
                ? `${this.label} did not answer ${what} before the deadline`
                : `${this.label} refused ${what}: ${name}: ${details}`;
          reject(new ServeError(code, message, { grpc_status: name }));
        } else resolve(response as Res);
      });
    });
  }

  async serverReady(timeoutMs: number): Promise<boolean> {
    return (await this.call(this.client.ServerReady, "ServerReady", {}, Date.now() + timeoutMs)).ready;
  }

  async modelReady(model: string, version: string, timeoutMs: number): Promise<boolean> {
    return (await this.call(this.client.ModelReady, `ModelReady(${model})`, { name: model, version }, Date.now() + timeoutMs)).ready;
  }

  async modelMetadata(model: string, version: string, timeoutMs: number): Promise<{ platform: string; inputs: TensorSpec[]; outputs: TensorSpec[] }> {
    const meta = await this.call(this.client.ModelMetadata, `ModelMetadata(${model})`, { name: model, version }, Date.now() + timeoutMs);
    const spec = (t: TensorMetadata, kind: string): TensorSpec => {
      if (!isDatatype(t.datatype)) throw new ServeError(ErrorCode.invalidModel, `${this.label}: model ${model}'s ${kind} '${t.name}' has datatype ${t.datatype}, which this executor does not take`);
      return { name: t.name, datatype: t.datatype, shape: t.shape.map(Number) };
    };
    return { platform: meta.platform, inputs: meta.inputs.map((t) => spec(t, "input")), outputs: meta.outputs.map((t) => spec(t, "output")) };
  }

  /** One ModelInfer: the inputs as raw contents; every output of the model comes back. */
  async infer(model: string, version: string, inputs: readonly Tensor[], deadlineMs: number): Promise<Tensor[]> {
    const request = {
      model_name: model,
      model_version: version,
      inputs: inputs.map((t) => ({ name: t.name, datatype: t.datatype, shape: t.shape })),
      raw_input_contents: inputs.map((t) => {
        const bytes = tensorBytes(t.data);
        return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
      }),
    };
    const response = await this.call(this.client.ModelInfer, `ModelInfer(${model})`, request, deadlineMs);
    return decodeOutputs(response, this.label);
  }

  close(): void {
    this.client.close();
  }
}

/** The outputs of a ModelInferResponse as tensors: from raw_output_contents when present, else from typed contents. */
export function decodeOutputs(response: Pick<ModelInferResponse, "outputs" | "raw_output_contents">, label = "the OIP server"): Tensor[] {
  const raw = response.raw_output_contents ?? [];
  if (raw.length > 0 && raw.length !== response.outputs.length) {
    throw new ServeError(ErrorCode.internal, `${label} answered with ${response.outputs.length} outputs but ${raw.length} raw_output_contents`);
  }
  return response.outputs.map((o, i) => {
    if (!isDatatype(o.datatype)) throw new ServeError(ErrorCode.internal, `${label} answered output '${o.name}' with datatype ${o.datatype}, which this executor does not take`);
    const shape = o.shape.map(Number);
    const count = elementCount(shape);
    const bytes = raw[i];
    let data: TensorData;
    if (bytes) {
      const width = bytesPerElement(o.datatype);
      if (bytes.byteLength !== count * width) {
        throw new ServeError(ErrorCode.internal, `${label} answered output '${o.name}' (${o.datatype} [${shape.join(", ")}]) with ${bytes.byteLength} bytes, not ${count * width}`);
      }
      data = viewOf(o.datatype, bytes, 0, count);
    } else data = fromContents(o.datatype, o.contents, count, `${label}: output '${o.name}'`);
    return { name: o.name, datatype: o.datatype, shape, data };
  });
}

/** Typed contents (the field of the datatype) as a typed array of `count` elements. */
function fromContents(datatype: Datatype, contents: InferTensorContents | null, count: number, what: string): TensorData {
  const from = <T extends TensorData>(make: (c: InferTensorContents) => T) => (): T | undefined => (contents ? make(contents) : undefined);
  const field: Record<Datatype, () => TensorData | undefined> = {
    BOOL: from((c) => Uint8Array.from(c.bool_contents, (b) => (b ? 1 : 0))),
    INT8: from((c) => Int8Array.from(c.int_contents)),
    INT16: from((c) => Int16Array.from(c.int_contents)),
    INT32: from((c) => Int32Array.from(c.int_contents)),
    INT64: from((c) => BigInt64Array.from(c.int64_contents, (v) => BigInt(v))),
    UINT8: from((c) => Uint8Array.from(c.uint_contents)),
    UINT16: from((c) => Uint16Array.from(c.uint_contents)),
    UINT32: from((c) => Uint32Array.from(c.uint_contents)),
    UINT64: from((c) => BigUint64Array.from(c.uint64_contents, (v) => BigInt(v))),
    // FP16 travels only as raw contents.
    FP16: () => undefined,
    FP32: from((c) => Float32Array.from(c.fp32_contents)),
    FP64: from((c) => Float64Array.from(c.fp64_contents)),
  };
  const data = field[datatype]();
  if (!data || data.length !== count) {
    throw new ServeError(ErrorCode.internal, `${what} (${datatype}) came with ${data ? data.length : "no"} elements in its contents, not ${count}`);
  }
  return data;
}
