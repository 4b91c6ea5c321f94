/**
 * The "digits" model family: architectures and training settings of every zoo model, from a 490-
 * parameter classifier on 7×7 average-pooled images to a two-layer CNN. Sizes and epochs are chosen so
 * the whole family trains in about two minutes on one CPU core and spans a wide accuracy range
 * (see `npm run zoo` and libs/zoo/README.md). Shift augmentation (±1 pixel) is what lifts the larger
 * models on only 7 000 training images; the tiny model exists to anchor the low end of the range with
 * a genuinely cheaper graph.
 */
import type { LayerSpec } from "./network.js";
import type { TrainConfig } from "./training.js";

/** One zoo model: a name, a one-line description, its layers and how it is trained. */
export interface ModelSpec {
  readonly name: string;
  readonly description: string;
  readonly layers: readonly LayerSpec[];
  readonly training: TrainConfig;
}

/** The digits family, smallest first. */
export const DIGITS_MODELS: readonly ModelSpec[] = [
  {
    name: "digits-tiny",
    description: "softmax regression on 7x7 average-pooled images (AveragePool 4 -> Gemm 49x10)",
    layers: [{ type: "avgpool", size: 4 }, { type: "flatten" }, { type: "dense", units: 10 }],
    training: { epochs: 3, batchSize: 64, learningRate: 0.02 },
  },
  {
    name: "digits-logreg",
    description: "softmax (multinomial logistic) regression on raw pixels (Gemm 784x10)",
    layers: [{ type: "flatten" }, { type: "dense", units: 10 }],
    training: { epochs: 5, batchSize: 64, learningRate: 0.01 },
  },
  {
    name: "digits-mlp-s",
    description: "MLP 784-32-10, ReLU",
    layers: [{ type: "flatten" }, { type: "dense", units: 32 }, { type: "relu" }, { type: "dense", units: 10 }],
    training: { epochs: 8, batchSize: 64, learningRate: 0.003 },
  },
  {
    name: "digits-mlp-m",
    description: "MLP 784-128-10, ReLU",
    layers: [{ type: "flatten" }, { type: "dense", units: 128 }, { type: "relu" }, { type: "dense", units: 10 }],
    training: { epochs: 8, batchSize: 64, learningRate: 0.002, augmentShift: 1 },
  },
  {
    name: "digits-mlp-l",
    description: "MLP 784-256-128-10, ReLU",
    layers: [
      { type: "flatten" },
      { type: "dense", units: 256 }, { type: "relu" },
      { type: "dense", units: 128 }, { type: "relu" },
      { type: "dense", units: 10 },
    ],
    training: { epochs: 8, batchSize: 64, learningRate: 0.002, augmentShift: 1 },
  },
  {
    name: "digits-cnn-s",
    description: "CNN conv 8@3x3 - ReLU - maxpool 2 - Gemm 1352x10",
    layers: [
      { type: "conv", filters: 8, kernel: 3 }, { type: "relu" }, { type: "maxpool", size: 2 },
      { type: "flatten" }, { type: "dense", units: 10 },
    ],
    training: { epochs: 6, batchSize: 32, learningRate: 0.003, augmentShift: 1 },
  },
  {
    name: "digits-cnn-m",
    description: "CNN conv 8@3x3 - ReLU - maxpool 2 - conv 32@3x3 - ReLU - maxpool 2 - Gemm 800x64 - ReLU - Gemm 64x10",
    layers: [
      { type: "conv", filters: 8, kernel: 3 }, { type: "relu" }, { type: "maxpool", size: 2 },
      { type: "conv", filters: 32, kernel: 3 }, { type: "relu" }, { type: "maxpool", size: 2 },
      { type: "flatten" }, { type: "dense", units: 64 }, { type: "relu" }, { type: "dense", units: 10 },
    ],
    training: { epochs: 10, batchSize: 32, learningRate: 0.003, augmentShift: 1 },
  },
];
