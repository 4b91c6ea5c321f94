import sharp from "sharp";
import { ErrorCode, ServeError } from "@sloserve/contracts";

/**
 * Images as the OCR stages pass them: 8-bit RGB, interleaved, row-major (`data[(y * width + x) * 3 + c]`).
 *
 * Decoding is sharp's (libvips with libpng and mozjpeg); the geometric operations the PaddleOCR
 * reference takes from OpenCV (bilinear resize, bicubic perspective warp with a replicated border,
 * 90° and 180° rotations) are written here after OpenCV's definitions, so that the models see what
 * they saw in training (see README.md in this package for where the arithmetic differs).
 */
export interface RgbImage {
  width: number;
  height: number;
  /** width × height × 3 bytes, RGB. */
  data: Uint8Array;
}

/** The largest image `decodeImage` accepts, in pixels (about 8000 × 5000). */
export const MAX_IMAGE_PIXELS = 40_000_000;

const PNG_MAGIC = [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a];
const JPEG_MAGIC = [0xff, 0xd8, 0xff];

type ImageFormat = "png" | "jpeg";

function startsWith(bytes: Uint8Array, magic: number[]): boolean {
  return bytes.length >= magic.length && magic.every((b, i) => bytes[i] === b);
}

/** The format the bytes say they are in (their signature), or undefined. */
export function sniffImageFormat(bytes: Uint8Array): ImageFormat | undefined {
  if (startsWith(bytes, PNG_MAGIC)) return "png";
  if (startsWith(bytes, JPEG_MAGIC)) return "jpeg";
  return undefined;
}

function formatOfContentType(contentType: string): ImageFormat | undefined {
  const type = contentType.split(";")[0]?.trim().toLowerCase() ?? "";
  if (type === "image/png") return "png";
  if (type === "image/jpeg" || type === "image/jpg" || type === "image/pjpeg") return "jpeg";
  return undefined;
}

/**
 * Decodes a PNG or JPEG into RGB. The format is recognised by the file's signature; a `contentType`
 * other than `image/png` or `image/jpeg`, or one that disagrees with the signature, is refused, and
 * so is anything else (`invalid_data`), a truncated or corrupt file (`invalid_data`, with the
 * decoder's reason) and an image over {@link MAX_IMAGE_PIXELS} (`payload_too_large`).
 *
 * Like OpenCV's `imread` (which the PaddleOCR reference uses) it applies the EXIF orientation of a
 * JPEG and turns grey images into three equal channels. Unlike `imread`, which drops the alpha
 * channel and so turns transparent pixels black, transparency is flattened onto white: dark text on
 * a transparent background stays readable.
 */
export async function decodeImage(bytes: Uint8Array, contentType?: string): Promise<RgbImage> {
  if (!(bytes instanceof Uint8Array)) throw new ServeError(ErrorCode.badRequest, "the image must be bytes (a Uint8Array)");
  if (bytes.length === 0) throw new ServeError(ErrorCode.invalidData, "the image is empty");
  const format = sniffImageFormat(bytes);
  if (contentType !== undefined) {
    const declared = formatOfContentType(contentType);
    if (!declared) throw new ServeError(ErrorCode.invalidData, `content type '${contentType}' is not supported: send image/png or image/jpeg`);
    if (format && declared !== format) throw new ServeError(ErrorCode.invalidData, `the content type says ${declared.toUpperCase()} but the data is a ${format.toUpperCase()} image`);
    if (!format) throw new ServeError(ErrorCode.invalidData, `the content type says ${declared.toUpperCase()} but the data is not a ${declared.toUpperCase()} image (its signature is missing)`);
  }
  if (!format) throw new ServeError(ErrorCode.invalidData, "the data is not a PNG or JPEG image (unrecognised signature)");
  try {
    const { data, info } = await sharp(bytes, { failOn: "warning", limitInputPixels: MAX_IMAGE_PIXELS })
      .autoOrient()
      .flatten({ background: "#ffffff" })
      .toColourspace("srgb")
      .removeAlpha()
      .raw()
      .toBuffer({ resolveWithObject: true });
    if (info.channels !== 3) throw new ServeError(ErrorCode.invalidData, `the decoded ${format.toUpperCase()} image has ${info.channels} channels, expected 3`);
    return { width: info.width, height: info.height, data: new Uint8Array(data.buffer, data.byteOffset, data.length) };
  } catch (err) {
    if (err instanceof ServeError) throw err;
    const message = err instanceof Error ? err.message : String(err);
    if (/pixel limit/i.test(message)) throw new ServeError(ErrorCode.payloadTooLarge, `the image has more than ${MAX_IMAGE_PIXELS} pixels`);
    throw new ServeError(ErrorCode.invalidData, `the ${format.toUpperCase()} image cannot be decoded: ${message.split("\n")[0] ?? message}`);
  }
}

