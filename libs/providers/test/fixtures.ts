import { copyFileSync, mkdirSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { Writable } from "node:stream";
import { createLogger, type Logger } from "@sloserve/bus";
import { ocrModels, tempDir } from "@sloserve/stack";
import { OnnxRunner } from "@sloserve/runtime";
import { decodeTensors, encodeTensors, type Tensor } from "@sloserve/contracts";

/** PaddleOCR's direction classifier: x [n, 3, H, W] → softmax [n, 2]. Small and real. */
export const MODEL_PATH = ocrModels().find((m) => m.name === "ocr-cls")?.path as string;
export const OBJECT = "model/ocr-cls.onnx";
export const VARIANT = "ocr-cls--cpu-fp32-b1-t1";

/** A models directory as a Lambda layer holds it: `<dir>/<object>`; without the model when `empty`. */
export function modelsDir(options: { empty?: boolean } = {}): string {
  const dir = tempDir("functions");
  if (!options.empty) addModel(dir);
  return dir;
}

export function addModel(dir: string): void {
  mkdirSync(dirname(join(dir, OBJECT)), { recursive: true });
  copyFileSync(MODEL_PATH, join(dir, OBJECT));
}

/** n images of 3×48×192 with a pattern that depends on `seed`. */
export function images(n: number, seed = 1): Tensor[] {
  const data = new Float32Array(n * 3 * 48 * 192);
  for (let i = 0; i < data.length; i++) data[i] = Math.sin((i + 1) * 0.001 * seed);
  return [{ name: "x", datatype: "FP32", shape: [n, 3, 48, 192], data }];
}

export function query(n = 1, seed = 1): Uint8Array {
  return encodeTensors(images(n, seed));
}

/** The outputs onnxruntime gives for the same inputs in this process: what a function must answer. */
export async function reference(n = 1, seed = 1): Promise<Float32Array> {
  const runner = await OnnxRunner.load(readFileSync(MODEL_PATH));
  try {
    const [out] = await runner.runOne(images(n, seed));
    return Float32Array.from(out?.data as Float32Array);
  } finally {
    await runner.release();
  }
}

export function outputsOf(payload: Uint8Array): { meta: Record<string, unknown>; data: Float32Array; shape: number[] } {
  const { meta, tensors } = decodeTensors<Record<string, unknown>>(payload);
  const t = tensors[0] as Tensor;
  return { meta, data: Float32Array.from(t.data as Float32Array), shape: t.shape };
}

/** A logger that keeps its lines (to check what was logged; tests expect warnings) and prints errors. */
export function memoryLogger(name: string): { log: Logger; lines: Array<Record<string, unknown>> } {
  const lines: Array<Record<string, unknown>> = [];
  const sink = new Writable({
    write(chunk: Buffer, _enc, done) {
      for (const line of chunk.toString().split("\n")) {
        if (!line) continue;
        const parsed = JSON.parse(line) as Record<string, unknown>;
        lines.push(parsed);
        if (typeof parsed.level === "number" && parsed.level >= 50) process.stderr.write(`${line}\n`);
      }
      done();
    },
  });
  return { log: createLogger(name, "debug", sink), lines };
}
