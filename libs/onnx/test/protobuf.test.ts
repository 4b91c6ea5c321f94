import { describe, expect, it } from "vitest";
import { ProtoWriter, fieldInt, fieldInts, fieldString, readFields } from "../src/protobuf.js";

describe("onnx - protobuf", () => {
  it("onnx - varints encode as the protobuf spec's examples", () => {
    // https://protobuf.dev/programming-guides/encoding/: 150 in field 1 is 08 96 01.
    expect(Array.from(new ProtoWriter().int(1, 150).finish())).toEqual([0x08, 0x96, 0x01]);
    // A negative int64 is ten bytes of two's complement.
    expect(Array.from(new ProtoWriter().int(1, -1).finish())).toEqual([0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01]);
    // "testing" in field 2 is 12 07 74 65 73 74 69 6e 67.
    expect(Array.from(new ProtoWriter().string(2, "testing").finish())).toEqual([0x12, 0x07, 0x74, 0x65, 0x73, 0x74, 0x69, 0x6e, 0x67]);
  });

  it("onnx - fields round-trip through reader and raw re-emission", () => {
    const inner = new ProtoWriter().int(1, 2 ** 40).string(2, "π");
    const bytes = new ProtoWriter().int(3, -2).float(4, 0.5).message(5, inner).int(6, 7).int(6, 8).finish();
    const fields = readFields(bytes);
    expect(fields.map((f) => [f.field, f.wire])).toEqual([[3, 0], [4, 5], [5, 2], [6, 0], [6, 0]]);
    expect(fieldInt(fields[0]!)).toBe(-2);
    expect(new DataView((fields[1]!.value as Uint8Array).slice().buffer).getFloat32(0, true)).toBe(0.5);
    const innerFields = readFields(fields[2]!.value as Uint8Array);
    expect(fieldInt(innerFields[0]!)).toBe(2 ** 40);
    expect(fieldString(innerFields[1]!)).toBe("π");
    const copy = new ProtoWriter();
    for (const f of fields) copy.raw(f);
    expect(Array.from(copy.finish())).toEqual(Array.from(bytes));
  });

  it("onnx - packed repeated ints are read like unpacked ones", () => {
    const packed = new ProtoWriter().bytes(1, Uint8Array.from([0x03, 0x8e, 0x02, 0x9e, 0xa7, 0x05])).finish();
    expect(fieldInts(readFields(packed)[0]!)).toEqual([3, 270, 86942]);
  });

  it("onnx - truncated input is an error", () => {
    expect(() => readFields(Uint8Array.from([0x12, 0x05, 0x61]))).toThrow("protobuf: truncated length-delimited field");
    expect(() => readFields(Uint8Array.from([0x08, 0x96]))).toThrow("protobuf: truncated varint");
  });
});
