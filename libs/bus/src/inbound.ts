import * as internal from "@nats-io/nats-core/internal";

/**
 * Large messages in with one buffer (bench/README.md, "the data path"). nats.js 3 reads a message
 * that spans socket reads into a growing buffer that starts at the size of the first read and doubles
 * (2 × capacity + what comes) as the rest arrives: for ocr-rec's 1 MB answer, ~3.4 MB allocated and
 * ~1.5 MB copied on top of the message itself, for every answer the frontend receives. Here the
 * buffer is grown once, to the message's size, as soon as the parser knows it (its protocol line has
 * it); the reading is nats.js's as before. Uses parts of nats.js that are not its public API (checked:
 * with another version it changes nothing).
 */

interface GrowableBuffer {
  length: number;
  capacity: number;
  grow(n: number): void;
}

interface ParserState {
  state: number;
  msgBuf?: GrowableBuffer;
  ma?: { size: number };
  parse(buf: Uint8Array): void;
}

let patched = false;

/** Makes every nats.js connection of this process size a large incoming message's buffer once (see above). Returns whether it could. */
export function readLargeMessagesWhole(): boolean {
  if (patched) return true;
  type Internal = { Parser?: { prototype: ParserState }; State?: Record<string, number>; default?: Internal };
  const mod = internal as unknown as Internal;
  const { Parser, State } = mod.Parser ? mod : (mod.default ?? {});
  const payload = State?.MSG_PAYLOAD;
  const proto = Parser?.prototype;
  if (!proto || typeof proto.parse !== "function" || typeof payload !== "number") return false;
  const parse = proto.parse;
  proto.parse = function (this: ParserState, buf: Uint8Array): void {
    parse.call(this, buf);
    // Still in a message's payload: the rest comes with later reads. Room for all of it, once.
    const msgBuf = this.msgBuf;
    if (this.state !== payload || !msgBuf || !this.ma) return;
    const missing = this.ma.size - msgBuf.length;
    if (missing > 0 && msgBuf.capacity - msgBuf.length < missing && typeof msgBuf.grow === "function") msgBuf.grow(missing);
  };
  patched = true;
  return true;
}
