import { describe, expect, it } from "vitest";
import { decodeTensors, isFileInput, oipJsonToWire, ServeError, type TensorSpec } from "../src/index.js";

/** Files (an image for the OCR pipeline) in Open Inference Protocol JSON: a BYTES tensor of one base64 string → UINT8 [n]. */

const signature: TensorSpec[] = [{ name: "image", datatype: "UINT8", shape: [-1] }];
const file = Uint8Array.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0, 255, 7]);
const b64 = Buffer.from(file).toString("base64");

function codeOf(fn: () => unknown): [string, string] {
  try {
    fn();
  } catch (err) {
    if (err instanceof ServeError) return [err.code, err.message];
    throw err;
  }
  throw new Error("did not throw");
}

describe("oip files", () => {
  it("oip files - a BYTES input of one base64 string becomes the UINT8 tensor of the file's bytes", () => {
    const { payload, id } = oipJsonToWire({ id: "q1", inputs: [{ name: "image", datatype: "BYTES", shape: [1], data: [b64] }] }, signature);
    expect(id).toBe("q1");
    const [t] = decodeTensors(payload).tensors;
    expect(t).toMatchObject({ name: "image", datatype: "UINT8", shape: [file.length] });
    expect(Array.from(t!.data as Uint8Array)).toEqual(Array.from(file));
  });

  it("oip files - base64 wrapped over lines (as `base64` writes it) and unpadded or URL-safe base64 are accepted", () => {
    const bytes = Uint8Array.from({ length: 200 }, (_, i) => (i * 37) % 256);
    const wrapped = Buffer.from(bytes).toString("base64").replace(/(.{76})/g, "$1\n");
    for (const text of [wrapped, Buffer.from(bytes).toString("base64url")]) {
      const [t] = decodeTensors(oipJsonToWire({ inputs: [{ name: "image", datatype: "BYTES", shape: [1], data: [text] }] }, signature).payload).tensors;
      expect(Array.from(t!.data as Uint8Array)).toEqual(Array.from(bytes));
    }
  });

  it("oip files - the same input as UINT8 numbers is accepted too", () => {
    const [t] = decodeTensors(oipJsonToWire({ inputs: [{ name: "image", datatype: "UINT8", shape: [file.length], data: Array.from(file) }] }, signature).payload).tensors;
    expect(Array.from(t!.data as Uint8Array)).toEqual(Array.from(file));
  });

  it.each([
    ["BYTES for an input that takes numbers", [{ name: "x", datatype: "FP32", shape: [-1, 2] }], { name: "x", datatype: "BYTES", shape: [1], data: [b64] },
      "invalid_datatype", "input 'x' is BYTES, which is accepted only for an input that takes a file (UINT8 [-1]); this one expects FP32 [-1, 2]"],
    ["two files in one input", signature, { name: "image", datatype: "BYTES", shape: [2], data: [b64, b64] }, "invalid_shape", "input 'image' (BYTES) must have shape [1]: one file; got [2]"],
    ["numbers as BYTES", signature, { name: "image", datatype: "BYTES", shape: [1], data: [137] }, "invalid_data", "input 'image' (BYTES) must carry the file as one base64 string: \"data\": [\"<base64>\"]"],
    ["not base64", signature, { name: "image", datatype: "BYTES", shape: [1], data: ["not base64!"] }, "invalid_data", "input 'image' (BYTES) is not valid base64"],
    ["an empty file", signature, { name: "image", datatype: "BYTES", shape: [1], data: [""] }, "invalid_data", "input 'image' (BYTES) is empty: send the file's bytes in base64"],
    ["an unknown input", signature, { name: "img", datatype: "BYTES", shape: [1], data: [b64] }, "unknown_input", "the model has no input named 'img'; its inputs are: image"],
  ])("oip files - refuses %s", (_case, sig, input, code, message) => {
    expect(codeOf(() => oipJsonToWire({ inputs: [input] }, sig as TensorSpec[]))).toEqual([code, message]);
  });

  it("oip files - an input takes a file when it is UINT8 with one dynamic dimension", () => {
    expect(isFileInput({ name: "image", datatype: "UINT8", shape: [-1] })).toBe(true);
    expect(isFileInput({ name: "image", datatype: "UINT8", shape: [-1, 3] })).toBe(false);
    expect(isFileInput({ name: "image", datatype: "UINT8", shape: [16] })).toBe(false);
    expect(isFileInput({ name: "image", datatype: "FP32", shape: [-1] })).toBe(false);
  });
});
