import { ErrorCode, ServeError, type Tensor } from "@sloserve/contracts";
import { isTensor, type StageDatum, type StageValue, type StepObject } from "@sloserve/policy";
import {
  assembleResult,
  checkImage,
  clsPostprocess,
  clsPreprocess,
  cropBoxes,
  ctcDecode,
  decodeImage,
  detPostprocess,
  detPreprocess,
  loadDictionary,
  ocrModelFiles,
  recPreprocess,
  rotate180,
  type Box,
  type DetScale,
  type RecognisedLine,
  type RgbImage,
} from "@sloserve/ocr";
import type { PipelineStep } from "./pipeline-steps.js";

/**
 * The OCR pipeline's processing as built-in steps (PaddleOCR PP-OCRv4 around the models ocr-det,
 * ocr-cls and ocr-rec; libs/ocr README): each a thin call into libs/ocr, the same functions
 * `runOcrLocally` chains in-process, so that the live pipeline answers what the reference does.
 * Images, scales, boxes and text pass between steps as objects; model inputs are tensors.
 *
 *   ocr-decode-det  image bytes (UINT8) → det input x, the decoded image, the scale   (decodeImage, detPreprocess)
 *   ocr-boxes       fan-out: det's map → one item per text box: strip, box, score     (detPostprocess, cropBoxes)
 *   ocr-cls-pre     strip → cls input x [1, 3, 48, 192]                               (clsPreprocess)
 *   ocr-direction   cls output [1, 2] → rotate (boolean), label, score                (clsPostprocess, cls_thresh)
 *   ocr-rotate      strip → the strip turned by 180°                                  (rotate180)
 *   ocr-rec-pre     strip → rec input x [1, 3, 48, W]                                 (recPreprocess, one strip)
 *   ocr-ctc         rec output [1, T, 6625] → text, score                             (ctcDecode, the bundled dictionary)
 *   ocr-assemble    join: every item's text, score, box, rotated → text, lines        (assembleResult, drop_score)
 *
 * Each box is its own item, so each box's classifier and recogniser inputs are their own queries,
 * which the executors batch with other boxes' (recognition inputs batch when they are equally wide:
 * every strip up to 320/48 wide is padded to 320). The only difference from `runOcrLocally`, which
 * batches 6 strips padded to the widest: the recogniser sees a strip padded to its own width, not its
 * batch's (zeros on the right, which it reads as blanks).
 *
 * Steps run on the dispatcher's event loop: decoding is sharp's (off the loop); detection
 * pre-processing (a bilinear resize to at most 960 on the longer side), the crops (one perspective
 * warp per box) and the strips' resizes are array work of a few milliseconds for a page of text.
 */

function datumOf(inputs: Readonly<Record<string, StageValue>>, name: string): StageDatum {
  const v = inputs[name];
  if (v === undefined) throw new Error(`input '${name}' is missing`);
  if (Array.isArray(v)) throw new Error(`input '${name}' is a list of a fan-out's items; this step reads one value`);
  return v as StageDatum;
}

function tensorOf(inputs: Readonly<Record<string, StageValue>>, name: string, what: string): Tensor {
  const d = datumOf(inputs, name);
  if (!isTensor(d)) throw new Error(`input '${name}' must be ${what} (a tensor), not an object from a step`);
  return d;
}

function objectOf(inputs: Readonly<Record<string, StageValue>>, name: string, what: string): unknown {
  const d = datumOf(inputs, name);
  if (isTensor(d)) throw new Error(`input '${name}' must be ${what}, not a tensor`);
  return d.object;
}

function isImage(o: unknown): o is RgbImage {
  return typeof o === "object" && o !== null && (o as RgbImage).data instanceof Uint8Array && Number.isInteger((o as RgbImage).width) && Number.isInteger((o as RgbImage).height);
}

const IMAGE = "the decoded image (from step ocr-decode-det)";
const STRIP = "a strip (from step ocr-boxes or ocr-rotate)";

function imageOf(inputs: Readonly<Record<string, StageValue>>, name: string, what: typeof IMAGE | typeof STRIP): RgbImage {
  const o = objectOf(inputs, name, what);
  if (!isImage(o)) throw new Error(`input '${name}' must be ${what}: an RGB image`);
  checkImage(o, `input '${name}'`);
  return o;
}

function scaleOf(inputs: Readonly<Record<string, StageValue>>): DetScale {
  const what = "the detection scale (from step ocr-decode-det)";
  const o = objectOf(inputs, "scale", what) as Partial<DetScale> | null;
  const keys = ["srcWidth", "srcHeight", "width", "height", "ratioW", "ratioH"] as const;
  if (typeof o !== "object" || o === null || !keys.every((k) => typeof o[k] === "number" && Number.isFinite(o[k]))) {
    throw new Error(`input 'scale' must be ${what}: ${keys.join(", ")}`);
  }
  return o as DetScale;
}

const obj = (name: string, object: unknown): StepObject => ({ name, object });

