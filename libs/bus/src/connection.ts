import { randomUUID } from "node:crypto";
import { connect, headers as natsHeaders, type Msg, type NatsConnection, type MsgHdrs } from "@nats-io/transport-node";
import {
  jetstream,
  jetstreamManager,
  RetentionPolicy,
  StorageType,
  DiscardPolicy,
  type JetStreamClient,
  type JetStreamManager,
  type StreamConfig,
} from "@nats-io/jetstream";
import { Objm, type ObjectStore } from "@nats-io/obj";
import { streams, subjects, MODEL_BUCKET } from "@sloserve/contracts";
import type { Logger } from "./log.js";
import { PresenceWatch, ResendingRequester, readPresence, watchReconnects, type ReconnectEvent } from "./resend.js";
import { coalesceWrites, writeQueuedInPieces } from "./outbound.js";
import { answerRequestsWithoutErrors, readLargeMessagesWhole } from "./inbound.js";

export interface Bus {
  nc: NatsConnection;
  js: JetStreamClient;
  jsm: JetStreamManager;
  models: ObjectStore;
  /**
   * A request (core NATS) sent again if a connection on the query path drops while it waits
   * (resend.ts; only with `resendOnReconnect`, else plain `nc.request`).
   */
  request(subject: string, payload: Uint8Array, options: { timeout: number; headers?: MsgHdrs }): Promise<Msg>;
  /** What sends `request`s again (with `resendOnReconnect`): its state, for metrics and tests. */
  requester?: ResendingRequester | undefined;
  close(): Promise<void>;
}

export interface BusOptions {
  servers: string;
  /** Connection name, shown by the server's monitoring. */
  name: string;
  log: Logger;
  /** Create or update the streams and the model bucket (idempotent). Default true. */
  ensure?: boolean;
  /**
   * Replicas of the streams and the model bucket (JS_REPLICAS; 3 on a three-node cluster). Unset: new
   * ones get 1 and existing ones keep theirs, so a service started without it never scales them down.
   */
  replicas?: number | undefined;
  /**
   * Where the credentials and TLS settings come from (`natsConnectOptions`): NATS_USER, NATS_PASSWORD,
   * NATS_TLS_CA, NATS_TLS_CERT, NATS_TLS_KEY. @default process.env
   */
  env?: Record<string, string | undefined>;
  /**
   * `request` sends again what may have been lost when this connection or another service's
   * (`events.bus.reconnected`) drops: for callers of queries (frontend, dispatcher's pipelines). @default false
   */
  resendOnReconnect?: boolean;
  /**
   * Write what is queued once per turn of the event loop rather than once per microtask checkpoint
   * (outbound.ts `coalesceWrites`): for a process that sends a request per incoming HTTP request
   * (the frontend), one socket write for the queries of a poll instead of one each. @default false
   */
  coalesceWrites?: boolean;
}

/** What `connect` takes for credentials and TLS. */
export interface NatsSecurityOptions {
  user?: string;
  pass?: string;
  tls?: { caFile: string; certFile?: string; keyFile?: string };
}

/**
 * Credentials and TLS of a NATS connection, from the environment (docs/SECURITY.md): NATS_USER with
 * NATS_PASSWORD (a user of the server's `authorization` block: libs/contracts nats-permissions.ts);
 * NATS_TLS_CA (the CA the server's certificate is checked against) turns TLS on, with NATS_TLS_CERT
 * and NATS_TLS_KEY for a client certificate when the server asks for one. Every problem is reported
 * at once; the password never appears in a message.
 */
export function natsConnectOptions(env: Record<string, string | undefined>): NatsSecurityOptions {
  const problems: string[] = [];
  const set = (name: string): string | undefined => (env[name] !== undefined && env[name] !== "" ? env[name] : undefined);
  const user = set("NATS_USER");
  const pass = set("NATS_PASSWORD");
  if (user && !pass) problems.push("NATS_USER is set without NATS_PASSWORD");
  if (pass && !user) problems.push("NATS_PASSWORD is set without NATS_USER");
  const ca = set("NATS_TLS_CA");
  const cert = set("NATS_TLS_CERT");
  const key = set("NATS_TLS_KEY");
  if (Boolean(cert) !== Boolean(key)) problems.push("NATS_TLS_CERT and NATS_TLS_KEY go together (a client certificate and its key)");
  if ((cert || key) && !ca) problems.push("NATS_TLS_CERT/NATS_TLS_KEY need NATS_TLS_CA (TLS is on only with a CA to check the server against)");
  if (problems.length > 0) throw new Error(`invalid NATS connection settings: ${problems.join("; ")}`);
  return {
    ...(user && pass ? { user, pass } : {}),
    ...(ca ? { tls: { caFile: ca, ...(cert && key ? { certFile: cert, keyFile: key } : {}) } } : {}),
  };
}

