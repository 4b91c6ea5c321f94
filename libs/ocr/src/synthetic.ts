import { existsSync } from "node:fs";
import { join } from "node:path";
import sharp from "sharp";
import { createRng, deriveSeed, sampleInt, sampleNormal, type Rng } from "@sloserve/policy";
import { ErrorCode, ServeError } from "@sloserve/contracts";

/**
 * Images of known text, for testing and measuring the OCR pipeline: words and lines rendered with
 * Pango (through sharp) in the DejaVu fonts of Debian's `fonts-dejavu-core` / `fonts-dejavu-extra`,
 * onto white, light-grey or noisy backgrounds, some turned upside down, encoded as PNG or JPEG.
 * Everything follows from a seed.
 */

/** Where Debian puts the DejaVu fonts. */
export const DEJAVU_DIR = "/usr/share/fonts/truetype/dejavu";

/** Pango font names and their files: fonts-dejavu-core has all but Condensed (fonts-dejavu-extra). */
export const FONTS = {
  "DejaVu Sans": "DejaVuSans.ttf",
  "DejaVu Sans Bold": "DejaVuSans-Bold.ttf",
  "DejaVu Sans Mono": "DejaVuSansMono.ttf",
  "DejaVu Serif": "DejaVuSerif.ttf",
  "DejaVu Sans Condensed": "DejaVuSansCondensed.ttf",
} as const;
export type FontName = keyof typeof FONTS;

export interface TextImageSpec {
  /** Lines of text, top to bottom. */
  lines: string[];
  font: FontName;
  /** Font size in pixels (the em square). */
  sizePx: number;
  background: "white" | "grey" | "noisy";
  /** Ink colour, RGB. @default [0, 0, 0] */
  ink?: [number, number, number];
  /** Turn the finished image upside down. */
  rotate180?: boolean;
  format: "png" | "jpeg";
  /** Margin around the text in pixels. @default sizePx */
  marginPx?: number;
  /** Seed of the background noise. @default 1 */
  noiseSeed?: number;
}

export interface TextImage {
  spec: TextImageSpec;
  bytes: Uint8Array;
  contentType: "image/png" | "image/jpeg";
  width: number;
  height: number;
  /** What OCR should read: the lines, space-separated. */
  expected: string;
}

/** The font file of a family, checking that it is installed. */
export function fontFile(font: FontName): string {
  const path = join(DEJAVU_DIR, FONTS[font]);
  if (!existsSync(path)) {
    throw new ServeError(ErrorCode.unavailable, `font file ${path} is missing: install Debian's fonts-dejavu-core and fonts-dejavu-extra (bash scripts/ensure-deps.sh does)`);
  }
  return path;
}

function escapeMarkup(s: string): string {
  return s.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
}

const hex = (c: [number, number, number]): string => `#${c.map((v) => v.toString(16).padStart(2, "0")).join("")}`;

/** Renders one image of known text. */
export async function renderTextImage(spec: TextImageSpec): Promise<TextImage> {
  if (spec.lines.length === 0 || spec.lines.some((l) => l.trim() === "")) throw new ServeError(ErrorCode.badRequest, "every line of a text image needs some text");
  const ink = spec.ink ?? [0, 0, 0];
  const margin = spec.marginPx ?? spec.sizePx;
  const markup = `<span foreground="${hex(ink)}">${escapeMarkup(spec.lines.join("\n"))}</span>`;
  const { data: textPng, info } = await sharp({
    text: { text: markup, font: `${spec.font} ${spec.sizePx}`, fontfile: fontFile(spec.font), rgba: true, dpi: 72, align: "left", spacing: Math.round(spec.sizePx * 0.4) },
  })
    .png()
    .toBuffer({ resolveWithObject: true });
  const width = info.width + 2 * margin;
  const height = info.height + 2 * margin;
  const rng = createRng(spec.noiseSeed ?? 1);
  const base = spec.background === "white" ? 255 : 225 + sampleInt(rng, 21);
  const background = Buffer.alloc(width * height * 3, base);
  let raw: Buffer = await sharp(background, { raw: { width, height, channels: 3 } })
    .composite([{ input: textPng, left: margin, top: margin }])
    .removeAlpha()
    .raw()
    .toBuffer();
  if (spec.background === "noisy") raw = addNoise(raw, rng, 12);
  let image = sharp(raw, { raw: { width, height, channels: 3 } });
  if (spec.rotate180) image = image.rotate(180);
  const bytes = spec.format === "png" ? await image.png().toBuffer() : await image.jpeg({ quality: 90 }).toBuffer();
  return {
    spec,
    bytes: new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.length),
    contentType: spec.format === "png" ? "image/png" : "image/jpeg",
    width,
    height,
    expected: spec.lines.join(" "),
  };
}

/** Gaussian noise of standard deviation `sigma` on every byte. */
function addNoise(raw: Buffer, rng: Rng, sigma: number): Buffer {
  const out = Buffer.alloc(raw.length);
  for (let i = 0; i < raw.length; i++) out[i] = Math.min(255, Math.max(0, Math.round((raw[i] as number) + sigma * sampleNormal(rng))));
  return out;
}

