import { describe, expect, it } from "vitest";
import { encodeTensors, encodeTensorParts, decodeTensors, decodeWireMeta, ServeError } from "../src/index.js";

describe("wire", () => {
  it("wire - round-trips tensors of several datatypes with extra meta", () => {
    const bytes = encodeTensors(
      [
        { name: "a", datatype: "FP32", shape: [2, 2], data: new Float32Array([1.5, -2, 3.25, 4]) },
        { name: "b", datatype: "INT64", shape: [3], data: new BigInt64Array([1n, -2n, 3n]) },
        { name: "c", datatype: "UINT8", shape: [5], data: new Uint8Array([1, 2, 3, 4, 5]) },
        { name: "d", datatype: "FP64", shape: [1], data: new Float64Array([Math.PI]) },
      ],
      { id: "q1" },
    );
    const { meta, tensors } = decodeTensors<{ id: string }>(bytes);
    expect(meta.id).toBe("q1");
    expect(tensors.map((t) => [t.name, t.datatype, t.shape])).toEqual([
      ["a", "FP32", [2, 2]],
      ["b", "INT64", [3]],
      ["c", "UINT8", [5]],
      ["d", "FP64", [1]],
    ]);
    expect(Array.from(tensors[0]!.data as Float32Array)).toEqual([1.5, -2, 3.25, 4]);
    expect(Array.from(tensors[1]!.data as BigInt64Array)).toEqual([1n, -2n, 3n]);
    expect(Array.from(tensors[2]!.data as Uint8Array)).toEqual([1, 2, 3, 4, 5]);
    expect(tensors[3]!.data[0]).toBe(Math.PI);
  });

  it("wire - encodeTensorParts: the pieces, written in order, are encodeTensors' bytes, and the tensors are views, not copies", () => {
    const a = new Float32Array([1.5, -2, 3.25]); // 12 bytes: 4 of padding follow
    const big = new Float32Array(1000).map((_, i) => i / 7);
    const tensors = [
      { name: "a", datatype: "FP32" as const, shape: [3], data: a },
      { name: "empty", datatype: "UINT8" as const, shape: [0], data: new Uint8Array(0) },
      { name: "b", datatype: "FP32" as const, shape: [2, 500], data: big.subarray(0, 1000) },
      { name: "c", datatype: "UINT8" as const, shape: [5], data: new Uint8Array([1, 2, 3, 4, 5]) },
    ];
    const whole = encodeTensors(tensors, { id: "q", served_by: { batch_size: 8 } });
    const { parts, byteLength } = encodeTensorParts(tensors, { id: "q", served_by: { batch_size: 8 } });
    expect(byteLength).toBe(whole.byteLength);
    expect(Buffer.concat(parts.map((p) => Buffer.from(p.buffer, p.byteOffset, p.byteLength)))).toEqual(Buffer.from(whole));
    // The tensors' bytes are theirs: views of the same memory.
    expect(parts.some((p) => p.buffer === big.buffer && p.byteOffset === big.byteOffset && p.byteLength === big.byteLength)).toBe(true);
    expect(parts.some((p) => p.buffer === a.buffer)).toBe(true);
    // Padding is zeros, and never shared with a tensor's memory.
    const { tensors: back } = decodeTensors(new Uint8Array(Buffer.concat(parts)));
    expect(Array.from(back[2]!.data as Float32Array)).toEqual(Array.from(big));
  });

  it("wire - decodes a message that sits at an odd offset inside a larger Node Buffer", () => {
    const bytes = encodeTensors([{ name: "x", datatype: "FP32", shape: [3], data: new Float32Array([1, 2, 3]) }]);
    // A network read buffer: the message starts at byte 51 of a pooled slab.
    const slab = Buffer.alloc(bytes.length + 100, 0xab);
    slab.set(bytes, 51);
    const view = slab.subarray(51, 51 + bytes.length);
    const { tensors } = decodeTensors(view);
    expect(Array.from(tensors[0]!.data as Float32Array)).toEqual([1, 2, 3]);
  });

  it("wire - rejects malformed messages with bad_request", () => {
    expect(() => decodeWireMeta(new Uint8Array([1, 2]))).toThrow("malformed binary tensor message: shorter than its header");
    const liar = new Uint8Array(8);
    new DataView(liar.buffer).setUint32(0, 1000, true);
    expect(() => decodeWireMeta(liar)).toThrow("meta runs past the end");
    const truncated = encodeTensors([{ name: "x", datatype: "FP32", shape: [4], data: new Float32Array(4) }]).subarray(0, 20);
    try {
      decodeTensors(truncated);
      expect.unreachable();
    } catch (err) {
      expect(err).toBeInstanceOf(ServeError);
      expect((err as ServeError).code).toBe("bad_request");
    }
  });
});
