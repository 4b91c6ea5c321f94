import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { connect, headers as natsHeaders, type Msg, type NatsConnection } from "@nats-io/transport-node";
import { alignPayload, answerRequestsWithoutErrors, coalesceWrites, publishParts, readLargeMessagesWhole, writeQueuedInPieces } from "@sloserve/bus";
import { decodeTensors, encodeTensorParts, encodeTensors, type Tensor } from "@sloserve/contracts";
import { startNats, type ServerHandle } from "@sloserve/stack";

/**
 * libs/bus outbound.ts on a real nats-server: a connection that writes its queued messages as their
 * pieces (no concatenation) delivers every message whole and in order, small and large interleaved;
 * a message published as pieces arrives as the same bytes as one published whole, headers included;
 * publishParts fails as nc.publish does; a large message comes in with one buffer of about its size
 * (inbound.ts), and with alignPayload its tensors are read in place.
 */

let nats: ServerHandle;
let sender: NatsConnection;
let plain: NatsConnection;
let receiver: NatsConnection;

beforeAll(async () => {
  expect(readLargeMessagesWhole()).toBe(true);
  nats = await startNats();
  sender = await connect({ servers: nats.url });
  plain = await connect({ servers: nats.url });
  receiver = await connect({ servers: nats.url });
});

afterAll(async () => {
  await sender?.close();
  await plain?.close();
  await receiver?.close();
  await nats?.stop();
});

/** Collects `count` messages of a subject. */
function collect(subject: string, count: number): Promise<Msg[]> {
  const got: Msg[] = [];
  return new Promise((resolve) => {
    receiver.subscribe(subject, {
      max: count,
      callback: (_err, msg) => {
        got.push(msg);
        if (got.length === count) resolve(got);
      },
    });
  });
}

const filled = (n: number, seed: number): Uint8Array => Uint8Array.from({ length: n }, (_, i) => (i * 31 + seed) & 255);

