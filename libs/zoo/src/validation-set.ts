/**
 * The binary validation-set file shipped next to each model (`<model>.validation.bin`).
 *
 * Layout, all little-endian:
 *   u32 count | u32 features | float32[count × features] inputs (row-major) | uint8[count] labels
 * For the digits models, features = 784 and each row is a [1, 28, 28] image with pixels in [0, 1];
 * labels are class indices 0–9. Total size 8 + 4·count·features + count bytes.
 */
import { readFile } from "node:fs/promises";

/** A labelled set of flat float32 samples. */
export interface ValidationSet {
  readonly count: number;
  readonly features: number;
  /** [count, features] row-major. */
  readonly inputs: Float32Array;
  /** [count] class indices. */
  readonly labels: Uint8Array;
}

/** The same set with plain arrays, ready for `JSON.stringify` or a JSON request body. */
export interface ValidationSetJson {
  readonly count: number;
  readonly features: number;
  readonly inputs: number[][];
  readonly labels: number[];
}

const HEADER_BYTES = 8;

/** Encodes a set in the binary layout above. */
export function encodeValidationSet(set: ValidationSet): Uint8Array {
  if (set.inputs.length !== set.count * set.features) {
    throw new Error(`validation set: ${set.inputs.length} inputs for ${set.count} x ${set.features}`);
  }
  if (set.labels.length !== set.count) throw new Error(`validation set: ${set.labels.length} labels for ${set.count} samples`);
  const bytes = new Uint8Array(HEADER_BYTES + set.inputs.length * 4 + set.count);
  const view = new DataView(bytes.buffer);
  view.setUint32(0, set.count, true);
  view.setUint32(4, set.features, true);
  for (let i = 0; i < set.inputs.length; i++) view.setFloat32(HEADER_BYTES + i * 4, set.inputs[i]!, true);
  bytes.set(set.labels, HEADER_BYTES + set.inputs.length * 4);
  return bytes;
}

/** Decodes the binary layout above, checking that the size matches the header. */
export function decodeValidationSet(bytes: Uint8Array): ValidationSet {
  if (bytes.byteLength < HEADER_BYTES) throw new Error(`validation set: ${bytes.byteLength} bytes is shorter than the header`);
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const count = view.getUint32(0, true);
  const features = view.getUint32(4, true);
  const expected = HEADER_BYTES + count * features * 4 + count;
  if (bytes.byteLength !== expected) {
    throw new Error(`validation set: header says ${count} x ${features} (${expected} bytes), file has ${bytes.byteLength}`);
  }
  const inputs = new Float32Array(count * features);
  for (let i = 0; i < inputs.length; i++) inputs[i] = view.getFloat32(HEADER_BYTES + i * 4, true);
  // A plain copy: `bytes` may be a Buffer, whose slice() is a view.
  const labels = Uint8Array.from(bytes.subarray(HEADER_BYTES + inputs.length * 4));
  return { count, features, inputs, labels };
}

/** Reads and decodes a `.validation.bin` file. */
export async function readValidationSet(path: string): Promise<ValidationSet> {
  return decodeValidationSet(await readFile(path));
}

/** Converts a set to plain arrays (one number[] per sample). */
export function validationSetToJson(set: ValidationSet): ValidationSetJson {
  const inputs: number[][] = [];
  for (let i = 0; i < set.count; i++) inputs.push(Array.from(set.inputs.subarray(i * set.features, (i + 1) * set.features)));
  return { count: set.count, features: set.features, inputs, labels: Array.from(set.labels) };
}

/** Converts plain arrays back to a {@link ValidationSet}, checking the shapes. */
export function validationSetFromJson(json: ValidationSetJson): ValidationSet {
  if (json.inputs.length !== json.count || json.labels.length !== json.count) {
    throw new Error(`validation set: count ${json.count} but ${json.inputs.length} inputs and ${json.labels.length} labels`);
  }
  const inputs = new Float32Array(json.count * json.features);
  json.inputs.forEach((row, i) => {
    if (row.length !== json.features) throw new Error(`validation set: sample ${i} has ${row.length} features, expected ${json.features}`);
    inputs.set(row, i * json.features);
  });
  return { count: json.count, features: json.features, inputs, labels: Uint8Array.from(json.labels) };
}
