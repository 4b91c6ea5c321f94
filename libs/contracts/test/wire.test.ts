import { describe, expect, it } from "vitest";
import { encodeTensors, encodeTensorParts, encodeTensorPartsWithFields, concatParts, decodeTensors, decodeWireMeta, alignedTo8, WireMetaCache, ServeError } from "../src/index.js";

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
  it("wire - encodeTensorPartsWithFields writes the bytes encodeTensorParts writes for the same fields", () => {
    const tensors = [
      { name: "logits", datatype: "FP32" as const, shape: [1, 10], data: new Float32Array(10).fill(0.5) },
      { name: "label", datatype: "INT64" as const, shape: [1], data: new BigInt64Array([7n]) },
    ];
    const cases: Array<Record<string, unknown>> = [{}, { id: "q-ü" }, { a: 1, b: { c: [1, null] }, d: undefined }, { tensors: "a field named tensors", x: 1 }];
    for (const extra of cases) {
      const want = encodeTensors(tensors, extra);
      const { parts, byteLength } = encodeTensorPartsWithFields(tensors, JSON.stringify(extra));
      expect(Buffer.from(concatParts(parts, byteLength)).equals(Buffer.from(want))).toBe(true);
      // Another shape between two answers: the tensors' list is not taken from the last one.
      const other = [{ name: "logits", datatype: "FP32" as const, shape: [2, 5], data: new Float32Array(10) }];
      expect(decodeWireMeta(encodeTensors(other, extra)).meta.tensors[0]!.shape).toEqual([2, 5]);
    }
    // A field named tensors is replaced by the list, as {...extra, tensors} does.
    expect(decodeWireMeta(encodeTensors(tensors, { tensors: "x" })).meta.tensors).toHaveLength(2);
  });

  it("wire - a WireMetaCache hands out the meta of the same bytes again, frozen, and parses other bytes anew", () => {
    const cache = new WireMetaCache();
    const one = encodeTensors([{ name: "x", datatype: "FP32", shape: [1, 2], data: new Float32Array([1, 2]) }]);
    const a = decodeTensors(one, cache);
    const b = decodeTensors(new Uint8Array(one), cache);
    expect(b.meta).toBe(a.meta);
    expect(Object.isFrozen(b.tensors[0]!.shape)).toBe(true);
    expect(Array.from(b.tensors[0]!.data as Float32Array)).toEqual([1, 2]);
    const other = decodeTensors(encodeTensors([{ name: "x", datatype: "FP32", shape: [1, 3], data: new Float32Array([1, 2, 3]) }], { id: "q" }), cache);
    expect(other.meta).not.toBe(a.meta);
    expect(other.tensors[0]!.shape).toEqual([1, 3]);
    // A meta with a request id is not kept: the last one without stays.
    expect(Object.isFrozen(other.meta)).toBe(false);
    expect(decodeTensors(one, cache).meta).toBe(a.meta);
    // A cached meta does not spare the checks of the data: a truncated message still fails.
    expect(() => decodeTensors(one.subarray(0, one.length - 4), cache)).toThrow("runs past the end");
    // Malformed metas are never cached.
    const bad = new Uint8Array(16);
    new DataView(bad.buffer).setUint32(0, 4, true);
    bad.set([123, 125, 32, 32], 4);
    expect(() => decodeWireMeta(bad, cache)).toThrow("meta has no tensors list");
    expect(() => decodeWireMeta(bad, cache)).toThrow("meta has no tensors list");
  });

  it("wire - alignedTo8: an aligned message as it is, a misaligned one copied to an aligned start", () => {
    const bytes = encodeTensors([{ name: "x", datatype: "FP32", shape: [3], data: new Float32Array([1, 2, 3]) }]);
    expect(alignedTo8(bytes)).toBe(bytes);
    const slab = Buffer.alloc(bytes.length + 8);
    slab.set(bytes, 3);
    const view = slab.subarray(3, 3 + bytes.length);
    const copy = alignedTo8(view);
    expect(copy.byteOffset % 8).toBe(0);
    expect(copy.buffer).not.toBe(slab.buffer);
    expect(Array.from(decodeTensors(copy).tensors[0]!.data as Float32Array)).toEqual([1, 2, 3]);
  });
});
