/**
 * Plane geometry for the detection post-processing: convex hull, minimum-area rectangle (OpenCV's
 * `minAreaRect` + `boxPoints`), polygon area and perimeter (shapely's `area` and `length`), and the
 * offset of a convex polygon with round joins (Clipper's `ClipperOffset` with `jtRound`, which the
 * PaddleOCR reference calls through pyclipper to "unclip" a box).
 */

export type Point = readonly [number, number];

function cross(o: Point, a: Point, b: Point): number {
  return (a[0] - o[0]) * (b[1] - o[1]) - (a[1] - o[1]) * (b[0] - o[0]);
}

/** Convex hull (Andrew's monotone chain), counter-clockwise in a y-up frame, without collinear points. */
export function convexHull(points: readonly Point[]): Point[] {
  const pts = [...points].sort((p, q) => p[0] - q[0] || p[1] - q[1]);
  const unique: Point[] = [];
  for (const p of pts) {
    const last = unique[unique.length - 1];
    if (!last || last[0] !== p[0] || last[1] !== p[1]) unique.push(p);
  }
  if (unique.length < 3) return unique;
  const lower: Point[] = [];
  for (const p of unique) {
    while (lower.length >= 2 && cross(lower[lower.length - 2] as Point, lower[lower.length - 1] as Point, p) <= 0) lower.pop();
    lower.push(p);
  }
  const upper: Point[] = [];
  for (let i = unique.length - 1; i >= 0; i--) {
    const p = unique[i] as Point;
    while (upper.length >= 2 && cross(upper[upper.length - 2] as Point, upper[upper.length - 1] as Point, p) <= 0) upper.pop();
    upper.push(p);
  }
  lower.pop();
  upper.pop();
  return [...lower, ...upper];
}

export interface RotatedRect {
  /** The four corners, in order around the rectangle. */
  corners: [Point, Point, Point, Point];
  /** Side lengths along the rectangle's two axes. */
  width: number;
  height: number;
}

/**
 * The rectangle of least area containing the points (rotating calipers over the hull's edges, as
 * OpenCV's `minAreaRect`). Fewer than three distinct points give a degenerate rectangle (a side of 0).
 */
export function minAreaRect(points: readonly Point[]): RotatedRect {
  const hull = convexHull(points);
  if (hull.length === 0) return { corners: [[0, 0], [0, 0], [0, 0], [0, 0]], width: 0, height: 0 };
  if (hull.length === 1) {
    const p = hull[0] as Point;
    return { corners: [p, p, p, p], width: 0, height: 0 };
  }
  let best: { area: number; ux: number; uy: number; minU: number; maxU: number; minV: number; maxV: number } | undefined;
  for (let i = 0; i < hull.length; i++) {
    const a = hull[i] as Point;
    const b = hull[(i + 1) % hull.length] as Point;
    const len = Math.hypot(b[0] - a[0], b[1] - a[1]);
    if (len === 0) continue;
    const ux = (b[0] - a[0]) / len;
    const uy = (b[1] - a[1]) / len;
    let minU = Infinity, maxU = -Infinity, minV = Infinity, maxV = -Infinity;
    for (const p of hull) {
      const u = p[0] * ux + p[1] * uy;
      const v = -p[0] * uy + p[1] * ux;
      if (u < minU) minU = u;
      if (u > maxU) maxU = u;
      if (v < minV) minV = v;
      if (v > maxV) maxV = v;
    }
    const area = (maxU - minU) * (maxV - minV);
    if (!best || area < best.area - 1e-9) best = { area, ux, uy, minU, maxU, minV, maxV };
  }
  if (!best) {
    const p = hull[0] as Point;
    return { corners: [p, p, p, p], width: 0, height: 0 };
  }
  const { ux, uy, minU, maxU, minV, maxV } = best;
  const at = (u: number, v: number): Point => [u * ux - v * uy, u * uy + v * ux];
  return { corners: [at(minU, minV), at(maxU, minV), at(maxU, maxV), at(minU, maxV)], width: maxU - minU, height: maxV - minV };
}

