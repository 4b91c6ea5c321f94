import { allocate, elementCount, type Tensor, type TensorSpec } from "@sloserve/contracts";

/**
 * Runs several queries through an engine that takes one set of inputs at a time (`run`): queries
 * whose inputs share trailing dimensions (e.g. images of one size) are concatenated along dimension 0
 * and run as one batch, whose outputs are split back by rows; a query alone in its group, or every
 * query when the engine is not `batchable`, runs by itself. Returns each query's outputs, in order.
 * onnxruntime (OnnxRunner) and a remote Open Inference Protocol server (executor-inferentia) share it.
 */
export async function runConcatenated(
  queries: ReadonlyArray<readonly Tensor[]>,
  inputs: readonly TensorSpec[],
  batchable: boolean,
  /** `owned`: the feeds were built here (a concatenation) and nothing else holds them, so the engine may take their buffers. */
  run: (feeds: readonly Tensor[], owned: boolean) => Promise<Tensor[]>,
): Promise<Tensor[][]> {
  if (queries.length === 1 || !batchable) {
    const out: Tensor[][] = [];
    for (const q of queries) out.push(await run(q, false));
    return out;
  }
  // Groups of queries with the same trailing dimensions (each compared with its group's first query:
  // no key string built per query; a batch is most often one group).
  const groups: number[][] = [];
  queries.forEach((q, i) => {
    const g = groups.find((indices) => sameTrailingShapes(queries[indices[0] as number] as readonly Tensor[], q, inputs));
    if (g) g.push(i);
    else groups.push([i]);
  });
  const results: Tensor[][] = new Array(queries.length);
  for (const indices of groups) {
    if (indices.length === 1) {
      const i = indices[0] as number;
      results[i] = await run(queries[i] as Tensor[], false);
      continue;
    }
    const rows = indices.map((i) => (queries[i] as Tensor[])[0]?.shape[0] ?? 1);
    const total = rows.reduce((a, b) => a + b, 0);
    const feeds: Tensor[] = [];
    for (const spec of inputs) {
      const parts = indices.map((i) => (queries[i] as Tensor[]).find((t) => t.name === spec.name) as Tensor);
      const first = parts[0] as Tensor;
      const shape = [total, ...first.shape.slice(1)];
      const data = allocate(spec.datatype, elementCount(shape));
      let offset = 0;
      for (const p of parts) {
        (data as Float32Array).set(p.data as Float32Array, offset);
        offset += p.data.length;
      }
      feeds.push({ name: spec.name, datatype: spec.datatype, data, shape });
    }
    const out = await run(feeds, true);
    const tails = out.map((t) => t.shape.slice(1));
    const rowSizes = tails.map(elementCount);
    let row = 0;
    indices.forEach((qi, k) => {
      const n = rows[k] as number;
      results[qi] = out.map((t, j) => {
        const rowSize = rowSizes[j] as number;
        const data = (t.data as Float32Array).subarray(row * rowSize, (row + n) * rowSize);
        return { name: t.name, datatype: t.datatype, shape: [n, ...(tails[j] as number[])], data } as Tensor;
      });
      row += n;
    });
  }
  return results;
}

/**
 * Whether two queries' inputs (by the model's input names) have the same dimensions after the first;
 * a missing input compares equal only to a missing one (such queries run together, and fail together
 * as the engine finds the input missing, as they did when grouped by a key string).
 */
function sameTrailingShapes(a: readonly Tensor[], b: readonly Tensor[], inputs: readonly TensorSpec[]): boolean {
  if (a === b) return true;
  for (const spec of inputs) {
    const x = a.find((t) => t.name === spec.name)?.shape;
    const y = b.find((t) => t.name === spec.name)?.shape;
    if (x === y) continue;
    if (!x || !y || x.length !== y.length) return false;
    for (let d = 1; d < x.length; d++) if (x[d] !== y[d]) return false;
  }
  return true;
}
