import { ErrorCode, ServeError } from "@sloserve/contracts";
import { sortBoxes, type Box } from "./det.js";

/** One recognised line: its text, its box in the source image (tl, tr, br, bl) and its score. */
export interface OcrLine {
  text: string;
  box: Box;
  score: number;
}

/** The OCR pipeline's answer: every line's text in reading order, space-separated, and the lines. */
export interface OcrResult {
  text: string;
  lines: OcrLine[];
}

/** A line as the stages produce it: {@link OcrLine} and whether the direction classifier turned it. */
export interface RecognisedLine extends OcrLine {
  /** True when the line's strip was turned by 180° before recognition. */
  rotated?: boolean;
}

/** PaddleOCR's `drop_score`: lines recognised with a lower mean probability are left out. */
export const DROP_SCORE = 0.5;

/**
 * Recognised lines → the answer. Lines under `dropScore` (and so lines with no text, whose score is
 * 0) are left out, as PaddleOCR's `TextSystem` does, and so are lines of nothing but spaces (a
 * line's text is trimmed); the rest are put in reading order by their boxes
 * ({@link sortBoxes}, the order detection gives them, so lines gathered in any order come out the same).
 *
 * One addition to PaddleOCR's behaviour: when more than half of the lines were turned by the
 * direction classifier, the page itself is upside down, and the lines are ordered as they read on
 * the page turned the right way up (PaddleOCR reads them last line first, right to left). Boxes stay
 * in the coordinates of the image as it was sent.
 */
export function assembleResult(lines: readonly RecognisedLine[], options: { dropScore?: number } = {}): OcrResult {
  const dropScore = options.dropScore ?? DROP_SCORE;
  lines.forEach((l, i) => {
    if (typeof l.text !== "string" || !Number.isFinite(l.score) || !Array.isArray(l.box) || l.box.length !== 4) {
      throw new ServeError(ErrorCode.invalidData, `line ${i} must have a text, a finite score and a box of four points`);
    }
  });
  // Spaces at a line's ends (a strip that caught the gap beside a word) would double the separator.
  const candidates = lines.map((l) => ({ ...l, text: l.text.trim() })).filter((l) => l.text.length > 0 && l.score >= dropScore);
  const upsideDown = candidates.filter((l) => l.rotated === true).length * 2 > candidates.length;
  const kept = upsideDown ? sortBoxes(candidates.map((line) => ({ line, box: turnBox(line.box) }))).map((t) => t.line) : sortBoxes(candidates);
  return { text: kept.map((l) => l.text).join(" "), lines: kept.map((l) => ({ text: l.text, box: l.box, score: l.score })) };
}

/** A box as seen on the image turned by 180° (up to a translation, which ordering ignores). */
function turnBox(box: Box): Box {
  const [tl, tr, br, bl] = box;
  const turn = (p: readonly [number, number]): [number, number] => [-p[0], -p[1]];
  return [turn(br), turn(bl), turn(tl), turn(tr)];
}
