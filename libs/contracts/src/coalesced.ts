import { ErrorCode, ServeError } from "./errors.js";
import { decodeWireMeta, encodeTensorParts } from "./wire.js";

/**
 * Several queries for one variant in one queue message (docs/ARCHITECTURE.md "The query path"): the
 * dispatcher coalesces the small queries it has pending for a variant into one JetStream message, and
 * the executor unpacks it into queries that join the variant's batching one by one. The message is in
 * the binary tensor encoding (wire.ts): its meta lists each query's headers (what a one-query message
 * carries as NATS headers: x-reply-to, x-deadline-ms, x-request-id, …), and its tensors are the
 * queries' own wire payloads as UINT8 tensors, in the same order, each starting 8-aligned (so a
 * query's tensors stay 8-aligned within the message and are read in place where the message is).
 * The message's NATS header `x-queries` (headers.queries) says how many it carries.
 */

/** One query of a coalesced message: its headers (name → value) and its wire payload. */
export interface CoalescedQuery {
  headers: Record<string, string>;
  payload: Uint8Array;
}

/** A coalesced message in pieces (the payloads are views, not copies), `byteLength` bytes in all. */
export function encodeCoalesced(queries: readonly CoalescedQuery[]): { parts: Uint8Array[]; byteLength: number } {
  return encodeTensorParts(
    queries.map((q, i) => ({ name: String(i), datatype: "UINT8", shape: [q.payload.byteLength], data: q.payload })),
    { queries: queries.map((q) => q.headers) },
  );
}

function malformed(why: string): ServeError {
  return new ServeError(ErrorCode.badRequest, `malformed coalesced queue message: ${why}`);
}

/** The queries of a coalesced message; their payloads are views of `bytes`. Throws a ServeError (bad_request) when it is not one. */
export function decodeCoalesced(bytes: Uint8Array): CoalescedQuery[] {
  const { meta, dataOffset } = decodeWireMeta<{ queries?: unknown }>(bytes);
  const list = meta.queries;
  if (!Array.isArray(list) || list.length !== meta.tensors.length) throw malformed("its queries do not match its tensors");
  const out: CoalescedQuery[] = [];
  let offset = dataOffset;
  for (let i = 0; i < list.length; i++) {
    const h = list[i] as unknown;
    const t = meta.tensors[i] as { byteLength: number };
    if (!h || typeof h !== "object" || Array.isArray(h) || !Object.values(h).every((v) => typeof v === "string")) throw malformed(`query ${i} has no headers`);
    if (offset + t.byteLength > bytes.length) throw malformed(`query ${i} runs past the end`);
    out.push({ headers: h as Record<string, string>, payload: bytes.subarray(offset, offset + t.byteLength) });
    offset += (t.byteLength + 7) & ~7;
  }
  return out;
}
