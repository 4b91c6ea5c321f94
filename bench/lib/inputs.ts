import { createRng } from "@sloserve/policy";
import { statSync } from "node:fs";
import { encodeTensors, type Tensor } from "@sloserve/contracts";
import { digitsModels, ocrModels, type BundledModel } from "@sloserve/stack";
import { DEFAULT_CACHE_DIR, checkZooCache } from "@sloserve/zoo";

/** The models the serving benchmarks use, and one deterministic query for each. */

export interface BenchModel {
  /** "small" (the tiny model) or "rec" (the compute-bound OCR recognition model). */
  role: "small" | "rec";
  model: BundledModel;
  inputName: string;
  /** Shape of one query (batch dimension 1). */
  shape: number[];
  /** Why this model plays this role. */
  note: string;
}

export interface Query {
  tensors: Tensor[];
  /** Open Inference Protocol JSON body. */
  json: Buffer;
  /** Binary tensor encoding (libs/contracts wire.ts). */
  wire: Uint8Array;
  /**
   * The same query in the Open Inference Protocol's HTTP binary tensor extension, asking for binary
   * outputs (`binary_data_output`): the body and its `Inference-Header-Content-Length`.
   */
  binary: { body: Buffer; headerLength: number };
}

/** A seeded PRNG (mulberry32), as in test/support.ts: the same inputs on every run. */
export function prng(seed: number): () => number {
  const rng = createRng(seed);
  return () => rng.next();
}

/** One query of the model's input shape; values have 3 decimals so JSON and binary carry the same numbers. */
export function makeQuery(m: BenchModel, seed = 42): Query {
  const rand = prng(seed);
  const n = m.shape.reduce((a, b) => a * b, 1);
  const values = Array.from({ length: n }, () => Math.round(rand() * 1000) / 1000);
  const tensors: Tensor[] = [{ name: m.inputName, datatype: "FP32", shape: m.shape, data: Float32Array.from(values) }];
  const json = Buffer.from(JSON.stringify({ inputs: [{ name: m.inputName, datatype: "FP32", shape: m.shape, data: values }] }));
  const data = tensors[0]!.data;
  const header = Buffer.from(JSON.stringify({ inputs: [{ name: m.inputName, datatype: "FP32", shape: m.shape, parameters: { binary_data_size: data.byteLength } }], parameters: { binary_data_output: true } }));
  const binary = { body: Buffer.concat([header, Buffer.from(data.buffer, data.byteOffset, data.byteLength)]), headerLength: header.length };
  return { tensors, json, wire: encodeTensors(tensors), binary };
}

function ocr(name: string): BundledModel {
  const found = ocrModels().find((x) => x.name === name);
  if (!found) throw new Error(`no bundled model ${name}`);
  return found;
}

export function recModel(): BenchModel {
  return { role: "rec", model: ocr("ocr-rec"), inputName: "x", shape: [1, 3, 48, 320], note: "PP-OCRv4 text recognition, 48×320 crop: compute-bound" };
}

/**
 * The tiny model: the smallest digits classifier of libs/zoo (by ONNX size) when the zoo's cache is
 * built (`npm run zoo`, or `npm start` once); otherwise ocr-cls, so that a fresh checkout does not
 * spend minutes training inside `--quick`. `prefer: "digits"` trains the zoo if it must.
 */
export async function smallModel(prefer: "auto" | "digits" | "ocr-cls"): Promise<BenchModel> {
  const cls: BenchModel = { role: "small", model: ocr("ocr-cls"), inputName: "x", shape: [1, 3, 48, 192], note: "PaddleOCR direction classifier" };
  if (prefer === "ocr-cls") return cls;
  if (prefer === "auto") {
    const stale = await checkZooCache({ cacheDir: DEFAULT_CACHE_DIR });
    if (stale !== null) return { ...cls, note: `${cls.note} (the digits zoo is not built: ${stale}; run 'npm run zoo')` };
  }
  const models = await digitsModels();
  const sized = models.map((m) => ({ m, bytes: statSync(m.path).size })).sort((a, b) => a.bytes - b.bytes);
  const smallest = sized[0];
  if (!smallest) throw new Error("the digits zoo has no model");
  const { validation: _v, ...model } = smallest.m; // registered without its validation set: nothing is profiled here
  return { role: "small", model, inputName: "input", shape: [1, 1, 28, 28], note: `smallest digits classifier of libs/zoo (${smallest.bytes} bytes of ONNX)` };
}
