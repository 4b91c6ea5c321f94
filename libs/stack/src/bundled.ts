import { readFileSync } from "node:fs";
import { join } from "node:path";
import { REPO_ROOT } from "./processes.js";
import { ensureZoo, readValidationSet, DEFAULT_CACHE_DIR, type ZooProgress } from "@sloserve/zoo";
import { encodeTensors, type PipelineSpecInput } from "@sloserve/contracts";

/** The real models that ship with the project (DESIGN.md §5), registered by `npm start`. */
export interface BundledModel {
  app: string;
  name: string;
  task: string;
  dataset: string;
  path: string;
  /** Validation set in the binary tensor encoding (inputs with N rows + `labels`), if any. */
  validation?: Uint8Array;
  /** Sizes of dynamic non-batch dimensions used when profiling, e.g. { x: [3, 48, 320] }. */
  profileShape?: Record<string, number[]>;
}

const ocr = join(REPO_ROOT, "node_modules", "@gutenye", "ocr-models", "assets");

/** PaddleOCR PP-OCRv4: detection → direction classifier → recognition (one app per task: their inputs differ). */
export function ocrModels(): BundledModel[] {
  return [
    { app: "ocr-det", name: "ocr-det", task: "text-detection", dataset: "paddleocr", path: join(ocr, "ch_PP-OCRv4_det_infer.onnx"), profileShape: { x: [3, 320, 320] } },
    { app: "ocr-cls", name: "ocr-cls", task: "text-direction", dataset: "paddleocr", path: join(ocr, "ch_ppocr_mobile_v2.0_cls_infer.onnx"), profileShape: { x: [3, 48, 192] } },
    { app: "ocr-rec", name: "ocr-rec", task: "text-recognition", dataset: "paddleocr", path: join(ocr, "ch_PP-OCRv4_rec_infer.onnx"), profileShape: { x: [3, 48, 320] } },
  ];
}

/**
 * The digits family (libs/zoo): classifiers of different size and accuracy trained on MNIST digits,
 * all in app `digits`, each with its validation split. Trains them first if the cache is empty.
 */
export async function digitsModels(onProgress?: (p: ZooProgress) => void): Promise<BundledModel[]> {
  const manifest = await ensureZoo({ cacheDir: DEFAULT_CACHE_DIR, ...(onProgress ? { onProgress } : {}) });
  const out: BundledModel[] = [];
  for (const entry of manifest.models) {
    const set = await readValidationSet(join(DEFAULT_CACHE_DIR, entry.files.validation));
    const validation = encodeTensors([
      { name: entry.inputs[0]?.name ?? "input", datatype: "FP32", shape: [set.count, 1, 28, 28], data: set.inputs },
      { name: "labels", datatype: "UINT8", shape: [set.count], data: set.labels },
    ]);
    out.push({ app: "digits", name: entry.name, task: entry.task, dataset: entry.dataset, path: join(DEFAULT_CACHE_DIR, entry.files.onnx), validation });
  }
  return out;
}

/**
 * The bundled pipeline (DESIGN §5): a cascade over the digits family. The fast model (digits-mlp-s, 25k
 * multiply-adds) answers when its top class probability reaches `threshold`; the accurate one
 * (digits-cnn-m, 380k) runs otherwise. On 500 validation digits at 0.9: accuracy 0.976 against 0.980
 * for digits-cnn-m alone, with 24% of the queries reaching it (docs/PIPELINES.md). `expected_share` is
 * that measured share, for the planner.
 */
export function digitsCascadeSpec(overrides: Partial<PipelineSpecInput> = {}): PipelineSpecInput {
  return {
    name: "digits-cascade",
    description: "digits-mlp-s answers when sure (top probability >= threshold); digits-cnn-m otherwise",
    slo: { p99_ms: 200 },
    params: { threshold: 0.9 },
    stages: [
      { name: "fast", model: "digits-mlp-s" },
      { name: "accurate", model: "digits-cnn-m" },
    ],
    edges: [{ from: "fast", to: "accurate", when: { output: "probabilities", reduce: "max", op: "<", value: "$threshold" }, expected_share: 0.24 }],
    outputs: { probabilities: ["accurate.probabilities", "fast.probabilities"] },
    ...overrides,
  };
}

/**
 * The bundled OCR pipeline (DESIGN §5; docs/PIPELINES.md "The ocr pipeline"): PaddleOCR PP-OCRv4 on an
 * image sent as itself (`Content-Type: image/png` or `image/jpeg`). Detection (ocr-det) between decoding
 * and its post-processing; a fan-out of one item per text box; per box, the direction classifier
 * (ocr-cls) and a conditional edge through a 180° turn when it reads the strip as upside down with a
 * score above `cls_threshold` (PaddleOCR's cls_thresh); recognition (ocr-rec) and CTC decoding; the join
 * puts the lines in reading order: `{text, lines}`. The steps are the dispatcher's (ocr-steps.ts), each a
 * call into libs/ocr, so the answer is `runOcrLocally`'s.
 *
 * `expected_share` of the turn (the planner's s_m for it, per box): measured on 200 generated images of
 * seed 1 (`syntheticSpecs`: 21 of them turned by 180°), the classifier turned 29 of 288 boxes (0.10).
 * SLO: on a 2-core machine (one CPU worker, variants profiled), 60 generated images of that seed queried
 * three times each, one at a time, took 162-187 ms at the median and 872-1329 ms at the 99th percentile
 * (two runs on a quiet machine; recognition dominates, ~95 ms per box); four clients at once, 1335-1533 ms;
 * 1443 ms one at a time while other test suites loaded the machine: 1500 ms (docs/PIPELINES.md "The ocr
 * pipeline").
 */
