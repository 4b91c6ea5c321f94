/** Test helpers: run a model in onnxruntime-node on flat [count, 784] digit inputs. */
import * as ort from "onnxruntime-node";

/** Probabilities [count, 10] from onnxruntime for `count` images of [1, 28, 28]. */
export async function ortProbabilities(model: Uint8Array, inputs: Float32Array, count: number): Promise<Float32Array> {
  const session = await ort.InferenceSession.create(model);
  try {
    const out = await session.run({ input: new ort.Tensor("float32", inputs, [count, 1, 28, 28]) });
    const probabilities = out.probabilities;
    if (!probabilities) throw new Error("model has no 'probabilities' output");
    return probabilities.data as Float32Array;
  } finally {
    await session.release();
  }
}

/** max |a − b| over two equally long arrays. */
export function maxAbsDiff(a: Float32Array, b: Float32Array): number {
  if (a.length !== b.length) throw new Error(`length ${a.length} vs ${b.length}`);
  let max = 0;
  for (let i = 0; i < a.length; i++) max = Math.max(max, Math.abs(a[i]! - b[i]!));
  return max;
}
