/**
 * Reference points for the cost of the bus itself, run as children of the benchmark (env NATS_URL,
 * ROLE, IN_SUBJECT, NO_ASYNC_TRACES; prints {"event":"ready"} on stdout). Every answer has the size
 * the request's `x-reply-bytes` header asks for (the size of the model's real answer).
 *
 * - ROLE=core: bare NATS request-reply echo on `bench.echo`: answers every request and does nothing else.
 * - ROLE=relay + ROLE=consumer: the system's hops without the model: the relay takes a core request
 *   on IN_SUBJECT (default `bench.relay`) and publishes it to a JetStream work queue (memory storage)
 *   with the caller's inbox in a header, like the dispatcher; the consumer pulls it (prefetch 16),
 *   answers the inbox and acks, like the executor. NO_ASYNC_TRACES=1 connects the relay with nats.js's
 *   `noAsyncTraces` (no Error with a stack trace built per request), to measure what that costs.
 */
import { connect, headers as natsHeaders } from "@nats-io/transport-node";
import { AckPolicy, RetentionPolicy, StorageType, jetstream, jetstreamManager } from "@nats-io/jetstream";

const url = process.env.NATS_URL;
const role = process.env.ROLE ?? "core";
const inSubject = process.env.IN_SUBJECT ?? "bench.relay";
const noAsyncTraces = process.env.NO_ASYNC_TRACES === "1";
if (!url) throw new Error("NATS_URL is required");

const STREAM = "BENCHQ";
const SUBJECT = "bench.q.echo";
const REPLY_TO = "x-reply-to";
export const REPLY_BYTES = "x-reply-bytes";

const nc = await connect({ servers: url, name: `bench-${role}`, noAsyncTraces });
const replies = new Map<number, Uint8Array>();
function replyFor(h: { get(k: string): string } | undefined): Uint8Array {
  const n = Math.max(0, Math.min(8 * 1024 * 1024, Number(h?.get(REPLY_BYTES)) || 64));
  let r = replies.get(n);
  if (!r) replies.set(n, (r = new Uint8Array(n)));
  return r;
}

if (role === "core") {
  nc.subscribe("bench.echo", { callback: (_err, msg) => void msg.respond(replyFor(msg.headers)) });
} else if (role === "relay") {
  const jsm = await jetstreamManager(nc);
  await jsm.streams.add({ name: STREAM, subjects: ["bench.q.>"], retention: RetentionPolicy.Workqueue, storage: StorageType.Memory }).catch(async (err: Error) => {
    if (!/already in use|exists/i.test(err.message)) throw err;
  });
  const js = jetstream(nc);
  nc.subscribe(inSubject, {
    callback: (_err, msg) => {
      if (!msg.reply) return;
      const h = natsHeaders();
      h.set(REPLY_TO, msg.reply);
      h.set(REPLY_BYTES, msg.headers?.get(REPLY_BYTES) ?? "64");
      js.publish(SUBJECT, msg.data, { headers: h }).catch((err: Error) => console.error(err.message));
    },
  });
} else if (role === "consumer") {
  const jsm = await jetstreamManager(nc);
  await jsm.consumers.add(STREAM, { durable_name: "bench-echo", filter_subject: SUBJECT, ack_policy: AckPolicy.Explicit }).catch((err: Error) => {
    if (!/already in use|exists/i.test(err.message)) throw err;
  });
  const consumer = await jetstream(nc).consumers.get(STREAM, "bench-echo");
  const messages = await consumer.consume({ max_messages: 16 });
  void (async () => {
    for await (const m of messages) {
      const to = m.headers?.get(REPLY_TO);
      if (to) nc.publish(to, replyFor(m.headers));
      m.ack();
    }
  })();
} else {
  throw new Error(`unknown ROLE ${role}`);
}

await nc.flush();
console.log(JSON.stringify({ event: "ready", role, inSubject, noAsyncTraces }));
process.on("SIGTERM", () => {
  void nc.drain().finally(() => process.exit(0));
});
