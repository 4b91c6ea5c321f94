import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { connectBus, createLogger, PresenceWatch, PRESENCE_FORGET_MS, PRESENCE_MISSED_BEATS, ResendingRequester, type Bus, type DispatcherPresence, type ReconnectEvent } from "@sloserve/bus";
import { subjects } from "@sloserve/contracts";
import { startNats, type ServerHandle } from "@sloserve/stack";
import { waitFor } from "@sloserve/testing";
import { FaultProxy } from "./fault-proxy.js";

/**
 * Requests sent again when a connection on the query path drops (libs/bus resend.ts), on a real
 * nats-server: a responder that drops the first copy of every request stands in for a reply lost
 * with a dying node; a service's `events.bus.reconnected` announcement makes the caller send again.
 */

let nats: ServerHandle;
let responder: NatsConnection;
let bus: Bus;
const log = createLogger("bus-resend-test", "silent");
const enc = (s: string) => new TextEncoder().encode(s);
const dec = (b: Uint8Array) => new TextDecoder().decode(b);

/** Answers `echo.<name>` with "<payload>#<copy>", dropping the first copy of each payload. */
const seen = new Map<string, number>();

beforeAll(async () => {
  nats = await startNats();
  responder = await connect({ servers: nats.url });
  responder.subscribe("echo.drop-first", {
    callback: (_err, msg) => {
      const key = dec(msg.data);
      const copy = (seen.get(key) ?? 0) + 1;
      seen.set(key, copy);
      if (copy > 1) msg.respond(enc(`${key}#${copy}`));
    },
  });
  responder.subscribe("echo.always", {
    callback: (_err, msg) => {
      msg.respond(msg.data);
    },
  });
  await responder.flush();
  bus = await connectBus({ servers: nats.url, name: "resend-test", log, ensure: false, resendOnReconnect: true });
});

afterAll(async () => {
  await bus?.close();
  await responder?.close();
  await nats?.stop();
});

const announce = async (name: string) => {
  const event: ReconnectEvent = { name, connection: "another", disconnected_at_ms: Date.now() - 100, reconnected_at_ms: Date.now() };
  responder.publish(subjects.busReconnected, JSON.stringify(event));
  await responder.flush();
};

