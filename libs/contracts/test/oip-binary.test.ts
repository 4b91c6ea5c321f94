import { describe, expect, it } from "vitest";
import { decodeTensors, oipRequestToWire, oipResponseBody, parseOipBinaryBody, wantsBinaryOutput, type TensorSpec } from "../src/index.js";

/** The HTTP binary tensor extension and raw inputs (gRPC raw_input_contents) through the one converter of oip.ts. */

const signature: TensorSpec[] = [{ name: "x", datatype: "FP32", shape: [-1, 2] }];
const fileSignature: TensorSpec[] = [{ name: "image", datatype: "UINT8", shape: [-1] }];

function body(header: unknown, ...segments: Uint8Array[]): { bytes: Buffer; headerLength: number } {
  const json = Buffer.from(JSON.stringify(header));
  return { bytes: Buffer.concat([json, ...segments]), headerLength: json.length };
}

/** Throws a ServeError with this code, and a message equal to (or matching) this. */
const refusal = (code: string, message: string | RegExp) => expect.objectContaining({ code, message: typeof message === "string" ? message : expect.stringMatching(message) }) as unknown as Error;

const floats = new Float32Array([1.5, -2, 3.25, 4]);
const floatBytes = new Uint8Array(floats.buffer);

describe("oip binary extension", () => {
  it("oip binary - splits header and binary inputs and converts them like JSON inputs", () => {
    const { bytes, headerLength } = body({ id: "r1", inputs: [{ name: "x", datatype: "FP32", shape: [2, 2], parameters: { binary_data_size: 16 } }], parameters: { binary_data_output: true } }, floatBytes);
    const request = parseOipBinaryBody(bytes, headerLength);
    expect(request.id).toBe("r1");
    const [t] = decodeTensors(oipRequestToWire(request, signature)).tensors;
    expect([t!.shape, Array.from(t!.data as Float32Array)]).toEqual([[2, 2], [1.5, -2, 3.25, 4]]);
    expect(wantsBinaryOutput(request, "y")).toBe(true);
  });

  it("oip binary - a raw input after a header of any length (not 4-aligned in the body) reaches the message as the same FP32 elements", () => {
    for (const id of ["a", "ab", "abc", "abcd"]) {
      const { bytes, headerLength } = body({ id, inputs: [{ name: "x", datatype: "FP32", shape: [2, 2], parameters: { binary_data_size: 16 } }] }, floatBytes);
      const [t] = decodeTensors(oipRequestToWire(parseOipBinaryBody(bytes, headerLength), signature)).tensors;
      expect([t!.datatype, t!.shape, t!.data instanceof Float32Array, Array.from(t!.data as Float32Array)]).toEqual(["FP32", [2, 2], true, [1.5, -2, 3.25, 4]]);
    }
  });

  it("oip binary - a BYTES input in binary (length-prefixed) is a file for a UINT8 [-1] input", () => {
    const file = Buffer.from([0x89, 0x50, 0x4e, 0x47, 7]);
    const prefix = Buffer.alloc(4);
    prefix.writeUInt32LE(file.length);
    const { bytes, headerLength } = body({ inputs: [{ name: "image", datatype: "BYTES", shape: [1], parameters: { binary_data_size: 9 } }] }, prefix, file);
    const [t] = decodeTensors(oipRequestToWire(parseOipBinaryBody(bytes, headerLength), fileSignature)).tensors;
    expect([t!.datatype, t!.shape, Array.from(t!.data as Uint8Array)]).toEqual(["UINT8", [5], Array.from(file)]);
    expect(() => oipRequestToWire({ parameters: {}, inputs: [{ name: "image", datatype: "BYTES", shape: [1], raw: file }] }, fileSignature)).toThrow(
      refusal("invalid_data", "input 'image' (BYTES) binary data must be one element: a 4-byte little-endian length, then that many bytes (got 5 bytes announcing 1196314761)"),
    );
  });

  it.each([
    ["a header length past the body", { inputs: [] }, [], 999, "bad_request", /Inference-Header-Content-Length is 999/],
    ["sizes that leave bytes over", { inputs: [{ name: "x", datatype: "FP32", shape: [1, 2], parameters: { binary_data_size: 8 } }] }, [floatBytes], undefined, "invalid_data_length", /8 bytes after the JSON header/],
    ["a size past the end", { inputs: [{ name: "x", datatype: "FP32", shape: [2, 2], parameters: { binary_data_size: 32 } }] }, [floatBytes], undefined, "invalid_data_length", /binary_data_size 32 runs past the end/],
    ["data and a binary size at once", { inputs: [{ name: "x", datatype: "FP32", shape: [2, 2], data: [1, 2, 3, 4], parameters: { binary_data_size: 16 } }] }, [floatBytes], undefined, "bad_request", /has both "data" and binary_data_size/],
  ])("oip binary - refuses %s", (_case, header, segments, length, code, message) => {
    const { bytes, headerLength } = body(header, ...(segments as Uint8Array[]));
    expect(() => parseOipBinaryBody(bytes, length ?? headerLength)).toThrow(refusal(code, message));
  });

  it("oip binary - raw bytes that are not whole elements are refused by name", () => {
    expect(() => oipRequestToWire({ parameters: {}, inputs: [{ name: "x", datatype: "FP32", shape: [1, 2], raw: floatBytes.subarray(0, 7) }] }, signature)).toThrow(
      refusal("invalid_data_length", "input 'x' has 7 bytes of binary data, not a whole number of FP32 elements (4 bytes each)"),
    );
  });

  it("oip binary - answers: binary outputs follow the JSON header, the others stay JSON", () => {
    const outputs = [
      { name: "a", datatype: "FP32" as const, shape: [2, 2], data: floats },
      { name: "b", datatype: "INT64" as const, shape: [1], data: new BigInt64Array([7n]) },
    ];
    const { body: out, headerLength } = oipResponseBody({ model_name: "m", id: "r1" }, outputs, (n) => n === "a");
    const header = JSON.parse(out.subarray(0, headerLength).toString()) as { id: string; outputs: Array<Record<string, unknown>> };
    expect(header.outputs).toEqual([{ name: "a", datatype: "FP32", shape: [2, 2], parameters: { binary_data_size: 16 } }, { name: "b", datatype: "INT64", shape: [1], data: [7] }]);
    expect(Array.from(new Float32Array(Uint8Array.from(out.subarray(headerLength)).buffer))).toEqual(Array.from(floats));
    expect(oipResponseBody({}, outputs, () => false).headerLength).toBeUndefined();
  });
});
