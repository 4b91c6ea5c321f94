import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { readFileSync } from "node:fs";
import { ManualClock, ServeError, pipelineSpecSchema, type PipelineSpec, type Tensor } from "@sloserve/contracts";
import { checkPipelineSpec, compilePipeline, resolvePipelineParams, type PipelineEnvironment, type SignatureView, type StageResult } from "@sloserve/policy";
import { ocrModels, ocrPipelineSpec } from "@sloserve/stack";
import { inspectModel } from "@sloserve/runtime";
import { characterAccuracy, loadOcrRunners, ocrModelFiles, parseDictionary, runOcrLocally } from "@sloserve/ocr";
import { renderTextImage, syntheticSet } from "@sloserve/ocr/synthetic";
import { runPipelineQuery, type ModelStageBackend } from "../src/pipeline-run.js";
import { builtinSteps } from "../src/builtin-steps.js";
import { ocrAssemble, ocrClsPre, ocrCtc, ocrDecodeDet, ocrDirection, ocrRecPre } from "../src/ocr-steps.js";

/**
 * The OCR steps (ocr-steps.ts) and the bundled `ocr` pipeline (libs/stack `ocrPipelineSpec`) through the
 * runner the dispatcher uses (pipeline-run.ts: libs/policy `PipelineRun` routes, fan-out per text box,
 * the conditional turn), with the three real PaddleOCR models run by onnxruntime in this process instead
 * of over the bus, on generated images (libs/ocr synthetic, a seed neither libs/ocr's tests nor the
 * end-to-end test use). Each answer is checked against `runOcrLocally` on the same image.
 */

const SEED = 31;
const MODEL_OF: Record<string, "det" | "cls" | "rec"> = { "ocr-det": "det", "ocr-cls": "cls", "ocr-rec": "rec" };
let runners: Awaited<ReturnType<typeof loadOcrRunners>>;
const signatures = new Map<string, SignatureView>();
let spec: PipelineSpec;
const steps = builtinSteps();
const clock = new ManualClock(1_800_000_000_000);

beforeAll(async () => {
  runners = await loadOcrRunners();
  for (const m of ocrModels()) signatures.set(m.name, await inspectModel(readFileSync(m.path)));
  spec = pipelineSpecSchema.parse(ocrPipelineSpec());
});

afterAll(async () => {
  await runners?.release();
});

const env = (): PipelineEnvironment => ({ model: (m) => signatures.get(m), app: () => undefined, step: (s) => steps.get(s), stepNames: () => steps.names() });

/** Model stages run by onnxruntime here (each stage query costs 1e-6, to check the sum). */
const local: ModelStageBackend = {
  async model(model, inputs) {
    const which = MODEL_OF[model];
    if (!which) throw new Error(`no model ${model} here`);
    return { outputs: await runners[which].runOne(inputs), servedBy: { model }, costDollars: 1e-6 };
  },
  app() {
    throw new Error("no app stages here");
  },
};

async function ocr(bytes: Uint8Array, params: Record<string, unknown> = {}) {
  const compiled = compilePipeline(spec, (n) => steps.get(n), env());
  const image: Tensor = { name: "image", datatype: "UINT8", shape: [bytes.length], data: bytes };
  return runPipelineQuery({ compiled, inputs: [image], params: resolvePipelineParams(spec, params), receivedAtMs: clock.now(), giveUpAtMs: clock.now() + 60_000 }, local, steps, clock);
}

async function codeOf(p: Promise<unknown> | (() => unknown)): Promise<[string, string]> {
  try {
    await (typeof p === "function" ? p() : p);
  } catch (err) {
    if (err instanceof ServeError) return [err.code, err.message];
    return ["(not a ServeError)", (err as Error).message];
  }
  throw new Error("did not throw");
}

const obj = (name: string, object: unknown) => ({ name, object });
const outputsOf = (r: StageResult) => ("outputs" in r ? r.outputs : {}) as Record<string, { object?: unknown } & Partial<Tensor>>;