/** Checks that an image's buffer matches its size; throws `invalid_data` otherwise. */
export function checkImage(image: RgbImage, what = "image"): void {
  if (!Number.isInteger(image.width) || !Number.isInteger(image.height) || image.width < 1 || image.height < 1) {
    throw new ServeError(ErrorCode.invalidData, `${what} has size ${image.width}×${image.height}; both sides must be positive integers`);
  }
  if (image.data.length !== image.width * image.height * 3) {
    throw new ServeError(ErrorCode.invalidData, `${what} is ${image.width}×${image.height} RGB, which takes ${image.width * image.height * 3} bytes, but has ${image.data.length}`);
  }
}

function clampByte(v: number): number {
  return v <= 0 ? 0 : v >= 255 ? 255 : Math.round(v);
}

/**
 * Bilinear resize with OpenCV's `INTER_LINEAR` sampling: destination pixel x reads the source at
 * (x + 0.5) · srcW / dstW − 0.5, clamped to the edge pixels; no anti-aliasing filter when shrinking
 * (OpenCV has none either). Results are rounded to bytes, as `cv2.resize` of a uint8 image does.
 */
export function resizeBilinear(image: RgbImage, width: number, height: number): RgbImage {
  checkImage(image);
  if (!Number.isInteger(width) || !Number.isInteger(height) || width < 1 || height < 1) {
    throw new ServeError(ErrorCode.badRequest, `cannot resize to ${width}×${height}`);
  }
  const { width: sw, height: sh, data: src } = image;
  const out = new Uint8Array(width * height * 3);
  const taps = (dst: number, srcSize: number): { i0: Int32Array; i1: Int32Array; f: Float64Array } => {
    const i0 = new Int32Array(dst);
    const i1 = new Int32Array(dst);
    const f = new Float64Array(dst);
    const scale = srcSize / dst;
    for (let d = 0; d < dst; d++) {
      let s = (d + 0.5) * scale - 0.5;
      if (s < 0) s = 0;
      let k = Math.floor(s);
      let frac = s - k;
      if (k >= srcSize - 1) {
        k = srcSize - 1;
        frac = 0;
      }
      i0[d] = k;
      i1[d] = Math.min(k + 1, srcSize - 1);
      f[d] = frac;
    }
    return { i0, i1, f };
  };
  const xs = taps(width, sw);
  const ys = taps(height, sh);
  for (let y = 0; y < height; y++) {
    const fy = ys.f[y] as number;
    const r0 = (ys.i0[y] as number) * sw;
    const r1 = (ys.i1[y] as number) * sw;
    for (let x = 0; x < width; x++) {
      const fx = xs.f[x] as number;
      const a = (r0 + (xs.i0[x] as number)) * 3;
      const b = (r0 + (xs.i1[x] as number)) * 3;
      const c = (r1 + (xs.i0[x] as number)) * 3;
      const d = (r1 + (xs.i1[x] as number)) * 3;
      const o = (y * width + x) * 3;
      for (let ch = 0; ch < 3; ch++) {
        const top = (src[a + ch] as number) * (1 - fx) + (src[b + ch] as number) * fx;
        const bottom = (src[c + ch] as number) * (1 - fx) + (src[d + ch] as number) * fx;
        out[o + ch] = clampByte(top * (1 - fy) + bottom * fy);
      }
    }
  }
  return { width, height, data: out };
}

/** Rotates by 180° (`cv2.rotate(img, cv2.ROTATE_180)`). */
export function rotate180(image: RgbImage): RgbImage {
  checkImage(image);
  const n = image.width * image.height;
  const out = new Uint8Array(n * 3);
  for (let i = 0; i < n; i++) {
    const j = (n - 1 - i) * 3;
    out[i * 3] = image.data[j] as number;
    out[i * 3 + 1] = image.data[j + 1] as number;
    out[i * 3 + 2] = image.data[j + 2] as number;
  }
  return { width: image.width, height: image.height, data: out };
}

/** Rotates by 90° counter-clockwise (`np.rot90(img)`): the result is height × width. */
export function rotate90CounterClockwise(image: RgbImage): RgbImage {
  checkImage(image);
  const { width: w, height: h, data } = image;
  const out = new Uint8Array(w * h * 3);
  // out is w rows of h pixels: out[r][c] = in[c][w - 1 - r]
  for (let r = 0; r < w; r++) {
    for (let c = 0; c < h; c++) {
      const s = (c * w + (w - 1 - r)) * 3;
      const o = (r * h + c) * 3;
      out[o] = data[s] as number;
      out[o + 1] = data[s + 1] as number;
      out[o + 2] = data[s + 2] as number;
    }
  }
  return { width: h, height: w, data: out };
}

/** OpenCV's bicubic kernel (Keys, a = −0.75) weights for a fractional offset t in [0, 1). */
function cubicWeights(t: number, w: Float64Array): void {
  const A = -0.75;
  const x0 = t + 1;
  const x1 = t;
  const x2 = 1 - t;
  w[0] = ((A * x0 - 5 * A) * x0 + 8 * A) * x0 - 4 * A;
  w[1] = ((A + 2) * x1 - (A + 3)) * x1 * x1 + 1;
  w[2] = ((A + 2) * x2 - (A + 3)) * x2 * x2 + 1;
  w[3] = 1 - (w[0] as number) - (w[1] as number) - (w[2] as number);
}

