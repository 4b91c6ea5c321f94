/**
 * A sequential classifier: layers from a serialisable spec, logits out, softmax on prediction.
 * The spec is plain data (hashed into the zoo's cache key and mapped one-to-one onto ONNX nodes).
 */
import { AvgPool2d, Conv2d, Dense, Flatten, MaxPool2d, Relu, type Layer, type Param } from "./layers.js";
import { pairedNormals, type Rng } from "@sloserve/policy";

/** One layer of a model spec. */
export type LayerSpec =
  | { readonly type: "flatten" }
  | { readonly type: "dense"; readonly units: number }
  | { readonly type: "relu" }
  | { readonly type: "conv"; readonly filters: number; readonly kernel: number; readonly pad?: number; readonly stride?: number }
  | { readonly type: "maxpool"; readonly size: number; readonly stride?: number }
  | { readonly type: "avgpool"; readonly size: number; readonly stride?: number };

/** A feed-forward network over per-sample input shape `inShape`. */
export class Network {
  readonly layers: readonly Layer[];
  readonly outFeatures: number;
  /** needsInputGrad[i]: some layer before i has parameters, so layer i must pass a gradient back. */
  private readonly needsInputGrad: readonly boolean[];

  /** Builds the layers, drawing initial weights from `rng` in layer order (Box-Muller pairs, {@link pairedNormals}). */
  constructor(readonly specs: readonly LayerSpec[], readonly inShape: readonly number[], rng: Rng) {
    const normal = pairedNormals(rng);
    const layers: Layer[] = [];
    let shape = inShape;
    const counts = new Map<string, number>();
    const lastDense = specs.map((s) => s.type).lastIndexOf("dense");
    specs.forEach((spec, index) => {
      const ordinal = counts.get(spec.type) ?? 0;
      counts.set(spec.type, ordinal + 1);
      const name = `${spec.type}${ordinal}`;
      let layer: Layer;
      switch (spec.type) {
        case "flatten":
          layer = new Flatten(name, shape);
          break;
        case "relu":
          layer = new Relu(name, shape);
          break;
        case "dense":
          if (shape.length !== 1) throw new Error(`${name}: dense needs a flat input, got [${shape.join(", ")}]; add a flatten`);
          // He initialisation before a ReLU, LeCun (gain 1) for the logits layer.
          layer = new Dense(name, shape[0]!, spec.units, normal, index === lastDense ? 1 : 2);
          break;
        case "conv":
          if (shape.length !== 3) throw new Error(`${name}: conv needs a [C, H, W] input, got [${shape.join(", ")}]`);
          layer = new Conv2d(name, shape, spec, normal);
          break;
        case "maxpool":
          if (shape.length !== 3) throw new Error(`${name}: maxpool needs a [C, H, W] input, got [${shape.join(", ")}]`);
          layer = new MaxPool2d(name, shape, spec.size, spec.stride ?? spec.size);
          break;
        case "avgpool":
          if (shape.length !== 3) throw new Error(`${name}: avgpool needs a [C, H, W] input, got [${shape.join(", ")}]`);
          layer = new AvgPool2d(name, shape, spec.size, spec.stride ?? spec.size);
          break;
      }
      layers.push(layer);
      shape = layer.outShape;
    });
    if (shape.length !== 1) throw new Error(`the network must end flat, got [${shape.join(", ")}]`);
    this.layers = layers;
    this.outFeatures = shape[0]!;
    this.needsInputGrad = layers.map((_, i) => layers.slice(0, i).some((l) => l.params.length > 0));
  }

  /** Every trainable tensor, in layer order. */
  get params(): Param[] {
    return this.layers.flatMap((layer) => [...layer.params]);
  }

  /** Number of trainable scalars. */
  get paramCount(): number {
    return this.params.reduce((sum, p) => sum + p.data.length, 0);
  }

  /** Logits [batch, outFeatures] (a view of an internal buffer). */
  forward(x: Float32Array, batch: number): Float32Array {
    let h = x;
    for (const layer of this.layers) h = layer.forward(h, batch);
    return h;
  }

  /** Back-propagates d(loss)/d(logits), accumulating parameter gradients. */
  backward(dLogits: Float32Array, batch: number): void {
    let g: Float32Array | null = dLogits;
    for (let i = this.layers.length - 1; i >= 0 && g; i--) g = this.layers[i]!.backward(g, batch, this.needsInputGrad[i]!);
  }

  /** Clears all gradients. */
  zeroGrad(): void {
    for (const p of this.params) p.grad.fill(0);
  }

  /** Class probabilities [count, outFeatures] (softmax of the logits), computed in chunks. */
  predictProba(inputs: Float32Array, count: number, chunk = 250): Float32Array {
    const inSize = inputs.length / count;
    const out = new Float32Array(count * this.outFeatures);
    for (let start = 0; start < count; start += chunk) {
      const n = Math.min(chunk, count - start);
      const logits = this.forward(inputs.subarray(start * inSize, (start + n) * inSize), n);
      softmaxRows(logits, n, this.outFeatures, out, start * this.outFeatures);
    }
    return out;
  }
}

/** Row-wise softmax with max subtraction: out[r, :] = exp(x − max) / Σ exp(x − max). */
export function softmaxRows(x: Float32Array, rows: number, cols: number, out: Float32Array, outOff = 0): void {
  for (let r = 0; r < rows; r++) {
    const base = r * cols;
    let max = -Infinity;
    for (let c = 0; c < cols; c++) max = Math.max(max, x[base + c]!);
    let sum = 0;
    for (let c = 0; c < cols; c++) sum += Math.exp(x[base + c]! - max);
    for (let c = 0; c < cols; c++) out[outOff + base + c] = Math.exp(x[base + c]! - max) / sum;
  }
}

/** Index of the largest value in each row of a [rows, cols] matrix (first index on ties). */
export function argmaxRows(x: Float32Array, rows: number, cols: number): Uint8Array {
  const out = new Uint8Array(rows);
  for (let r = 0; r < rows; r++) {
    let best = 0;
    for (let c = 1; c < cols; c++) if (x[r * cols + c]! > x[r * cols + best]!) best = c;
    out[r] = best;
  }
  return out;
}

/** Fraction of rows whose argmax equals the label. */
export function accuracy(probabilities: Float32Array, labels: Uint8Array, classes: number): number {
  const predicted = argmaxRows(probabilities, labels.length, classes);
  let correct = 0;
  for (let i = 0; i < labels.length; i++) if (predicted[i] === labels[i]) correct++;
  return correct / labels.length;
}
