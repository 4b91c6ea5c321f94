import * as ort from "onnxruntime-node";
import {
  ErrorCode,
  ServeError,
  allocate,
  datatypeFromOrt,
  elementCount,
  type Tensor,
  type TensorSpec,
  type Datatype,
} from "@sloserve/contracts";

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
  /** Execution providers in order of preference. @default ["cpu"] */
  executionProviders?: string[];
}

function specOf(meta: ort.InferenceSession.ValueMetadata, kind: "input" | "output"): TensorSpec {
  if (!meta.isTensor) throw new ServeError(ErrorCode.invalidModel, `the model's ${kind} '${meta.name}' is not a tensor; only tensor inputs and outputs are supported`);
  const datatype = datatypeFromOrt(meta.type);
  if (!datatype) throw new ServeError(ErrorCode.invalidModel, `the model's ${kind} '${meta.name}' has element type ${meta.type}, which is not supported`);
  return { name: meta.name, datatype, shape: meta.shape.map((d) => (typeof d === "number" && d >= 0 ? d : -1)) };
}

async function createSession(bytes: Uint8Array, options: RunnerOptions): Promise<ort.InferenceSession> {
  try {
    return await ort.InferenceSession.create(bytes, {
      intraOpNumThreads: options.intraOpThreads ?? 1,
      interOpNumThreads: 1,
      executionProviders: options.executionProviders ?? ["cpu"],
      graphOptimizationLevel: "all",
    });
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

export class OnnxRunner {
  private constructor(
    private readonly session: ort.InferenceSession,
    readonly signature: ModelSignature,
    /** True when every input and output has a dynamic first dimension, so queries can be concatenated. */
    readonly batchable: boolean,
  ) {}

  static async load(bytes: Uint8Array, options: RunnerOptions = {}): Promise<OnnxRunner> {
    const session = await createSession(bytes, options);
    const signature = { inputs: session.inputMetadata.map((m) => specOf(m, "input")), outputs: session.outputMetadata.map((m) => specOf(m, "output")) };
    const batchable = [...signature.inputs, ...signature.outputs].every((s) => s.shape.length > 0 && s.shape[0] === -1);
    return new OnnxRunner(session, signature, batchable);
  }

  async release(): Promise<void> {
    await this.session.release();
  }

  /** Runs one query (its own inputs) and returns its outputs. */
  async runOne(inputs: readonly Tensor[]): Promise<Tensor[]> {
    const feeds: Record<string, ort.Tensor> = {};
    for (const t of inputs) feeds[t.name] = toOrt(t);
    const results = await this.session.run(feeds);
    return this.signature.outputs.map((spec) => fromOrt(spec.name, spec, results[spec.name] as ort.Tensor));
  }

  /**
   * Runs several queries as one batch when they can be concatenated along dimension 0 (same
   * trailing dimensions), otherwise one by one. Returns each query's outputs, in order.
   */
  async runBatch(queries: ReadonlyArray<readonly Tensor[]>): Promise<Tensor[][]> {
    if (queries.length === 1 || !this.batchable) {
      const out: Tensor[][] = [];
      for (const q of queries) out.push(await this.runOne(q));
      return out;
    }
    // Group queries whose inputs share trailing dimensions (e.g. images of one size).
    const groups = new Map<string, number[]>();
    queries.forEach((q, i) => {
      const k = this.signature.inputs.map((spec) => q.find((t) => t.name === spec.name)?.shape.slice(1).join("x") ?? "?").join("|");
      const g = groups.get(k);
      if (g) g.push(i);
      else groups.set(k, [i]);
    });
    const results: Tensor[][] = new Array(queries.length);
    for (const indices of groups.values()) {
      if (indices.length === 1) {
        const i = indices[0] as number;
        results[i] = await this.runOne(queries[i] as Tensor[]);
        continue;
      }
      const rows = indices.map((i) => (queries[i] as Tensor[])[0]?.shape[0] ?? 1);
      const total = rows.reduce((a, b) => a + b, 0);
      const feeds: Record<string, ort.Tensor> = {};
      for (const spec of this.signature.inputs) {
        const parts = indices.map((i) => (queries[i] as Tensor[]).find((t) => t.name === spec.name) as Tensor);
        const first = parts[0] as Tensor;
        const shape = [total, ...first.shape.slice(1)];
        const data = allocate(spec.datatype, elementCount(shape));
        let offset = 0;
        for (const p of parts) {
          (data as Float32Array).set(p.data as Float32Array, offset);
          offset += p.data.length;
        }
        feeds[spec.name] = toOrt({ datatype: spec.datatype, data, shape });
      }
      const out = await this.session.run(feeds);
      let row = 0;
      indices.forEach((qi, k) => {
        const n = rows[k] as number;
        results[qi] = this.signature.outputs.map((spec) => {
          const t = out[spec.name] as ort.Tensor;
          const rowSize = elementCount(t.dims.slice(1) as number[]);
          const data = (t.data as Float32Array).subarray(row * rowSize, (row + n) * rowSize);
          return { name: spec.name, datatype: spec.datatype, shape: [n, ...t.dims.slice(1)], data } as Tensor;
        });
        row += n;
      });
    }
    return results;
  }
}