/** Area of a simple polygon (shoelace), always ≥ 0. */
export function polygonArea(points: readonly Point[]): number {
  let s = 0;
  for (let i = 0; i < points.length; i++) {
    const a = points[i] as Point;
    const b = points[(i + 1) % points.length] as Point;
    s += a[0] * b[1] - b[0] * a[1];
  }
  return Math.abs(s) / 2;
}

/** Perimeter of a closed polygon. */
export function polygonPerimeter(points: readonly Point[]): number {
  let s = 0;
  for (let i = 0; i < points.length; i++) {
    const a = points[i] as Point;
    const b = points[(i + 1) % points.length] as Point;
    s += Math.hypot(b[0] - a[0], b[1] - a[1]);
  }
  return s;
}

/**
 * Grows a convex polygon outwards by `delta` with round corners, the way Clipper's `ClipperOffset`
 * (`jtRound`, `etClosedPolygon`, arc tolerance 0.25) does: each edge moves out by `delta` along its
 * normal and each corner becomes an arc of radius `delta` around the vertex, approximated by points
 * on the arc whose chords stray at most `arcTolerance` from it. Like Clipper, the input is taken in
 * integer coordinates (truncated, as pyclipper converts floats) and the result is rounded to integers.
 */
export function offsetConvexPolygon(points: readonly Point[], delta: number, arcTolerance = 0.25): Point[] {
  const hull = convexHull(points.map((p) => [Math.trunc(p[0]), Math.trunc(p[1])] as Point));
  if (hull.length === 0 || delta <= 0) return hull;
  // Clipper: steps per full circle = π / acos(1 − tolerance / |delta|).
  const tol = Math.min(Math.max(arcTolerance, Math.abs(delta) * 0.0025), Math.abs(delta));
  const stepsPerCircle = Math.max(Math.PI / Math.acos(1 - tol / Math.abs(delta)), 4);
  const stepAngle = (2 * Math.PI) / stepsPerCircle;
  const out: Point[] = [];
  if (hull.length < 3) {
    // A point or a segment: its offset is a disk or a stadium; sample the whole circle around each end.
    for (const p of hull) for (let k = 0; k < Math.ceil(stepsPerCircle); k++) out.push([Math.round(p[0] + delta * Math.cos(k * stepAngle)), Math.round(p[1] + delta * Math.sin(k * stepAngle))]);
    return convexHull(out);
  }
  const n = hull.length;
  // Outward normal of edge i (from hull[i] to hull[i + 1]); the hull is counter-clockwise (y up).
  const normal = (i: number): [number, number] => {
    const a = hull[i % n] as Point;
    const b = hull[(i + 1) % n] as Point;
    const len = Math.hypot(b[0] - a[0], b[1] - a[1]);
    return [(b[1] - a[1]) / len, -(b[0] - a[0]) / len];
  };
  for (let i = 0; i < n; i++) {
    const v = hull[i] as Point;
    const nPrev = normal(i - 1 + n);
    const nNext = normal(i);
    let a0 = Math.atan2(nPrev[1], nPrev[0]);
    let a1 = Math.atan2(nNext[1], nNext[0]);
    // The arc turns the same way as the hull (counter-clockwise): a1 ≥ a0.
    while (a1 < a0) a1 += 2 * Math.PI;
    if (a1 - a0 > Math.PI) {
      // Numerically a straight continuation; no arc.
      a1 = a0;
    }
    const steps = Math.max(Math.ceil((a1 - a0) / stepAngle), 1);
    for (let k = 0; k <= steps; k++) {
      const ang = a0 + ((a1 - a0) * k) / steps;
      out.push([Math.round(v[0] + delta * Math.cos(ang)), Math.round(v[1] + delta * Math.sin(ang))]);
    }
  }
  return convexHull(out);
}
