/**
 * The function handler: what runs inside one function container, shared by both function providers
 * (a process of the local pool, `function-runtime.ts`, and an AWS Lambda instance, `lambda-handler.ts`).
 * DESIGN §3 "Serverless overflow", MArk §4.1: a query that would miss its SLO locally runs here instead.
 *
 * One invocation: decode the inputs (binary tensor encoding, libs/contracts wire.ts), load the variant's
 * model unless this container already holds it (one onnxruntime session per model object, kept for the
 * container's life, as a Lambda instance keeps its globals), check the inputs against the model's
 * signature, run, and encode the outputs with `served_by` and `timing_ms` in the meta.
 *
 * Errors are `ServeError`s: the caller's (malformed message, inputs that don't fit the signature, data
 * onnxruntime refuses) keep their 4xx codes and are told apart by {@link isCallerFault}; everything else
 * (the model missing from the container's store, a binary onnxruntime can't load) is `internal`. Circuit
 * breakers count only the latter against a provider.
 *
 * Durations are measured with `performance.now()` (monotonic); the deadline is compared with the
 * injected clock.
 */
import { ErrorCode, ServeError, checkInputs, decodeTensors, encodeTensors, isErrorCode, type Clock, type Datatype, type Tensor, type TensorSpec } from "@sloserve/contracts";
import { readGraphOutputs } from "@sloserve/onnx";
import { OnnxRunner } from "@sloserve/runtime";
import type { Rng } from "@sloserve/policy";
import { calibrationFor, drawLatencyMs, entryPoints, latencyModel, linearLatencyModel, queryRows, zeroOutputs, type EmulationCalibration } from "@sloserve/executor/emulation";

/** One query for a function: the fields of `FunctionRequest` (types.ts). */
export interface FunctionInvocation {
  variant: string;
  /** Object name of the model binary, e.g. "model/ocr-cls.onnx". */
  object: string;
  /** Input tensors, binary tensor encoding. */
  payload: Uint8Array;
  requestId?: string;
  /** Absolute deadline, epoch ms, on the handler's clock. */
  deadlineMs: number;
}

/** Where a container gets a model binary by its object name. Throws a `ServeError` when it is missing. */
export type ModelSource = (object: string) => Promise<Uint8Array>;

export interface HandlerOutput {
  /** Output tensors, binary tensor encoding, meta { id?, served_by, timing_ms }. */
  payload: Uint8Array;
  /** True when this invocation paid a start: the container's first use, or a model load. */
  coldStart: boolean;
  /** Time spent loading the model in this invocation, ms (0 when it was loaded before). */
  loadMs: number;
  inferenceMs: number;
  /** The handler's time for the whole invocation, ms. */
  durationMs: number;
}

export interface FunctionHandlerOptions {
  source: ModelSource;
  clock: Clock;
  /** Extra fields of `served_by` in every answer, e.g. `{ provider: "local", container: "fn-3" }`. */
  servedBy?: Record<string, unknown>;
  /** onnxruntime threads inside one operator. @default 1 */
  intraOpThreads?: number;
  /**
   * Emulated invocations (FUNCTION_BACKEND=emulated): the model is still fetched (a cold start is the
   * container's start and that fetch; no onnxruntime session, so a container holds no weights), its
   * declared outputs shape the answer; an invocation waits a latency drawn as an emulated CPU
   * worker's at its rows (libs/executor emulated-latency.ts: the variant's calibration entry, else
   * `fallback`) and answers zeros, `served_by.backend` `emulated`. Inputs are not checked.
   */
  emulation?: FunctionEmulation;
}

/** What an emulated function container draws its latencies from (see {@link FunctionHandlerOptions.emulation}). */
export interface FunctionEmulation {
  calibration?: EmulationCalibration;
  /** `batchMs + itemMs·rows` ms for a variant the calibration does not have. */
  fallback: { batchMs: number; itemMs: number };
  rng: Rng;
  /** How a latency is waited. @default a timer */
  sleep?: (ms: number) => Promise<void>;
}

