import { ErrorCode, ServeError, type Tensor } from "@sloserve/contracts";
import { checkImage, resizeBilinear, type RgbImage } from "./image.js";

/**
 * The resize-and-normalise step shared by the direction classifier and the recogniser (PaddleOCR's
 * `resize_norm_img` in predict_cls.py and predict_rec.py): each strip is resized bilinearly to the
 * model's height keeping its aspect ratio (width ⌈height × w / h⌉, at most the batch width),
 * normalised to (v / 255 − 0.5) / 0.5 in BGR channel order (as OpenCV loads images and PaddleOCR
 * feeds them), and padded on the right with zeros up to the batch width.
 */
export function stripsToTensor(strips: readonly RgbImage[], height: number, width: number): Tensor {
  if (strips.length === 0) throw new ServeError(ErrorCode.badRequest, "no strips to batch: at least one is needed");
  const plane = height * width;
  const data = new Float32Array(strips.length * 3 * plane);
  strips.forEach((strip, n) => {
    checkImage(strip, `strip ${n}`);
    const resizedW = Math.min(Math.ceil(height * (strip.width / strip.height)), width);
    const resized = resizeBilinear(strip, Math.max(resizedW, 1), height);
    const rw = resized.width;
    const base = n * 3 * plane;
    for (let y = 0; y < height; y++) {
      for (let x = 0; x < rw; x++) {
        const s = (y * rw + x) * 3;
        const o = y * width + x;
        for (let c = 0; c < 3; c++) data[base + c * plane + o] = ((resized.data[s + (2 - c)] as number) / 255 - 0.5) / 0.5;
      }
    }
  });
  return { name: "x", datatype: "FP32", shape: [strips.length, 3, height, width], data };
}

/** Indices of the strips sorted by aspect ratio (width / height), as PaddleOCR orders its batches. */
export function byAspectRatio(strips: readonly RgbImage[]): number[] {
  const ratios = strips.map((s) => s.width / s.height);
  return ratios.map((_, i) => i).sort((a, b) => (ratios[a] as number) - (ratios[b] as number) || a - b);
}

/** Splits `indices` into consecutive groups of at most `size`. */
export function chunk(indices: readonly number[], size: number): number[][] {
  if (!(Number.isInteger(size) && size >= 1)) throw new ServeError(ErrorCode.badRequest, `batch size must be a positive integer, got ${size}`);
  const out: number[][] = [];
  for (let i = 0; i < indices.length; i += size) out.push(indices.slice(i, i + size));
  return out;
}
