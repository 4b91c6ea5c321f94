import { allocate, elementCount, type Tensor, type TensorData } from "@sloserve/contracts";
import { isTensor, type StageDatum, type StageResult, type StageValue, type StepDescriptor } from "@sloserve/policy";

/**
 * Built-in pipeline steps: named processing functions a pipeline stage can run between model stages
 * (`{"name": "crops", "step": "split-rows"}`), in the dispatcher, on the query's data. A step is
 * `(inputs, params) → { outputs } | { items }`: a "map" step gives outputs; a "fan_out" step gives
 * items, one result per item (the stages after it run once per item); a "join" step receives each of its
 * per-item inputs as the list over items (null where an item gave none) and gathers them. Outputs are
 * tensors, or objects (`{ name, object }`: a decoded image, boxes, text) that only steps read and that
 * the answer carries as JSON (`values`).
 *
 * The OCR pipeline's processing (libs/ocr) registers here too (ocr-steps.ts: `ocr-decode-det`, the
 * fan-out `ocr-boxes`, `ocr-cls-pre`, `ocr-direction`, `ocr-rotate`, `ocr-rec-pre`, `ocr-ctc` and the join
 * `ocr-assemble`); a new step is one more entry in builtin-steps.ts `builtinSteps`, and the registry validates specs
 * that name it.
 *
 * Steps run on the dispatcher's event loop: keep them to light array work (decoding, slicing, decoding
 * CTC output); anything heavy belongs in a model.
 */
export interface PipelineStep extends StepDescriptor {
  run(inputs: Readonly<Record<string, StageValue>>, params: Readonly<Record<string, unknown>>): StageResult | Promise<StageResult>;
}

export class StepRegistry {
  private readonly steps = new Map<string, PipelineStep>();

  constructor(steps: Iterable<PipelineStep> = []) {
    for (const s of steps) this.add(s);
  }

  add(step: PipelineStep): this {
    if (this.steps.has(step.name)) throw new Error(`step ${step.name} is registered twice`);
    this.steps.set(step.name, step);
    return this;
  }

  get(name: string): PipelineStep | undefined {
    return this.steps.get(name);
  }

  names(): string[] {
    return [...this.steps.keys()].sort();
  }
}

function tensorOf(inputs: Readonly<Record<string, StageValue>>, name: string): Tensor {
  const v = inputs[name];
  if (!v || Array.isArray(v) || !isTensor(v as StageDatum)) throw new Error(`input '${name}' must be one tensor`);
  return v as Tensor;
}

function listOf(inputs: Readonly<Record<string, StageValue>>, name: string): ReadonlyArray<Tensor | null> {
  const v = inputs[name];
  if (!Array.isArray(v)) throw new Error(`input '${name}' must be the list of a fan-out's items`);
  const list = v as ReadonlyArray<StageDatum | null>;
  list.forEach((d, i) => {
    if (d && !isTensor(d)) throw new Error(`input '${name}' of item ${i} is not a tensor`);
  });
  return list as ReadonlyArray<Tensor | null>;
}

function sliceData(data: TensorData, from: number, to: number): TensorData {
  return (data as Float32Array).slice(from, to) as unknown as TensorData;
}

/** Rows of a tensor along its first dimension (one item per row, each [1, ...]). */
export const splitRows: PipelineStep = {
  name: "split-rows",
  kind: "fan_out",
  description: "one item per row of x (along the first dimension), each of shape [1, ...]",
  inputs: ["x"],
  outputs: ["x"],
  run(inputs) {
    const x = tensorOf(inputs, "x");
    const rows = x.shape[0] ?? 0;
    const per = rows === 0 ? 0 : elementCount(x.shape) / rows;
    const items = Array.from({ length: rows }, (_, r) => ({ x: { name: "x", datatype: x.datatype, shape: [1, ...x.shape.slice(1)], data: sliceData(x.data, r * per, (r + 1) * per) } }));
    return { items };
  },
};

