import { ErrorCode, ServeError, type Tensor } from "@sloserve/contracts";
import { rotate180, type RgbImage } from "./image.js";
import { byAspectRatio, chunk, stripsToTensor } from "./strips.js";

/**
 * Text direction classifier (PaddleOCR's mobile v2.0 cls; predict_cls.py): is a strip upright (0°)
 * or upside down (180°)? Strips go in as [n, 3, 48, 192], each resized to height 48 keeping its
 * aspect ratio (at most 192 wide) and padded right; the model answers two softmax scores per strip.
 * A strip is turned when its best label is 180° with a score above `threshold` (`cls_thresh`, 0.9).
 */

export const CLS_HEIGHT = 48;
export const CLS_WIDTH = 192;
/** PaddleOCR's `cls_batch_num`. */
export const CLS_BATCH = 6;
export const CLS_LABELS = ["0", "180"] as const;

/** All strips as one classifier input [n, 3, 48, 192] (in the order given). */
export function clsPreprocess(strips: readonly RgbImage[]): Tensor {
  return stripsToTensor(strips, CLS_HEIGHT, CLS_WIDTH);
}

/**
 * The strips in PaddleOCR's batches: sorted by aspect ratio, `batchSize` at a time; `indices` says
 * which strips each batch holds, in its rows' order.
 */
export function clsBatches(strips: readonly RgbImage[], batchSize = CLS_BATCH): Array<{ tensor: Tensor; indices: number[] }> {
  return chunk(byAspectRatio(strips), batchSize).map((indices) => ({ tensor: clsPreprocess(indices.map((i) => strips[i] as RgbImage)), indices }));
}

export interface ClsResult {
  label: (typeof CLS_LABELS)[number];
  score: number;
  /** Whether the strip is to be turned by 180° before recognition. */
  rotate: boolean;
}

/** Classifier output [n, 2] → per strip: label, score and whether to rotate. */
export function clsPostprocess(output: Tensor, options: { threshold?: number | undefined } = {}): ClsResult[] {
  const threshold = options.threshold ?? 0.9;
  if (output.datatype !== "FP32" || !(output.data instanceof Float32Array)) throw new ServeError(ErrorCode.invalidDatatype, `the classifier output must be FP32, got ${output.datatype}`);
  if (output.shape.length !== 2 || output.shape[1] !== CLS_LABELS.length) throw new ServeError(ErrorCode.invalidShape, `the classifier output must be [n, 2], got [${output.shape.join(", ")}]`);
  const n = output.shape[0] as number;
  if (output.data.length !== n * 2) throw new ServeError(ErrorCode.invalidDataLength, `the classifier output has ${output.data.length} values for shape [${n}, 2]`);
  const out: ClsResult[] = [];
  for (let i = 0; i < n; i++) {
    const p0 = output.data[i * 2] as number;
    const p1 = output.data[i * 2 + 1] as number;
    const best = p1 > p0 ? 1 : 0;
    const score = best === 1 ? p1 : p0;
    const label = CLS_LABELS[best] as ClsResult["label"];
    out.push({ label, score, rotate: label === "180" && score > threshold });
  }
  return out;
}

/** Turns the strips flagged by the classifier by 180°; the others are returned as they are. */
export function applyRotations(strips: readonly RgbImage[], flags: ReadonlyArray<{ rotate: boolean } | boolean>): RgbImage[] {
  if (flags.length !== strips.length) throw new ServeError(ErrorCode.badRequest, `${strips.length} strips but ${flags.length} rotation flags`);
  return strips.map((s, i) => {
    const f = flags[i];
    return (typeof f === "boolean" ? f : f?.rotate) ? rotate180(s) : s;
  });
}
