import { describe, expect, it } from "vitest";
import { OnceByReply, SilentPeerTakeover, TAKEOVER_FORGET_MS } from "../src/takeover.js";

const beat = (dispatcher: string, leaving = false) => ({ dispatcher, at_ms: 0, every_ms: 1000, ...(leaving ? { leaving } : {}) });

describe("silent peer takeover", () => {
  it("takeover - the live dispatcher whose id sorts first takes a silent peer's queries over, until the peer is heard again", () => {
    const a = new SilentPeerTakeover("a");
    const b = new SilentPeerTakeover("b");
    const c = new SilentPeerTakeover("c");
    for (const t of [a, b, c]) for (const id of ["a", "b", "c"]) t.heard(beat(id), 0);
    // Everyone live: nobody takes over.
    expect([a, b, c].map((t) => t.shouldTakeOver(2_000))).toEqual([false, false, false]);
    // b goes silent (a and c keep beating until 5 s): a takes over, c leaves it to a.
    for (const t of [a, b, c]) for (const id of ["a", "c"]) t.heard(beat(id), 5_000);
    expect(a.silent(5_500)).toEqual(["b"]);
    expect([a.shouldTakeOver(5_500), c.shouldTakeOver(5_500)]).toEqual([true, false]);
    // b itself, waking with stale heartbeats of its own, takes nothing over.
    expect(b.shouldTakeOver(5_500)).toBe(false);
    // a goes silent too: c is the first live one now.
    for (const id of ["c"]) c.heard(beat(id), 9_000);
    expect(c.shouldTakeOver(9_500)).toBe(true);
    // b heard again, a leaves cleanly: nothing silent, no takeover.
    c.heard(beat("b"), 9_600);
    c.heard(beat("a", true), 9_600);
    expect(c.silent(9_700)).toEqual([]);
    expect(c.shouldTakeOver(9_700)).toBe(false);
  });

  it("takeover - a peer silent past the forget time is dropped (nats-server has closed its connection by then)", () => {
    const a = new SilentPeerTakeover("a");
    a.heard(beat("b"), 0);
    a.heard(beat("a"), TAKEOVER_FORGET_MS);
    expect(a.shouldTakeOver(TAKEOVER_FORGET_MS + 500)).toBe(false);
    a.heard(beat("b"), TAKEOVER_FORGET_MS);
    a.heard(beat("a"), TAKEOVER_FORGET_MS + 4_000);
    expect(a.shouldTakeOver(TAKEOVER_FORGET_MS + 4_000)).toBe(true);
  });

  it("once by reply - a query reaching a dispatcher twice is handled once; after the time to live it is new again", () => {
    const once = new OnceByReply(1_000);
    expect(once.first("_INBOX.1", 0)).toBe(true);
    expect(once.first("_INBOX.1", 10)).toBe(false);
    expect(once.first("_INBOX.2", 10)).toBe(true);
    expect(once.first(undefined, 10)).toBe(true);
    expect(once.first(undefined, 10)).toBe(true);
    once.sweep(1_005);
    expect(once.size).toBe(1);
    expect(once.first("_INBOX.1", 1_005)).toBe(true);
  });
});