/** A one-row model output: a pipeline item carries one strip. */
function oneRow(t: Tensor, what: string): void {
  if (t.shape[0] !== 1) throw new ServeError(ErrorCode.invalidShape, `the ${what} output has ${t.shape[0]} rows; this step reads one strip per item ([1, …]), got [${t.shape.join(", ")}]`);
}

const numberParam = (p: Readonly<Record<string, unknown>>, key: string, min: number, max: number): string | undefined => {
  const v = p[key];
  if (v === undefined) return undefined;
  return typeof v === "number" && v >= min && v <= max ? undefined : `${key} must be a number from ${min} to ${max}, got ${JSON.stringify(v)}`;
};
const checkNumbers = (spec: Record<string, [number, number]>) => (p: Readonly<Record<string, unknown>>): string | undefined => {
  for (const [key, [min, max]] of Object.entries(spec)) {
    const bad = numberParam(p, key, min, max);
    if (bad) return bad;
  }
  return undefined;
};
const num = (p: Readonly<Record<string, unknown>>, key: string): number | undefined => (typeof p[key] === "number" ? p[key] : undefined);

/** PNG or JPEG bytes → the detector's input, the decoded image and the scale that maps boxes back. */
export const ocrDecodeDet: PipelineStep = {
  name: "ocr-decode-det",
  kind: "map",
  description: "image: a PNG or JPEG file's bytes (UINT8) → x: ocr-det's input [1, 3, H, W]; image: the decoded image; scale (params: limit_side_len, default 960)",
  inputs: ["image"],
  outputs: ["x", "image", "scale"],
  checkParams: checkNumbers({ limit_side_len: [32, 8192] }),
  async run(inputs, params) {
    const bytes = tensorOf(inputs, "image", "the image file's bytes");
    if (bytes.datatype !== "UINT8") throw new ServeError(ErrorCode.invalidDatatype, `input 'image' must be the image file's bytes as UINT8, got ${bytes.datatype}`);
    const image = await decodeImage(bytes.data as Uint8Array);
    const limit = num(params, "limit_side_len");
    const { tensor, scale } = detPreprocess(image, limit === undefined ? {} : { limitSideLen: limit });
    return { outputs: { x: tensor, image: obj("image", image), scale: obj("scale", scale) } };
  },
};

/** Fan-out: the detector's probability map → one item per text box (in reading order) with its strip. */
export const ocrBoxes: PipelineStep = {
  name: "ocr-boxes",
  kind: "fan_out",
  description: "map: ocr-det's output; image, scale: from ocr-decode-det → one item per text box: strip (the box cut out, horizontal), box (four [x, y] corners), score (params: threshold 0.3, box_threshold 0.6, unclip_ratio 2.0)",
  inputs: ["map", "image", "scale"],
  outputs: ["strip", "box", "score"],
  checkParams: checkNumbers({ threshold: [0, 1], box_threshold: [0, 1], unclip_ratio: [0.1, 10] }),
  run(inputs, params) {
    const map = tensorOf(inputs, "map", "ocr-det's probability map");
    const image = imageOf(inputs, "image", IMAGE);
    const options = { threshold: num(params, "threshold"), boxThreshold: num(params, "box_threshold"), unclipRatio: num(params, "unclip_ratio") };
    const detected = detPostprocess(map, scaleOf(inputs), Object.fromEntries(Object.entries(options).filter(([, v]) => v !== undefined)));
    const strips = cropBoxes(image, detected.map((d) => d.box));
    return { items: detected.map((d, i) => ({ strip: obj("strip", strips[i]), box: obj("box", d.box), score: obj("score", d.score) })) };
  },
};

/** A strip → the direction classifier's input [1, 3, 48, 192]. */
export const ocrClsPre: PipelineStep = {
  name: "ocr-cls-pre",
  kind: "map",
  description: "strip → x: ocr-cls's input [1, 3, 48, 192]",
  inputs: ["strip"],
  outputs: ["x"],
  run(inputs) {
    return { outputs: { x: clsPreprocess([imageOf(inputs, "strip", STRIP)]) } };
  },
};

/**
 * The classifier's answer for one strip: whether to turn it (label 180° with a score above `threshold`,
 * PaddleOCR's cls_thresh), as a boolean a conditional edge can read, and the label and score.
 */
export const ocrDirection: PipelineStep = {
  name: "ocr-direction",
  kind: "map",
  description: "x: ocr-cls's output [1, 2] → rotate (true when the strip reads 180° with score > threshold), label (\"0\" or \"180\"), score (params: threshold, default 0.9)",
  inputs: ["x"],
  outputs: ["rotate", "label", "score"],
  checkParams: checkNumbers({ threshold: [0, 1] }),
  run(inputs, params) {
    const x = tensorOf(inputs, "x", "ocr-cls's output");
    oneRow(x, "direction classifier");
    const [r] = clsPostprocess(x, { threshold: num(params, "threshold") });
    return { outputs: { rotate: obj("rotate", r!.rotate), label: obj("label", r!.label), score: obj("score", r!.score) } };
  },
};

