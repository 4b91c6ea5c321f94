import { describe, expect, it } from "vitest";
import type { Tensor } from "@sloserve/contracts";
import {
  applyRotations,
  assembleResult,
  characterAccuracy,
  clsBatches,
  clsPostprocess,
  clsPreprocess,
  cropBoxes,
  ctcDecode,
  editDistance,
  loadDictionary,
  ocrModelFiles,
  parseDictionary,
  recPreprocess,
  type Box,
  type RgbImage,
} from "../src/index.js";

function solid(width: number, height: number, rgb: [number, number, number]): RgbImage {
  const data = new Uint8Array(width * height * 3);
  for (let i = 0; i < width * height; i++) data.set(rgb, i * 3);
  return { width, height, data };
}

const px = (img: RgbImage, x: number, y: number): number[] => Array.from(img.data.subarray((y * img.width + x) * 3, (y * img.width + x) * 3 + 3));
const rect = (x0: number, y0: number, x1: number, y1: number): Box => [[x0, y0], [x1, y0], [x1, y1], [x0, y1]];

describe("ocr - cropping", () => {
  it("ocr - a box becomes a strip of its size holding that region; a tall one is turned to lie flat", () => {
    // White image with a red block at x 10..29, y 5..14.
    const img = solid(60, 40, [255, 255, 255]);
    for (let y = 5; y < 15; y++) for (let x = 10; x < 30; x++) img.data.set([255, 0, 0], (y * 60 + x) * 3);
    const [flat, tall] = cropBoxes(img, [rect(10, 5, 30, 15), rect(40, 2, 46, 32)]);
    expect([flat?.width, flat?.height]).toEqual([20, 10]);
    for (let y = 0; y < 10; y++) for (let x = 0; x < 20; x++) expect(px(flat as RgbImage, x, y)).toEqual([255, 0, 0]);
    // 6 × 30 is 5 times taller than wide: turned 90° counter-clockwise into 30 × 6.
    expect([tall?.width, tall?.height]).toEqual([30, 6]);
    expect(() => cropBoxes(img, [rect(5, 5, 5, 20)])).toThrow("box 0 is 0×15 pixels; a box must be at least 1×1");
  });
});

describe("ocr - direction classifier stages", () => {
  it("ocr - strips go in at height 48, at most 192 wide, padded right with zeros, (v/255 − 0.5)/0.5", () => {
    const t = clsPreprocess([solid(100, 25, [255, 255, 255]), solid(400, 20, [0, 0, 0])]);
    expect(t.shape).toEqual([2, 3, 48, 192]);
    const plane = 48 * 192;
    // First strip: ratio 4 → 192 wide, all white → 1 everywhere.
    expect(t.data[0]).toBe(1);
    expect(t.data[plane - 1]).toBe(1);
    // Second strip: ratio 20 → clipped at 192, all black → −1.
    expect(t.data[3 * plane + 191]).toBe(-1);
    const narrow = clsPreprocess([solid(30, 30, [255, 255, 255])]);
    expect(narrow.data[47]).toBe(1); // 48 wide
    expect(narrow.data[48]).toBe(0); // padding
  });

  it("ocr - the classifier's scores flag a strip for turning only when 180° wins with more than 0.9", () => {
    const out: Tensor = { name: "softmax_0.tmp_0", datatype: "FP32", shape: [4, 2], data: Float32Array.from([0.99, 0.01, 0.05, 0.95, 0.15, 0.85, 0.5, 0.5]) };
    expect(clsPostprocess(out)).toEqual([
      { label: "0", score: expect.closeTo(0.99, 6) as unknown, rotate: false },
      { label: "180", score: expect.closeTo(0.95, 6) as unknown, rotate: true },
      { label: "180", score: expect.closeTo(0.85, 6) as unknown, rotate: false },
      { label: "0", score: 0.5, rotate: false },
    ]);
    expect(() => clsPostprocess({ ...out, shape: [2, 4] })).toThrow("the classifier output must be [n, 2], got [2, 4]");
    const strip: RgbImage = { width: 2, height: 1, data: Uint8Array.from([1, 2, 3, 4, 5, 6]) };
    expect(applyRotations([strip, strip], [true, { rotate: false }]).map((s) => Array.from(s.data))).toEqual([[4, 5, 6, 1, 2, 3], [1, 2, 3, 4, 5, 6]]);
    expect(() => applyRotations([strip], [])).toThrow("1 strips but 0 rotation flags");
  });

  it("ocr - batches hold six strips, in order of aspect ratio, and say which strip each row is", () => {
    const strips = [9, 3, 7, 1, 5, 2, 8, 4].map((r) => solid(10 * r, 10, [255, 255, 255]));
    const batches = clsBatches(strips);
    expect(batches.map((b) => b.indices)).toEqual([[3, 5, 1, 7, 4, 2], [6, 0]]);
    expect(batches.map((b) => b.tensor.shape[0])).toEqual([6, 2]);
  });
});

