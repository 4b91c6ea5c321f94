/**
 * Mini-batch training of a {@link Network} with softmax cross-entropy and Adam
 * (Kingma & Ba, "Adam: A Method for Stochastic Optimization", ICLR 2015, Algorithm 1), with a cosine
 * learning-rate decay over all steps (Loshchilov & Hutter, SGDR, 2017, without restarts).
 *
 * Deterministic: the only randomness (initial weights, epoch shuffles, optional shift augmentation)
 * comes from one seeded {@link Rng}, and every loop has a fixed order, so the same seed gives the same
 * weights bit for bit on the same platform.
 */
import type { DigitSet } from "./data.js";
import { Network, type LayerSpec } from "./network.js";
import { Xoshiro128ss, sampleInt, shuffleInPlace, type Rng } from "@sloserve/policy";

/** Hyper-parameters of one training run. */
export interface TrainConfig {
  readonly epochs: number;
  readonly batchSize: number;
  /** Peak Adam step size. */
  readonly learningRate: number;
  /** Train on only the first this-many training samples (a deliberately weak model). @default all */
  readonly trainSubset?: number;
  /**
   * Random translation of each training image by up to this many pixels, zero-filled (0 = none).
   * Assumes square single-channel images (the digits). @default 0
   */
  readonly augmentShift?: number;
}

/** Progress of a training run, reported once per epoch. */
export interface TrainProgress {
  readonly epoch: number;
  readonly epochs: number;
  /** Mean training loss over the epoch. */
  readonly loss: number;
}

/** What {@link trainNetwork} returns. */
export interface TrainResult {
  readonly network: Network;
  readonly steps: number;
  /** Mean training loss of the last epoch. */
  readonly finalLoss: number;
}

const ADAM_BETA1 = 0.9;
const ADAM_BETA2 = 0.999;
const ADAM_EPSILON = 1e-8;

/**
 * Trains a network of `layers` on `train` (per-sample shape `inShape`) with `seed`.
 * `onEpoch` is called after each epoch.
 */
export function trainNetwork(
  layers: readonly LayerSpec[],
  inShape: readonly number[],
  train: DigitSet,
  config: TrainConfig,
  seed: number,
  onEpoch?: (progress: TrainProgress) => void,
): TrainResult {
  const rng = new Xoshiro128ss(seed);
  const network = new Network(layers, inShape, rng);
  const classes = network.outFeatures;
  const features = train.features;
  const count = Math.min(config.trainSubset ?? train.count, train.count);
  const batchSize = config.batchSize;
  const stepsPerEpoch = Math.ceil(count / batchSize);
  const totalSteps = stepsPerEpoch * config.epochs;
  const params = network.params;
  const m = params.map((p) => new Float32Array(p.data.length));
  const v = params.map((p) => new Float32Array(p.data.length));
  const order = new Uint32Array(count).map((_, i) => i);
  const x = new Float32Array(batchSize * features);
  const y = new Uint8Array(batchSize);
  const dLogits = new Float32Array(batchSize * classes);
  let step = 0;
  let finalLoss = NaN;

  for (let epoch = 1; epoch <= config.epochs; epoch++) {
    shuffleInPlace(order, rng);
    let lossSum = 0;
    for (let start = 0; start < count; start += batchSize) {
      const n = Math.min(batchSize, count - start);
      gatherBatch(train, order, start, n, x, y, config.augmentShift ?? 0, rng);
      network.zeroGrad();
      const logits = network.forward(x.subarray(0, n * features), n);
      lossSum += softmaxCrossEntropy(logits, y, n, classes, dLogits) * n;
      network.backward(dLogits.subarray(0, n * classes), n);
      step++;
      const lr = config.learningRate * 0.5 * (1 + Math.cos((Math.PI * (step - 1)) / totalSteps));
      adamStep(params, m, v, step, lr);
    }
    finalLoss = lossSum / count;
    onEpoch?.({ epoch, epochs: config.epochs, loss: finalLoss });
  }
  return { network, steps: step, finalLoss };
}

/** Copies samples order[start .. start+n) into x/y, optionally shifted by up to `shift` pixels. */
function gatherBatch(
  set: DigitSet, order: Uint32Array, start: number, n: number,
  x: Float32Array, y: Uint8Array, shift: number, rng: Rng,
): void {
  const f = set.features;
  for (let i = 0; i < n; i++) {
    const from = order[start + i]!;
    y[i] = set.labels[from]!;
    if (shift === 0) {
      x.set(set.inputs.subarray(from * f, (from + 1) * f), i * f);
      continue;
    }
    const side = Math.round(Math.sqrt(f));
    const dx = sampleInt(rng, 2 * shift + 1) - shift;
    const dy = sampleInt(rng, 2 * shift + 1) - shift;
    for (let r = 0; r < side; r++) {
      for (let c = 0; c < side; c++) {
        const sr = r - dy;
        const sc = c - dx;
        x[i * f + r * side + c] = sr >= 0 && sr < side && sc >= 0 && sc < side ? set.inputs[from * f + sr * side + sc]! : 0;
      }
    }
  }
}

/**
 * Mean cross-entropy of softmax(logits) against the labels; writes d(mean loss)/d(logits)
 * = (softmax − onehot) / n into `grad`.
 */
export function softmaxCrossEntropy(
  logits: Float32Array, labels: Uint8Array, n: number, classes: number, grad: Float32Array,
): number {
  let loss = 0;
  for (let r = 0; r < n; r++) {
    const base = r * classes;
    let max = -Infinity;
    for (let c = 0; c < classes; c++) max = Math.max(max, logits[base + c]!);
    let sum = 0;
    for (let c = 0; c < classes; c++) sum += Math.exp(logits[base + c]! - max);
    const label = labels[r]!;
    loss += Math.log(sum) - (logits[base + label]! - max);
    for (let c = 0; c < classes; c++) {
      const p = Math.exp(logits[base + c]! - max) / sum;
      grad[base + c] = (p - (c === label ? 1 : 0)) / n;
    }
  }
  return loss / n;
}

/** One Adam update with bias correction, step t ≥ 1. */
function adamStep(
  params: readonly { data: Float32Array; grad: Float32Array }[],
  m: readonly Float32Array[], v: readonly Float32Array[], t: number, lr: number,
): void {
  const c1 = 1 - ADAM_BETA1 ** t;
  const c2 = 1 - ADAM_BETA2 ** t;
  params.forEach((p, k) => {
    const mk = m[k]!;
    const vk = v[k]!;
    const { data, grad } = p;
    for (let i = 0; i < data.length; i++) {
      const g = grad[i]!;
      const mi = ADAM_BETA1 * mk[i]! + (1 - ADAM_BETA1) * g;
      const vi = ADAM_BETA2 * vk[i]! + (1 - ADAM_BETA2) * g * g;
      mk[i] = mi;
      vk[i] = vi;
      data[i] = data[i]! - (lr * (mi / c1)) / (Math.sqrt(vi / c2) + ADAM_EPSILON);
    }
  });
}
