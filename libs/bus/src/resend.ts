import type { Msg, MsgHdrs, NatsConnection } from "@nats-io/transport-node";
import { subjects } from "@sloserve/contracts";
import type { Logger } from "./log.js";

/**
 * Requests whose reply may have been lost with a NATS node, sent again.
 *
 * A query's request and its reply travel on core NATS (the query itself is durable on its JetStream
 * queue, and an executor that dies before acknowledging it is redelivered). Core NATS keeps nothing:
 * a request or a reply in flight on the connection of a node that dies is gone, and its caller would
 * wait until its deadline. In a full mesh a message passes through the publisher's and the
 * subscriber's servers only, so such a loss always comes with a connection that dropped: the
 * caller's own (a `disconnect`/`reconnect` status here) or a service's on the query path (the
 * dispatcher's, an executor's), which announces its reconnection on `events.bus.reconnected`
 * (`announceReconnects`).
 *
 * On either, every request still waiting is sent once more, with a new inbox (so the dispatcher's
 * JetStream message id differs and the query is queued again), while its deadline allows; the first
 * answer wins. A query may then run twice, only around a lost connection: inference is idempotent,
 * and at-least-once is the guarantee (docs/RELIABILITY.md). A resend that finds no responder (the
 * dispatcher not yet back on the cluster) is tried again every 250 ms.
 */

/** What a service announces after its connection came back (`events.bus.reconnected`). */
export interface ReconnectEvent {
  /** The connection's name (the service). */
  name: string;
  /** This connection's random id (a process ignores its own announcements). */
  connection: string;
  disconnected_at_ms: number;
  reconnected_at_ms: number;
}

export interface ResendOptions {
  /** Times one request is sent again at most. @default 3 */
  maxResends?: number;
  /** A copy is not sent again sooner than this after the last copy, ms (the first send is always sent again). @default 500 */
  minIntervalMs?: number;
  /** Wait before trying a resend again that found no responder, ms. @default 250 */
  noResponderRetryMs?: number;
  now?: () => number;
}

interface InFlight {
  resend(): void;
  lastSentMs: number;
  resends: number;
}

function isNoResponders(err: unknown): boolean {
  const e = err as { name?: string; message?: string } | null;
  return /no ?responders/i.test(`${e?.name ?? ""} ${e?.message ?? ""}`);
}

export class ResendingRequester {
  private readonly inFlight = new Set<InFlight>();
  private readonly maxResends: number;
  private readonly minIntervalMs: number;
  private readonly noResponderRetryMs: number;
  private readonly now: () => number;
  /** Requests sent again so far (metrics, tests). */
  resent = 0;
  private readonly host: RequestHost;

  constructor(
    private readonly nc: NatsConnection,
    private readonly log: Logger,
    options: ResendOptions = {},
  ) {
    this.maxResends = options.maxResends ?? 3;
    this.minIntervalMs = options.minIntervalMs ?? 500;
    this.noResponderRetryMs = options.noResponderRetryMs ?? 250;
    this.now = options.now ?? Date.now;
    this.host = { nc, now: this.now, noResponderRetryMs: this.noResponderRetryMs, inFlight: this.inFlight, countResend: () => this.resent++ };
  }

  /** Requests waiting for their reply now. */
  get waiting(): number {
    return this.inFlight.size;
  }

  /** While this connection is down: since when (this requester's clock). */
  private downSinceMs: number | undefined;

  /** Whether this connection is down now ({@link disconnected} without {@link reconnected} yet). */
  get isDisconnected(): boolean {
    return this.downSinceMs !== undefined;
  }

  /**
   * This connection dropped. nats.js clears what waits to be written at every attempt to dial again,
   * so every send from now until {@link reconnected} is discarded, the first sends of new requests
   * included; resends wait until then.
   */
  disconnected(): void {
    this.downSinceMs ??= this.now();
  }

  /**
   * This connection is back: every request whose last copy went out while it was down (and so was
   * discarded) is sent again, whatever its spacing and count; the others as {@link resendWaiting}
   * (the reply of one sent before the drop may have been lost with it). Returns how many were sent.
   */
  reconnected(reason: string): number {
    const since = this.downSinceMs;
    this.downSinceMs = undefined;
    let n = 0;
    for (const f of this.inFlight) {
      const discarded = since !== undefined && f.lastSentMs >= since;
      if (!discarded && (f.resends >= this.maxResends || (f.resends > 0 && this.now() - f.lastSentMs < this.minIntervalMs))) continue;
      f.resend();
      n++;
    }
    if (n > 0) this.log.warn({ reason, resent: n }, "this connection came back: requests still waiting sent again");
    return n;
  }