describe("messages out without copies (libs/bus outbound.ts)", () => {
  it("outbound - a connection that writes its queue in pieces delivers small and large messages whole and in order", async () => {
    expect(writeQueuedInPieces(sender)).toBe(true);
    expect(writeQueuedInPieces(sender)).toBe(true); // once is enough; again changes nothing
    await receiver.flush();
    const sizes = [10, 1_100_000, 3, 0, 200_000, 65_536, 1_100_000, 7];
    const messages = Array.from({ length: 40 }, (_, i) => filled(sizes[i % sizes.length] as number, i));
    const arrived = collect("outbound.order", messages.length);
    await receiver.flush();
    // nats.js concatenates in `drain` (DataBuffer.pack): the patched flush never calls it for several pieces.
    const outbound = (sender as unknown as { protocol: { outbound: { drain: (n?: number) => Uint8Array } } }).protocol.outbound;
    const drain = outbound.drain.bind(outbound);
    let drains = 0;
    outbound.drain = (n?: number) => {
      drains++;
      return drain(n);
    };
    // Published back to back in one turn (queued together, flushed inline past 32 kB), then after pauses.
    for (const m of messages.slice(0, 30)) sender.publish("outbound.order", m);
    // Only the queue's last small messages (under 64 kB in all) wait for the flush that concatenates them.
    expect(drains).toBe(0);
    for (const m of messages.slice(30)) {
      sender.publish("outbound.order", m, { headers: natsHeaders() });
      await new Promise((r) => setTimeout(r, 1));
    }
    const got = await arrived;
    expect(got.map((m) => m.data.length)).toEqual(messages.map((m) => m.length));
    got.forEach((m, i) => expect(Buffer.from(m.data).equals(Buffer.from(messages[i] as Uint8Array))).toBe(true));
    // Requests still get their answers on it.
    receiver.subscribe("outbound.echo", { callback: (_e, msg) => void msg.respond(msg.data) });
    await receiver.flush();
    const big = filled(500_000, 9);
    const answer = await sender.request("outbound.echo", big, { timeout: 10_000 });
    expect(Buffer.from(answer.data).equals(Buffer.from(big))).toBe(true);
  });

  it("outbound - publishParts sends the bytes encodeTensors would, with the headers, whether or not the connection writes in pieces", async () => {
    const tensors: Tensor[] = [
      { name: "probs", datatype: "FP32", shape: [1, 40, 6625], data: new Float32Array(40 * 6625).map((_, i) => i / 1e5) },
      { name: "odd", datatype: "UINT8", shape: [3], data: new Uint8Array([7, 8, 9]) },
    ];
    const extra = { id: "q1", served_by: { batch_size: 8 } };
    const whole = encodeTensors(tensors, extra);
    const arrived = collect("outbound.parts", 4);
    await receiver.flush();
    for (const [from, nc] of [["pieces", sender], ["plain", plain]] as const) {
      for (let i = 0; i < 2; i++) {
        const h = natsHeaders();
        h.set("x-n", `${from}${i}`);
        const { parts, byteLength } = encodeTensorParts(tensors, extra);
        publishParts(nc, "outbound.parts", parts, byteLength, { headers: h });
      }
    }
    const got = await arrived;
    for (const m of got) {
      expect(Buffer.from(m.data).equals(Buffer.from(whole))).toBe(true);
      expect(decodeTensors<{ id: string }>(m.data).meta.id).toBe("q1");
    }
    // In order from each connection (the two connections' messages may interleave).
    const order = got.map((m) => m.headers?.get("x-n") ?? "");
    expect(order.filter((n) => n.startsWith("pieces"))).toEqual(["pieces0", "pieces1"]);
    expect(order.filter((n) => n.startsWith("plain"))).toEqual(["plain0", "plain1"]);
  });

  it("outbound - a large message comes in whole in a buffer of about its size; with aligned headers its tensors are views of it", async () => {
    const tensors: Tensor[] = [{ name: "probs", datatype: "FP32", shape: [1, 40, 6625], data: new Float32Array(40 * 6625).map((_, i) => i / 3) }];
    const arrived = collect("outbound.aligned", 6);
    await receiver.flush();
    for (let i = 0; i < 6; i++) {
      const h = natsHeaders();
      h.set("x-request-id", "r".repeat(i)); // headers of every length mod 8
      const { parts, byteLength } = encodeTensorParts(tensors, { id: `q${i}` });
      publishParts(sender, "outbound.aligned", parts, byteLength, { headers: alignPayload(h) });
    }
    const got = await arrived;
    const size = encodeTensors(tensors, { id: "q0" }).byteLength;
    for (const m of got) {
      expect(m.data.byteLength).toBe(size);
      // nats.js alone grows the buffer by doubling: ~1.8× the message here.
      expect(m.data.buffer.byteLength).toBeLessThan(size * 1.3);
      expect(m.data.byteOffset % 8).toBe(0);
      const t = decodeTensors(m.data).tensors[0] as Tensor;
      expect(t.data.buffer).toBe(m.data.buffer);
      expect((t.data as Float32Array)[1000]).toBe((tensors[0]!.data as Float32Array)[1000]);
      expect(m.headers?.get("x-request-id")).toMatch(/^r*$/);
    }
  });

  it("outbound - publishParts fails as nc.publish does: a bad subject, a payload past max_payload, a closed connection", async () => {
    const h = natsHeaders();
    const parts = [new Uint8Array(8), new Uint8Array(8)];
    expect(() => publishParts(sender, "bad subject", parts, 16, { headers: h })).toThrow();
    const max = sender.info?.max_payload ?? 1024 * 1024;
    const tooBig = [new Uint8Array(8), new Uint8Array(max)];
    let publishError: unknown;
    try {
      sender.publish("outbound.big", new Uint8Array(max + 8), { headers: natsHeaders() });
    } catch (err) {
      publishError = err;
    }
    expect(publishError).toBeInstanceOf(Error);
    expect(() => publishParts(sender, "outbound.big", tooBig, max + 8, { headers: natsHeaders() })).toThrow((publishError as Error).message);
    const closing = await connect({ servers: nats.url });
    writeQueuedInPieces(closing);
    await closing.close();
    expect(() => publishParts(closing, "outbound.closed", parts, 16, { headers: natsHeaders() })).toThrow(/closed/i);
  });

  it("inbound - with answered requests making no Error, requests still resolve, time out, find no responders and fail on close as before", async () => {
    expect(answerRequestsWithoutErrors()).toBe(true);
    expect(answerRequestsWithoutErrors()).toBe(true); // once is enough
    const nc = await connect({ servers: nats.url, noAsyncTraces: true });
    receiver.subscribe("inbound.answered", { callback: (_e, msg) => void msg.respond(msg.data) });
    receiver.subscribe("inbound.silent", { callback: () => undefined });
    await receiver.flush();
    const answers = await Promise.all(Array.from({ length: 20 }, (_, i) => nc.request("inbound.answered", filled(i, i), { timeout: 10_000 })));
    expect(answers.map((a) => a.data.length)).toEqual(Array.from({ length: 20 }, (_, i) => i));
    const failure = (request: Promise<Msg>): Promise<Error | undefined> => request.then(() => undefined, (e: unknown) => e as Error);
    const timedOut = await failure(nc.request("inbound.silent", filled(1, 1), { timeout: 50 }));
    expect(timedOut).toBeInstanceOf(Error);
    expect(`${timedOut?.name} ${timedOut?.message}`).toMatch(/timeout/i);
    const nobody = await failure(nc.request("inbound.nobody", filled(1, 1), { timeout: 5_000 }));
    expect(`${nobody?.name} ${nobody?.message}`).toMatch(/no ?responders/i);
    const pending = failure(nc.request("inbound.silent", filled(1, 1), { timeout: 10_000 }));
    await nc.flush();
    await nc.close();
    const closed = await pending;
    expect(closed).toBeInstanceOf(Error);
    expect(closed?.message).toMatch(/closed/i); // its own error, not the one shared by answered requests
  });

  it("outbound - a connection that coalesces its writes sends what callbacks of one turn queued in one write, whole and in order", async () => {
    const nc = await connect({ servers: nats.url });
    expect(writeQueuedInPieces(nc)).toBe(true);
    expect(coalesceWrites(nc)).toBe(true);
    expect(coalesceWrites(nc)).toBe(true); // once is enough
    const transport = (nc as unknown as { protocol: { transport: { send: (frame: Uint8Array) => void } } }).protocol.transport;
    const send = transport.send.bind(transport);
    let writes = 0;
    transport.send = (frame: Uint8Array) => {
      writes++;
      send(frame);
    };
    // Small (under 32 kB in all): nats.js would not flush them inline, and they are written concatenated.
    const sizes = [10, 3, 2_000, 0, 7_000, 7, 11_000, 12];
    const messages = sizes.map((n, i) => filled(n, i));
    const arrived = collect("outbound.coalesced", messages.length);
    await receiver.flush();
    // Timers due together run in one turn, nats.js's flush (a microtask) after each: one write each without coalescing.
    await new Promise<void>((resolve) => {
      messages.forEach((m, i) => setTimeout(() => {
        nc.publish("outbound.coalesced", m);
        if (i === messages.length - 1) resolve();
      }, 0));
    });
    await nc.flush();
    const got = await arrived;
    expect(got.map((m) => m.data.length)).toEqual(sizes);
    got.forEach((m, i) => expect(Buffer.from(m.data).equals(Buffer.from(messages[i] as Uint8Array))).toBe(true));
    // All of them and flush's PING: one write.
    expect(writes).toBe(1);
    receiver.subscribe("outbound.coalesced.echo", { callback: (_e, msg) => void msg.respond(msg.data) });
    await receiver.flush();
    const answer = await nc.request("outbound.coalesced.echo", filled(100, 1), { timeout: 10_000 });
    expect(answer.data.length).toBe(100);
    await nc.drain();
  });
});