/** A strip turned by 180° (taken when the classifier says it is upside down). */
export const ocrRotate: PipelineStep = {
  name: "ocr-rotate",
  kind: "map",
  description: "strip → strip turned by 180°",
  inputs: ["strip"],
  outputs: ["strip"],
  run(inputs) {
    return { outputs: { strip: obj("strip", rotate180(imageOf(inputs, "strip", STRIP))) } };
  },
};

/** A strip → the recogniser's input [1, 3, 48, W] (W = 48 × its aspect ratio, at least 320). */
export const ocrRecPre: PipelineStep = {
  name: "ocr-rec-pre",
  kind: "map",
  description: "strip → x: ocr-rec's input [1, 3, 48, W], W = max(320, 48 × width / height)",
  inputs: ["strip"],
  outputs: ["x"],
  run(inputs) {
    const [batch] = recPreprocess([imageOf(inputs, "strip", STRIP)], { batchSize: 1 });
    return { outputs: { x: batch!.tensor } };
  },
};

let dictionary: Promise<string[]> | undefined;
/** The bundled recogniser's dictionary (blank, ppocr_keys_v1.txt, space), read once. */
function bundledDictionary(): Promise<string[]> {
  dictionary ??= loadDictionary(ocrModelFiles().dictionary).catch((err: unknown) => {
    dictionary = undefined; // read again on the next query
    throw err;
  });
  return dictionary;
}

/** The recogniser's output for one strip → its text and mean character probability (CTC greedy decoding). */
export const ocrCtc: PipelineStep = {
  name: "ocr-ctc",
  kind: "map",
  description: "x: ocr-rec's output [1, T, 6625] → text, score (CTC greedy decoding with PaddleOCR's ppocr_keys_v1 dictionary)",
  inputs: ["x"],
  outputs: ["text", "score"],
  async run(inputs) {
    const x = tensorOf(inputs, "x", "ocr-rec's output");
    oneRow(x, "recognition");
    const [line] = ctcDecode(x, await bundledDictionary());
    return { outputs: { text: obj("text", line!.text), score: obj("score", line!.score) } };
  },
};

function listOf(inputs: Readonly<Record<string, StageValue>>, name: string): ReadonlyArray<StageDatum | null> {
  const v = inputs[name];
  if (!Array.isArray(v)) throw new Error(`input '${name}' must be the list of a fan-out's items`);
  return v as ReadonlyArray<StageDatum | null>;
}

function isBox(o: unknown): o is Box {
  return Array.isArray(o) && o.length === 4 && o.every((p) => Array.isArray(p) && p.length === 2 && p.every((c) => typeof c === "number" && Number.isFinite(c)));
}

/**
 * Join: every box's recognised line → the answer `{text, lines}` (assembleResult: lines under
 * `drop_score` dropped, reading order; a page whose lines were mostly turned is read upright).
 */
export const ocrAssemble: PipelineStep = {
  name: "ocr-assemble",
  kind: "join",
  description: "per item: text, score (from ocr-ctc), box (from ocr-boxes), rotated (optional: ocr-direction's rotate) → text: every line in reading order, space-separated; lines: [{text, box, score}] (params: drop_score, default 0.5)",
  inputs: ["text", "score", "box"],
  optionalInputs: ["rotated"],
  outputs: ["text", "lines"],
  checkParams: checkNumbers({ drop_score: [0, 1] }),
  run(inputs, params) {
    const texts = listOf(inputs, "text");
    const scores = listOf(inputs, "score");
    const boxes = listOf(inputs, "box");
    const rotated = inputs["rotated"] === undefined ? undefined : listOf(inputs, "rotated");
    const lines: RecognisedLine[] = texts.map((t, i) => {
      const text = t && !isTensor(t) ? t.object : undefined;
      const score = scores[i] && !isTensor(scores[i]) ? (scores[i] as StepObject).object : undefined;
      const box = boxes[i] && !isTensor(boxes[i]) ? (boxes[i] as StepObject).object : undefined;
      if (typeof text !== "string" || typeof score !== "number" || !isBox(box)) throw new Error(`item ${i} lacks its text, score or box (a string, a number and four [x, y] points)`);
      const r = rotated?.[i];
      return { text, score, box, rotated: r !== null && r !== undefined && !isTensor(r) && r.object === true };
    });
    const dropScore = num(params, "drop_score");
    const result = assembleResult(lines, dropScore === undefined ? {} : { dropScore });
    return { outputs: { text: obj("text", result.text), lines: obj("lines", result.lines) } };
  },
};

/** Every OCR step, for the dispatcher's step registry. */
export const OCR_STEPS: readonly PipelineStep[] = [ocrDecodeDet, ocrBoxes, ocrClsPre, ocrDirection, ocrRotate, ocrRecPre, ocrCtc, ocrAssemble];
