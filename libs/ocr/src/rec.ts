import { readFile } from "node:fs/promises";
import { ErrorCode, ServeError, type Tensor } from "@sloserve/contracts";
import type { RgbImage } from "./image.js";
import { byAspectRatio, chunk, stripsToTensor } from "./strips.js";

/**
 * Text recognition (PP-OCRv4 rec, an SVTR-LCNet network trained with CTC; predict_rec.py) and CTC
 * greedy decoding (ppocr/postprocess/rec_postprocess.py `CTCLabelDecode`).
 *
 * Input: strips resized to height 48 keeping their aspect ratio and padded right to the batch width,
 * which is 48 × the largest width/height ratio in the batch but at least 320 (PaddleOCR's
 * `rec_image_shape` 3,48,320). Output: [n, T, C] softmax scores over C classes: the CTC blank
 * (class 0), the dictionary's characters in file order, then a space (`use_space_char`).
 */

export const REC_HEIGHT = 48;
/** The narrowest batch (`rec_image_shape`'s width). */
export const REC_MIN_WIDTH = 320;
/** PaddleOCR's `rec_batch_num`. */
export const REC_BATCH = 6;
/** Widest strip (in pixels at height 48) fed to the recogniser: a strip 250 times longer than tall. */
export const REC_MAX_WIDTH = 12_000;

/**
 * The strips in PaddleOCR's batches: sorted by aspect ratio, `batchSize` at a time, each batch
 * padded to its widest strip; `indices` says which strips each batch holds, in its rows' order.
 * With `batchSize` 1 each strip is its own input (what a fan-out of one query per box sends).
 */
export function recPreprocess(strips: readonly RgbImage[], options: { batchSize?: number } = {}): Array<{ tensor: Tensor; indices: number[] }> {
  const batchSize = options.batchSize ?? REC_BATCH;
  return chunk(byAspectRatio(strips), batchSize).map((indices) => {
    const batch = indices.map((i) => strips[i] as RgbImage);
    let maxRatio = REC_MIN_WIDTH / REC_HEIGHT;
    for (const s of batch) maxRatio = Math.max(maxRatio, s.width / s.height);
    const width = Math.min(Math.trunc(REC_HEIGHT * maxRatio), REC_MAX_WIDTH);
    return { tensor: stripsToTensor(batch, REC_HEIGHT, width), indices };
  });
}

/**
 * The recogniser's classes: the CTC blank, one character per line of the dictionary file, and a
 * space. The file is PaddleOCR's format (UTF-8, one character per line, `\n` or `\r\n` line ends);
 * an empty file, or a line that is not exactly one character, is refused.
 */
export async function loadDictionary(path: string): Promise<string[]> {
  let text: string;
  try {
    text = await readFile(path, "utf8");
  } catch (err) {
    throw new ServeError(ErrorCode.invalidData, `cannot read the dictionary ${path}: ${(err as Error).message}`);
  }
  return parseDictionary(text, path);
}

/** {@link loadDictionary} on the file's text. */
export function parseDictionary(text: string, source = "the dictionary"): string[] {
  const lines = text.split("\n").map((l) => (l.endsWith("\r") ? l.slice(0, -1) : l));
  if (lines.length > 0 && lines[lines.length - 1] === "") lines.pop();
  if (lines.length === 0) throw new ServeError(ErrorCode.invalidData, `${source} is empty`);
  lines.forEach((l, i) => {
    if ([...l].length !== 1) throw new ServeError(ErrorCode.invalidData, `${source}, line ${i + 1}: expected one character, got ${JSON.stringify(l)}`);
  });
  return ["", ...lines, " "];
}

export interface DecodedLine {
  text: string;
  /** Mean probability of the characters kept (0 when none is). */
  score: number;
}

/**
 * CTC greedy decoding of the recogniser's output [n, T, C]: the best class at each step; repeats of
 * the previous step's class and blanks (class 0) are dropped; the rest map to `dictionary` (as from
 * {@link loadDictionary}: blank first). The score is the mean of the kept steps' probabilities.
 */
export function ctcDecode(output: Tensor, dictionary: readonly string[]): DecodedLine[] {
  if (output.datatype !== "FP32" || !(output.data instanceof Float32Array)) throw new ServeError(ErrorCode.invalidDatatype, `the recognition output must be FP32, got ${output.datatype}`);
  if (output.shape.length !== 3) throw new ServeError(ErrorCode.invalidShape, `the recognition output must be [n, T, C], got [${output.shape.join(", ")}]`);
  const [n, steps, classes] = output.shape as [number, number, number];
  if (classes !== dictionary.length) {
    throw new ServeError(ErrorCode.invalidShape, `the recognition output has ${classes} classes but the dictionary has ${dictionary.length} (blank + characters + space)`);
  }
  if (output.data.length !== n * steps * classes) throw new ServeError(ErrorCode.invalidDataLength, `the recognition output has ${output.data.length} values for shape [${n}, ${steps}, ${classes}]`);
  const data = output.data;
  const out: DecodedLine[] = [];
  for (let b = 0; b < n; b++) {
    let text = "";
    let sum = 0;
    let kept = 0;
    let prev = -1;
    for (let t = 0; t < steps; t++) {
      const base = (b * steps + t) * classes;
      let best = 0;
      let bestP = data[base] as number;
      for (let c = 1; c < classes; c++) {
        const p = data[base + c] as number;
        if (p > bestP) {
          bestP = p;
          best = c;
        }
      }
      if (best !== 0 && best !== prev) {
        text += dictionary[best] as string;
        sum += bestP;
        kept++;
      }
      prev = best;
    }
    out.push({ text, score: kept > 0 ? sum / kept : 0 });
  }
  return out;
}