/** Error codes that mean the request itself is wrong: they are answers, not failures of the function. */
const CALLER_FAULTS: ReadonlySet<ErrorCode> = new Set<ErrorCode>([
  ErrorCode.badRequest,
  ErrorCode.malformedJson,
  ErrorCode.payloadTooLarge,
  ErrorCode.invalidName,
  ErrorCode.unknownInput,
  ErrorCode.missingInput,
  ErrorCode.invalidShape,
  ErrorCode.invalidDatatype,
  ErrorCode.invalidDataLength,
  ErrorCode.invalidData,
]);

/** Whether an error code blames the request (so a circuit breaker must not count it against the provider). */
export function isCallerFault(code: ErrorCode): boolean {
  return CALLER_FAULTS.has(code);
}

/** An error as it crosses a process or network boundary. */
export interface FunctionFailure {
  code: ErrorCode;
  message: string;
}

export function toFailure(err: unknown): FunctionFailure {
  if (err instanceof ServeError) return { code: err.code, message: err.message };
  return { code: ErrorCode.internal, message: err instanceof Error ? err.message : String(err) };
}

/** Rebuilds a failure; `context` prefixes the message of the function's own failures, not the query's. */
export function fromFailure(failure: { code?: unknown; message?: unknown }, context: string): ServeError {
  const code = isErrorCode(failure.code) ? failure.code : ErrorCode.internal;
  const message = typeof failure.message === "string" ? failure.message : "unknown error";
  return new ServeError(code, isCallerFault(code) ? message : `${context}: ${message}`);
}

/** An emulated invocation: waits a latency drawn for the variant at the query's rows, answers zeros of the outputs' shapes. */
async function emulate(emulation: FunctionEmulation, variant: string, outputs: Parameters<typeof zeroOutputs>[0], tensors: Tensor[]): Promise<Tensor[]> {
  const rows = queryRows(tensors);
  const entry = calibrationFor(emulation.calibration, variant, "", "cpu");
  const latency = entry ? latencyModel(entryPoints(entry)) : linearLatencyModel(emulation.fallback.batchMs, emulation.fallback.itemMs);
  const ms = drawLatencyMs(latency(rows), emulation.rng);
  if (ms > 0) await (emulation.sleep ?? ((t: number) => new Promise<void>((r) => setTimeout(r, t))))(ms);
  return zeroOutputs(outputs, rows);
}

/** A model as a container holds it: onnxruntime's session, or (emulated) its declared outputs alone. */
type Held = { runner: OnnxRunner } | { outputs: TensorSpec[] };

/** ONNX element types (TensorProto.DataType) as the Open Inference Protocol names them. */
const ONNX_DATATYPES: Readonly<Record<number, Datatype>> = { 1: "FP32", 2: "UINT8", 3: "INT8", 4: "UINT16", 5: "INT16", 6: "INT32", 7: "INT64", 9: "BOOL", 10: "FP16", 11: "FP64", 12: "UINT32", 13: "UINT64" };

/** A model's outputs as its file declares them (the emulated container answers zeros of them). */
function declaredOutputs(bytes: Uint8Array): TensorSpec[] {
  return readGraphOutputs(bytes).map((o) => ({ name: o.name, datatype: ONNX_DATATYPES[o.elemType] ?? "FP32", shape: [...o.shape] }));
}

export class FunctionHandler {
  private readonly runners = new Map<string, Promise<Held>>();
  private used = false;

  constructor(private readonly options: FunctionHandlerOptions) {}

  /** Model objects loaded (or loading) in this container. */
  loaded(): string[] {
    return [...this.runners.keys()];
  }