describe("ocr steps", () => {
  it("ocr steps - the bundled spec is valid against the real models' signatures and names only registered steps", () => {
    expect(checkPipelineSpec(spec, env())).toEqual([]);
    for (const s of spec.stages) if (s.step) expect(steps.get(s.step), s.step).toBeDefined();
    // The planner's view: the turn is the one conditional edge, at its measured share.
    expect(spec.edges.filter((e) => e.when).map((e) => [e.from, e.to, e.expected_share])).toEqual([["direction", "rotate", 0.1]]);
  });

  it("ocr steps - 14 generated images (PNG and JPEG, some turned by 180°) through the pipeline: each text equals runOcrLocally's; accuracy ≥ 0.9", async () => {
    const set = await syntheticSet(SEED, 14, { rotatedShare: 0.3 });
    expect(set.some((s) => s.spec.rotate180)).toBe(true);
    expect(new Set(set.map((s) => s.spec.format))).toEqual(new Set(["png", "jpeg"]));
    const pairs: Array<{ expected: string; actual: string }> = [];
    let turned = 0;
    for (const image of set) {
      const a = await ocr(image.bytes);
      const reference = await runOcrLocally(image.bytes, runners);
      const { text, lines } = a.values as { text: string; lines: Array<{ text: string; box: number[][]; score: number }> };
      expect(text, `${image.expected} (${image.spec.format}, ${image.spec.sizePx} px${image.spec.rotate180 ? ", turned" : ""})`).toBe(reference.text);
      expect(lines.map((l) => l.text)).toEqual(reference.lines.map((l) => l.text));
      expect(lines.map((l) => l.box)).toEqual(reference.lines.map((l) => l.box));
      // Scores move a little: runOcrLocally pads a strip to its batch's widest, the pipeline to its own width.
      lines.forEach((l, i) => expect(Math.abs(l.score - reference.lines[i]!.score)).toBeLessThan(0.02));
      // One item per box: the classifier and the recogniser ran once for each.
      const boxes = (a.visits["cls"] ?? 0);
      expect(a.visits["rec"]).toBe(boxes);
      expect(boxes).toBeGreaterThanOrEqual(lines.length);
      expect(Object.keys(a.visits)).toEqual(expect.arrayContaining(["decode", "det", "boxes", "assemble"]));
      if (image.spec.rotate180) {
        expect(a.visits["rotate"] ?? 0, image.expected).toBeGreaterThan(0);
        turned++;
      }
      expect(a.costDollars).toBeCloseTo(1e-6 * (1 + 2 * boxes), 12);
      pairs.push({ expected: image.expected, actual: text });
    }
    expect(turned).toBeGreaterThan(0);
    expect(characterAccuracy(pairs), JSON.stringify(pairs.filter((p) => p.expected !== p.actual))).toBeGreaterThanOrEqual(0.9);
  });

  it("ocr steps - an upside-down page of three lines: each box goes through the turn, the lines come back in reading order", async () => {
    const image = await renderTextImage({ lines: ["Invoice 2024", "Total 42.50", "Museum Road"], font: "DejaVu Sans", sizePx: 32, background: "white", format: "png", rotate180: true });
    const a = await ocr(image.bytes);
    expect(a.values["text"]).toBe("Invoice 2024 Total 42.50 Museum Road");
    expect(a.visits["rotate"]).toBe(a.visits["cls"]);
    // Per item, the turned strip is what the recogniser read: its stage ran for every box.
    expect((a.servedBy["rotate"] as unknown[]).every((s) => s !== null)).toBe(true);
    // With the threshold above every score, nothing is turned, and the strips read upside down are not the text.
    const unturned = await ocr(image.bytes, { cls_threshold: 1 });
    expect(unturned.visits["rotate"]).toBeUndefined();
    expect(unturned.values["text"]).not.toBe("Invoice 2024 Total 42.50 Museum Road");
  });

  it("ocr steps - an image without text: no boxes, no model stage after detection, an empty answer", async () => {
    const blank = await renderTextImage({ lines: ["."], font: "DejaVu Sans", sizePx: 4, background: "white", format: "png", marginPx: 40 });
    const a = await ocr(blank.bytes);
    expect(a.values).toEqual({ text: "", lines: [] });
    expect(a.visits["cls"]).toBeUndefined();
    expect(a.visits["assemble"]).toBe(1);
  });

  it("ocr steps - a corrupt or foreign body is refused with the decoder's reason, naming the stage", async () => {
    const good = (await renderTextImage({ lines: ["serving"], font: "DejaVu Sans", sizePx: 24, background: "white", format: "png" })).bytes;
    const [code, message] = await codeOf(ocr(good.slice(0, 60)));
    expect(code).toBe("invalid_data");
    expect(message).toMatch(/^stage decode \(step ocr-decode-det\): the PNG image cannot be decoded: .+/);
    expect(await codeOf(ocr(new TextEncoder().encode("hello, world")))).toEqual(["invalid_data", "stage decode (step ocr-decode-det): the data is not a PNG or JPEG image (unrecognised signature)"]);
    expect(await codeOf(() => ocrDecodeDet.run({ image: { name: "image", datatype: "FP32", shape: [1], data: new Float32Array(1) } }, {}))).toEqual(["invalid_datatype", "input 'image' must be the image file's bytes as UINT8, got FP32"]);
  });

  it("ocr steps - direction: turn when the classifier says 180° above the threshold (PaddleOCR's cls_thresh)", () => {
    const cls = (p0: number, p1: number): Tensor => ({ name: "x", datatype: "FP32", shape: [1, 2], data: Float32Array.from([p0, p1]) });
    const run = (t: Tensor, threshold = 0.9) => outputsOf(ocrDirection.run({ x: t }, { threshold }) as StageResult);
    expect(run(cls(0.04, 0.96))["rotate"]?.object).toBe(true);
    expect(run(cls(0.04, 0.96))["label"]?.object).toBe("180");
    expect(run(cls(0.2, 0.8))["rotate"]?.object).toBe(false); // 180° but not sure enough
    expect(run(cls(0.2, 0.8), 0.5)["rotate"]?.object).toBe(true);
    expect(run(cls(0.97, 0.03))["rotate"]?.object).toBe(false);
    expect(ocrDirection.checkParams?.({ threshold: 2 })).toBe("threshold must be a number from 0 to 1, got 2");
    expect(() => ocrDirection.run({ x: { name: "x", datatype: "FP32", shape: [2, 2], data: new Float32Array(4) } }, {})).toThrow("the direction classifier output has 2 rows; this step reads one strip per item ([1, …]), got [2, 2]");
  });

  it("ocr steps - strip inputs: the classifier's is 48 × 192, the recogniser's 48 high and at least 320 wide; a tensor where a strip belongs is refused", () => {
    const strip = { width: 100, height: 20, data: new Uint8Array(100 * 20 * 3).fill(200) };
    expect(outputsOf(ocrClsPre.run({ strip: obj("strip", strip) }, {}) as StageResult)["x"]?.shape).toEqual([1, 3, 48, 192]);
    expect(outputsOf(ocrRecPre.run({ strip: obj("strip", strip) }, {}) as StageResult)["x"]?.shape).toEqual([1, 3, 48, 320]);
    const long = { width: 800, height: 20, data: new Uint8Array(800 * 20 * 3) };
    expect(outputsOf(ocrRecPre.run({ strip: obj("strip", long) }, {}) as StageResult)["x"]?.shape).toEqual([1, 3, 48, 1920]);
    expect(() => ocrRecPre.run({ strip: { name: "strip", datatype: "FP32", shape: [1], data: new Float32Array(1) } }, {})).toThrow("input 'strip' must be a strip (from step ocr-boxes or ocr-rotate), not a tensor");
    expect(() => ocrClsPre.run({ strip: obj("strip", { width: 2, height: 2, data: new Uint8Array(5) }) }, {})).toThrow("input 'strip' is 2×2 RGB, which takes 12 bytes, but has 5");
  });

  it("ocr steps - CTC decoding of a hand-made recogniser output with the bundled dictionary", async () => {
    // Classes: 0 the blank, then ppocr_keys_v1.txt, then a space.
    const dictionary = parseDictionary(readFileSync(ocrModelFiles().dictionary, "utf8"));
    const T = 6;
    const C = dictionary.length;
    const data = new Float32Array(T * C);
    const o = dictionary.indexOf("O");
    const k = dictionary.indexOf("K");
    // O O blank K K blank → "OK", mean probability of the kept steps (0.9 and 0.7).
    [o, o, 0, k, k, 0].forEach((c, t) => (data[t * C + c] = t === 3 ? 0.7 : 0.9));
    const out = outputsOf((await ocrCtc.run({ x: { name: "x", datatype: "FP32", shape: [1, T, C], data } }, {})) as StageResult);
    expect(out["text"]?.object).toBe("OK");
    expect(out["score"]?.object).toBeCloseTo(0.8, 6);
  });

  it("ocr steps - the join: lines below drop_score left out, the rest in reading order; items without text refused", () => {
    const box = (x: number, y: number) => [[x, y], [x + 50, y], [x + 50, y + 20], [x, y + 20]];
    const items = (texts: Array<string | null>, scores: number[], boxes: number[][][]) => ({
      text: texts.map((t) => (t === null ? null : obj("text", t))),
      score: scores.map((s) => obj("score", s)),
      box: boxes.map((b) => obj("box", b)),
    });
    // Second line first, a low-score line in between: reading order by the boxes.
    const r = outputsOf(ocrAssemble.run(items(["world", "noise", "hello"], [0.95, 0.3, 0.9], [box(100, 10), box(10, 60), box(10, 10)]), {}) as StageResult);
    expect(r["text"]?.object).toBe("hello world");
    expect((r["lines"]?.object as Array<{ text: string }>).map((l) => l.text)).toEqual(["hello", "world"]);
    const kept = outputsOf(ocrAssemble.run(items(["world", "noise", "hello"], [0.95, 0.3, 0.9], [box(100, 10), box(10, 60), box(10, 10)]), { drop_score: 0.2 }) as StageResult);
    expect(kept["text"]?.object).toBe("hello world noise");
    expect(() => ocrAssemble.run(items([null], [0.9], [box(0, 0)]), {})).toThrow("item 0 lacks its text, score or box (a string, a number and four [x, y] points)");
  });

  it("ocr steps - a JPEG on grey reads; a spec that leaves out an input a step needs is refused before it runs", async () => {
    const image = await renderTextImage({ lines: ["Oslo"], font: "DejaVu Sans Bold", sizePx: 40, background: "grey", format: "jpeg" });
    expect((await ocr(image.bytes)).values["text"]).toBe("Oslo");
    const bad = pipelineSpecSchema.parse(ocrPipelineSpec({ stages: ocrPipelineSpec().stages.map((s) => (s.name === "boxes" ? { ...s, inputs: { map: "det.sigmoid_0.tmp_0", image: "decode.image" } } : s)) }));
    expect(checkPipelineSpec(bad, env())).toEqual(["stage boxes: step ocr-boxes needs input 'scale', which is not mapped"]);
  });
});