/** The items' x concatenated along the first dimension (items without one are an error unless skip_missing). */
export const concatRows: PipelineStep = {
  name: "concat-rows",
  kind: "join",
  description: "x of every item concatenated along the first dimension; with no items, an empty FP32 [0]",
  inputs: ["x"],
  outputs: ["x"],
  checkParams: (p) => (p["skip_missing"] !== undefined && typeof p["skip_missing"] !== "boolean" ? "skip_missing must be true or false" : undefined),
  run(inputs, params) {
    const list = listOf(inputs, "x");
    const parts: Tensor[] = [];
    list.forEach((t, i) => {
      if (t) parts.push(t);
      else if (params["skip_missing"] !== true) throw new Error(`item ${i} has no x`);
    });
    const first = parts[0];
    if (!first) return { outputs: { x: { name: "x", datatype: "FP32", shape: [0], data: new Float32Array(0) } } };
    const tail = first.shape.slice(1).join(",");
    for (const p of parts) {
      if (p.datatype !== first.datatype || p.shape.slice(1).join(",") !== tail) {
        throw new Error(`items differ: ${first.datatype} [${first.shape.join(", ")}] and ${p.datatype} [${p.shape.join(", ")}]`);
      }
    }
    const total = parts.reduce((n, p) => n + elementCount(p.shape), 0);
    const data = allocate(first.datatype, total);
    let at = 0;
    for (const p of parts) {
      (data as Float32Array).set(p.data as Float32Array, at);
      at += p.data.length;
    }
    return { outputs: { x: { name: "x", datatype: first.datatype, shape: [parts.reduce((n, p) => n + (p.shape[0] ?? 0), 0), ...first.shape.slice(1)], data } } };
  },
};

/** The elementwise mean of its inputs (same shape, floating point): an ensemble of models. */
export const mean: PipelineStep = {
  name: "mean",
  kind: "map",
  description: "elementwise mean of every input (same shape, FP32 or FP64), as y",
  inputs: "any",
  outputs: ["y"],
  run(inputs) {
    const tensors = Object.entries(inputs).map(([name]) => tensorOf(inputs, name));
    const first = tensors[0];
    if (!first) throw new Error("no inputs");
    for (const t of tensors) {
      if (t.datatype !== "FP32" && t.datatype !== "FP64") throw new Error(`input '${t.name}' is ${t.datatype}; mean takes FP32 or FP64`);
      if (t.shape.join(",") !== first.shape.join(",")) throw new Error(`input '${t.name}' has shape [${t.shape.join(", ")}], '${first.name}' [${first.shape.join(", ")}]`);
    }
    const out = new Float32Array(first.data.length);
    for (const t of tensors) {
      const d = t.data as Float32Array;
      for (let i = 0; i < out.length; i++) out[i] = out[i]! + d[i]! / tensors.length;
    }
    return { outputs: { y: { name: "y", datatype: "FP32", shape: [...first.shape], data: out } } };
  },
};

/** Per row (last axis), the index and value of the largest element: a classifier's class and score. */
export const argmax: PipelineStep = {
  name: "argmax",
  kind: "map",
  description: "per row of x (over its last axis): class (INT64) and score (FP32) of the largest element",
  inputs: ["x"],
  outputs: ["class", "score"],
  run(inputs) {
    const x = tensorOf(inputs, "x");
    if (x.datatype !== "FP32" && x.datatype !== "FP64") throw new Error(`x is ${x.datatype}; argmax takes FP32 or FP64`);
    const cols = x.shape.length > 0 ? (x.shape[x.shape.length - 1] ?? 0) : 0;
    const rows = cols > 0 ? x.data.length / cols : 0;
    const cls = new BigInt64Array(rows);
    const score = new Float32Array(rows);
    const d = x.data as Float32Array;
    for (let r = 0; r < rows; r++) {
      let best = 0;
      for (let j = 1; j < cols; j++) if (d[r * cols + j]! > d[r * cols + best]!) best = j;
      cls[r] = BigInt(best);
      score[r] = d[r * cols + best]!;
    }
    const shape = x.shape.slice(0, -1);
    return { outputs: { class: { name: "class", datatype: "INT64", shape, data: cls }, score: { name: "score", datatype: "FP32", shape, data: score } } };
  },
};

/**
 * A classifier's answer in words: per row of x (over its last axis), the label of the largest element and
 * its score, as objects (JSON in the answer): one row gives a string and a number, several give lists.
 */
export const label: PipelineStep = {
  name: "label",
  kind: "map",
  description: "per row of x: label (params.labels[class], default the class index) and score of the largest element, as JSON",
  inputs: ["x"],
  outputs: ["label", "score"],
  checkParams: (p) => (p["labels"] !== undefined && !(Array.isArray(p["labels"]) && p["labels"].every((l) => typeof l === "string")) ? "labels must be a list of strings" : undefined),
  run(inputs, params) {
    const { outputs } = argmax.run(inputs, {}) as { outputs: Record<string, Tensor> };
    const classes = Array.from(outputs["class"]!.data as BigInt64Array, Number);
    const scores = Array.from(outputs["score"]!.data as Float32Array);
    const names = params["labels"] as string[] | undefined;
    const labels = classes.map((c) => names?.[c] ?? String(c));
    const one = classes.length === 1;
    return { outputs: { label: { name: "label", object: one ? labels[0] : labels }, score: { name: "score", object: one ? scores[0] : scores } } };
  },
};

/** The steps every dispatcher offers. */
export const GENERIC_STEPS: readonly PipelineStep[] = [splitRows, concatRows, mean, argmax, label];