  /** Loads the model once per container; a failed load is forgotten so that the next call tries again. */
  private async runner(object: string): Promise<{ held: Held; loadMs: number }> {
    const cached = this.runners.get(object);
    if (cached) return { held: await cached, loadMs: 0 };
    const started = performance.now();
    const loading = (async () => {
      let bytes: Uint8Array;
      try {
        bytes = await this.options.source(object);
      } catch (err) {
        if (err instanceof ServeError) throw err;
        throw new ServeError(ErrorCode.internal, `cannot read model object '${object}': ${(err as Error).message}`);
      }
      try {
        // (emulated: the outputs the file declares; no session, so a container holds no weights)
        if (this.options.emulation) return { outputs: declaredOutputs(bytes) };
        return { runner: await OnnxRunner.load(bytes, { intraOpThreads: this.options.intraOpThreads ?? 1 }) };
      } catch (err) {
        // The binary was validated when it was registered: failing to load it here is the function's problem.
        throw new ServeError(ErrorCode.internal, `cannot load model object '${object}': ${(err as Error).message}`);
      }
    })();
    this.runners.set(object, loading);
    try {
      const held = await loading;
      return { held, loadMs: performance.now() - started };
    } catch (err) {
      this.runners.delete(object);
      throw err;
    }
  }

  /** Pre-warming: marks the container used and loads `object` if given. */
  async warm(object?: string): Promise<{ coldStart: boolean; loadMs: number }> {
    const first = !this.used;
    this.used = true;
    if (object === undefined) return { coldStart: first, loadMs: 0 };
    const { loadMs } = await this.runner(object);
    return { coldStart: first || loadMs > 0, loadMs };
  }

  async invoke(invocation: FunctionInvocation): Promise<HandlerOutput> {
    const started = performance.now();
    const first = !this.used;
    this.used = true;
    const { tensors } = decodeTensors(invocation.payload);
    const { held, loadMs } = await this.runner(invocation.object);
    // (emulated, as the emulated executors: inputs are not checked)
    if ("runner" in held) {
      checkInputs(
        tensors.map((t) => ({ name: t.name, datatype: t.datatype, shape: t.shape, length: t.data.length })),
        held.runner.signature.inputs,
      );
    }
    const now = this.options.clock.now();
    if (now >= invocation.deadlineMs) {
      throw new ServeError(ErrorCode.deadlineExceeded, `the query's deadline passed ${now - invocation.deadlineMs} ms before it could run${loadMs > 0 ? ` (the model load took ${loadMs.toFixed(0)} ms)` : ""}`);
    }
    const runStarted = performance.now();
    const emulation = this.options.emulation;
    let outputs: Tensor[];
    if (!("runner" in held)) outputs = await emulate(emulation!, invocation.variant, held.outputs, tensors);
    else {
      try {
        outputs = await held.runner.runOne(tensors);
      } catch (err) {
        // As the executor does: inputs that pass the signature check but fail in onnxruntime are bad data.
        throw new ServeError(ErrorCode.invalidData, `inference failed: ${(err as Error).message}`);
      }
    }
    const finished = performance.now();
    const coldStart = first || loadMs > 0;
    const round = (ms: number): number => Math.round(ms * 1000) / 1000;
    const payload = encodeTensors(outputs, {
      ...(invocation.requestId !== undefined ? { id: invocation.requestId } : {}),
      served_by: { variant: invocation.variant, hardware: "function", ...this.options.servedBy, ...(emulation ? { backend: "emulated" } : {}), cold_start: coldStart },
      timing_ms: { load: round(loadMs), inference: round(finished - runStarted), total: round(finished - started) },
    });
    return { payload, coldStart, loadMs, inferenceMs: finished - runStarted, durationMs: performance.now() - started };
  }

  async close(): Promise<void> {
    const runners = [...this.runners.values()];
    this.runners.clear();
    for (const r of await Promise.allSettled(runners)) if (r.status === "fulfilled" && "runner" in r.value) await r.value.runner.release();
  }
}
