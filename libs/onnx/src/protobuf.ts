/**
 * A minimal protocol-buffers wire-format writer and reader (https://protobuf.dev/programming-guides/encoding/).
 *
 * Why hand-written rather than `protobufjs` or `onnx-proto`: ONNX export needs only four wire types
 * (varint, 32-bit, 64-bit, length-delimited), and the int8 rewrite must pass every field it does not
 * understand through unchanged, which a schema-less field reader does naturally while generated
 * classes drop or re-encode unknown fields. `protobufjs` is only a transitive dependency here (via
 * @grpc/proto-loader) and would add the onnx.proto schema as a runtime asset; this file is ~200 lines
 * and every model it writes is checked by loading it in onnxruntime (test/quantize.test.ts here,
 * libs/zoo/test/onnx.test.ts for the zoo's exporter).
 */

/** Wire types: 0 varint, 1 64-bit, 2 length-delimited, 5 32-bit (3/4, groups, are not supported). */
export type WireType = 0 | 1 | 2 | 5;

/** One field as read from the wire: a varint as bigint, any other wire type as its raw bytes. */
export interface ProtoField {
  readonly field: number;
  readonly wire: WireType;
  readonly value: bigint | Uint8Array;
}

const utf8 = new TextEncoder();
const utf8Decoder = new TextDecoder("utf-8", { fatal: true });

/** Appends protobuf fields to a growable buffer. Fields are written in call order. */
export class ProtoWriter {
  private buffer = new Uint8Array(64);
  private length = 0;

  private reserve(extra: number): void {
    if (this.length + extra <= this.buffer.length) return;
    let capacity = this.buffer.length * 2;
    while (capacity < this.length + extra) capacity *= 2;
    const grown = new Uint8Array(capacity);
    grown.set(this.buffer.subarray(0, this.length));
    this.buffer = grown;
  }

  private byte(value: number): void {
    this.reserve(1);
    this.buffer[this.length++] = value;
  }

  /** Writes a bare varint. Negative values are encoded as 64-bit two's complement (10 bytes). */
  private varint(value: number | bigint): void {
    let v = typeof value === "bigint" ? BigInt.asUintN(64, value) : value;
    if (typeof v === "number") {
      if (!Number.isSafeInteger(v)) throw new RangeError(`varint must be a safe integer, got ${v}`);
      if (v < 0) {
        v = BigInt.asUintN(64, BigInt(v));
      } else {
        while (v > 0x7f) {
          this.byte((v % 128) | 0x80);
          v = Math.floor(v / 128);
        }
        this.byte(v);
        return;
      }
    }
    while (v > 0x7fn) {
      this.byte(Number(v & 0x7fn) | 0x80);
      v >>= 7n;
    }
    this.byte(Number(v));
  }

  private tag(field: number, wire: WireType): void {
    this.varint(field * 8 + wire);
  }

  /** int32 / int64 / enum / bool field (varint). */
  int(field: number, value: number | bigint): this {
    this.tag(field, 0);
    this.varint(value);
    return this;
  }

  /** float field (32-bit little-endian IEEE 754). */
  float(field: number, value: number): this {
    this.tag(field, 5);
    this.reserve(4);
    new DataView(this.buffer.buffer, this.buffer.byteOffset).setFloat32(this.length, value, true);
    this.length += 4;
    return this;
  }

  /** bytes field. */
  bytes(field: number, value: Uint8Array): this {
    this.tag(field, 2);
    this.varint(value.length);
    this.reserve(value.length);
    this.buffer.set(value, this.length);
    this.length += value.length;
    return this;
  }

  /** string field (UTF-8). */
  string(field: number, value: string): this {
    return this.bytes(field, utf8.encode(value));
  }

  /** Embedded message field. */
  message(field: number, value: ProtoWriter | Uint8Array): this {
    return this.bytes(field, value instanceof ProtoWriter ? value.finish() : value);
  }