/**
 * The NATS credentials of a process this one starts (a worker, a function process): its own user from
 * `<PREFIX>_NATS_USER` and `<PREFIX>_NATS_PASSWORD` (EXECUTOR_, FUNCTION_), as its NATS_USER and
 * NATS_PASSWORD; empty when they are unset. The local providers never pass their own on.
 */
export function natsChildEnv(env: Record<string, string | undefined>, prefix: "EXECUTOR" | "FUNCTION"): Record<string, string> {
  const user = env[`${prefix}_NATS_USER`];
  const password = env[`${prefix}_NATS_PASSWORD`];
  return user && password ? { NATS_USER: user, NATS_PASSWORD: password } : {};
}

const HOUR_NS = 3600 * 1e9;
const SETUP_TIMEOUT_MS = 10_000;
const DAY_NS = 24 * HOUR_NS;

/** Stream configurations (DESIGN.md §2). */
export function streamConfigs(): Array<Partial<StreamConfig> & { name: string; subjects: string[] }> {
  return [
    { ...streams.queries, subjects: [...streams.queries.subjects], retention: RetentionPolicy.Workqueue, storage: StorageType.Memory, max_age: 5 * 60 * 1e9, discard: DiscardPolicy.New, max_bytes: 512 * 1024 * 1024 },
    { ...streams.metrics, subjects: [...streams.metrics.subjects], retention: RetentionPolicy.Limits, storage: StorageType.File, max_age: HOUR_NS },
    { ...streams.events, subjects: [...streams.events.subjects], retention: RetentionPolicy.Limits, storage: StorageType.File, max_age: DAY_NS },
    { ...streams.scale, subjects: [...streams.scale.subjects], retention: RetentionPolicy.Workqueue, storage: StorageType.File, max_age: HOUR_NS },
    { ...streams.profile, subjects: [...streams.profile.subjects], retention: RetentionPolicy.Workqueue, storage: StorageType.File, max_age: 7 * DAY_NS },
  ];
}

export async function ensureStreams(jsm: JetStreamManager, replicas?: number): Promise<void> {
  for (const config of streamConfigs()) {
    try {
      const existing = await jsm.streams.info(config.name);
      const wanted = { ...config, num_replicas: replicas ?? existing.config.num_replicas };
      // Only a change is sent: on a cluster each update is a proposal to the meta group.
      const current = existing.config as unknown as Record<string, unknown>;
      if (Object.entries(wanted).every(([key, value]) => JSON.stringify(current[key]) === JSON.stringify(value))) continue;
      await jsm.streams.update(config.name, wanted);
    } catch (err) {
      if ((err as Error).name !== "StreamNotFoundError" && !/not found/i.test((err as Error).message)) throw err;
      try {
        await jsm.streams.add({ ...config, num_replicas: replicas ?? 1 });
      } catch (addErr) {
        // Another service created it between our look-up and our add.
        if (!/already in use|exists/i.test((addErr as Error).message)) throw addErr;
      }
    }
  }
}

const SETUP_ATTEMPTS = 6;

async function retryTimeouts<T>(log: Logger, attempt: () => Promise<T>): Promise<T> {
  for (let i = 1; ; i++) {
    try {
      return await attempt();
    } catch (err) {
      const timedOut = (err as Error).name === "TimeoutError" || /timeout/i.test((err as Error).message);
      if (!timedOut || i >= SETUP_ATTEMPTS) throw err;
      log.warn({ attempt: i, of: SETUP_ATTEMPTS }, "setting up the JetStream streams timed out; trying again");
    }
  }
}

/** Sets an existing bucket's replica count (creating a bucket sets it only for a new one). */
async function ensureBucketReplicas(jsm: JetStreamManager, bucket: ObjectStore, replicas: number): Promise<void> {
  const status = await bucket.status();
  if (status.replicas === replicas) return;
  const stream = status.streamInfo.config;
  await jsm.streams.update(stream.name, { ...stream, num_replicas: replicas });
}

