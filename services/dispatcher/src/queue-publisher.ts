import { JetStreamApiError, type PubAck } from "@nats-io/jetstream";
import { createInbox, type Msg, type MsgHdrs, type NatsConnection } from "@nats-io/transport-node";
import { ALIGN_FROM_BYTES, alignPayload } from "@sloserve/bus";

/** What publishUntil needs: nats.js' JetStreamClient is one. */
export interface QueuePublisher {
  publish(subject: string, data: Uint8Array, options: { msgID: string; headers: MsgHdrs; timeout: number }): Promise<PubAck>;
}

/** The header JetStream reads a message id from (deduplication). */
const MSG_ID = "Nats-Msg-Id";
/** nats-server's JSNotEnabledForAccountErr: nats.js reports it as JetStreamNotEnabled too. */
const JS_NOT_ENABLED_FOR_ACCOUNT = 10039;

const decoder = new TextDecoder();

interface Waiting {
  subject: string;
  resolve: (ack: PubAck) => void;
  reject: (err: Error) => void;
  timer: NodeJS.Timeout;
}

function named(name: string, message: string, cause?: unknown): Error {
  const err = new Error(message, cause === undefined ? undefined : { cause });
  err.name = name;
  return err;
}

/**
 * JetStream publishes (a query onto its variant's queue) with their acknowledgements on one
 * subscription of this connection, answered by token.
 *
 * `js.publish` means the same, but goes through nats.js' `request`, whose every answered request
 * builds and throws away an Error with its stack trace (`RequestOne.resolver` → `cancel` →
 * `new RequestError("cancelled")`, whatever `noAsyncTraces` says): about a tenth of the dispatcher's
 * CPU on the query path (bench/README.md, "the data path"). The outcomes are js.publish's, with the
 * error names `isTransientPublishError` (publish-retry.ts) tells apart: no responder on the subject
 * (no stream, or the stream between leaders) is `JetStreamNotEnabled`, no acknowledgement in time is
 * `TimeoutError`, a refusal by the stream is a `JetStreamApiError` with the server's code and
 * description, and a closed connection throws as `nc.publish` does.
 */
export class AckedPublisher implements QueuePublisher {
  private readonly prefix: string;
  private readonly waiting = new Map<string, Waiting>();
  private next = 0;

  constructor(private readonly nc: NatsConnection) {
    this.prefix = `${createInbox()}.`;
    nc.subscribe(`${this.prefix}*`, {
      // An error of the subscription itself (none expected: every service may use _INBOX.>) leaves the publishes waiting to their timeouts.
      callback: (err, msg) => {
        if (!err && msg) this.answer(msg);
      },
    });
  }

  publish(subject: string, data: Uint8Array, options: { msgID: string; headers: MsgHdrs; timeout: number }): Promise<PubAck> {
    const token = (this.next++).toString(36);
    const timeoutMs = options.timeout;
    return new Promise<PubAck>((resolve, reject) => {
      const timer = setTimeout(() => {
        if (this.waiting.delete(token)) reject(named("TimeoutError", "timeout"));
      }, timeoutMs);
      this.waiting.set(token, { subject, resolve, reject, timer });
      try {
        options.headers.set(MSG_ID, options.msgID);
        // A large query's tensors are then read in place by the executor (libs/bus outbound.ts).
        if (data.byteLength >= ALIGN_FROM_BYTES) alignPayload(options.headers);
        this.nc.publish(subject, data, { reply: `${this.prefix}${token}`, headers: options.headers });
      } catch (err) {
        clearTimeout(timer);
        this.waiting.delete(token);
        reject(err as Error);
      }
    });
  }

  private answer(msg: Msg): void {
    const token = msg.subject.slice(this.prefix.length);
    const w = this.waiting.get(token);
    if (!w) return; // timed out already
    this.waiting.delete(token);
    clearTimeout(w.timer);
    if (msg.data.length === 0 && msg.headers?.code === 503) {
      w.reject(named("JetStreamNotEnabled", "jetstream is not enabled", named("NoRespondersError", `no responders: '${w.subject}'`)));
      return;
    }
    let ack: PubAck & { error?: { code: number; err_code: number; description: string } };
    try {
      ack = JSON.parse(decoder.decode(msg.data)) as typeof ack;
    } catch (err) {
      w.reject(err as Error);
      return;
    }
    if (ack.error) {
      const apiError = new JetStreamApiError(ack.error);
      w.reject(ack.error.err_code === JS_NOT_ENABLED_FOR_ACCOUNT ? named("JetStreamNotEnabled", apiError.message, apiError) : apiError);
      return;
    }
    if (!ack.stream) {
      w.reject(named("JetStreamError", "invalid ack response"));
      return;
    }
    ack.duplicate = ack.duplicate ? ack.duplicate : false;
    w.resolve(ack);
  }
}
