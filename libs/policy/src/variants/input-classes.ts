/**
 * Input size classes: profiles where the latency depends on the input (INFaaS §5: "the latency of
 * some models depends on the input"; InferLine §9 plans on the tail of the latency distribution).
 *
 * A model whose inputs have dynamic dimensions besides the batch one (OCR recognition: the text line's
 * width) is profiled at several sizes: its profile shape with the dynamic dimensions scaled by
 * {@link DEFAULT_CLASS_SCALES} ({@link inputClasses}). Each size is a class, named by its shapes and
 * ordered by the elements one query of it holds; the profile records the median and the P99 latency per
 * class and batch size. A query belongs to the smallest class that holds its elements, or the largest
 * ({@link classFor}); selection judges a variant by the latency of the query's class
 * (`QueryRequirements.inputElements`, selection.ts).
 *
 * Caveat: classes are ordered by the elements of a query, which stands for the work when a model's cost
 * grows with its input's size (convolutions over a width); a model whose cost depends on the values
 * (e.g. the number of boxes a detector finds) is measured on its validation set's spread (the P99)
 * instead.
 */

/** How the profile shape's dynamic dimensions are scaled, one class each. @default ¼, ½, 1, 2 */
export const DEFAULT_CLASS_SCALES = [0.25, 0.5, 1, 2];

export interface InputClass {
  /** e.g. "x=3x48x80". */
  name: string;
  /** Each input's non-batch shape. */
  shapes: Record<string, number[]>;
  /** Elements of one query (all inputs). */
  elements: number;
}

/**
 * The size classes of a model: none when no input has a dynamic non-batch dimension (its latency does
 * not depend on the input's size) or the profile shape does not say their size.
 */
export function inputClasses(inputs: ReadonlyArray<{ name: string; shape: readonly number[] }>, profileShape: Readonly<Record<string, readonly number[]>>, scales: readonly number[] = DEFAULT_CLASS_SCALES): InputClass[] {
  const dynamic = inputs.some((i) => i.shape.slice(1).some((d) => d < 0));
  if (!dynamic) return [];
  const base: Record<string, number[]> = {};
  for (const i of inputs) {
    const trailing = i.shape.slice(1);
    const given = profileShape[i.name];
    if (trailing.some((d) => d < 0) && (!given || given.length !== trailing.length)) return [];
    base[i.name] = trailing.map((d, k) => (d < 0 ? (given?.[k] as number) : d));
  }
  const out = new Map<string, InputClass>();
  for (const s of scales) {
    const shapes: Record<string, number[]> = {};
    for (const i of inputs) shapes[i.name] = (base[i.name] as number[]).map((d, k) => ((i.shape[k + 1] ?? 0) < 0 ? Math.max(1, Math.round(d * s)) : d));
    const name = inputs.map((i) => `${i.name}=${(shapes[i.name] as number[]).join("x")}`).join(";");
    const elements = Object.values(shapes).reduce((sum, shape) => sum + shape.reduce((p, d) => p * d, 1), 0);
    out.set(name, { name, shapes, elements });
  }
  return [...out.values()].sort((a, b) => a.elements - b.elements);
}

/** The class of a query of `elements` elements: the smallest that holds it, else the largest. `classes` ascending. */
export function classFor<T extends { elements: number }>(classes: readonly T[], elements: number): T | undefined {
  for (const c of classes) if (c.elements >= elements) return c;
  return classes[classes.length - 1];
}

/** Elements of one query (per row of the batch dimension) over its inputs' shapes. */
export function queryElements(shapes: ReadonlyArray<readonly number[]>): number {
  let n = 0;
  for (const shape of shapes) n += shape.slice(1).reduce((p, d) => p * d, 1);
  return n;
}
