import { Socket } from "node:net";
import type { MsgHdrs, NatsConnection } from "@nats-io/transport-node";
import { concatParts } from "@sloserve/contracts";

/**
 * Large messages out without copies (bench/README.md, "the data path"). nats.js 3 queues each outgoing
 * message as its pieces (protocol line, headers, payload, CRLF) and, when it flushes, concatenates
 * everything queued into one new buffer before the socket write: a copy of every byte sent (for an
 * ocr-rec answer, 1 MB per query, on top of the copy that put the answer into one message). Here:
 *
 * - {@link writeQueuedInPieces}: the connection's flush hands the queued pieces to the socket as they
 *   are (one corked write, a writev), instead of concatenating them;
 * - {@link publishParts}: a message published as several pieces (a wire header and views of the
 *   tensors, libs/contracts encodeTensorParts), so that an answer goes from the engine's output to the
 *   socket without being copied in user space.
 *
 * Both use parts of nats.js that are not its public API (checked before use: with another version they
 * do nothing, and publishParts concatenates and publishes as before).
 */

/** What this module uses of nats.js 3's ProtocolHandler. */
interface Protocol {
  outbound: { buffers: Uint8Array[]; byteLength: number };
  transport?: { socket?: unknown; isClosed?: boolean };
  infoReceived: boolean;
  connected: boolean;
  info?: { headers?: boolean; max_payload?: number };
  outBytes: number;
  outMsgs: number;
  sendCommand(cmd: string | Uint8Array, ...payloads: Uint8Array[]): void;
  flushPending(): void;
}

type Internals = { protocol?: Partial<Protocol>; _check?: (subject: string, sub: boolean, pub: boolean) => void };

function protocolOf(nc: NatsConnection): Protocol | undefined {
  const p = (nc as unknown as Internals).protocol;
  if (!p || typeof p.sendCommand !== "function" || typeof p.flushPending !== "function") return undefined;
  if (!p.outbound || !Array.isArray(p.outbound.buffers) || typeof p.outbound.byteLength !== "number") return undefined;
  if (typeof p.outBytes !== "number" || typeof p.outMsgs !== "number") return undefined;
  return p as Protocol;
}

const inPieces = new WeakSet<object>();

/** What a flush writes as pieces from this many queued bytes on; less is concatenated, as nats.js does. */
const PIECES_FROM_BYTES = 64 * 1024;

/**
 * Makes the connection write what it has queued without concatenating it first (see above). Returns
 * whether it could (false: this nats.js is not the one this was written for; nothing changed).
 */
export function writeQueuedInPieces(nc: NatsConnection): boolean {
  return replaceFlush(nc, inPieces, (p, concatenating) => function flushPending(): void {
    const socket = p.transport?.socket;
    const queued = p.outbound.buffers;
    // One piece is written as it is anyway, and small ones are cheaper to copy together than to hand
    // to the socket one by one (the tiny model's messages); anything unusual goes the original way.
    if (queued.length < 2 || p.outbound.byteLength < PIECES_FROM_BYTES || !p.infoReceived || !p.connected || p.transport?.isClosed || !(socket instanceof Socket) || socket.destroyed) {
      concatenating();
      return;
    }
    const pieces = queued.splice(0);
    p.outbound.byteLength = 0;
    // Write errors surface as the socket's "error" event, which the transport handles (as it ignores
    // the write callbacks' errors).
    socket.cork();
    for (const piece of pieces) socket.write(piece);
    socket.uncork();
  });
}

/**
 * Replaces the connection's flush with `wrap(p, the flush it had)`, once per connection for each
 * `done`; false when this nats.js is not the one this was written for (nothing changed).
 */
function replaceFlush(nc: NatsConnection, done: WeakSet<object>, wrap: (p: Protocol, flush: () => void) => () => void): boolean {
  const p = protocolOf(nc);
  if (!p) return false;
  if (!done.has(p)) {
    done.add(p);
    p.flushPending = wrap(p, p.flushPending.bind(p));
  }
  return true;
}

