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

interface RequestOneProto {
  resolver(err: Error | null, msg: unknown): void;
  cancel(err?: Error): void;
}

let answeredPatched = false;

/**
 * No Error made for every request answered. nats.js 3's request (`RequestOne`), once a reply has
 * settled its promise, calls its `cancel()`, which rejects that settled promise (a no-op) with a new
 * `RequestError("cancelled")`: an Error with its stack trace captured, ~3 µs here, for every query the
 * frontend sends and every JetStream publish (its PubAck is a request), 1-4% of the frontend's CPU
 * under HTTP load (bench/README.md, "HTTP frontend CPU"). Here the `cancel()` that settling a request
 * calls gets one error made once; any other cancel (a closed connection, a failed publish) makes its
 * own as before. Were a later nats.js to call it before settling, the request would fail with that
 * shared error (a RequestError "cancelled" as before, its stack not the caller's). Uses parts of
 * nats.js that are not its public API (checked: with another version it changes nothing). Returns
 * whether it could.
 */
export function answerRequestsWithoutErrors(): boolean {
  if (answeredPatched) return true;
  type Internal = { RequestOne?: { prototype: RequestOneProto }; RequestError?: new (message: string) => Error; default?: Internal };
  const mod = internal as unknown as Internal;
  const { RequestOne, RequestError } = mod.RequestOne ? mod : (mod.default ?? {});
  const proto = RequestOne?.prototype;
  if (!proto || !RequestError || typeof proto.resolver !== "function" || typeof proto.cancel !== "function") return false;
  const { resolver, cancel } = proto;
  const settled = new RequestError("cancelled");
  let settling: RequestOneProto | undefined;
  proto.resolver = function (this: RequestOneProto, err: Error | null, msg: unknown): void {
    settling = this;
    try {
      resolver.call(this, err, msg);
    } finally {
      settling = undefined;
    }
  };
  proto.cancel = function (this: RequestOneProto, err?: Error): void {
    cancel.call(this, err ?? (settling === this ? settled : undefined));
  };
  answeredPatched = true;
  return true;
}
