import { Worker } from "node:worker_threads";
import { existsSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import * as ort from "onnxruntime-node";
import {
  ErrorCode,
  ServeError,
  datatypeFromOrt,
  type Tensor,
  type TensorSpec,
  type Datatype,
} from "@sloserve/contracts";
import { runConcatenated } from "./batch.js";

/**
 * onnxruntime-node behind one small interface: inspect a model's signature, and run batches of
 * queries, concatenating them along the first (batch) dimension when the model allows it.
 */

export interface ModelSignature {
  inputs: TensorSpec[];
  outputs: TensorSpec[];
}

export interface RunnerOptions {
  /** Threads onnxruntime may use inside one operator. @default 1 */
  intraOpThreads?: number;
  /**
   * With more than one intra-op thread: whether onnxruntime's threads spin, waiting for work, after
   * each run (`session.intra_op.allow_spinning`, onnxruntime's default on). Off here: a served
   * variant's runs come between gaps (the next batch being gathered), and its spinning threads held a
   * core through every gap (digits-mlp-m, 1 000 batches of 8 a millisecond apart, 2 threads, load
   * average 0.4: 1.16-1.21 ms of CPU a batch spinning, 0.055-0.080 ms not; a run took 0.023-0.029 ms
   * and 0.027-0.033 ms), taken from the frontend, dispatcher and NATS on the same cores. @default false
   */
  intraOpSpinning?: boolean;
  /**
   * The scheduling priority (nice value, Linux: per thread) of a session in a thread of its own
   * (`thread`), and of onnxruntime's threads for it; lower runs first. A value the process may not
   * take (below its own without CAP_SYS_NICE) leaves the thread as it is ({@link OnnxRunner.priority}
   * says why). @default unchanged
   */
  threadNice?: number;
  /** Execution providers in order of preference, by name or with their options (`deviceId`). @default ["cpu"] */
  executionProviders?: Array<string | { name: string; deviceId?: number }>;
}

function specOf(meta: ort.InferenceSession.ValueMetadata, kind: "input" | "output"): TensorSpec {
  if (!meta.isTensor) throw new ServeError(ErrorCode.invalidModel, `the model's ${kind} '${meta.name}' is not a tensor; only tensor inputs and outputs are supported`);
  const datatype = datatypeFromOrt(meta.type);
  if (!datatype) throw new ServeError(ErrorCode.invalidModel, `the model's ${kind} '${meta.name}' has element type ${meta.type}, which is not supported`);
  return { name: meta.name, datatype, shape: meta.shape.map((d) => (typeof d === "number" && d >= 0 ? d : -1)) };
}

async function createSession(bytes: Uint8Array, options: RunnerOptions): Promise<ort.InferenceSession> {
  try {
    return await ort.InferenceSession.create(bytes, sessionOptions(options));
  } catch (err) {
    throw new ServeError(ErrorCode.invalidModel, `onnxruntime cannot load the model: ${(err as Error).message}`);
  }
}

/** Loads the model once to read its signature; throws `invalid_model` if onnxruntime can't load it. */
export async function inspectModel(bytes: Uint8Array): Promise<ModelSignature> {
  const session = await createSession(bytes, {});
  try {
    return { inputs: session.inputMetadata.map((m) => specOf(m, "input")), outputs: session.outputMetadata.map((m) => specOf(m, "output")) };
  } finally {
    await session.release();
  }
}

function toOrt(t: { datatype: Datatype; data: Tensor["data"]; shape: number[] }): ort.Tensor {
  const type = t.datatype === "FP16" ? "float16" : (ortTypes[t.datatype] as ort.Tensor.Type);
  return new ort.Tensor(type, t.data as never, t.shape);
}

const ortTypes: Record<Datatype, string> = {
  BOOL: "bool", UINT8: "uint8", UINT16: "uint16", UINT32: "uint32", UINT64: "uint64", INT8: "int8", INT16: "int16",
  INT32: "int32", INT64: "int64", FP16: "float16", FP32: "float32", FP64: "float64",
};

function fromOrt(name: string, spec: TensorSpec | undefined, t: ort.Tensor): Tensor {
  const datatype = spec?.datatype ?? datatypeFromOrt(t.type) ?? "FP32";
  return { name, datatype, shape: [...t.dims], data: t.data as Tensor["data"] };
}

/** One run's outputs (in signature order) and onnxruntime's own time for it, ms (without the thread hops). */
interface EngineRun {
  outputs: Tensor[];
  ms: number;
}

/** The priority a session's thread asked for ({@link RunnerOptions.threadNice}) and what it got: `error` when it could not take it. */
export interface ThreadPriority {
  nice: number;
  error?: string;
}

/** Runs one set of feeds. */
interface Engine {
  signature: ModelSignature;
  /** A thread engine's priority, when one was asked for. */
  readonly priority?: ThreadPriority | undefined;
  /** `owned`: the caller no longer needs the inputs' buffers (the engine may take them instead of copying). */
  run(inputs: readonly Tensor[], owned?: boolean): Promise<EngineRun>;
  release(): Promise<void>;
}

/** Where a runner's session runs: the calling thread ("inline") or a worker thread of its own ("thread"). */
export type SessionThread = "inline" | "thread";

/** The session on the calling thread: no copies, no hops, but inference blocks the caller's event loop. */
class InProcessEngine implements Engine {
  constructor(private readonly session: ort.InferenceSession, readonly signature: ModelSignature) {}

  static async start(bytes: Uint8Array, options: RunnerOptions): Promise<InProcessEngine> {
    const session = await createSession(bytes, options);
    return new InProcessEngine(session, { inputs: session.inputMetadata.map((m) => specOf(m, "input")), outputs: session.outputMetadata.map((m) => specOf(m, "output")) });
  }

  async run(inputs: readonly Tensor[]): Promise<EngineRun> {
    const feeds: Record<string, ort.Tensor> = {};
    for (const t of inputs) feeds[t.name] = toOrt(t);
    // onnxruntime-node runs the session in a setImmediate callback of its own, queued by run(): the
    // one queued just before it starts the clock, so that the time excludes the event-loop turn
    // (other I/O) run() waits for.
    let started = performance.now();
    setImmediate(() => (started = performance.now()));
    const results = await this.session.run(feeds);
    const ms = performance.now() - started;
    return { outputs: this.signature.outputs.map((spec) => fromOrt(spec.name, spec, results[spec.name] as ort.Tensor)), ms };
  }

  release(): Promise<void> {
    return this.session.release();
  }
}

type ThreadResult = { type: string; id?: number; outputs?: Array<{ name: string; shape: number[]; data: Tensor["data"] }>; ms?: number; error?: string };

/** The session in a worker thread (ort-thread.mjs); inputs are copied in (or transferred when owned), outputs transferred back. */
class ThreadEngine implements Engine {
  private nextId = 0;
  private readonly waiting = new Map<number, { resolve: (r: EngineRun) => void; reject: (e: Error) => void }>();

  private constructor(private readonly thread: Worker, readonly signature: ModelSignature, readonly priority: ThreadPriority | undefined) {
    thread.on("message", (msg: ThreadResult) => {
      if (msg.type !== "result" || msg.id === undefined) return;
      const w = this.waiting.get(msg.id);
      if (!w) return;
      this.waiting.delete(msg.id);
      if (msg.error !== undefined) w.reject(new Error(msg.error));
      else w.resolve({ outputs: (msg.outputs ?? []).map((o, i) => ({ name: o.name, datatype: this.signature.outputs[i]?.datatype ?? "FP32", shape: o.shape, data: o.data })), ms: msg.ms ?? 0 });
    });
    thread.on("error", (err) => this.failAll(err));
    thread.on("exit", (code) => this.failAll(new Error(`inference thread exited (code ${code})`)));
  }

  private failAll(err: Error): void {
    for (const w of this.waiting.values()) w.reject(err);
    this.waiting.clear();
  }

  static async start(bytes: Uint8Array, options: RunnerOptions): Promise<ThreadEngine> {
    const thread = new Worker(new URL("./ort-thread.mjs", import.meta.url), {
      workerData: { bytes, options: sessionOptions(options), nice: options.threadNice },
      execArgv: [],
    });
    const ready = await new Promise<{ inputs: ort.InferenceSession.ValueMetadata[]; outputs: ort.InferenceSession.ValueMetadata[]; priority?: ThreadPriority }>((resolve, reject) => {
      thread.once("message", (msg: { type: string; message?: string; inputs?: ort.InferenceSession.ValueMetadata[]; outputs?: ort.InferenceSession.ValueMetadata[]; priority?: ThreadPriority }) => {
        if (msg.type === "ready") resolve({ inputs: msg.inputs ?? [], outputs: msg.outputs ?? [], ...(msg.priority ? { priority: msg.priority } : {}) });
        else reject(new ServeError(ErrorCode.invalidModel, `onnxruntime cannot load the model: ${msg.message ?? "unknown error"}`));
      });
      thread.once("error", reject);
    }).catch(async (err: unknown) => {
      await thread.terminate();
      throw err;
    });
    return new ThreadEngine(thread, { inputs: ready.inputs.map((m) => specOf(m, "input")), outputs: ready.outputs.map((m) => specOf(m, "output")) }, ready.priority);
  }

  run(inputs: readonly Tensor[], owned = false): Promise<EngineRun> {
    const id = this.nextId++;
    // Inputs may be views into a large network buffer: each is copied into its own buffer and the
    // copy handed over without a second copy. Owned inputs (a batch concatenated for this run) that
    // fill their buffer are handed over as they are: no copy at all.
    const own = inputs.map((t) => {
      const whole = owned && t.data.byteOffset === 0 && t.data.byteLength === t.data.buffer.byteLength && t.data.buffer instanceof ArrayBuffer;
      return { name: t.name, datatype: t.datatype, shape: t.shape, data: (whole ? t.data : t.data.slice()) as Tensor["data"] };
    });
    return new Promise((resolve, reject) => {
      this.waiting.set(id, { resolve, reject });
      this.thread.postMessage({ type: "run", id, inputs: own, outputNames: this.signature.outputs.map((o) => o.name) }, own.map((t) => t.data.buffer as ArrayBuffer));
    });
  }

  async release(): Promise<void> {
    await new Promise<void>((resolve) => {
      const done = setTimeout(resolve, 2000);
      this.thread.once("message", () => {
        clearTimeout(done);
        resolve();
      });
      this.thread.postMessage({ type: "release" });
    });
    await this.thread.terminate();
  }
}

/** An engine and the runs it has in flight: one that is replaced ({@link OnnxRunner.moveTo}) is released once they end. */
class EngineSlot {
  active = 0;
  retired = false;
  private released: Promise<void> | undefined;

  constructor(readonly engine: Engine, readonly thread: SessionThread) {}

  async run(inputs: readonly Tensor[], owned: boolean): Promise<EngineRun> {
    this.active++;
    try {
      return await this.engine.run(inputs, owned);
    } finally {
      this.active--;
      if (this.retired && this.active === 0) void this.release();
    }
  }

  release(): Promise<void> {
    this.released ??= this.engine.release();
    return this.released;
  }

  retire(): Promise<void> {
    this.retired = true;
    return this.active === 0 ? this.release() : Promise.resolve();
  }
}

/** The options of every session this module opens. */
export function sessionOptions(options: RunnerOptions): ort.InferenceSession.SessionOptions {
  const threads = options.intraOpThreads ?? 1;
  return {
    intraOpNumThreads: threads,
    interOpNumThreads: 1,
    executionProviders: options.executionProviders ?? ["cpu"],
    graphOptimizationLevel: "all",
    ...(threads > 1 && options.intraOpSpinning !== true ? { extra: { session: { intra_op: { allow_spinning: "0" } } } } : {}),
  };
}

export interface LoadOptions extends RunnerOptions {
  /** Where the session starts: in a worker thread (what an executor wants: inference does not block its event loop) or on the calling thread. @default false (calling thread) */
  thread?: boolean;
  /** Keep the model's bytes so that {@link OnnxRunner.moveTo} can open the session on the other side later. @default false */
  movable?: boolean;
  /** Called after each run of the session with its rows (first dimension of its first input) and onnxruntime's own time for it, ms (no thread hops). */
  onRun?: (rows: number, ms: number) => void;
}

export class OnnxRunner {
  private slot: EngineSlot;
  private moving: Promise<void> | undefined;
  private released = false;

  private constructor(
    engine: Engine,
    thread: SessionThread,
    /** True when every input and output has a dynamic first dimension, so queries can be concatenated. */
    readonly batchable: boolean,
    private readonly options: LoadOptions,
    /** The model, kept only when the session may move. */
    private readonly bytes: Uint8Array | undefined,
  ) {
    this.slot = new EngineSlot(engine, thread);
  }

  get signature(): ModelSignature {
    return this.slot.engine.signature;
  }

  /** Where the session runs now. */
  get thread(): SessionThread {
    return this.slot.thread;
  }

  /** The session's thread's priority, when `threadNice` was given and the session runs in a thread. */
  get priority(): ThreadPriority | undefined {
    return this.slot.engine.priority;
  }

  /**
   * Loads a model. With `thread: true` the session lives in a worker thread, so that inference does
   * not block the caller's event loop (what an executor wants); otherwise on the calling thread.
   */
  static async load(bytes: Uint8Array, options: LoadOptions = {}): Promise<OnnxRunner> {
    const thread: SessionThread = options.thread ? "thread" : "inline";
    const engine = thread === "thread" ? await ThreadEngine.start(bytes, options) : await InProcessEngine.start(bytes, options);
    const batchable = [...engine.signature.inputs, ...engine.signature.outputs].every((s) => s.shape.length > 0 && s.shape[0] === -1);
    return new OnnxRunner(engine, thread, batchable, options, options.movable ? bytes : undefined);
  }

  /**
   * Opens the session on the other side (`inline` or `thread`, needs `movable`) and sends the next
   * runs there; runs in flight end where they started, and the old session is released after them.
   * One move at a time: a call while one is under way waits for it (and then moves if still needed).
   */
  async moveTo(where: SessionThread): Promise<void> {
    await this.moveSettled();
    if (where === this.slot.thread || this.released) return;
    const bytes = this.bytes;
    if (!bytes) throw new Error("this runner was loaded without `movable`: its session cannot move");
    this.moving = (async () => {
      const engine = where === "thread" ? await ThreadEngine.start(bytes, this.options) : await InProcessEngine.start(bytes, this.options);
      if (this.released) return engine.release();
      const old = this.slot;
      this.slot = new EngineSlot(engine, where);
      await old.retire();
    })().finally(() => {
      this.moving = undefined;
    });
    await this.moving;
  }

  /**
   * Waits until no move is under way. A move's failure is reported to the caller that started it (it
   * awaits the move); one that only waits for the session to be settled goes on with the slot as it is.
   */
  private async moveSettled(): Promise<void> {
    while (this.moving) {
      try {
        await this.moving;
      } catch {
        // (reported to the mover, see above)
      }
    }
  }

  async release(): Promise<void> {
    this.released = true;
    await this.moveSettled();
    await this.slot.release();
  }

  private async run(feeds: readonly Tensor[], owned: boolean): Promise<Tensor[]> {
    const { outputs, ms } = await this.slot.run(feeds, owned);
    this.options.onRun?.(feeds[0]?.shape[0] ?? 1, ms);
    return outputs;
  }

  /** Runs one query (its own inputs) and returns its outputs. */
  runOne(inputs: readonly Tensor[]): Promise<Tensor[]> {
    return this.run(inputs, false);
  }

  /**
   * Runs several queries as one batch when they can be concatenated along dimension 0 (same
   * trailing dimensions), otherwise one by one. Returns each query's outputs, in order.
   */
  async runBatch(queries: ReadonlyArray<readonly Tensor[]>): Promise<Tensor[][]> {
    return runConcatenated(queries, this.signature.inputs, this.batchable, (feeds, owned) => this.run(feeds, owned));
  }
}

/**
 * The smallest model there is (one Identity node on a float tensor), written out by hand: used to
 * ask onnxruntime whether an execution provider really works here before a worker offers it.
 */
function identityModel(): Uint8Array {
  const varint = (n: number): number[] => {
    const out: number[] = [];
    while (n > 127) {
      out.push((n & 127) | 128);
      n >>>= 7;
    }
    out.push(n);
    return out;
  };
  const bytes = (field: number, value: number[] | Uint8Array): number[] => [(field << 3) | 2, ...varint(value.length), ...value];
  const str = (field: number, s: string): number[] => bytes(field, [...new TextEncoder().encode(s)]);
  const int = (field: number, n: number): number[] => [field << 3, ...varint(n)];
  // ValueInfo x / y: float tensor of shape [1]
  const tensorType = bytes(1, [...int(1, 1), ...bytes(2, bytes(1, int(1, 1)))]);
  const valueInfo = (name: string): number[] => [...str(1, name), ...bytes(2, tensorType)];
  const node = [...str(1, "x"), ...str(2, "y"), ...str(4, "Identity")];
  const graph = [...bytes(1, node), ...str(2, "probe"), ...bytes(11, valueInfo("x")), ...bytes(12, valueInfo("y"))];
  const model = [...int(1, 8), ...bytes(7, graph), ...bytes(8, int(2, 13))];
  return Uint8Array.from(model);
}

/** Where onnxruntime-node keeps its native libraries (the CUDA build adds its providers there). */
function ortBinaryDir(): string {
  const entry = createRequire(import.meta.url).resolve("onnxruntime-node");
  return join(dirname(entry), "..", "bin", "napi-v6", process.platform, process.arch);
}

/** Whether onnxruntime can create a session with `provider` (e.g. "cuda") on this machine. */
export async function probeExecutionProvider(provider: string, options: { deviceId?: number } = {}): Promise<{ ok: true } | { ok: false; error: string }> {
  if (provider === "cuda" || provider === "tensorrt") {
    const lib = join(ortBinaryDir(), `libonnxruntime_providers_${provider}.so`);
    if (!existsSync(lib)) return { ok: false, error: `onnxruntime-node was installed without its ${provider.toUpperCase()} build (${lib} is missing)` };
  }
  try {
    const ep = options.deviceId !== undefined ? { name: provider, deviceId: options.deviceId } : provider;
    const session = await ort.InferenceSession.create(identityModel(), { executionProviders: [ep as never], logSeverityLevel: 4 });
    await session.release();
    return { ok: true };
  } catch (err) {
    return { ok: false, error: (err instanceof Error ? err.message : String(err)).split("\n")[0]?.replace(/\x1b\[[0-9;]*m/g, "").slice(0, 300) ?? "unknown error" };
  }
}