export async function connectBus(options: BusOptions): Promise<Bus> {
  const nc = await connect({
    servers: options.servers.split(","),
    name: options.name,
    ...natsConnectOptions(options.env ?? process.env),
    maxReconnectAttempts: -1,
    reconnectTimeWait: 500,
    // Without this nats.js builds an Error (with a stack trace) per request: a third of the
    // dispatcher's CPU on the query path (bench/README.md).
    noAsyncTraces: true,
  });
  // Queued messages go to the socket as their pieces, not concatenated first (outbound.ts); a large
  // message comes in with one buffer, and an answered request makes no Error (inbound.ts).
  writeQueuedInPieces(nc);
  if (options.coalesceWrites) coalesceWrites(nc);
  readLargeMessagesWhole();
  answerRequestsWithoutErrors();
  const log = options.log;
  // Every connection announces its reconnections; callers of queries send again what waits.
  const requester = options.resendOnReconnect ? new ResendingRequester(nc, log) : undefined;
  const connection = randomUUID();
  // A presence watch (below) that heard nothing while this connection was down counts every dispatcher as heard on its return.
  let onBack: (() => void) | undefined;
  watchReconnects(
    nc,
    options.name,
    connection,
    log,
    (event) => {
      onBack?.();
      requester?.reconnected(`this connection (${event.name}) reconnected`);
    },
    Date.now,
    () => requester?.disconnected(),
  );
  if (requester) {
    nc.subscribe(subjects.busReconnected, {
      callback: (_err, msg) => {
        let event: Partial<ReconnectEvent> = {};
        try {
          event = msg.json<ReconnectEvent>();
        } catch {
          return;
        }
        if (event.connection !== connection) requester.resendWaiting(`${String(event.name)} reconnected`);
      },
    });
    // A dispatcher that dies holds what it had not queued yet: its silence sends them again.
    const presence = new PresenceWatch();
    nc.subscribe(subjects.dispatcherPresenceAll, {
      callback: (_err, msg) => {
        const p = readPresence(msg);
        if (!p) return;
        if (presence.heard(p, Date.now())) requester.resendWaiting(`dispatcher ${p.dispatcher} left`);
      },
    });
    onBack = () => presence.heardAllAt(Date.now());
    const watch = setInterval(() => {
      // While this connection is down every dispatcher is silent to it, and a resend would be discarded.
      if (requester.isDisconnected) return;
      for (const id of presence.silent(Date.now())) requester.resendWaiting(`dispatcher ${id} went silent`);
    }, 500);
    watch.unref();
    void nc.closed().then(() => clearInterval(watch));
  }
  const js = jetstream(nc);
  // No account check here: it is a request to the meta leader with the 5 s default, and on a cluster
  // just formed (or several services starting at once) it can go unanswered; the retried set-up below
  // makes that check with the longer timeout.
  const jsm = await jetstreamManager(nc, { checkAPI: false });
  // Setting streams up, and the model bucket's transfers, get longer than the 5 s default: on a cluster
  // every change is a proposal to the meta group, and several services start at once. When services
  // create the same stream at once, nats-server 2.9 may not answer all of them: a timeout is retried
  // (the stream is then found and left as it is).
  const slow = { timeout: SETUP_TIMEOUT_MS };
  const objm = new Objm(jetstream(nc, slow));
  const models = await retryTimeouts(log, async () => {
    const setup = await jetstreamManager(nc, slow);
    if (options.ensure !== false) await ensureStreams(setup, options.replicas);
    const bucket = await objm.create(MODEL_BUCKET, { storage: StorageType.File, replicas: options.replicas ?? 1 });
    if (options.ensure !== false && options.replicas !== undefined) await ensureBucketReplicas(setup, bucket, options.replicas);
    return bucket;
  });
  return {
    nc,
    js,
    jsm,
    models,
    request: requester ? (subject, payload, opts) => requester.request(subject, payload, opts) : (subject, payload, opts) => nc.request(subject, payload, opts),
    requester,
    async close() {
      await nc.drain().catch(() => nc.close());
    },
  };
}

/** Header names nats.js has checked once (its `append` throws on an invalid one); a bounded set. */
const checkedHeaderNames = new Set<string>();
const MAX_CHECKED_HEADER_NAMES = 256;
/** A value nats.js's `append` would store as it is: no CR or LF, nothing for `trim()` to remove. */
const PLAIN_HEADER_VALUE = /^(?:[^\s]|[^\s][^\r\n]*[^\s])?$/;

/**
 * Builds NATS headers from a record, skipping undefined values. The same headers as `append` of each
 * (same bytes on the wire, same errors), without its work per value where it has none to do: nats.js's
 * `append` canonicalises and checks the name, lists the keys already there (an array and a closure)
 * and checks the value with a regex, for every header of every query (1.7% of the frontend's CPU under
 * HTTP load, and as much again in the dispatcher and the executor: bench/README.md, "HTTP frontend
 * CPU, again"). A name checked once and a plain value (PLAIN_HEADER_VALUE) go straight into the map
 * `append` fills; anything else goes through `append`.
 */
export function makeHeaders(values: Record<string, string | number | undefined>): MsgHdrs {
  const h = natsHeaders();
  const map = (h as unknown as { headers?: unknown }).headers;
  const direct = map instanceof Map ? (map as Map<string, string[]>) : undefined;
  for (const key in values) {
    const value = values[key];
    if (value === undefined) continue;
    const text = typeof value === "string" ? value : String(value);
    // A record's keys are distinct: none is in the map yet.
    if (direct !== undefined && checkedHeaderNames.has(key) && PLAIN_HEADER_VALUE.test(text)) {
      direct.set(key, [text]);
      continue;
    }
    h.append(key, text);
    if (direct !== undefined && checkedHeaderNames.size < MAX_CHECKED_HEADER_NAMES) checkedHeaderNames.add(key);
  }
  return h;
}
