import { ErrorCode, ServeError } from "@sloserve/contracts";
import { checkImage, perspectiveTransform, rotate90CounterClockwise, warpPerspective, type RgbImage } from "./image.js";
import type { Box } from "./det.js";

/**
 * Each box → a horizontal strip of the image (PaddleOCR's `get_rotate_crop_image`): the strip is
 * as wide as the longer of the box's top and bottom edges and as tall as the longer of its left and
 * right edges (truncated to whole pixels); the box is warped onto it with a perspective transform
 * (bicubic, edge pixels replicated); a strip at least 1.5 times taller than wide is taken to be
 * vertical text and turned 90° counter-clockwise.
 */
export function cropBoxes(image: RgbImage, boxes: readonly Box[]): RgbImage[] {
  checkImage(image);
  return boxes.map((box, i) => {
    if (!Array.isArray(box) || box.length !== 4 || box.some((p) => !Array.isArray(p) || p.length !== 2 || !p.every(Number.isFinite))) {
      throw new ServeError(ErrorCode.invalidData, `box ${i} must be four [x, y] points`);
    }
    const [p0, p1, p2, p3] = box;
    const d = (a: readonly number[], b: readonly number[]): number => Math.hypot((a[0] as number) - (b[0] as number), (a[1] as number) - (b[1] as number));
    const width = Math.trunc(Math.max(d(p0, p1), d(p2, p3)));
    const height = Math.trunc(Math.max(d(p0, p3), d(p1, p2)));
    if (width < 1 || height < 1) throw new ServeError(ErrorCode.invalidData, `box ${i} is ${width}×${height} pixels; a box must be at least 1×1`);
    const m = perspectiveTransform(box, [[0, 0], [width, 0], [width, height], [0, height]]);
    const strip = warpPerspective(image, m, width, height);
    return strip.height / strip.width >= 1.5 ? rotate90CounterClockwise(strip) : strip;
  });
}
