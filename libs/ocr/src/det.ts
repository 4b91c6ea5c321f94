import { ErrorCode, ServeError, type Tensor } from "@sloserve/contracts";
import { checkImage, resizeBilinear, type RgbImage } from "./image.js";
import { minAreaRect, offsetConvexPolygon, polygonArea, polygonPerimeter, type Point } from "./geometry.js";

/**
 * Text detection (PP-OCRv4 det, a DB — Differentiable Binarization — network; Liao et al., AAAI 2020):
 * pre-processing into the model's input and post-processing of its probability map into boxes, after
 * PaddleOCR's `DetResizeForTest` + `NormalizeImage` and `DBPostProcess` + `filter_tag_det_res`
 * (tools/infer/predict_det.py, ppocr/postprocess/db_postprocess.py), with the settings of PaddleX's
 * OCR pipeline for PP-OCRv4 (limit 960 on the longer side, thresholds 0.3 and 0.6, unclip ratio
 * 2.0); the boxes then go in reading order by a rule of our own ({@link sortBoxes}).
 *
 * Caveats: connected components stand in for OpenCV's contour tracing. A box's minimum-area
 * rectangle depends only on the contour's convex hull, which is the hull of the component's pixels,
 * so outer contours give the same boxes; OpenCV's `RETR_LIST` also returns the contours of holes
 * inside a component, which become boxes only when their ring of pixels averages over the box
 * threshold — we leave them out.
 */

/** A text box: four corners in source-image pixels, clockwise from the top left (tl, tr, br, bl). */
export type Box = [Point, Point, Point, Point];

/** What `detPostprocess` needs to map the probability map back onto the source image. */
export interface DetScale {
  /** The source image's size. */
  srcWidth: number;
  srcHeight: number;
  /** The model input's (and so the probability map's) size. */
  width: number;
  height: number;
  /** Map pixels per source pixel, across and down (PaddleOCR's ratio_w, ratio_h). */
  ratioW: number;
  ratioH: number;
}

export interface DetPreprocessOptions {
  /** The longer side is shrunk to at most this many pixels (`det_limit_side_len`). @default 960 */
  limitSideLen?: number;
}

/** PaddleOCR's `NormalizeImage` for detection: ImageNet mean and std on x / 255. */
export const DET_MEAN = [0.485, 0.456, 0.406] as const;
export const DET_STD = [0.229, 0.224, 0.225] as const;

/**
 * Image → detection input `x` [1, 3, H, W] (FP32).
 *
 * `DetResizeForTest` with `limit_type: max`: an image whose sides add up to under 64 is first padded
 * (black, bottom and right) to at least 32 × 32; the scale is limitSideLen / longer side when the
 * longer side exceeds the limit, else 1; each side is then rounded to the nearest multiple of 32 (at
 * least 32) — so the aspect ratio moves slightly — and the image resized bilinearly. Normalisation
 * is ((v / 255) − mean) / std per channel, in the channel order PaddleOCR feeds its models: OpenCV's
 * BGR (channel 0 is blue, normalised with mean 0.485).
 */
export function detPreprocess(image: RgbImage, options: DetPreprocessOptions = {}): { tensor: Tensor; scale: DetScale } {
  checkImage(image);
  const limit = options.limitSideLen ?? 960;
  if (!(limit >= 32)) throw new ServeError(ErrorCode.badRequest, `limitSideLen must be at least 32, got ${limit}`);
  let img = image;
  if (img.width + img.height < 64) img = padTo(img, Math.max(32, img.width), Math.max(32, img.height));
  const { width: w, height: h } = img;
  const ratio = Math.max(w, h) > limit ? limit / Math.max(w, h) : 1;
  const resizeW = Math.max(roundHalfEven(Math.trunc(w * ratio) / 32) * 32, 32);
  const resizeH = Math.max(roundHalfEven(Math.trunc(h * ratio) / 32) * 32, 32);
  const resized = resizeW === w && resizeH === h ? img : resizeBilinear(img, resizeW, resizeH);
  const plane = resizeW * resizeH;
  const data = new Float32Array(3 * plane);
  const px = resized.data;
  for (let i = 0; i < plane; i++) {
    // BGR: channel c reads RGB index 2 - c.
    for (let c = 0; c < 3; c++) {
      data[c * plane + i] = ((px[i * 3 + (2 - c)] as number) / 255 - (DET_MEAN[c] as number)) / (DET_STD[c] as number);
    }
  }
  // Padding only adds space on the right and at the bottom, so map pixels per source pixel are those
  // of the padded image. (PaddleOCR maps the whole map onto the unpadded source size instead, which
  // misplaces the boxes of such tiny images.)
  return {
    tensor: { name: "x", datatype: "FP32", shape: [1, 3, resizeH, resizeW], data },
    scale: { srcWidth: image.width, srcHeight: image.height, width: resizeW, height: resizeH, ratioW: resizeW / w, ratioH: resizeH / h },
  };
}

