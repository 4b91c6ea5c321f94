import { concatParts, encodeCoalesced, headers as headerNames, type Clock } from "@sloserve/contracts";
import { ALIGN_FROM_BYTES, makeHeaders } from "@sloserve/bus";
import { publishUntil } from "./publish-retry.js";
import type { QueuePublisher } from "./queue-publisher.js";

/**
 * Micro-batches on the bus (docs/ARCHITECTURE.md "The query path"): the queries pending for one
 * variant go onto its JetStream queue as one message, so that the bus's durable hop (publish, store,
 * pull, ack: about as costly for 8 small queries as for one) is paid per message, not per query.
 *
 * It never waits on a timer: a query is published at the next turn of the event loop (setImmediate)
 * with what else arrived for its variant in the same turn, or, while {@link COALESCE_IN_FLIGHT} of
 * the variant's publishes await their acknowledgements, when the first of those comes, with what
 * arrived meanwhile. A message
 * holds at most the variant's max batch of queries and {@link COALESCED_MAX_BYTES}; a query of
 * {@link ALIGN_FROM_BYTES} or more is published alone as before (its tensors are read in place by
 * the executor: libs/bus outbound.ts), and so is a query found alone.
 *
 * The routing and overflow decisions were taken per query before (dispatch.ts); the executor unpacks
 * the message into its queries (libs/executor instance.ts), which are batched and answered one by one,
 * and acks the message once all are answered: a message whose replica dies is redelivered whole.
 */

/** Most bytes of queries in one coalesced message (nats-server's max_payload is 1 MB by default). */
export const COALESCED_MAX_BYTES = 64 * 1024;
/** What a query's headers add to a coalesced message, at most (for the byte limit). */
const HEADERS_BYTES = 512;
/**
 * Publishes per variant awaiting their acknowledgement at once; queries arriving beyond wait for one to
 * come back. The messages of one turn go out in one socket write: with 1, every acknowledgement
 * released one message and its own write (a loopback syscall in the dispatcher and a read in
 * nats-server per message). Measured side by side (bench/README.md, "Publishes in flight"): 4 takes
 * ~25% of the dispatcher's CPU per query out on the tiny model.
 */
export const COALESCE_IN_FLIGHT = 4;

interface Item {
  payload: Uint8Array;
  fields: Record<string, string>;
  msgID: string;
  deadlineMs: number;
  onRetry: QueuePublishOptions["onRetry"];
  resolve: (attempts: number) => void;
  reject: (err: unknown) => void;
}

interface Lane {
  subject: string;
  maxBatch: number;
  pending: Item[];
  inFlight: number;
  /** Of those in flight, the publishes being tried again (the stream between leaders): they hold nothing back. */
  retrying: number;
  scheduled: boolean;
}

export interface QueuePublishOptions {
  msgID: string;
  deadlineMs: number;
  /** The query's headers; undefined values are left out. */
  fields: Record<string, string | number | undefined>;
  onRetry?: (err: Error, attempt: number, delayMs: number) => void;
}

export class QueueCoalescer {
  private readonly lanes = new Map<string, Lane>();

  constructor(
    private readonly publisher: QueuePublisher,
    private readonly clock: Clock,
    /** Off: every query is its own message (QUEUE_COALESCE=false). */
    private readonly enabled: boolean,
  ) {}

  /** Puts one query on `subject` (a variant's queue); resolves with the publish attempts its message took, rejects as publishUntil does. */
  async publish(subject: string, maxBatch: number, payload: Uint8Array, options: QueuePublishOptions): Promise<number> {
    if (!this.enabled || maxBatch <= 1 || payload.byteLength >= ALIGN_FROM_BYTES) {
      const { attempts } = await publishUntil(this.publisher, subject, payload, { msgID: options.msgID, deadlineMs: options.deadlineMs, clock: this.clock, onRetry: options.onRetry, headers: makeHeaders(options.fields) });
      return attempts;
    }
    const fields: Record<string, string> = {};
    for (const [k, v] of Object.entries(options.fields)) if (v !== undefined) fields[k] = String(v);
    let lane = this.lanes.get(subject);
    if (!lane) {
      lane = { subject, maxBatch, pending: [], inFlight: 0, retrying: 0, scheduled: false };
      this.lanes.set(subject, lane);
    }
    lane.maxBatch = maxBatch;
    const l = lane;
    return new Promise<number>((resolve, reject) => {
      l.pending.push({ payload, fields, msgID: options.msgID, deadlineMs: options.deadlineMs, onRetry: options.onRetry, resolve, reject });
      this.schedule(l);
    });
  }

  private schedule(lane: Lane): void {
    if (lane.scheduled || !this.mayPublish(lane) || lane.pending.length === 0) return;
    lane.scheduled = true;
    setImmediate(() => {
      lane.scheduled = false;
      this.flush(lane);
    });
  }

  /**
   * Whether the next message may go now: fewer than COALESCE_IN_FLIGHT publishes await their first
   * acknowledgement. One being tried again does not count: the queries behind it go, and are tried
   * again, on their own deadlines (publish-retry.ts), as without coalescing.
   */
  private mayPublish(lane: Lane): boolean {
    return lane.inFlight - lane.retrying < COALESCE_IN_FLIGHT;
  }

  private flush(lane: Lane): void {
    while (lane.pending.length > 0 && this.mayPublish(lane)) {
      let n = 0;
      let bytes = 0;
      for (const item of lane.pending) {
        const size = item.payload.byteLength + HEADERS_BYTES;
        if (n >= lane.maxBatch || (n > 0 && bytes + size > COALESCED_MAX_BYTES)) break;
        n++;
        bytes += size;
      }
      const chunk = lane.pending.splice(0, n);
      lane.inFlight++;
      let retried = false;
      const onRetry = (): void => {
        if (retried) return;
        retried = true;
        lane.retrying++;
        this.schedule(lane);
      };
      void this.send(lane.subject, chunk, onRetry).finally(() => {
        lane.inFlight--;
        if (retried) lane.retrying--;
        if (lane.pending.length === 0 && lane.inFlight === 0) this.lanes.delete(lane.subject);
        else this.schedule(lane);
      });
    }
  }

  private async send(subject: string, chunk: Item[], retrying: () => void): Promise<void> {
    const first = chunk[0] as Item;
    const onRetry = (err: Error, attempt: number, delayMs: number): void => {
      retrying();
      first.onRetry?.(err, attempt, delayMs);
    };
    try {
      let attempts: number;
      if (chunk.length === 1) {
        ({ attempts } = await publishUntil(this.publisher, subject, first.payload, { msgID: first.msgID, deadlineMs: first.deadlineMs, clock: this.clock, onRetry, headers: makeHeaders(first.fields) }));
      } else {
        const { parts, byteLength } = encodeCoalesced(chunk.map((q) => ({ headers: q.fields, payload: q.payload })));
        // Tried again until the latest deadline of its queries (the executor sheds those past theirs);
        // the first query's message id, marked with the count, keeps one copy across attempts.
        ({ attempts } = await publishUntil(this.publisher, subject, concatParts(parts, byteLength), {
          msgID: `${first.msgID}+${chunk.length}`,
          deadlineMs: Math.max(...chunk.map((q) => q.deadlineMs)),
          clock: this.clock,
          onRetry,
          headers: makeHeaders({ [headerNames.queries]: chunk.length }),
        }));
      }
      for (const q of chunk) q.resolve(attempts);
    } catch (err) {
      for (const q of chunk) q.reject(err);
    }
  }
}
