/**
 * @sloserve/zoo — the "digits" model family: real MNIST classifiers trained deterministically in
 * TypeScript, exported as ONNX (through @sloserve/onnx), cached with a manifest and a validation set
 * per model.
 */
export { buildZoo, ensureZoo, checkZooCache, readManifest, trainZooModel, modelContentHash, zooContentHash, ZOO_VERSION, DEFAULT_ZOO_SEED, DEFAULT_CACHE_DIR } from "./zoo.js";
export type { TrainedZooModel } from "./zoo.js";
export type { ZooManifest, ZooModelEntry, ZooOptions, ZooProgress, TensorSignature } from "./types.js";
export { loadDigits, DIGIT_CLASSES, DIGIT_FEATURES, DIGIT_SHAPE, DEFAULT_SPLIT_SEED } from "./data.js";
export type { DigitSet, DigitSplits, LoadDigitsOptions } from "./data.js";
export { readValidationSet, encodeValidationSet, decodeValidationSet, validationSetToJson, validationSetFromJson } from "./validation-set.js";
export type { ValidationSet, ValidationSetJson } from "./validation-set.js";
export { DIGITS_MODELS } from "./models.js";
export type { ModelSpec } from "./models.js";
export { Network, accuracy, argmaxRows } from "./network.js";
export type { LayerSpec } from "./network.js";
export { trainNetwork } from "./training.js";
export type { TrainConfig, TrainProgress, TrainResult } from "./training.js";
export { exportNetwork, networkFromOnnx, INPUT_NAME, OUTPUT_NAME } from "./export.js";
