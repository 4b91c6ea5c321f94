import { ErrorCode, ServeError } from "./errors.js";
import { bytesPerElement, isDatatype, viewOf, type Tensor, type Datatype } from "./tensors.js";

/**
 * The binary encoding of tensors on the bus ("wire"): one buffer per message,
 *
 *   [u32 LE: meta length][meta: UTF-8 JSON][padding to 8][tensor 0 bytes][pad to 8][tensor 1 bytes]…
 *
 * meta = { tensors: [{ name, datatype, shape, byteLength }], ...extra fields }.
 * Tensor bytes are little-endian element arrays; decoding makes views, not copies, where aligned.
 * JSON numbers cost ~10× more to parse than raw floats, so the frontend converts once at the edge.
 */

export interface WireTensorMeta {
  name: string;
  datatype: Datatype;
  shape: number[];
  byteLength: number;
}

const encoder = new TextEncoder();
const decoder = new TextDecoder();
const align8 = (n: number): number => (n + 7) & ~7;

/** The header of a message: [u32 LE: meta length][meta][padding to 8]. */
function wireHead(tensors: readonly Tensor[], extra: Record<string, unknown>): Uint8Array {
  const metas: WireTensorMeta[] = tensors.map((t) => ({ name: t.name, datatype: t.datatype, shape: t.shape, byteLength: t.data.byteLength }));
  const metaBytes = encoder.encode(JSON.stringify({ ...extra, tensors: metas }));
  const head = new Uint8Array(align8(4 + metaBytes.length));
  new DataView(head.buffer).setUint32(0, metaBytes.length, true);
  head.set(metaBytes, 4);
  return head;
}

const bytesOf = (t: Tensor): Uint8Array => new Uint8Array(t.data.buffer, t.data.byteOffset, t.data.byteLength);

export function encodeTensors(tensors: readonly Tensor[], extra: Record<string, unknown> = {}): Uint8Array {
  const { parts, byteLength } = encodeTensorParts(tensors, extra);
  return concatParts(parts, byteLength);
}

/** Pieces written one after the other into one buffer of `byteLength` bytes. */
export function concatParts(parts: readonly Uint8Array[], byteLength: number): Uint8Array {
  const out = new Uint8Array(byteLength);
  let offset = 0;
  for (const part of parts) {
    out.set(part, offset);
    offset += part.byteLength;
  }
  return out;
}

/** Zeros for the padding after a tensor (at most 7 bytes); shared, never written. */
const PADDING = new Uint8Array(8);

/**
 * {@link encodeTensors} in pieces, without copying the tensors: the header, then each tensor's bytes
 * as a view of its data, followed by its padding. Written one after the other they are exactly
 * encodeTensors' bytes (`byteLength` in all): a large answer (ocr-rec's 1 MB) goes from the engine's
 * output to the socket without being copied into a message first (libs/bus publishParts).
 */
export function encodeTensorParts(tensors: readonly Tensor[], extra: Record<string, unknown> = {}): { parts: Uint8Array[]; byteLength: number } {
  const head = wireHead(tensors, extra);
  const parts: Uint8Array[] = [head];
  let byteLength = head.byteLength;
  for (const t of tensors) {
    const n = t.data.byteLength;
    if (n > 0) parts.push(bytesOf(t));
    if (align8(n) > n) parts.push(PADDING.subarray(0, align8(n) - n));
    byteLength += align8(n);
  }
  return { parts, byteLength };
}

export interface DecodedWire<M> {
  meta: M & { tensors: WireTensorMeta[] };
  tensors: Tensor[];
}

function malformed(why: string): ServeError {
  return new ServeError(ErrorCode.badRequest, `malformed binary tensor message: ${why}`);
}

/** Reads only the meta of a wire message (cheap: no tensor data is touched). */
export function decodeWireMeta<M = Record<string, unknown>>(bytes: Uint8Array): { meta: M & { tensors: WireTensorMeta[] }; dataOffset: number } {
  if (bytes.length < 4) throw malformed("shorter than its header");
  const metaLength = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength).getUint32(0, true);
  if (4 + metaLength > bytes.length) throw malformed("meta runs past the end");
  let meta: M & { tensors: WireTensorMeta[] };
  try {
    meta = JSON.parse(decoder.decode(bytes.subarray(4, 4 + metaLength)));
  } catch {
    throw malformed("meta is not JSON");
  }
  if (!meta || typeof meta !== "object" || !Array.isArray(meta.tensors)) throw malformed("meta has no tensors list");
  for (const t of meta.tensors) {
    if (!t || typeof t.name !== "string" || !isDatatype(t.datatype) || !Array.isArray(t.shape) || !t.shape.every((d) => Number.isInteger(d) && d >= 0) || !Number.isInteger(t.byteLength)) {
      throw malformed("a tensor entry lacks name, datatype, shape or byteLength");
    }
  }
  return { meta, dataOffset: align8(4 + metaLength) };
}

export function decodeTensors<M = Record<string, unknown>>(bytes: Uint8Array): DecodedWire<M> {
  const { meta, dataOffset } = decodeWireMeta<M>(bytes);
  let offset = dataOffset;
  const tensors: Tensor[] = [];
  for (const t of meta.tensors) {
    const width = bytesPerElement(t.datatype);
    if (t.byteLength % width !== 0) throw malformed(`tensor '${t.name}' byte length ${t.byteLength} is not a multiple of ${width}`);
    if (offset + t.byteLength > bytes.length) throw malformed(`tensor '${t.name}' runs past the end`);
    tensors.push({ name: t.name, datatype: t.datatype, shape: t.shape, data: viewOf(t.datatype, bytes, offset, t.byteLength / width) });
    offset += align8(t.byteLength);
  }
  return { meta, tensors };
}