/** Python's `round` (half to even), which PaddleOCR uses for the multiple of 32. */
function roundHalfEven(x: number): number {
  const r = Math.round(x);
  return Math.abs(x % 1) === 0.5 && r % 2 !== 0 ? r - 1 : r;
}

function padTo(image: RgbImage, width: number, height: number): RgbImage {
  const data = new Uint8Array(width * height * 3);
  for (let y = 0; y < image.height; y++) data.set(image.data.subarray(y * image.width * 3, (y + 1) * image.width * 3), y * width * 3);
  return { width, height, data };
}

export interface DetPostprocessOptions {
  /** Pixels with probability above this are text (`det_db_thresh`). @default 0.3 */
  threshold?: number;
  /** A box is kept when the mean probability inside it reaches this (`det_db_box_thresh`). @default 0.6 */
  boxThreshold?: number;
  /**
   * How far a box grows: area × ratio / perimeter (`unclip_ratio`). PaddleOCR 3 (PaddleX's OCR
   * pipeline for PP-OCRv4) uses 2.0, PaddleOCR 2's tools 1.5, which crops the strips so tightly that
   * the recogniser loses spaces between words and letters at the ends (README.md of this package).
   * @default 2.0
   */
  unclipRatio?: number;
  /** At most this many candidate regions are looked at (`max_candidates`). @default 1000 */
  maxCandidates?: number;
}

/** A probability map: `data` is height × width, row-major. */
export interface ProbMap {
  width: number;
  height: number;
  data: Float32Array;
}

/** The detection model's output [1, 1, H, W] (or [1, H, W], [H, W]) as a {@link ProbMap}. */
export function probMapOf(output: Tensor): ProbMap {
  if (output.datatype !== "FP32" || !(output.data instanceof Float32Array)) throw new ServeError(ErrorCode.invalidDatatype, `the detection output must be FP32, got ${output.datatype}`);
  const dims = output.shape;
  if (dims.length < 2 || dims.slice(0, -2).some((d) => d !== 1)) throw new ServeError(ErrorCode.invalidShape, `the detection output must be one map [1, 1, H, W], got [${dims.join(", ")}]`);
  const height = dims[dims.length - 2] as number;
  const width = dims[dims.length - 1] as number;
  if (output.data.length !== width * height) throw new ServeError(ErrorCode.invalidDataLength, `the detection output has ${output.data.length} values for shape [${dims.join(", ")}]`);
  return { width, height, data: output.data };
}

/**
 * Probability map → text boxes in the source image, in reading order.
 *
 * DB post-processing (`DBPostProcess.boxes_from_bitmap`, score mode "fast", box type "quad"):
 * 1. binarise at `threshold`; each 8-connected region of text pixels is a candidate (at most
 *    `maxCandidates`);
 * 2. its minimum-area rectangle; dropped when the shorter side is under 3 pixels;
 * 3. score = mean probability over the rectangle (filled polygon); dropped under `boxThreshold`;
 * 4. unclip: grow the rectangle by area × `unclipRatio` / perimeter with round corners (the DB
 *    network predicts a kernel shrunk from the text by about that much), take the
 *    minimum-area rectangle of that; dropped when its shorter side is under 5;
 * 5. scale to the source image, round, clip.
 * Then `filter_tag_det_res` (corners ordered tl, tr, br, bl, clipped to the image, boxes 3 pixels or
 * less across dropped), and reading order ({@link sortBoxes}).
 */