/**
 * `cv2.warpPerspective(img, M, (width, height), flags=INTER_CUBIC, borderMode=BORDER_REPLICATE)`:
 * `m` (row-major 3×3) maps source to destination points; each destination pixel samples the source
 * at M⁻¹·(x, y, 1) with the bicubic kernel, coordinates outside clamped to the edge.
 */
export function warpPerspective(image: RgbImage, m: readonly number[], width: number, height: number): RgbImage {
  checkImage(image);
  const inv = invert3x3(m);
  const { width: sw, height: sh, data: src } = image;
  const out = new Uint8Array(width * height * 3);
  const wx = new Float64Array(4);
  const wy = new Float64Array(4);
  const acc = [0, 0, 0];
  const [a, b, c, d, e, f, g, h, i] = inv as [number, number, number, number, number, number, number, number, number];
  for (let y = 0; y < height; y++) {
    for (let x = 0; x < width; x++) {
      const wz = g * x + h * y + i;
      const k = wz !== 0 ? 1 / wz : 0;
      const X = (a * x + b * y + c) * k;
      const Y = (d * x + e * y + f) * k;
      const x0 = Math.floor(X);
      const y0 = Math.floor(Y);
      cubicWeights(X - x0, wx);
      cubicWeights(Y - y0, wy);
      acc[0] = acc[1] = acc[2] = 0;
      for (let j = 0; j < 4; j++) {
        const yy = Math.min(Math.max(y0 - 1 + j, 0), sh - 1);
        const wyj = wy[j] as number;
        for (let q = 0; q < 4; q++) {
          const xx = Math.min(Math.max(x0 - 1 + q, 0), sw - 1);
          const wgt = wyj * (wx[q] as number);
          const s = (yy * sw + xx) * 3;
          acc[0] += (src[s] as number) * wgt;
          acc[1] += (src[s + 1] as number) * wgt;
          acc[2] += (src[s + 2] as number) * wgt;
        }
      }
      const o = (y * width + x) * 3;
      out[o] = clampByte(acc[0]);
      out[o + 1] = clampByte(acc[1]);
      out[o + 2] = clampByte(acc[2]);
    }
  }
  return { width, height, data: out };
}

/** Inverse of a row-major 3×3 matrix; throws on a singular one. */
export function invert3x3(m: readonly number[]): number[] {
  const [a, b, c, d, e, f, g, h, i] = m as [number, number, number, number, number, number, number, number, number];
  const A = e * i - f * h;
  const B = -(d * i - f * g);
  const C = d * h - e * g;
  const det = a * A + b * B + c * C;
  if (!Number.isFinite(det) || Math.abs(det) < 1e-12) throw new ServeError(ErrorCode.invalidData, "the perspective transform is singular (a degenerate box)");
  const s = 1 / det;
  return [
    A * s, -(b * i - c * h) * s, (b * f - c * e) * s,
    B * s, (a * i - c * g) * s, -(a * f - c * d) * s,
    C * s, -(a * h - b * g) * s, (a * e - b * d) * s,
  ];
}

/**
 * `cv2.getPerspectiveTransform(src, dst)`: the 3×3 matrix (row-major, m[8] = 1) mapping the four
 * `src` points onto the four `dst` points, by solving the 8×8 linear system.
 */
export function perspectiveTransform(src: ReadonlyArray<readonly [number, number]>, dst: ReadonlyArray<readonly [number, number]>): number[] {
  if (src.length !== 4 || dst.length !== 4) throw new ServeError(ErrorCode.badRequest, "a perspective transform needs four source and four destination points");
  const rows: number[][] = [];
  for (let k = 0; k < 4; k++) {
    const [x, y] = src[k] as readonly [number, number];
    const [u, v] = dst[k] as readonly [number, number];
    rows.push([x, y, 1, 0, 0, 0, -x * u, -y * u, u]);
    rows.push([0, 0, 0, x, y, 1, -x * v, -y * v, v]);
  }
  // Gaussian elimination with partial pivoting on the augmented 8×9 matrix.
  for (let col = 0; col < 8; col++) {
    let pivot = col;
    for (let r = col + 1; r < 8; r++) if (Math.abs((rows[r] as number[])[col] as number) > Math.abs((rows[pivot] as number[])[col] as number)) pivot = r;
    const p = rows[pivot] as number[];
    if (Math.abs(p[col] as number) < 1e-12) throw new ServeError(ErrorCode.invalidData, "the box's corners are collinear: no perspective transform maps them to a rectangle");
    rows[pivot] = rows[col] as number[];
    rows[col] = p;
    for (let r = 0; r < 8; r++) {
      if (r === col) continue;
      const row = rows[r] as number[];
      const factor = (row[col] as number) / (p[col] as number);
      if (factor === 0) continue;
      for (let k = col; k < 9; k++) row[k] = (row[k] as number) - factor * (p[k] as number);
    }
  }
  const sol = rows.map((row, r) => (row[8] as number) / (row[r] as number));
  return [...sol, 1];
}
