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

/** Registers a pipeline over HTTP (`POST /v1/pipelines/{name}`). Returns the HTTP status and body. */
export async function registerPipelineOverHttp(baseUrl: string, spec: PipelineSpecInput): Promise<{ status: number; body: Record<string, unknown> }> {
  const response = await fetch(`${baseUrl}/v1/pipelines/${encodeURIComponent(spec.name)}`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(spec) });
  return { status: response.status, body: (await response.json()) as Record<string, unknown> };
}

/**
 * Registers a model over HTTP, as a user would: multipart with the binary, the validation set and
 * the profile shape when there are any, else the bare binary. Returns the HTTP status and body.
 */
export async function registerOverHttp(baseUrl: string, model: BundledModel): Promise<{ status: number; body: Record<string, unknown> }> {
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
    response = await fetch(url, { method: "POST", body: form });
  } else {
    const query = new URLSearchParams({ task: model.task, dataset: model.dataset });
    response = await fetch(`${url}?${query}`, { method: "POST", headers: { "content-type": "application/octet-stream" }, body: bytes });
  }
  return { status: response.status, body: (await response.json()) as Record<string, unknown> };
}

/** Waits until every variant of `model` on the given hardware is profiled; reports progress. */
export async function waitForProfiles(baseUrl: string, model: string, hardware: string, timeoutMs: number, onProgress?: (done: number, total: number) => void): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const status = (await (await fetch(`${baseUrl}/v1/models/${model}/profile`)).json()) as { by_hardware?: Record<string, { variants: number; profiled: number }> };
    const h = status.by_hardware?.[hardware];
    if (h) onProgress?.(h.profiled, h.variants);
    if (h && h.profiled >= h.variants) return;
    if (Date.now() > deadline) throw new Error(`profiling of ${model} on ${hardware} did not finish within ${timeoutMs} ms (${h?.profiled ?? 0}/${h?.variants ?? "?"})`);
    await new Promise((r) => setTimeout(r, 250));
  }
}
