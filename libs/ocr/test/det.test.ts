import { describe, expect, it } from "vitest";
import {
  DET_MEAN,
  DET_STD,
  convexHull,
  detPostprocess,
  detPreprocess,
  minAreaRect,
  offsetConvexPolygon,
  sortBoxes,
  type Box,
  type DetScale,
  type ProbMap,
  type RgbImage,
} from "../src/index.js";

function solid(width: number, height: number, rgb: [number, number, number]): RgbImage {
  const data = new Uint8Array(width * height * 3);
  for (let i = 0; i < width * height; i++) data.set(rgb, i * 3);
  return { width, height, data };
}

/** A probability map with rectangles [x0, y0, x1, y1] (inclusive) at value p, 0.05 elsewhere. */
function mapWith(width: number, height: number, rects: Array<[number, number, number, number, number]>): ProbMap {
  const data = new Float32Array(width * height).fill(0.05);
  for (const [x0, y0, x1, y1, p] of rects) for (let y = y0; y <= y1; y++) for (let x = x0; x <= x1; x++) data[y * width + x] = p;
  return { width, height, data };
}

const identity = (width: number, height: number): DetScale => ({ srcWidth: width, srcHeight: height, width, height, ratioW: 1, ratioH: 1 });

describe("ocr - geometry", () => {
  it("ocr - the hull drops inner and collinear points; the minimum-area rectangle of a tilted rectangle is itself", () => {
    expect(convexHull([[0, 0], [2, 0], [4, 0], [4, 3], [2, 1], [0, 3]])).toEqual([[0, 0], [4, 0], [4, 3], [0, 3]]);
    // A 10 × 4 rectangle turned by atan(3/4): corners (0,0), (8,6), (5.6,9.2), (-2.4,3.2).
    const rect = minAreaRect([[0, 0], [8, 6], [5.6, 9.2], [-2.4, 3.2], [3, 4]]);
    expect([rect.width, rect.height].sort((a, b) => a - b).map((v) => Number(v.toFixed(6)))).toEqual([4, 10]);
    const corners = rect.corners.map(([x, y]) => [Number(x.toFixed(6)), Number(y.toFixed(6))]).sort((a, b) => (a[0] as number) - (b[0] as number));
    expect(corners).toEqual([[-2.4, 3.2], [0, 0], [5.6, 9.2], [8, 6]]);
  });

  it("ocr - offsetting a rectangle with round corners and boxing it again grows each side by the distance", () => {
    // 100 × 20 rectangle, distance 10: the rounded rectangle's bounding box is 120 × 40.
    const grown = minAreaRect(offsetConvexPolygon([[0, 0], [100, 0], [100, 20], [0, 20]], 10));
    expect([grown.width, grown.height]).toEqual([120, 40]);
    const xs = grown.corners.map((p) => p[0]);
    const ys = grown.corners.map((p) => p[1]);
    expect([Math.min(...xs), Math.max(...xs), Math.min(...ys), Math.max(...ys)]).toEqual([-10, 110, -10, 30]);
  });
});

describe("ocr - detection pre-processing", () => {
  it("ocr - sides become multiples of 32 (longer side at most 960), normalised per channel in BGR order", () => {
    const { tensor, scale } = detPreprocess(solid(100, 50, [255, 0, 128]));
    // 100 / 32 = 3.125 → 96; 50 / 32 = 1.5625 → 64.
    expect(tensor.shape).toEqual([1, 3, 64, 96]);
    expect(scale).toEqual({ srcWidth: 100, srcHeight: 50, width: 96, height: 64, ratioW: 0.96, ratioH: 1.28 });
    const plane = 64 * 96;
    const at = (c: number): number => tensor.data[c * plane + 7] as number;
    expect(at(0)).toBeCloseTo((128 / 255 - (DET_MEAN[0] as number)) / (DET_STD[0] as number), 5); // blue
    expect(at(1)).toBeCloseTo((0 - (DET_MEAN[1] as number)) / (DET_STD[1] as number), 5); // green
    expect(at(2)).toBeCloseTo((1 - (DET_MEAN[2] as number)) / (DET_STD[2] as number), 5); // red

    const big = detPreprocess(solid(2000, 500, [255, 255, 255]));
    // ratio 960 / 2000: 2000 → 960, 500 → 240 (= 7.5 × 32 → 8 × 32 = 256: Python rounds half to even)
    expect(big.tensor.shape).toEqual([1, 3, 256, 960]);
    // Tiny images are padded to 32 × 32 first; boxes still map back at one map pixel per image pixel.
    expect(detPreprocess(solid(20, 10, [255, 255, 255])).scale).toMatchObject({ width: 32, height: 32, ratioW: 1, ratioH: 1 });
  });
});

