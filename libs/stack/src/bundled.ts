import { readFileSync } from "node:fs";
import { join } from "node:path";
import { REPO_ROOT } from "./processes.js";

/** The real models that ship with the project (DESIGN.md §5), registered by `npm start`. */
export interface BundledModel {
  app: string;
  name: string;
  task: string;
  dataset: string;
  path: string;
}

const ocr = join(REPO_ROOT, "node_modules", "@gutenye", "ocr-models", "assets");

export function ocrModels(): BundledModel[] {
  return [
    { app: "ocr", name: "ocr-det", task: "text-detection", dataset: "paddleocr", path: join(ocr, "ch_PP-OCRv4_det_infer.onnx") },
    { app: "ocr", name: "ocr-cls", task: "text-direction", dataset: "paddleocr", path: join(ocr, "ch_ppocr_mobile_v2.0_cls_infer.onnx") },
    { app: "ocr", name: "ocr-rec", task: "text-recognition", dataset: "paddleocr", path: join(ocr, "ch_PP-OCRv4_rec_infer.onnx") },
  ];
}

/** Registers a model over HTTP, as a user would. Returns the HTTP status and body. */
export async function registerOverHttp(baseUrl: string, model: BundledModel): Promise<{ status: number; body: unknown }> {
  const query = new URLSearchParams({ task: model.task, dataset: model.dataset });
  const response = await fetch(`${baseUrl}/v1/apps/${model.app}/models/${model.name}?${query}`, {
    method: "POST",
    headers: { "content-type": "application/octet-stream" },
    body: readFileSync(model.path),
  });
  return { status: response.status, body: await response.json() };
}