const coalescing = new WeakSet<object>();

/**
 * Makes the connection write what it queued once per turn of the event loop (a `setImmediate`) instead
 * of once per microtask checkpoint, as nats.js does (it flushes in a microtask after the first message
 * queued). Node runs the microtasks after each I/O callback, so a frontend answering many HTTP requests
 * that arrived together wrote one socket write per query to NATS: a syscall each (on loopback the whole
 * TCP path, in the frontend and again in nats-server's read), 13% of the frontend's CPU under HTTP load
 * (bench/README.md, "HTTP frontend CPU"). Deferred to the check phase, the requests of one poll go out
 * in one write; alone, a request waits only for the other callbacks of its poll (none when idle).
 * Every flush is deferred, nats.js's own (its PING of `flush()`, the 32 kB threshold) too: they are
 * writes of what is queued, never a promise that it is on the socket. Call after
 * {@link writeQueuedInPieces} (it then defers that flush). Returns whether it could (false: this nats.js
 * is not the one this was written for; nothing changed).
 */
export function coalesceWrites(nc: NatsConnection): boolean {
  return replaceFlush(nc, coalescing, (_p, flushNow) => {
    let scheduled = false;
    const flush = (): void => {
      scheduled = false;
      flushNow();
    };
    return function flushPending(): void {
      if (scheduled) return;
      scheduled = true;
      setImmediate(flush);
    };
  });
}

const CRLF = new Uint8Array([13, 10]);

/** Payloads from this size on are worth aligning ({@link alignPayload}): a smaller copy costs less than the bytes. */
export const ALIGN_FROM_BYTES = 16 * 1024;

/** The header that {@link alignPayload} adds; its value is only padding. */
export const PAD_HEADER = "x-pad";

/**
 * Pads a message's headers (with {@link PAD_HEADER}) to a multiple of 8 bytes, so that the payload
 * after them starts 8-aligned in the receiver's buffer: nats.js reads a large message (any that spans
 * socket reads) into a buffer of its own that starts with the headers, and a binary tensor message's
 * tensors are 8-aligned within the payload, so they are then read in place instead of copied
 * (libs/contracts viewOf copies a misaligned tensor: 1 MB per ocr-rec answer). Returns `h`.
 */
export function alignPayload(h: MsgHdrs): MsgHdrs {
  const encode = (h as MsgHdrs & { encode?: () => Uint8Array }).encode;
  if (typeof encode !== "function") return h;
  h.set(PAD_HEADER, "0");
  const short = (8 - (encode.call(h).length % 8)) % 8;
  if (short > 0) h.set(PAD_HEADER, "0".repeat(1 + short));
  return h;
}

/**
 * Publishes one message given as pieces (`byteLength` bytes in all, written in order) with headers,
 * as `nc.publish` would the pieces concatenated: same checks, same errors. With a connection that
 * {@link writeQueuedInPieces}, no byte of the pieces is copied before the socket write.
 */
export function publishParts(nc: NatsConnection, subject: string, parts: readonly Uint8Array[], byteLength: number, options: { headers: MsgHdrs }): void {
  const p = protocolOf(nc);
  const check = (nc as unknown as Internals)._check;
  const encode = (options.headers as MsgHdrs & { encode?: () => Uint8Array }).encode;
  const hdrs = typeof encode === "function" ? encode.call(options.headers) : undefined;
  const total = (hdrs?.length ?? 0) + byteLength;
  if (!p || !hdrs || typeof check !== "function" || p.info?.headers !== true || p.info.max_payload === undefined || total > p.info.max_payload || parts.length < 2) {
    nc.publish(subject, parts.length === 1 ? (parts[0] as Uint8Array) : concatParts(parts, byteLength), options);
    return;
  }
  check.call(nc, subject, false, true);
  p.outBytes += total;
  p.outMsgs++;
  p.sendCommand(`HPUB ${subject} ${hdrs.length} ${total}\r\n`, hdrs, ...parts, CRLF);
}