describe("requests sent again after a lost connection", () => {
  it("resend - a request whose reply was lost is answered once another service announces its reconnection", async () => {
    const asked = bus.request("echo.drop-first", enc("q1"), { timeout: 20_000 });
    await waitFor("the first copy of q1 at the responder (which drops it)", () => seen.get("q1") === 1, { intervalMs: 10 });
    await new Promise((r) => setTimeout(r, 600));
    await announce("dispatcher");
    expect(dec((await asked).data)).toBe("q1#2");
  });

  it("resend - answered requests are not sent again; a request with no responder fails at once", async () => {
    const nc = await connect({ servers: nats.url });
    const requester = new ResendingRequester(nc, log, { minIntervalMs: 0 });
    try {
      expect(dec((await requester.request("echo.always", enc("a"), { timeout: 5_000 })).data)).toBe("a");
      expect(requester.waiting).toBe(0);
      expect(requester.resendWaiting("test")).toBe(0);
      await expect(requester.request("echo.nobody", enc("b"), { timeout: 5_000 })).rejects.toThrow(/no ?responders/i);
      expect(requester.waiting).toBe(0);
    } finally {
      await nc.close();
    }
  });

  it("resend - a resend that finds no responder is tried again until one comes, within the deadline", async () => {
    const nc = await connect({ servers: nats.url });
    const requester = new ResendingRequester(nc, log, { minIntervalMs: 0, noResponderRetryMs: 50 });
    const late = await connect({ servers: nats.url });
    let copies = 0;
    try {
      // The first copy goes to a responder that drops it and leaves (the dying dispatcher).
      const gone = await connect({ servers: nats.url });
      let dropped = false;
      gone.subscribe("echo.moved", { max: 1, callback: () => void (dropped = true) });
      await gone.flush();
      const asked = requester.request("echo.moved", enc("m"), { timeout: 20_000 });
      await waitFor("the first copy at the responder that leaves", () => dropped);
      await gone.close();
      expect(requester.resendWaiting("the dispatcher's connection dropped")).toBe(1);
      // No responder for a while: the resend is refused (no responders) and tried again every 50 ms.
      await new Promise((r) => setTimeout(r, 300));
      // A responder comes back (the dispatcher on another node).
      late.subscribe("echo.moved", {
        callback: (_err, msg) => {
          copies++;
          msg.respond(msg.data);
        },
      });
      await late.flush();
      expect(dec((await asked).data)).toBe("m");
      expect(copies).toBe(1);
      expect(requester.resent).toBe(1);
    } finally {
      await late.close();
      await nc.close();
    }
  });

  it("resend - at most maxResends copies, and a request that never gets its answer times out with the first send's error", async () => {
    const nc = await connect({ servers: nats.url });
    const requester = new ResendingRequester(nc, log, { minIntervalMs: 0, maxResends: 2 });
    const silent = await connect({ servers: nats.url });
    let copies = 0;
    silent.subscribe("echo.silent", { callback: () => void copies++ });
    await silent.flush();
    try {
      const asked = requester.request("echo.silent", enc("s"), { timeout: 1_500 });
      await waitFor("the first copy at the silent responder", () => copies === 1);
      expect([requester.resendWaiting("1"), requester.resendWaiting("2"), requester.resendWaiting("3")]).toEqual([1, 1, 0]);
      await expect(asked).rejects.toThrow(/timeout/i);
      expect(copies).toBe(3);
      expect(requester.waiting).toBe(0);
    } finally {
      await silent.close();
      await nc.close();
    }
  });

  it("resend - a request sent just before the drop is sent again at once; announcements close together send one copy", async () => {
    const nc = await connect({ servers: nats.url });
    const requester = new ResendingRequester(nc, log, { minIntervalMs: 60_000 });
    const silent = await connect({ servers: nats.url });
    let copies = 0;
    silent.subscribe("echo.recent", { callback: () => void copies++ });
    await silent.flush();
    try {
      const asked = requester.request("echo.recent", enc("r"), { timeout: 1_000 });
      // [the first announcement, two more right after]: the first send, however recent, is sent again.
      expect([requester.resendWaiting("1"), requester.resendWaiting("2"), requester.resendWaiting("3")]).toEqual([1, 0, 0]);
      await expect(asked).rejects.toThrow(/timeout/i);
      expect(copies).toBe(2);
    } finally {
      await silent.close();
      await nc.close();
    }
  });

  it("resend - the caller's own link cut: requests made while it is down (which nats.js discards) are sent again on its return and answered", async () => {
    const proxy = await FaultProxy.start(nats.url);
    const down = await connectBus({ servers: proxy.natsUrl, name: "cut-caller", log, ensure: false, resendOnReconnect: true });
    try {
      expect(dec((await down.request("echo.always", enc("before"), { timeout: 2_000 })).data)).toBe("before");
      proxy.cut(1_000);
      await waitFor("the caller to see its connection drop", () => down.requester?.isDisconnected, { timeoutMs: 5_000, intervalMs: 20 });
      // Made while down: each copy goes to a buffer that nats.js clears at every dial.
      const asked = ["a", "b", "c"].map((k) => down.request("echo.always", enc(k), { timeout: 10_000 }));
      // A resend asked for meanwhile (a dispatcher "silent" to a caller that hears nothing) waits for the return.
      expect(down.requester?.resendWaiting("test: silent")).toBe(0);
      const answers = await Promise.all(asked);
      expect(answers.map((m) => dec(m.data))).toEqual(["a", "b", "c"]);
    } finally {
      await down.close();
      await proxy.close();
    }
  });

  it("resend - dispatcher presence: silent for more than its missed beats counts as gone, again each such period while silent; leaving, once", () => {
    const w = new PresenceWatch();
    const beat = (dispatcher: string, extra: Partial<DispatcherPresence> = {}): DispatcherPresence => ({ dispatcher, at_ms: 0, every_ms: 1000, ...extra });
    expect(w.heard(beat("a"), 0)).toBe(false);
    expect(w.heard(beat("b"), 0)).toBe(false);
    expect(w.heard(beat("c", { every_ms: 200 }), 0)).toBe(false);
    // [now, heartbeats heard just before, the dispatchers found silent then]
    const table: Array<[number, string[], string[]]> = [
      [PRESENCE_MISSED_BEATS * 200, [], []],
      [1000, ["a"], ["c"]],
      [1500, ["a"], []],
      [3000, ["a"], ["c"]],
      [3001, [], ["b"]],
      [6000, [], ["c"]],
      [6002, [], ["a", "b"]],
      // Heard again: no longer silent.
      [6100, ["c"], []],
    ];
    for (const [now, beats, expected] of table) {
      for (const d of beats) w.heard(beat(d), now);
      expect(w.silent(now), `at ${now} ms`).toEqual(expected);
    }
    // Silent past PRESENCE_FORGET_MS: forgotten.
    expect(w.silent(3000 + PRESENCE_FORGET_MS + 1)).toEqual(["c"]);
    expect(w.known).toBe(1);
    expect(w.heard(beat("c", { leaving: true }), 6100 + PRESENCE_FORGET_MS)).toBe(true);
    expect(w.known).toBe(0);
    expect(w.silent(200_000)).toEqual([]);
  });

  it("resend - a request held by a dispatcher that goes silent is sent again and answered by another", async () => {
    const nc = await connect({ servers: nats.url });
    let copies = 0;
    // The dying dispatcher takes the first copy and never answers; a survivor answers the second.
    nc.subscribe("echo.held", {
      callback: (_err, msg) => {
        if (++copies > 1) msg.respond(msg.data);
      },
    });
    await nc.flush();
    try {
      const dying: DispatcherPresence = { dispatcher: "dispatcher-dying", at_ms: Date.now(), every_ms: 100 };
      responder.publish(subjects.dispatcherPresence(dying.dispatcher), JSON.stringify(dying));
      await responder.flush();
      const started = Date.now();
      const asked = bus.request("echo.held", enc("h"), { timeout: 20_000 });
      expect(dec((await asked).data)).toBe("h");
      expect(copies).toBe(2);
      // Sent again once the heartbeat was missed (3 × 100 ms, checked every 500 ms), long before the deadline.
      expect(Date.now() - started).toBeLessThan(10_000);
    } finally {
      await nc.close();
    }
  });
});