export function detPostprocess(probMap: ProbMap | Tensor, scale: DetScale, options: DetPostprocessOptions = {}): Array<{ box: Box; score: number }> {
  const map = "datatype" in probMap ? probMapOf(probMap) : probMap;
  const threshold = options.threshold ?? 0.3;
  const boxThreshold = options.boxThreshold ?? 0.6;
  const unclipRatio = options.unclipRatio ?? 2.0;
  const maxCandidates = options.maxCandidates ?? 1000;
  const { width, height, data: pred } = map;
  if (pred.length !== width * height) throw new ServeError(ErrorCode.invalidDataLength, `the probability map is ${width}×${height} but has ${pred.length} values`);
  if (width !== scale.width || height !== scale.height) {
    throw new ServeError(ErrorCode.invalidShape, `the probability map is ${width}×${height} but the detection input it belongs to was ${scale.width}×${scale.height}`);
  }
  if (!(scale.ratioW > 0) || !(scale.ratioH > 0)) throw new ServeError(ErrorCode.badRequest, `the detection scale's ratios must be positive, got ${scale.ratioW} and ${scale.ratioH}`);
  const found: Array<{ box: Box; score: number }> = [];
  const regions = connectedRegions(pred, width, height, threshold, maxCandidates);
  for (const hullPoints of regions) {
    const rect = minAreaRect(hullPoints);
    if (Math.min(rect.width, rect.height) < 3) continue;
    const mini = orderMiniBox(rect.corners);
    const score = boxScoreFast(pred, width, height, mini);
    if (score < boxThreshold) continue;
    const distance = (polygonArea(mini) * unclipRatio) / polygonPerimeter(mini);
    const grown = minAreaRect(offsetConvexPolygon(mini, distance));
    if (Math.min(grown.width, grown.height) < 3 + 2) continue;
    const box = orderMiniBox(grown.corners).map(([x, y]) => [
      clip(roundHalfEven(x / scale.ratioW), 0, scale.srcWidth),
      clip(roundHalfEven(y / scale.ratioH), 0, scale.srcHeight),
    ] as Point) as Box;
    found.push({ box, score });
  }
  const kept: Array<{ box: Box; score: number }> = [];
  for (const { box, score } of found) {
    const ordered = orderPointsClockwise(box).map(([x, y]) => [Math.trunc(clip(x, 0, scale.srcWidth - 1)), Math.trunc(clip(y, 0, scale.srcHeight - 1))] as Point) as Box;
    const rectWidth = Math.trunc(dist(ordered[0], ordered[1]));
    const rectHeight = Math.trunc(dist(ordered[0], ordered[3]));
    if (rectWidth <= 3 || rectHeight <= 3) continue;
    kept.push({ box: ordered, score });
  }
  return sortBoxes(kept);
}

function clip(v: number, lo: number, hi: number): number {
  return v < lo ? lo : v > hi ? hi : v;
}

function dist(a: Point, b: Point): number {
  return Math.hypot(a[0] - b[0], a[1] - b[1]);
}

/**
 * 8-connected regions of pixels above `threshold`, each given by the leftmost and rightmost pixel of
 * each of its rows (enough for the convex hull), by their first pixel in raster order.
 */
function connectedRegions(pred: Float32Array, width: number, height: number, threshold: number, maxRegions: number): Point[][] {
  const labels = new Int32Array(width * height);
  const regions: Point[][] = [];
  const stack: number[] = [];
  let next = 0;
  for (let start = 0; start < pred.length && regions.length < maxRegions; start++) {
    if (labels[start] !== 0 || !((pred[start] as number) > threshold)) continue;
    next++;
    labels[start] = next;
    stack.push(start);
    const rowMin = new Map<number, number>();
    const rowMax = new Map<number, number>();
    while (stack.length > 0) {
      const p = stack.pop() as number;
      const y = Math.floor(p / width);
      const x = p - y * width;
      const lo = rowMin.get(y);
      if (lo === undefined || x < lo) rowMin.set(y, x);
      const hi = rowMax.get(y);
      if (hi === undefined || x > hi) rowMax.set(y, x);
      for (let dy = -1; dy <= 1; dy++) {
        const yy = y + dy;
        if (yy < 0 || yy >= height) continue;
        for (let dx = -1; dx <= 1; dx++) {
          const xx = x + dx;
          if (xx < 0 || xx >= width || (dx === 0 && dy === 0)) continue;
          const q = yy * width + xx;
          if (labels[q] === 0 && (pred[q] as number) > threshold) {
            labels[q] = next;
            stack.push(q);
          }
        }
      }
    }
    const points: Point[] = [];
    for (const [y, lo] of rowMin) {
      points.push([lo, y]);
      const hi = rowMax.get(y) as number;
      if (hi !== lo) points.push([hi, y]);
    }
    regions.push(points);
  }
  return regions;
}

/**
 * `get_mini_boxes`' corner order: sorted by x; of the two leftmost, the upper is the first corner and
 * the lower the fourth; of the two rightmost, the upper is the second and the lower the third.
 */
function orderMiniBox(corners: readonly Point[]): Box {
  const p = [...corners].sort((a, b) => a[0] - b[0]);
  const [p0, p1, p2, p3] = p as [Point, Point, Point, Point];
  const [i1, i4] = p1[1] > p0[1] ? [p0, p1] : [p1, p0];
  const [i2, i3] = p3[1] > p2[1] ? [p2, p3] : [p3, p2];
  return [i1, i2, i3, i4];
}