/** Words the generator draws from: common English words, names, and some with capitals and digits. */
export const WORDS = [
  "the", "quick", "brown", "fox", "jumps", "over", "lazy", "dog", "serving", "model", "latency", "budget",
  "pipeline", "queue", "batch", "worker", "cluster", "request", "answer", "window", "river", "mountain",
  "garden", "station", "market", "winter", "summer", "autumn", "spring", "yellow", "purple", "orange",
  "silver", "golden", "planet", "rocket", "engine", "bridge", "castle", "forest", "island", "harbor",
  "Paris", "London", "Berlin", "Tokyo", "Madrid", "Oslo", "Lisbon", "Vienna", "Prague", "Dublin",
  "Monday", "Friday", "October", "March", "Alice", "Robert", "Maria", "Chen", "Olga", "Pedro",
  "coffee", "bread", "butter", "cheese", "apple", "lemon", "pepper", "sugar", "honey", "salad",
  "number", "letter", "signal", "energy", "matrix", "vector", "tensor", "scalar", "kernel", "buffer",
  "Invoice", "Total", "Receipt", "Order", "Street", "Avenue", "Road", "Hotel", "Museum", "Library",
  "happy", "simple", "strong", "gentle", "bright", "silent", "rapid", "steady", "clever", "honest",
];

function pick<T>(rng: Rng, items: readonly T[]): T {
  return items[sampleInt(rng, items.length)] as T;
}

/** A token: mostly a word, sometimes a number, a price, a date or a code. */
function token(rng: Rng): string {
  const r = rng.next();
  if (r < 0.75) return pick(rng, WORDS);
  if (r < 0.83) return String(sampleInt(rng, 10_000));
  if (r < 0.9) return `${sampleInt(rng, 500)}.${String(sampleInt(rng, 100)).padStart(2, "0")}`;
  if (r < 0.95) return `${2000 + sampleInt(rng, 30)}-${String(1 + sampleInt(rng, 12)).padStart(2, "0")}-${String(1 + sampleInt(rng, 28)).padStart(2, "0")}`;
  return `${String.fromCharCode(65 + sampleInt(rng, 26))}${String.fromCharCode(65 + sampleInt(rng, 26))}${100 + sampleInt(rng, 900)}`;
}

export interface SyntheticSetOptions {
  /** Font sizes in pixels to draw from. @default [16, 20, 24, 32, 40, 56, 72] */
  sizes?: number[];
  /** Share of images turned upside down. @default 0.1 */
  rotatedShare?: number;
  /** Share of images with two or three lines. @default 0.15 */
  multiLineShare?: number;
  /** Fonts to draw from. @default all of {@link FONTS} */
  fonts?: FontName[];
}

/**
 * `count` image specs from `seed`: one to three tokens per line, one line (or two or three for a
 * share of them), sizes and fonts drawn at random, on white (60%), light grey (20%) or noisy grey
 * (20%) backgrounds, dark ink, PNG or JPEG in equal shares.
 */
export function syntheticSpecs(seed: number, count: number, options: SyntheticSetOptions = {}): TextImageSpec[] {
  const rng = createRng(seed);
  const sizes = options.sizes ?? [16, 20, 24, 32, 40, 56, 72];
  // Every font, installed or not, so that a seed gives the same set everywhere; rendering names a
  // missing font's package.
  const fonts = options.fonts ?? (Object.keys(FONTS) as FontName[]);
  if (fonts.length === 0) throw new ServeError(ErrorCode.badRequest, "at least one font is needed");
  const rotatedShare = options.rotatedShare ?? 0.1;
  const multiLineShare = options.multiLineShare ?? 0.15;
  const specs: TextImageSpec[] = [];
  for (let i = 0; i < count; i++) {
    const lineCount = rng.next() < multiLineShare ? 2 + sampleInt(rng, 2) : 1;
    const lines = Array.from({ length: lineCount }, () => Array.from({ length: 1 + sampleInt(rng, 3) }, () => token(rng)).join(" "));
    const b = rng.next();
    const inkLevel = sampleInt(rng, 60);
    specs.push({
      lines,
      font: pick(rng, fonts),
      sizePx: pick(rng, sizes),
      background: b < 0.6 ? "white" : b < 0.8 ? "grey" : "noisy",
      ink: rng.next() < 0.8 ? [inkLevel, inkLevel, inkLevel] : [sampleInt(rng, 60), sampleInt(rng, 60), 60 + sampleInt(rng, 80)],
      rotate180: rng.next() < rotatedShare,
      format: rng.next() < 0.5 ? "png" : "jpeg",
      noiseSeed: deriveSeed(seed, `noise-${i}`),
    });
  }
  return specs;
}

/** {@link syntheticSpecs} rendered. */
export async function syntheticSet(seed: number, count: number, options: SyntheticSetOptions = {}): Promise<TextImage[]> {
  const out: TextImage[] = [];
  for (const spec of syntheticSpecs(seed, count, options)) out.push(await renderTextImage(spec));
  return out;
}
