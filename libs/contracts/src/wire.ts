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

const decoder = new TextDecoder();
const align8 = (n: number): number => (n + 7) & ~7;

/** The header of a message: [u32 LE: meta length][meta][padding to 8]. */
function wireHead(tensors: readonly Tensor[], extra: Record<string, unknown>): Uint8Array {
  return headOf(metaJson(JSON.stringify(extra), tensors));
}

/** The meta `{...fields, tensors: [{name, datatype, shape, byteLength}…]}` as JSON, from the fields' JSON (an object's). */
function metaJson(fieldsJson: string, tensors: readonly Tensor[]): string {
  if (fieldsJson.includes('"tensors":')) return JSON.stringify({ ...(JSON.parse(fieldsJson) as object), tensors: tensorsOf(tensors) });
  return fieldsJson.length > 2 ? `${fieldsJson.slice(0, -1)},"tensors":${tensorsJson(tensors)}}` : `{"tensors":${tensorsJson(tensors)}}`;
}

/**
 * The `tensors` list of the last header made, and its JSON: the answers of a variant (of one batch
 * above all) list the same outputs with the same shapes, so it is serialised once, not per answer
 * (issue 14: the executor's reply headers were 5-8% of its CPU on the tiny model).
 */
let lastTensors: WireTensorMeta[] = [];
let lastTensorsJson = "[]";

function tensorsJson(tensors: readonly Tensor[]): string {
  if (!sameTensorMetas(lastTensors, tensors)) {
    lastTensors = tensorsOf(tensors);
    lastTensorsJson = JSON.stringify(lastTensors);
  }
  return lastTensorsJson;
}

const tensorsOf = (tensors: readonly Tensor[]): WireTensorMeta[] => tensors.map((t) => ({ name: t.name, datatype: t.datatype, shape: [...t.shape], byteLength: t.data.byteLength }));

function sameTensorMetas(metas: readonly WireTensorMeta[], tensors: readonly Tensor[]): boolean {
  if (metas.length !== tensors.length) return false;
  for (let i = 0; i < metas.length; i++) {
    const m = metas[i] as WireTensorMeta;
    const t = tensors[i] as Tensor;
    if (m.name !== t.name || m.datatype !== t.datatype || m.byteLength !== t.data.byteLength || m.shape.length !== t.shape.length) return false;
    for (let d = 0; d < m.shape.length; d++) if (m.shape[d] !== t.shape[d]) return false;
  }
  return true;
}

/**
 * [u32 LE: length][meta][zeros to 8] for a meta's JSON. A small header is carved from Node's shared
 * pool (Buffer.allocUnsafe: no allocation of its own, 8-aligned), the padding zeroed by hand.
 */
function headOf(metaJson: string): Uint8Array {
  const length = Buffer.byteLength(metaJson);
  const size = align8(4 + length);
  const head = Buffer.allocUnsafe(size);
  head.writeUInt32LE(length, 0);
  head.write(metaJson, 4, "utf8");
  head.fill(0, 4 + length);
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
  return partsAfter(wireHead(tensors, extra), tensors);
}

/**
 * {@link encodeTensorParts} with the extra fields already serialised: `fieldsJson` is the JSON of an
 * object of them (`{"a":1,"b":"x"}`, or "{}"), whose fields come before `tensors` in the meta, as
 * encodeTensorParts(tensors, JSON.parse(fieldsJson)) would write them. For a sender that builds most
 * of its meta once (the executor's answers, libs/executor answer-meta.ts).
 */
export function encodeTensorPartsWithFields(tensors: readonly Tensor[], fieldsJson: string): { parts: Uint8Array[]; byteLength: number } {
  return partsAfter(headOf(metaJson(fieldsJson, tensors)), tensors);
}