export function ocrPipelineSpec(overrides: Partial<PipelineSpecInput> = {}): PipelineSpecInput {
  return {
    name: "ocr",
    description: "PaddleOCR PP-OCRv4: text boxes (ocr-det), each box's direction (ocr-cls: turned by 180° when upside down) and text (ocr-rec); lines in reading order",
    slo: { p99_ms: 1500 },
    params: { cls_threshold: 0.9 },
    inputs: [{ name: "image", datatype: "UINT8", shape: [-1], content_types: ["image/png", "image/jpeg"] }],
    stages: [
      { name: "decode", step: "ocr-decode-det", inputs: { image: "input.image" } },
      { name: "det", model: "ocr-det", inputs: { x: "decode.x" } },
      { name: "boxes", step: "ocr-boxes", inputs: { map: "det.sigmoid_0.tmp_0", image: "decode.image", scale: "decode.scale" } },
      { name: "cls-pre", step: "ocr-cls-pre", inputs: { strip: "boxes.strip" } },
      { name: "cls", model: "ocr-cls", inputs: { x: "cls-pre.x" } },
      { name: "direction", step: "ocr-direction", inputs: { x: "cls.softmax_0.tmp_0" }, params: { threshold: "$cls_threshold" } },
      { name: "rotate", step: "ocr-rotate", inputs: { strip: "boxes.strip" } },
      { name: "rec-pre", step: "ocr-rec-pre", inputs: { strip: ["rotate.strip", "boxes.strip"] } },
      { name: "rec", model: "ocr-rec", inputs: { x: "rec-pre.x" } },
      { name: "ctc", step: "ocr-ctc", inputs: { x: "rec.softmax_11.tmp_0" } },
      { name: "assemble", step: "ocr-assemble", inputs: { text: "ctc.text", score: "ctc.score", box: "boxes.box", rotated: "direction.rotate" } },
    ],
    edges: [
      { from: "decode", to: "det" },
      { from: "det", to: "boxes" },
      { from: "boxes", to: "cls-pre" },
      { from: "cls-pre", to: "cls" },
      { from: "cls", to: "direction" },
      { from: "direction", to: "rotate", when: { output: "rotate", reduce: "first", op: "==", value: 1 }, expected_share: 0.1 },
      { from: "direction", to: "rec-pre" },
      { from: "rotate", to: "rec-pre" },
      { from: "rec-pre", to: "rec" },
      { from: "rec", to: "ctc" },
      { from: "ctc", to: "assemble" },
    ],
    outputs: { text: "assemble.text", lines: "assemble.lines" },
    ...overrides,
  };
}

/** The header that carries an API key (the frontend's access control), or none. */
export function bearer(apiKey: string | undefined): Record<string, string> {
  return apiKey ? { authorization: `Bearer ${apiKey}` } : {};
}

/** Registers a pipeline over HTTP (`POST /v1/pipelines/{name}`), with an API key when access control is on. Returns the HTTP status and body. */
export async function registerPipelineOverHttp(baseUrl: string, spec: PipelineSpecInput, apiKey?: string): Promise<{ status: number; body: Record<string, unknown> }> {
  const response = await fetch(`${baseUrl}/v1/pipelines/${encodeURIComponent(spec.name)}`, { method: "POST", headers: { "content-type": "application/json", ...bearer(apiKey) }, body: JSON.stringify(spec) });
  return { status: response.status, body: (await response.json()) as Record<string, unknown> };
}

/**
 * Registers a model over HTTP, as a user would: multipart with the binary, the validation set and
 * the profile shape when there are any, else the bare binary; with an API key when access control is
 * on. Returns the HTTP status and body.
 */
export async function registerOverHttp(baseUrl: string, model: BundledModel, apiKey?: string): Promise<{ status: number; body: Record<string, unknown> }> {
  const url = `${baseUrl}/v1/apps/${model.app}/models/${model.name}`;
  const bytes = readFileSync(model.path);
  let response: Response;
  if (model.validation || model.profileShape) {
    const form = new FormData();
    form.set("task", model.task);
    form.set("dataset", model.dataset);
    if (model.profileShape) form.set("profile_shape", JSON.stringify(model.profileShape));
    form.set("model", new Blob([bytes]), `${model.name}.onnx`);
    if (model.validation) form.set("validation", new Blob([model.validation]), `${model.name}.validation.bin`);
    response = await fetch(url, { method: "POST", headers: bearer(apiKey), body: form });
  } else {
    const query = new URLSearchParams({ task: model.task, dataset: model.dataset });
    response = await fetch(`${url}?${query}`, { method: "POST", headers: { "content-type": "application/octet-stream", ...bearer(apiKey) }, body: bytes });
  }
  return { status: response.status, body: (await response.json()) as Record<string, unknown> };
}

/** Waits until every variant of `model` on the given hardware is profiled; reports progress. */
export async function waitForProfiles(baseUrl: string, model: string, hardware: string, timeoutMs: number, onProgress?: (done: number, total: number) => void, apiKey?: string): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const status = (await (await fetch(`${baseUrl}/v1/models/${model}/profile`, { headers: bearer(apiKey) })).json()) as { by_hardware?: Record<string, { variants: number; profiled: number }> };
    const h = status.by_hardware?.[hardware];
    if (h) onProgress?.(h.profiled, h.variants);
    if (h && h.profiled >= h.variants) return;
    if (Date.now() > deadline) throw new Error(`profiling of ${model} on ${hardware} did not finish within ${timeoutMs} ms (${h?.profiled ?? 0}/${h?.variants ?? "?"})`);
    await new Promise((r) => setTimeout(r, 250));
  }
}