/** `order_points_clockwise`: leftmost two by y → tl, bl; rightmost two by y → tr, br. */
function orderPointsClockwise(box: readonly Point[]): Box {
  const byX = [...box].sort((a, b) => a[0] - b[0]);
  const left = byX.slice(0, 2).sort((a, b) => a[1] - b[1]);
  const right = byX.slice(2).sort((a, b) => a[1] - b[1]);
  return [left[0] as Point, right[0] as Point, right[1] as Point, left[1] as Point];
}

/**
 * `box_score_fast`: the mean probability over the box, filled as `cv2.fillPoly` fills the polygon of
 * its corners truncated to integers (edges included), within the box's bounding rectangle.
 */
function boxScoreFast(pred: Float32Array, width: number, height: number, box: Box): number {
  const xs = box.map((p) => p[0]);
  const ys = box.map((p) => p[1]);
  const xmin = clip(Math.floor(Math.min(...xs)), 0, width - 1);
  const xmax = clip(Math.ceil(Math.max(...xs)), 0, width - 1);
  const ymin = clip(Math.floor(Math.min(...ys)), 0, height - 1);
  const ymax = clip(Math.ceil(Math.max(...ys)), 0, height - 1);
  const poly = box.map(([x, y]) => [Math.trunc(x - xmin), Math.trunc(y - ymin)] as Point);
  let sum = 0;
  let count = 0;
  for (let y = 0; y <= ymax - ymin; y++) {
    const span = polygonRowSpan(poly, y);
    if (!span) continue;
    const x0 = Math.max(span[0], 0);
    const x1 = Math.min(span[1], xmax - xmin);
    for (let x = x0; x <= x1; x++) {
      sum += pred[(y + ymin) * width + x + xmin] as number;
      count++;
    }
  }
  return count > 0 ? sum / count : 0;
}

/** The pixels of row y covered by a convex polygon with integer corners, edges included. */
function polygonRowSpan(poly: readonly Point[], y: number): [number, number] | undefined {
  let lo = Infinity;
  let hi = -Infinity;
  for (let i = 0; i < poly.length; i++) {
    const a = poly[i] as Point;
    const b = poly[(i + 1) % poly.length] as Point;
    const y0 = Math.min(a[1], b[1]);
    const y1 = Math.max(a[1], b[1]);
    if (y < y0 || y > y1) continue;
    if (a[1] === b[1]) {
      lo = Math.min(lo, a[0], b[0]);
      hi = Math.max(hi, a[0], b[0]);
    } else {
      const x = a[0] + ((y - a[1]) * (b[0] - a[0])) / (b[1] - a[1]);
      lo = Math.min(lo, x);
      hi = Math.max(hi, x);
    }
  }
  if (lo > hi) return undefined;
  return [Math.round(lo), Math.round(hi)];
}

/**
 * Reading order: boxes are grouped into lines, lines go top to bottom and a line's boxes left to
 * right. A box joins the line whose first box it overlaps most vertically, when the overlap is at
 * least half the shorter of the two heights; otherwise it starts a line. Boxes are taken by their top
 * edge, so a line is anchored by its highest box.
 *
 * PaddleOCR's `sorted_boxes` instead sorts by the top-left corner and swaps neighbours whose tops are
 * within 10 pixels; with large type the tops of words on one line differ by more than that (a
 * capital next to lower-case letters: about 0.2 em, 14 pixels at 72 px), and words come out of
 * order, so the rule here is relative to the boxes' heights instead.
 */
export function sortBoxes<T extends { box: Box }>(boxes: readonly T[]): T[] {
  const extent = (b: Box): { top: number; bottom: number; left: number } => ({
    top: Math.min(b[0][1], b[1][1], b[2][1], b[3][1]),
    bottom: Math.max(b[0][1], b[1][1], b[2][1], b[3][1]),
    left: Math.min(b[0][0], b[1][0], b[2][0], b[3][0]),
  });
  const items = boxes.map((item) => ({ item, ...extent(item.box) })).sort((a, b) => a.top - b.top || a.left - b.left);
  const lines: Array<{ top: number; bottom: number; members: typeof items }> = [];
  for (const it of items) {
    let best: (typeof lines)[number] | undefined;
    let bestOverlap = 0;
    for (const line of lines) {
      const overlap = Math.min(it.bottom, line.bottom) - Math.max(it.top, line.top);
      const needed = 0.5 * Math.min(it.bottom - it.top, line.bottom - line.top);
      if (overlap >= needed && overlap > bestOverlap) {
        best = line;
        bestOverlap = overlap;
      }
    }
    if (best) best.members.push(it);
    else lines.push({ top: it.top, bottom: it.bottom, members: [it] });
  }
  return lines.flatMap((line) => [...line.members].sort((a, b) => a.left - b.left || a.top - b.top).map((m) => m.item));
}
