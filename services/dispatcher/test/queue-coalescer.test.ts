import { describe, expect, it } from "vitest";
import type { PubAck } from "@nats-io/jetstream";
import type { MsgHdrs } from "@nats-io/transport-node";
import { decodeCoalesced, encodeTensors, headers, type Clock } from "@sloserve/contracts";
import { ALIGN_FROM_BYTES } from "@sloserve/bus";
import { waitFor } from "@sloserve/testing";
import { COALESCED_MAX_BYTES, COALESCE_IN_FLIGHT, QueueCoalescer } from "../src/queue-coalescer.js";
import type { QueuePublisher } from "../src/queue-publisher.js";

/** A queue that records what is published and acknowledges each publish when told to. */
class FakeQueue implements QueuePublisher {
  sent: Array<{ data: Uint8Array; headers: MsgHdrs; msgID: string; ack: () => void; fail: (err: Error) => void }> = [];
  publish(_subject: string, data: Uint8Array, options: { msgID: string; headers: MsgHdrs; timeout: number }): Promise<PubAck> {
    return new Promise((resolve, reject) => {
      this.sent.push({ data, headers: options.headers, msgID: options.msgID, ack: () => resolve({ stream: "QUERIES", seq: this.sent.length, duplicate: false } as PubAck), fail: reject });
    });
  }
}

const clock: Clock = { now: () => 1_000 };
const turn = (): Promise<void> => new Promise((r) => setImmediate(r));
const payload = (i: number, bytes = 64): Uint8Array => encodeTensors([{ name: "x", datatype: "UINT8", shape: [bytes], data: new Uint8Array(bytes).fill(i) }]);
const fields = (i: number) => ({ [headers.replyTo]: `_INBOX.${i}`, [headers.deadline]: 5_000 + i, [headers.requestId]: `r${i}`, [headers.sloLatencyMs]: undefined });

