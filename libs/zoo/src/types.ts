/** Types of the zoo's manifest (`manifest.json` in the cache directory) and build options. */
import type { LayerSpec } from "./network.js";
import type { TrainConfig } from "./training.js";

/** A graph input or output: name, element type and shape ("N" is the dynamic batch dimension). */
export interface TensorSignature {
  readonly name: string;
  readonly dtype: "float32";
  readonly shape: readonly (number | string)[];
}

/** One trained model in the manifest. */
export interface ZooModelEntry {
  /** e.g. "digits-cnn-m". */
  readonly name: string;
  readonly task: "image-classification";
  readonly dataset: "mnist";
  readonly description: string;
  /** Layer list the model was built from (maps one-to-one onto the ONNX nodes). */
  readonly architecture: readonly LayerSpec[];
  readonly training: TrainConfig;
  readonly inputs: readonly TensorSignature[];
  readonly outputs: readonly TensorSignature[];
  /** Class label of each output index ("0".."9"). */
  readonly labels: readonly string[];
  /** Trainable scalars. */
  readonly params: number;
  /** Top-1 accuracy on the held-out test split, in [0, 1]. */
  readonly testAccuracy: number;
  /** Top-1 accuracy on the validation split shipped with the model, in [0, 1]. */
  readonly validationAccuracy: number;
  /** Wall-clock training time on the machine that built the zoo. */
  readonly trainTimeMs: number;
  /** Seed the model was trained with (derived from the zoo seed and the name). */
  readonly seed: number;
  /** Hash of the zoo version, split, seed and this model's spec: the cache key. */
  readonly contentHash: string;
  /** File names relative to the cache directory. */
  readonly files: { readonly onnx: string; readonly validation: string };
  readonly onnxBytes: number;
  /** sha256 (hex) of the `.onnx` file. */
  readonly onnxSha256: string;
}

/** The zoo manifest. */
export interface ZooManifest {
  readonly formatVersion: 1;
  /** Version of the training/export code ({@link ZOO_VERSION}); bump it to invalidate caches. */
  readonly zooVersion: string;
  readonly seed: number;
  /** Hash over the version, seed, split and every model spec. */
  readonly contentHash: string;
  readonly dataset: {
    readonly name: "mnist";
    readonly source: string;
    readonly splitSeed: number;
    readonly train: number;
    readonly validation: number;
    readonly test: number;
    readonly features: number;
    readonly classes: number;
    /** Layout of the `.validation.bin` files. */
    readonly validationFormat: string;
  };
  readonly models: readonly ZooModelEntry[];
}

/** Progress of a zoo build. */
export type ZooProgress =
  | { readonly type: "data"; readonly train: number; readonly validation: number; readonly test: number }
  | { readonly type: "start"; readonly model: string; readonly index: number; readonly total: number }
  | { readonly type: "epoch"; readonly model: string; readonly epoch: number; readonly epochs: number; readonly loss: number; readonly elapsedMs: number }
  | { readonly type: "done"; readonly model: string; readonly entry: ZooModelEntry }
  | { readonly type: "cached"; readonly manifest: ZooManifest }
  | { readonly type: "stale"; readonly reason: string };

/** Options of {@link buildZoo} and {@link ensureZoo}. */
export interface ZooOptions {
  /** Where models, validation sets and manifest.json go. @default "<repo>/.cache/zoo" */
  readonly cacheDir?: string;
  /** Training seed. @default 1 */
  readonly seed?: number;
  /** Build only these models (by name). @default all of DIGITS_MODELS */
  readonly models?: readonly string[];
  /** Called with build progress. */
  readonly onProgress?: (event: ZooProgress) => void;
  /** Monotonic clock in ms, used for training times. @default performance.now */
  readonly clock?: () => number;
}