function partsAfter(head: Uint8Array, tensors: readonly Tensor[]): { parts: Uint8Array[]; byteLength: number } {
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

/**
 * The last wire meta decoded with it, by its bytes: a message whose meta is the same, byte for byte
 * (a client's queries of one shape, without ids), is not parsed and checked again (issue 14: the
 * executor parsed every query's meta, ~6% of its CPU on the tiny model). What it hands out is frozen,
 * as every message that hits shares it.
 */
export class WireMetaCache {
  private bytes: Uint8Array | undefined;
  private meta: unknown;

  /** The meta decoded last from exactly `metaBytes`, if any. */
  get(metaBytes: Uint8Array): unknown {
    const last = this.bytes;
    if (!last || last.length !== metaBytes.length) return undefined;
    for (let i = 0; i < last.length; i++) if (last[i] !== metaBytes[i]) return undefined;
    return this.meta;
  }

  set(metaBytes: Uint8Array, meta: { tensors: WireTensorMeta[] }): void {
    // A meta with a request id is its query's own: it would never be met again, and keeping it would
    // cost every query of a client that sends ids a copy and a freeze for nothing.
    if ("id" in meta) return;
    for (const t of meta.tensors) Object.freeze(Object.freeze(t).shape);
    Object.freeze(Object.freeze(meta).tensors);
    // A copy (a Buffer's slice() would be a view, keeping the whole message alive).
    this.bytes = new Uint8Array(metaBytes);
    this.meta = meta;
  }
}

/** Reads only the meta of a wire message (cheap: no tensor data is touched). With a cache, the meta may be a shared, frozen object. */
export function decodeWireMeta<M = Record<string, unknown>>(bytes: Uint8Array, cache?: WireMetaCache): { meta: M & { tensors: WireTensorMeta[] }; dataOffset: number } {
  if (bytes.length < 4) throw malformed("shorter than its header");
  const metaLength = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength).getUint32(0, true);
  if (4 + metaLength > bytes.length) throw malformed("meta runs past the end");
  const metaBytes = bytes.subarray(4, 4 + metaLength);
  const dataOffset = align8(4 + metaLength);
  const known = cache?.get(metaBytes) as (M & { tensors: WireTensorMeta[] }) | undefined;
  if (known) return { meta: known, dataOffset };
  let meta: M & { tensors: WireTensorMeta[] };
  try {
    meta = JSON.parse(decoder.decode(metaBytes));
  } catch {
    throw malformed("meta is not JSON");
  }
  if (!meta || typeof meta !== "object" || !Array.isArray(meta.tensors)) throw malformed("meta has no tensors list");
  for (const t of meta.tensors) {
    if (!t || typeof t.name !== "string" || !isDatatype(t.datatype) || !Array.isArray(t.shape) || !t.shape.every((d) => Number.isInteger(d) && d >= 0) || !Number.isInteger(t.byteLength)) {
      throw malformed("a tensor entry lacks name, datatype, shape or byteLength");
    }
  }
  cache?.set(metaBytes, meta);
  return { meta, dataOffset };
}

/** The tensors of a wire message (views of `bytes` where aligned). With a cache ({@link WireMetaCache}), the meta and the tensors' shapes may be shared, frozen. */
export function decodeTensors<M = Record<string, unknown>>(bytes: Uint8Array, cache?: WireMetaCache): DecodedWire<M> {
  const { meta, dataOffset } = decodeWireMeta<M>(bytes, cache);
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

/**
 * `bytes`, or a copy of them that starts 8-aligned when they do not. The tensors of a wire message
 * (and the queries of a coalesced one) are 8-aligned within it, so in a message that starts aligned
 * they are read in place: one copy of a misaligned message instead of one per tensor (a fresh
 * allocation each, in viewOf).
 */
export function alignedTo8(bytes: Uint8Array): Uint8Array {
  // new Uint8Array(bytes) copies (a Buffer's slice() would be a view of the same bytes).
  return bytes.byteOffset % 8 === 0 ? bytes : new Uint8Array(bytes);
}