  /**
   * Sends every request still waiting once more (a connection on the query path dropped: `reason`).
   * Returns how many were sent again. Nothing while this connection is down: what it sent would be
   * discarded, and {@link reconnected} sends it all.
   */
  resendWaiting(reason: string): number {
    if (this.downSinceMs !== undefined) return 0;
    let n = 0;
    for (const f of this.inFlight) {
      // The first send is always sent again, however recent: it may have gone to the node or the
      // dispatcher that is gone. Only copies are spaced by minIntervalMs (one drop announced by
      // several services at once sends each request once more, not once per announcement).
      if (f.resends >= this.maxResends || (f.resends > 0 && this.now() - f.lastSentMs < this.minIntervalMs)) continue;
      f.resend();
      n++;
    }
    if (n > 0) this.log.warn({ reason, resent: n }, "a connection on the query path dropped: requests still waiting sent again");
    return n;
  }

  /**
   * `nc.request`, sent again by {@link resendWaiting} while it waits. Rejects with the first send's
   * error when every send failed (a timeout: no answer by `timeout`), else resolves with the first answer.
   */
  request(subject: string, payload: Uint8Array, options: { timeout: number; headers?: MsgHdrs }): Promise<Msg> {
    const deadline = this.now() + options.timeout;
    return new Promise<Msg>((resolve, reject) => {
      const waiting = new WaitingRequest(this.host, subject, payload, options.headers, deadline, resolve, reject);
      this.inFlight.add(waiting);
      waiting.send(true);
    });
  }
}

/** What a {@link WaitingRequest} uses of its requester. */
interface RequestHost {
  nc: NatsConnection;
  now: () => number;
  noResponderRetryMs: number;
  inFlight: Set<InFlight>;
  countResend(): void;
}

/**
 * One request of {@link ResendingRequester.request} while it waits: its sends (the first and any
 * resends) and how it settles. A class rather than closures made for every request (each named one
 * also renamed at run time by tsx: bench/README.md, "HTTP frontend CPU, again").
 */
class WaitingRequest implements InFlight {
  lastSentMs: number;
  resends = 0;
  /** Sends not answered yet (and resends waiting to be tried again). */
  private pending = 0;
  private firstError: unknown;
  private done = false;

  constructor(
    private readonly host: RequestHost,
    private readonly subject: string,
    private readonly payload: Uint8Array,
    private readonly headers: MsgHdrs | undefined,
    private readonly deadline: number,
    private readonly resolve: (msg: Msg) => void,
    private readonly reject: (err: unknown) => void,
  ) {
    this.lastSentMs = host.now();
  }

  resend(): void {
    this.resends++;
    this.host.countResend();
    this.send(false);
  }

  send(original: boolean): void {
    const left = this.deadline - this.host.now();
    if (left <= 0) return;
    this.lastSentMs = this.host.now();
    this.pending++;
    this.host.nc.request(this.subject, this.payload, this.headers ? { timeout: left, headers: this.headers } : { timeout: left }).then(
      (msg) => this.answered(msg),
      (err: unknown) => this.failed(err, original),
    );
  }

  private settle(): void {
    this.done = true;
    this.host.inFlight.delete(this);
  }

  private answered(msg: Msg): void {
    this.pending--;
    if (this.done) return;
    this.settle();
    this.resolve(msg);
  }

  private failed(err: unknown, original: boolean): void {
    this.pending--;
    if (this.done) return;
    if (original) this.firstError = err;
    else if (isNoResponders(err) && this.deadline - this.host.now() > this.host.noResponderRetryMs) {
      // The dispatcher is not back on the cluster yet: the same resend, shortly.
      this.pending++;
      setTimeout(() => {
        this.pending--;
        if (!this.done) this.send(false);
      }, this.host.noResponderRetryMs).unref();
      return;
    }
    if (this.pending === 0) {
      this.settle();
      this.reject(this.firstError ?? err);
    }
  }
}

/**
 * Publishes `events.bus.reconnected` each time `nc` comes back after a disconnection, so that callers
 * waiting on requests this connection may have lost send them again ({@link ResendingRequester}), and
 * calls `onLocal` (the connection's own requests may have lost their replies).
 */
