import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DiscardPolicy, RetentionPolicy, StorageType, jetstream, jetstreamManager, type JetStreamClient, type JetStreamManager } from "@nats-io/jetstream";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { makeHeaders, systemClock } from "@sloserve/bus";
import { startNats, type ServerHandle } from "@sloserve/stack";
import { waitFor } from "@sloserve/testing";
import { PublishGaveUp, isTransientPublishError, publishRetryDelayMs, publishUntil } from "../src/publish-retry.js";
import { AckedPublisher, type QueuePublisher } from "../src/queue-publisher.js";

/**
 * The dispatcher's queue publish under a stream with no leader, on a real nats-server: a stream that
 * is not there answers like one between leaders (no responder on its subjects), so deleting and
 * adding it back stands in for a lost leader and its successor.
 */

let nats: ServerHandle;
let nc: NatsConnection;
let js: JetStreamClient;
let jsm: JetStreamManager;
let acked: AckedPublisher;

const addStream = (name: string, extra: { max_msgs?: number } = {}) =>
  jsm.streams.add({ name, subjects: [`${name.toLowerCase()}.>`], retention: RetentionPolicy.Workqueue, storage: StorageType.Memory, discard: DiscardPolicy.New, ...extra });

beforeAll(async () => {
  nats = await startNats();
  nc = await connect({ servers: nats.url });
  js = jetstream(nc);
  jsm = await jetstreamManager(nc);
  acked = new AckedPublisher(nc);
});

afterAll(async () => {
  await nc?.close();
  await nats?.stop();
});

describe("queue publish retry", () => {
  it("publish retry - backoff doubles from 50 ms up to 1 s", () => {
    expect([0, 1, 2, 3, 4, 5, 6, 20].map(publishRetryDelayMs)).toEqual([50, 100, 200, 400, 800, 1000, 1000, 1000]);
  });

  it("publish retry - transient: no responder, timeout, JetStream temporarily unavailable; anything else is final", () => {
    const named = (name: string, extra: Record<string, unknown> = {}) => Object.assign(new Error(name), { name }, extra);
    expect(isTransientPublishError(named("JetStreamNotEnabled"))).toBe(true);
    expect(isTransientPublishError(named("TimeoutError"))).toBe(true);
    expect(isTransientPublishError(named("JetStreamApiError", { code: 10008 }))).toBe(true);
    expect(isTransientPublishError(named("JetStreamApiError", { code: 10077 }))).toBe(false);
    expect(isTransientPublishError(named("ClosedConnectionError"))).toBe(false);
    expect(isTransientPublishError(undefined)).toBe(false);
  });

});

// The same outcomes through nats.js' js.publish and through the dispatcher's AckedPublisher (queue-publisher.ts).
describe.each([
  ["js.publish", "A"],
  ["AckedPublisher", "B"],
] as const)("queue publish retry through %s", (via, tag) => {
  const pub = (): QueuePublisher => (via === "js.publish" ? js : acked);
  const stream = (name: string) => `${name}${tag}`;
  const subject = (name: string) => `${stream(name).toLowerCase()}.q`;

  it("publish retry - a stream without a leader: tried again until it has one, stored once", async () => {
    const retries: number[] = [];
    const publishing = publishUntil(pub(), subject("PRA"), new TextEncoder().encode("query"), {
      msgID: "r1@inbox",
      headers: makeHeaders({ "x-request-id": "r1" }),
      deadlineMs: systemClock.now() + 60_000,
      clock: systemClock,
      onRetry: (_err, attempt) => retries.push(attempt),
    });
    // The stream comes (back) once the publisher has been refused at least once.
    await waitFor("the publisher refused once", () => retries.length > 0, { intervalMs: 10 });
    await addStream(stream("PRA"));
    const { ack, attempts } = await publishing;
    expect(attempts).toBeGreaterThan(1);
    expect(attempts).toBe(retries.length + 1);
    expect(ack.duplicate).toBe(false);
    expect((await jsm.streams.info(stream("PRA"))).state.messages).toBe(1);
  });

  it("publish retry - an attempt repeated with the same message id is dropped by the duplicate window", async () => {
    await addStream(stream("PRB"));
    const options = { msgID: "r2@inbox", headers: makeHeaders({}), deadlineMs: systemClock.now() + 60_000, clock: systemClock };
    const first = await publishUntil(pub(), subject("PRB"), new Uint8Array([1]), options);
    const again = await publishUntil(pub(), subject("PRB"), new Uint8Array([1]), { ...options, headers: makeHeaders({}) });
    const other = await publishUntil(pub(), subject("PRB"), new Uint8Array([1]), { ...options, msgID: "r2@another-inbox", headers: makeHeaders({}) });
    expect([first.ack.duplicate, again.ack.duplicate, other.ack.duplicate]).toEqual([false, true, false]);
    expect(again.ack.seq).toBe(first.ack.seq);
    expect((await jsm.streams.info(stream("PRB"))).state.messages).toBe(2);
  });

  it("publish retry - no leader until the deadline: given up with the last error, marked out of time", async () => {
    const deadlineMs = systemClock.now() + 300;
    const err = await publishUntil(pub(), subject("PRC"), new Uint8Array([1]), { msgID: "r3@inbox", headers: makeHeaders({}), deadlineMs, clock: systemClock }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(PublishGaveUp);
    const gaveUp = err as PublishGaveUp;
    expect(gaveUp.outOfTime).toBe(true);
    expect(gaveUp.attempts).toBeGreaterThanOrEqual(1);
    expect(gaveUp.message).toMatch(/^jetstream is not enabled \(\d+ attempts until the query's deadline\)$/);
  });

  it("publish retry - a final refusal (the stream full) is not retried", async () => {
    await addStream(stream("PRD"), { max_msgs: 1 });
    const options = { headers: makeHeaders({}), deadlineMs: systemClock.now() + 60_000, clock: systemClock };
    await publishUntil(pub(), subject("PRD"), new Uint8Array([1]), { ...options, msgID: "a" });
    const err = (await publishUntil(pub(), subject("PRD"), new Uint8Array([2]), { ...options, headers: makeHeaders({}), msgID: "b" }).catch((e: unknown) => e)) as PublishGaveUp;
    expect(err).toBeInstanceOf(PublishGaveUp);
    expect([err.attempts, err.outOfTime]).toEqual([1, false]);
    expect(err.message).toMatch(/maximum messages exceeded/);
  });

  it("publish retry - no acknowledgement in time (a responder that never answers): a timeout, tried again until the deadline", async () => {
    const silent = nc.subscribe(subject("PRE"), { callback: () => undefined });
    try {
      const deadlineMs = systemClock.now() + 500;
      const err = (await publishUntil(pub(), subject("PRE"), new Uint8Array([1]), { msgID: "e", headers: makeHeaders({}), deadlineMs, clock: systemClock }).catch((e: unknown) => e)) as PublishGaveUp;
      expect(err).toBeInstanceOf(PublishGaveUp);
      expect(err.cause.name).toBe("TimeoutError");
      expect([err.attempts, err.outOfTime]).toEqual([1, true]);
    } finally {
      silent.unsubscribe();
    }
  });
});
