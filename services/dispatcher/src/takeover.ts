import { presenceState, type DispatcherPresence, type HeardBeat } from "@sloserve/bus";

/**
 * Queries of a dispatcher that went silent, taken over by one that did not.
 *
 * The dispatchers share the query subjects as a NATS queue group: the server hands each query to one
 * member. A dispatcher that dies loses its subscriptions with its connection, and its callers send
 * again what it held (libs/bus resend.ts). One that is paused (a long GC pause, a frozen VM, SIGSTOP)
 * keeps its connection and its subscriptions until the server gives up on it (minutes: two missed
 * pings), so the server keeps handing it its share of new queries and of the callers' resends, and
 * those wait until their deadline.
 *
 * So while a peer is silent (the presence rule of libs/bus: three missed heartbeats), one live
 * dispatcher, the one whose id sorts first among those it hears, also subscribes to the query subjects
 * outside the queue group and so sees every query, the silent peer's included. It handles each
 * query once: a query that reaches it by both subscriptions is recognised by its reply subject
 * ({@link OnceByReply}). When the peer is heard again, or has been silent past {@link TAKEOVER_FORGET_MS}
 * (the server has dropped it by then), the extra subscriptions go. A peer that wakes up still handles
 * what it had been given: the caller takes the first answer (at-least-once, docs/RELIABILITY.md).
 */

/** A peer silent this long is no longer taken over: nats-server has closed its connection by then (2 × its 2 min ping). */
export const TAKEOVER_FORGET_MS = 5 * 60_000;

export class SilentPeerTakeover {
  private readonly peers = new Map<string, HeardBeat>();

  constructor(private readonly self: string) {}

  /** A heartbeat heard at `nowMs` (its own included: it is live as long as it hears itself). */
  heard(p: DispatcherPresence, nowMs: number): void {
    if (p.leaving) this.peers.delete(p.dispatcher);
    else this.peers.set(p.dispatcher, { atMs: nowMs, everyMs: Math.max(1, p.every_ms) });
  }

  /** The peers silent at `nowMs` (forgotten ones dropped). */
  silent(nowMs: number): string[] {
    const out: string[] = [];
    for (const [id, h] of this.peers) {
      if (id === this.self) continue;
      const state = presenceState(h, nowMs, TAKEOVER_FORGET_MS);
      if (state === "forgotten") this.peers.delete(id);
      else if (state === "silent") out.push(id);
    }
    return out.sort();
  }

  /**
   * Whether this dispatcher should take the silent peers' queries over at `nowMs`: some peer is
   * silent, this one is live (it heard its own last heartbeat in time: a dispatcher that was itself
   * paused or cut off takes nothing over), and no live peer's id sorts before its own.
   */
  shouldTakeOver(nowMs: number): boolean {
    if (this.silent(nowMs).length === 0) return false;
    const own = this.peers.get(this.self);
    if (!own || presenceState(own, nowMs, TAKEOVER_FORGET_MS) !== "live") return false;
    for (const [id, h] of this.peers) if (id < this.self && presenceState(h, nowMs, TAKEOVER_FORGET_MS) === "live") return false;
    return true;
  }
}

/**
 * Each query once, by its reply subject (a caller's inbox, new for every request and every resend),
 * while a takeover makes a query arrive twice; remembered for `ttlMs`.
 */
export class OnceByReply {
  private readonly seen = new Map<string, number>();

  constructor(private readonly ttlMs = 60_000) {}

  /** True the first time `reply` is offered within the time to live, false after. A query without a reply subject is always new. */
  first(reply: string | undefined, nowMs: number): boolean {
    if (!reply) return true;
    const at = this.seen.get(reply);
    if (at !== undefined && nowMs - at <= this.ttlMs) return false;
    this.seen.set(reply, nowMs);
    return true;
  }

  /** Forgets replies older than the time to live. */
  sweep(nowMs: number): void {
    for (const [reply, at] of this.seen) if (nowMs - at > this.ttlMs) this.seen.delete(reply);
  }

  clear(): void {
    this.seen.clear();
  }

  get size(): number {
    return this.seen.size;
  }
}