export function watchReconnects(nc: NatsConnection, name: string, connection: string, log: Logger, onLocal: (event: ReconnectEvent) => void, now: () => number = Date.now, onDown?: () => void): void {
  let disconnectedAt: number | undefined;
  void (async () => {
    for await (const status of nc.status()) {
      if (status.type === "disconnect" || status.type === "reconnect" || status.type === "error") log.warn({ status: status.type }, "nats connection status");
      if (status.type === "disconnect") {
        disconnectedAt ??= now();
        onDown?.();
      }
      if (status.type === "reconnect") {
        const event: ReconnectEvent = { name, connection, disconnected_at_ms: disconnectedAt ?? now(), reconnected_at_ms: now() };
        disconnectedAt = undefined;
        try {
          nc.publish(subjects.busReconnected, JSON.stringify(event));
        } catch (err) {
          log.warn({ err: (err as Error).message }, "could not announce the reconnection");
        }
        onLocal(event);
      }
    }
  })();
}

/** A dispatcher's heartbeat (`presence.dispatcher.<id>`, every `every_ms`); `leaving` on a clean stop. */
export interface DispatcherPresence {
  dispatcher: string;
  at_ms: number;
  every_ms: number;
  leaving?: boolean;
}

/** A heartbeat's payload read from a message, or undefined when it is not one (never throws). */
export function readPresence(msg: { json<T>(): T }): DispatcherPresence | undefined {
  let p: DispatcherPresence;
  try {
    p = msg.json<DispatcherPresence>();
  } catch {
    return undefined;
  }
  return typeof p?.dispatcher === "string" && typeof p.every_ms === "number" ? p : undefined;
}

/** Heartbeats a dispatcher may miss before it counts as gone. */
export const PRESENCE_MISSED_BEATS = 3;

/** A dispatcher silent this long is forgotten (no more resends for it), ms. */
export const PRESENCE_FORGET_MS = 60_000;

/** A dispatcher's last heartbeat as a receiver heard it: when (its own clock) and the period it announced. */
export interface HeardBeat {
  atMs: number;
  everyMs: number;
}

/**
 * The one presence rule: a dispatcher is `live` while it has missed fewer than
 * {@link PRESENCE_MISSED_BEATS} heartbeats, `silent` after that, and `forgotten` once silent for more
 * than `forgetMs` (callers stop resending for it; a dispatcher stops taking its queries over).
 */
export function presenceState(h: HeardBeat, nowMs: number, forgetMs = PRESENCE_FORGET_MS): "live" | "silent" | "forgotten" {
  const quietMs = nowMs - h.atMs;
  if (quietMs > forgetMs) return "forgotten";
  return quietMs > PRESENCE_MISSED_BEATS * h.everyMs ? "silent" : "live";
}

/**
 * The dispatchers heard from, and which went silent: a dispatcher that dies holds the queries it
 * received and had not yet queued, and their callers would wait until their deadline. Once one misses
 * {@link PRESENCE_MISSED_BEATS} heartbeats (or says it leaves), the requests still waiting are sent
 * again ({@link ResendingRequester.resendWaiting}); the survivors of the queue group take them. While
 * it stays silent it counts as gone again every missed-beats period, up to {@link PRESENCE_FORGET_MS}:
 * a dispatcher paused or cut off keeps its subscriptions on the server, which may give it a resend,
 * or a new query, again. Times are the receiver's own (a heartbeat's arrival), so the clocks of the
 * two machines never meet.
 */
export class PresenceWatch {
  private readonly lastHeard = new Map<string, HeardBeat & { goneAtMs?: number }>();

  /** A heartbeat heard at `nowMs`; returns true when it says the dispatcher leaves (it is forgotten). */
  heard(p: DispatcherPresence, nowMs: number): boolean {
    if (p.leaving) {
      this.lastHeard.delete(p.dispatcher);
      return true;
    }
    this.lastHeard.set(p.dispatcher, { atMs: nowMs, everyMs: Math.max(1, p.every_ms) });
    return false;
  }

  /** The dispatchers silent for more than their missed beats at `nowMs`, and not found so in the last such period. */
  silent(nowMs: number): string[] {
    const gone: string[] = [];
    for (const [id, h] of this.lastHeard) {
      const missedMs = PRESENCE_MISSED_BEATS * h.everyMs;
      const state = presenceState(h, nowMs);
      if (state === "forgotten") this.lastHeard.delete(id);
      else if (state === "silent" && (h.goneAtMs === undefined || nowMs - h.goneAtMs > missedMs)) {
        gone.push(id);
        h.goneAtMs = nowMs;
      }
    }
    return gone;
  }

  /**
   * This process heard nothing because its own connection was down until `nowMs`: every dispatcher
   * counts as heard then (a silence of its own is no dispatcher's).
   */
  heardAllAt(nowMs: number): void {
    for (const h of this.lastHeard.values()) {
      h.atMs = Math.max(h.atMs, nowMs);
      h.goneAtMs = undefined;
    }
  }

  get known(): number {
    return this.lastHeard.size;
  }
}