  /** Re-emits a field read by {@link readFields} unchanged. */
  raw(f: ProtoField): this {
    this.tag(f.field, f.wire);
    if (f.wire === 0) {
      this.varint(f.value as bigint);
    } else if (f.wire === 2) {
      const bytes = f.value as Uint8Array;
      this.varint(bytes.length);
      this.reserve(bytes.length);
      this.buffer.set(bytes, this.length);
      this.length += bytes.length;
    } else {
      const bytes = f.value as Uint8Array;
      this.reserve(bytes.length);
      this.buffer.set(bytes, this.length);
      this.length += bytes.length;
    }
    return this;
  }

  /** The encoded bytes (a copy). */
  finish(): Uint8Array {
    return this.buffer.slice(0, this.length);
  }
}

/** Reads a varint at `pos`; returns the value and the position after it. */
export function readVarint(bytes: Uint8Array, pos: number): [bigint, number] {
  let result = 0n;
  let shift = 0n;
  for (;;) {
    if (pos >= bytes.length) throw new Error("protobuf: truncated varint");
    const b = bytes[pos++]!;
    result |= BigInt(b & 0x7f) << shift;
    if ((b & 0x80) === 0) return [result, pos];
    shift += 7n;
    if (shift > 63n) throw new Error("protobuf: varint longer than 10 bytes");
  }
}

/** Splits an encoded message into its fields, in wire order. Views share memory with `bytes`. */
export function readFields(bytes: Uint8Array): ProtoField[] {
  const fields: ProtoField[] = [];
  let pos = 0;
  while (pos < bytes.length) {
    const [key, afterKey] = readVarint(bytes, pos);
    pos = afterKey;
    const field = Number(key >> 3n);
    const wire = Number(key & 7n);
    if (field === 0) throw new Error("protobuf: field number 0");
    if (wire === 0) {
      const [value, next] = readVarint(bytes, pos);
      fields.push({ field, wire, value });
      pos = next;
    } else if (wire === 1 || wire === 5) {
      const width = wire === 1 ? 8 : 4;
      if (pos + width > bytes.length) throw new Error("protobuf: truncated fixed-width field");
      fields.push({ field, wire, value: bytes.subarray(pos, pos + width) });
      pos += width;
    } else if (wire === 2) {
      const [length, start] = readVarint(bytes, pos);
      const end = start + Number(length);
      if (end > bytes.length) throw new Error("protobuf: truncated length-delimited field");
      fields.push({ field, wire, value: bytes.subarray(start, end) });
      pos = end;
    } else {
      throw new Error(`protobuf: unsupported wire type ${wire} (field ${field})`);
    }
  }
  return fields;
}

/** A varint field's value as a signed 64-bit number (ONNX int64 / int32 / enum). */
export function fieldInt(f: ProtoField): number {
  if (f.wire !== 0) throw new Error(`protobuf: field ${f.field} is not a varint`);
  return Number(BigInt.asIntN(64, f.value as bigint));
}

/** A length-delimited field's bytes. */
export function fieldBytes(f: ProtoField): Uint8Array {
  if (f.wire !== 2) throw new Error(`protobuf: field ${f.field} is not length-delimited`);
  return f.value as Uint8Array;
}

/** A length-delimited field as UTF-8 text. */
export function fieldString(f: ProtoField): string {
  return utf8Decoder.decode(fieldBytes(f));
}

/** The values of a repeated integer field that may be packed (wire 2) or not (wire 0). */
export function fieldInts(f: ProtoField): number[] {
  if (f.wire === 0) return [fieldInt(f)];
  const bytes = fieldBytes(f);
  const values: number[] = [];
  let pos = 0;
  while (pos < bytes.length) {
    const [v, next] = readVarint(bytes, pos);
    values.push(Number(BigInt.asIntN(64, v)));
    pos = next;
  }
  return values;
}