describe("ocr - recognition stages", () => {
  it("ocr - strips go in at height 48, batch width 48 × the widest ratio but at least 320", () => {
    const strips = [solid(40, 20, [255, 255, 255]), solid(300, 10, [255, 255, 255]), solid(60, 30, [255, 255, 255])];
    const [all] = recPreprocess(strips);
    expect(all?.indices).toEqual([0, 2, 1]);
    expect(all?.tensor.shape).toEqual([3, 3, 48, 1440]); // ratio 30 → 1440
    const single = recPreprocess(strips, { batchSize: 1 });
    expect(single.map((b) => b.tensor.shape[3])).toEqual([320, 320, 1440]);
    const t = single[0]?.tensor as Tensor;
    expect(t.data[95]).toBe(1); // 40 × 20 → 96 wide at height 48
    expect(t.data[96]).toBe(0);
  });

  it("ocr - CTC greedy decoding drops blanks and repeats and averages the kept probabilities", () => {
    const dictionary = ["", "a", "b", " "];
    // Steps (best class, probability): a .9, a .8, blank, a .7, b .6, b .9, space .5, blank, b .8
    const steps: Array<[number, number]> = [[1, 0.9], [1, 0.8], [0, 0.99], [1, 0.7], [2, 0.6], [2, 0.9], [3, 0.5], [0, 0.9], [2, 0.8]];
    const data = new Float32Array(2 * steps.length * 4);
    steps.forEach(([c, p], t) => {
      for (let k = 0; k < 4; k++) data[t * 4 + k] = k === c ? p : (1 - p) / 3;
    });
    // Second row: blanks only.
    for (let t = 0; t < steps.length; t++) data[(steps.length + t) * 4] = 1;
    const out = ctcDecode({ name: "y", datatype: "FP32", shape: [2, steps.length, 4], data }, dictionary);
    expect(out[0]?.text).toBe("aab b");
    expect(out[0]?.score).toBeCloseTo((0.9 + 0.7 + 0.6 + 0.5 + 0.8) / 5, 6);
    expect(out[1]).toEqual({ text: "", score: 0 });
    expect(() => ctcDecode({ name: "y", datatype: "FP32", shape: [1, 2, 5], data: new Float32Array(10) }, dictionary)).toThrow(
      "the recognition output has 5 classes but the dictionary has 4 (blank + characters + space)",
    );
  });

  it("ocr - the bundled dictionary gives the recogniser's 6625 classes: blank, 6623 characters, space", async () => {
    const dict = await loadDictionary(ocrModelFiles().dictionary);
    expect(dict).toHaveLength(6625);
    expect(dict[0]).toBe("");
    expect(dict[6624]).toBe(" ");
    expect(dict).toContain("A");
    expect(dict).toContain("7");
    expect(parseDictionary("a\r\nb\n")).toEqual(["", "a", "b", " "]);
    expect(() => parseDictionary("")).toThrow("the dictionary is empty");
    expect(() => parseDictionary("a\nbc\n", "keys.txt")).toThrow('keys.txt, line 2: expected one character, got "bc"');
    await expect(loadDictionary("/nonexistent/keys.txt")).rejects.toMatchObject({ code: "invalid_data" });
  });
});

describe("ocr - result", () => {
  it("ocr - lines in reading order, trimmed, low scores and empty lines dropped, text joined by spaces", () => {
    const lines = [
      { text: "world", box: rect(120, 12, 200, 40), score: 0.97 },
      { text: "noise", box: rect(10, 100, 50, 120), score: 0.3 },
      { text: "second", box: rect(10, 60, 90, 88), score: 0.9 },
      { text: "", box: rect(300, 60, 310, 80), score: 0 },
      { text: " ", box: rect(95, 60, 115, 88), score: 0.9 },
      { text: "third ", box: rect(400, 60, 480, 88), score: 0.8 },
      { text: "hello", box: rect(10, 10, 100, 40), score: 0.99 },
    ];
    const result = assembleResult(lines);
    expect(result.text).toBe("hello world second third");
    expect(result.lines.map((l) => l.text)).toEqual(["hello", "world", "second", "third"]);
    expect(result.lines[0]).toEqual({ text: "hello", box: rect(10, 10, 100, 40), score: 0.99 });
    expect(assembleResult([])).toEqual({ text: "", lines: [] });
  });

  it("ocr - when most lines were turned upside down, they are read in the order of the page turned upright", () => {
    // "hello world" on an upside-down page: "world" is on the left, "hello" on the right.
    const lines = [
      { text: "world", box: rect(10, 50, 90, 80), score: 0.9, rotated: true },
      { text: "hello", box: rect(100, 50, 190, 80), score: 0.9, rotated: true },
      { text: "next", box: rect(10, 10, 80, 40), score: 0.9, rotated: true },
    ];
    expect(assembleResult(lines).text).toBe("hello world next");
    expect(assembleResult(lines.map((l) => ({ ...l, rotated: false }))).text).toBe("next world hello");
  });

  it("ocr - character accuracy is 1 − edit distance / reference length over the set", () => {
    expect(editDistance("kitten", "sitting")).toBe(3);
    expect(editDistance("", "abc")).toBe(3);
    expect(characterAccuracy([{ expected: "hello", actual: "hello" }, { expected: "world", actual: "w0rld" }])).toBeCloseTo(0.9, 10);
    expect(characterAccuracy([{ expected: "ab", actual: "abcdef" }])).toBe(0);
  });
});