describe("queue coalescing (dispatcher)", () => {
  it("coalescing - a query alone is published alone, at the next turn, with its own headers", async () => {
    const q = new FakeQueue();
    const c = new QueueCoalescer(q, clock, true);
    const done = c.publish("q.v", 8, payload(1), { msgID: "m1", deadlineMs: 5_001, fields: fields(1) });
    expect(q.sent).toHaveLength(0);
    await turn();
    expect(q.sent).toHaveLength(1);
    expect(q.sent[0]!.headers.get(headers.queries)).toBe("");
    expect(q.sent[0]!.headers.get(headers.replyTo)).toBe("_INBOX.1");
    expect(q.sent[0]!.msgID).toBe("m1");
    q.sent[0]!.ack();
    expect(await done).toBe(1);
  });

  it("coalescing - queries of one turn share a message of at most a batch; past the publishes in flight, those arriving wait for an ack and go together", async () => {
    const q = new FakeQueue();
    const c = new QueueCoalescer(q, clock, true);
    const first = Array.from({ length: 3 }, (_, i) => c.publish("q.v", 4, payload(i), { msgID: `m${i}`, deadlineMs: 5_000 + i, fields: fields(i) }));
    await turn();
    expect(q.sent).toHaveLength(1);
    const m = q.sent[0]!;
    expect(m.headers.get(headers.queries)).toBe("3");
    expect(m.msgID).toBe("m0+3");
    const queries = decodeCoalesced(m.data);
    expect(queries.map((x) => x.headers[headers.replyTo])).toEqual(["_INBOX.0", "_INBOX.1", "_INBOX.2"]);
    expect(queries.map((x) => x.headers[headers.sloLatencyMs])).toEqual([undefined, undefined, undefined]);
    queries.forEach((x, i) => expect(x.payload).toEqual(payload(i)));
    // Single queries in later turns go at once while fewer than COALESCE_IN_FLIGHT await their acks.
    const singles: Array<Promise<number>> = [];
    for (let i = 1; i < COALESCE_IN_FLIGHT; i++) {
      singles.push(c.publish("q.v", 4, payload(20 + i), { msgID: `s${i}`, deadlineMs: 6_000, fields: fields(20 + i) }));
      await turn();
      expect(q.sent).toHaveLength(1 + i);
    }
    // Six more while all are in flight: nothing goes until an ack, then a batch (4), then the rest.
    const more = Array.from({ length: 6 }, (_, i) => c.publish("q.v", 4, payload(10 + i), { msgID: `n${i}`, deadlineMs: 6_000, fields: fields(10 + i) }));
    await turn();
    expect(q.sent).toHaveLength(COALESCE_IN_FLIGHT);
    m.ack();
    await Promise.all(first);
    await turn();
    expect(q.sent.slice(COALESCE_IN_FLIGHT).map((s) => s.headers.get(headers.queries))).toEqual(["4"]);
    q.sent[1]!.ack();
    await turn();
    await turn();
    expect(q.sent.slice(COALESCE_IN_FLIGHT).map((s) => s.headers.get(headers.queries))).toEqual(["4", "2"]);
    for (const s of q.sent.slice(2)) s.ack();
    expect(await Promise.all(singles)).toEqual(singles.map(() => 1));
    expect(await Promise.all(more)).toEqual([1, 1, 1, 1, 1, 1]);
  });

  it("coalescing - a large query goes alone at once; a message stays under its byte limit; off: one message per query", async () => {
    const q = new FakeQueue();
    const c = new QueueCoalescer(q, clock, true);
    void c.publish("q.v", 8, payload(1, ALIGN_FROM_BYTES), { msgID: "big", deadlineMs: 5_000, fields: fields(1) });
    expect(q.sent).toHaveLength(1);
    expect(q.sent[0]!.headers.get(headers.queries)).toBe("");
    const size = Math.floor(COALESCED_MAX_BYTES / 3);
    for (let i = 0; i < 4; i++) void c.publish("q.w", 8, payload(i, ALIGN_FROM_BYTES - 100).subarray(0, size), { msgID: `w${i}`, deadlineMs: 5_000, fields: fields(i) });
    await turn();
    const w = q.sent.slice(1);
    expect(w.length).toBeGreaterThan(1);
    expect(w.map((m) => Number(m.headers.get(headers.queries) || 1)).reduce((a, b) => a + b, 0)).toBe(4);
    for (const m of w) expect(m.data.byteLength).toBeLessThanOrEqual(COALESCED_MAX_BYTES);

    const off = new FakeQueue();
    const o = new QueueCoalescer(off, clock, false);
    for (let i = 0; i < 3; i++) void o.publish("q.v", 8, payload(i), { msgID: `o${i}`, deadlineMs: 5_000, fields: fields(i) });
    expect(off.sent.map((s) => s.headers.get(headers.queries))).toEqual(["", "", ""]);
  });

  it("coalescing - a publish tried again (the stream between leaders) holds back none of the queries behind it", async () => {
    const q = new FakeQueue();
    const c = new QueueCoalescer(q, { now: () => Date.now() }, true);
    const first = c.publish("q.v", 8, payload(0), { msgID: "m0", deadlineMs: Date.now() + 60_000, fields: fields(0) });
    await turn();
    // As many publishes in flight as allowed, then one more query: it waits.
    const fillers: Array<Promise<number>> = [];
    for (let i = 1; i < COALESCE_IN_FLIGHT; i++) {
      fillers.push(c.publish("q.v", 8, payload(10 + i), { msgID: `f${i}`, deadlineMs: Date.now() + 60_000, fields: fields(10 + i) }));
      await turn();
    }
    const later = c.publish("q.v", 8, payload(1), { msgID: "m1", deadlineMs: Date.now() + 60_000, fields: fields(1) });
    await turn();
    expect(q.sent).toHaveLength(COALESCE_IN_FLIGHT);
    q.sent[0]!.fail(Object.assign(new Error("jetstream is not enabled"), { name: "JetStreamNotEnabled" }));
    await waitFor("m1 sent", () => q.sent.some((s) => s.msgID === "m1"), { intervalMs: 5 });
    // m1 went while m0 waits to be tried again.
    expect(q.sent.map((s) => s.msgID)).toEqual(["m0", ...fillers.map((_, i) => `f${i + 1}`), "m1"]);
    for (const s of q.sent.slice(1)) s.ack();
    expect(await later).toBe(1);
    expect(await Promise.all(fillers)).toEqual(fillers.map(() => 1));
    await waitFor("m0 tried again", () => q.sent.length === COALESCE_IN_FLIGHT + 2, { intervalMs: 5 });
    expect(q.sent[COALESCE_IN_FLIGHT + 1]!.msgID).toBe("m0");
    q.sent[COALESCE_IN_FLIGHT + 1]!.ack();
    expect(await first).toBe(2);
  });

  it("coalescing - a refused message fails each of its queries", async () => {
    const q = new FakeQueue();
    const c = new QueueCoalescer(q, clock, true);
    const all = Array.from({ length: 2 }, (_, i) => c.publish("q.v", 8, payload(i), { msgID: `m${i}`, deadlineMs: 5_000, fields: fields(i) }).catch((e: Error) => e.name));
    await turn();
    q.sent[0]!.fail(Object.assign(new Error("maximum messages exceeded"), { name: "JetStreamApiError", code: 10077 }));
    expect(await Promise.all(all)).toEqual(["PublishGaveUp", "PublishGaveUp"]);
  });
});
