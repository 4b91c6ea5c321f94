import type { PubAck } from "@nats-io/jetstream";
import type { MsgHdrs } from "@nats-io/transport-node";
import type { Clock } from "@sloserve/contracts";
import { backoffMs } from "@sloserve/bus";
import type { QueuePublisher } from "./queue-publisher.js";

/**
 * Putting a query on its JetStream queue when the stream may be between leaders (a NATS node of a
 * cluster lost: docs/RELIABILITY.md, test/fault-nats-cluster.test.ts). While the QUERIES stream has
 * no leader its subjects have no responder ("jetstream is not enabled"), and a publish sent to a
 * leader that is dying times out; a new leader is elected within nats-server's raft election timeout
 * (4-9 s measured). The publish is tried again with backoff while the query's deadline allows.
 *
 * Every attempt carries the same JetStream message id (Nats-Msg-Id): an attempt that was stored but
 * whose acknowledgement was lost is dropped by the stream's duplicate window (2 min, nats-server's
 * default) when the next attempt arrives, so the query is queued once. An answer `duplicate: true`
 * is that case, a success.
 */

/**
 * Longest one attempt waits for the stream's acknowledgement, ms (nats.js' default is 5 s): an attempt
 * that went to a dying leader is given up sooner. One that was only slow costs nothing: its retry is a
 * duplicate. The last attempt may end this long after the deadline; the caller has had its timeout.
 */
export const PUBLISH_ATTEMPT_TIMEOUT_MS = 2_000;

/** Wait before attempt `attempt + 1` (attempt 0 is the first retry): 50, 100, 200, 400, 800, then 1 000 ms. */
export function publishRetryDelayMs(attempt: number): number {
  return backoffMs(attempt, 50, 1_000);
}

/**
 * Whether a JetStream publish failed for a reason that passes: no responder on the subject (the
 * stream has no leader now; nats.js names it JetStreamNotEnabled), no acknowledgement in time, or the
 * server's "JetStream system temporarily unavailable" (API error code 10008). Anything else is final:
 * the stream full (also a 503 status, code 10077), a subject no stream takes, a closed connection.
 */
export function isTransientPublishError(err: unknown): boolean {
  const e = err as { name?: unknown; code?: unknown } | null;
  if (e?.name === "JetStreamNotEnabled" || e?.name === "TimeoutError") return true;
  return e?.name === "JetStreamApiError" && e.code === JS_CLUSTER_NOT_AVAILABLE;
}

/** nats-server's JSClusterNotAvailErr: "JetStream system temporarily unavailable". */
const JS_CLUSTER_NOT_AVAILABLE = 10008;

/** A publish that was given up: the last error, how many attempts were made, whether it was the deadline that ended them. */
export class PublishGaveUp extends Error {
  constructor(
    override readonly cause: Error,
    readonly attempts: number,
    readonly outOfTime: boolean,
  ) {
    super(outOfTime ? `${cause.message} (${attempts} attempts until the query's deadline)` : cause.message, { cause });
    this.name = "PublishGaveUp";
  }
}

export interface PublishUntilOptions {
  /** The JetStream message id every attempt carries (Nats-Msg-Id). */
  msgID: string;
  headers: MsgHdrs;
  /** No attempt starts at or after this time (epoch ms). */
  deadlineMs: number;
  clock: Clock;
  /** Called before each retry (for a log line). */
  onRetry?: (err: Error, attempt: number, delayMs: number) => void;
}

/**
 * Publishes `data` on `subject` until the stream acknowledges it, retrying transient failures
 * ({@link isTransientPublishError}) with {@link publishRetryDelayMs} backoff while a retry can still
 * start before `deadlineMs`. Resolves with the acknowledgement and the number of attempts; rejects
 * with {@link PublishGaveUp}.
 */
export async function publishUntil(js: QueuePublisher, subject: string, data: Uint8Array, options: PublishUntilOptions): Promise<{ ack: PubAck; attempts: number }> {
  for (let attempt = 1; ; attempt++) {
    try {
      const ack = await js.publish(subject, data, { msgID: options.msgID, headers: options.headers, timeout: PUBLISH_ATTEMPT_TIMEOUT_MS });
      return { ack, attempts: attempt };
    } catch (err) {
      const e = err instanceof Error ? err : new Error(String(err));
      if (!isTransientPublishError(e)) throw new PublishGaveUp(e, attempt, false);
      const delayMs = publishRetryDelayMs(attempt - 1);
      if (options.clock.now() + delayMs >= options.deadlineMs) throw new PublishGaveUp(e, attempt, true);
      options.onRetry?.(e, attempt, delayMs);
      await new Promise((r) => setTimeout(r, delayMs));
    }
  }
}