describe("ocr - detection post-processing", () => {
  it("ocr - a map with two text rectangles gives two boxes, top one first, unclipped by area × 2 / perimeter", () => {
    // Rectangles 61 × 11 pixels (hull 60 × 10 between pixel centres).
    const map = mapWith(200, 100, [[100, 60, 160, 70, 0.9], [20, 10, 80, 20, 0.8]]);
    const boxes = detPostprocess(map, identity(200, 100));
    expect(boxes).toHaveLength(2);
    // distance = 600 × 2 / 140 = 8.57: each side moves out by 8.57, rounded (20 − 8.57 → 11, 80 + 8.57 → 89).
    expect(boxes[0]).toEqual({ box: [[11, 1], [89, 1], [89, 29], [11, 29]], score: expect.closeTo(0.8, 5) as unknown });
    expect(boxes[1]).toEqual({ box: [[91, 51], [169, 51], [169, 79], [91, 79]], score: expect.closeTo(0.9, 5) as unknown });
    // With PaddleOCR 2's ratio 1.5: distance 6.43.
    expect(detPostprocess(map, identity(200, 100), { unclipRatio: 1.5 })[0]?.box).toEqual([[14, 4], [86, 4], [86, 26], [14, 26]]);
  });

  it("ocr - boxes map back onto the source image by the resize ratios", () => {
    const map = mapWith(200, 100, [[20, 10, 80, 20, 0.9]]);
    const [found] = detPostprocess(map, { srcWidth: 400, srcHeight: 50, width: 200, height: 100, ratioW: 0.5, ratioH: 2 });
    // Map box x 11..89, y 1..29 → x / 0.5, y / 2 (14.5 rounds half to even, as numpy does).
    expect(found?.box).toEqual([[22, 0], [178, 0], [178, 14], [22, 14]]);
  });

  it("ocr - faint regions (mean under 0.6), specks and lines under 3 pixels across are dropped", () => {
    const map = mapWith(200, 100, [
      [20, 10, 80, 20, 0.5], // above the 0.3 threshold but scores 0.5
      [100, 50, 101, 90, 0.95], // 2 pixels wide
      [150, 80, 150, 80, 0.99], // one pixel
      [20, 60, 60, 75, 0.7], // kept
    ]);
    const boxes = detPostprocess(map, identity(200, 100));
    expect(boxes.map((b) => b.score)).toEqual([expect.closeTo(0.7, 5)]);
    expect(detPostprocess(mapWith(50, 50, []), identity(50, 50))).toEqual([]);
  });

  it("ocr - a map that does not match its scale, or is not FP32 [1, 1, H, W], is refused", () => {
    expect(() => detPostprocess(mapWith(64, 32, []), identity(32, 32))).toThrow("the probability map is 64×32 but the detection input it belongs to was 32×32");
    expect(() => detPostprocess({ name: "y", datatype: "FP32", shape: [2, 1, 4, 4], data: new Float32Array(32) }, identity(4, 4))).toThrow("the detection output must be one map [1, 1, H, W], got [2, 1, 4, 4]");
    expect(() => detPostprocess({ name: "y", datatype: "INT32", shape: [1, 1, 2, 2], data: new Int32Array(4) }, identity(2, 2))).toThrow(/must be FP32/);
  });

  it("ocr - reading order: lines top to bottom, boxes left to right, even when their tops differ by more than 10 pixels", () => {
    const b = (x0: number, y0: number, x1: number, y1: number): { box: Box; id: string } => ({ box: [[x0, y0], [x1, y0], [x1, y1], [x0, y1]], id: `${x0},${y0}` });
    // Line 1 at large type: "spring" (top at x-height, y 118) left of "Order" (top at cap height, y 100).
    // Line 2 below.
    const boxes = [b(300, 100, 480, 170), b(40, 118, 260, 190), b(40, 230, 200, 290), b(250, 240, 400, 290)];
    expect(sortBoxes(boxes).map((x) => x.id)).toEqual(["40,118", "300,100", "40,230", "250,240"]);
    // Order-independent.
    expect(sortBoxes([...boxes].reverse()).map((x) => x.id)).toEqual(["40,118", "300,100", "40,230", "250,240"]);
  });
});
