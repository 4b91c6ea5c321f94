import { connect, headers as natsHeaders, type NatsConnection, type MsgHdrs } from "@nats-io/transport-node";
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
import { streams, MODEL_BUCKET } from "@sloserve/contracts";
import type { Logger } from "./log.js";

export interface Bus {
  nc: NatsConnection;
  js: JetStreamClient;
  jsm: JetStreamManager;
  models: ObjectStore;
  close(): Promise<void>;
}

export interface BusOptions {
  servers: string;
  /** Connection name, shown by the server's monitoring. */
  name: string;
  log: Logger;
  /** Create or update the streams and the model bucket (idempotent). Default true. */
  ensure?: boolean;
}

const HOUR_NS = 3600 * 1e9;
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

export async function ensureStreams(jsm: JetStreamManager): Promise<void> {
  for (const config of streamConfigs()) {
    try {
      await jsm.streams.info(config.name);
      await jsm.streams.update(config.name, config);
    } catch (err) {
      if ((err as Error).name !== "StreamNotFoundError" && !/not found/i.test((err as Error).message)) throw err;
      try {
        await jsm.streams.add(config);
      } catch (addErr) {
        // Another service created it between our look-up and our add.
        if (!/already in use|exists/i.test((addErr as Error).message)) throw addErr;
      }
    }
  }
}

export async function connectBus(options: BusOptions): Promise<Bus> {
  const nc = await connect({
    servers: options.servers.split(","),
    name: options.name,
    maxReconnectAttempts: -1,
    reconnectTimeWait: 500,
    // Without this nats.js builds an Error (with a stack trace) per request: a third of the
    // dispatcher's CPU on the query path (bench/README.md).
    noAsyncTraces: true,
  });
  const log = options.log;
  void (async () => {
    for await (const status of nc.status()) {
      if (status.type === "disconnect" || status.type === "reconnect" || status.type === "error") log.warn({ status: status.type }, "nats connection status");
    }
  })();
  const js = jetstream(nc);
  const jsm = await jetstreamManager(nc);
  if (options.ensure !== false) await ensureStreams(jsm);
  const objm = new Objm(nc);
  const models = await objm.create(MODEL_BUCKET, { storage: StorageType.File });
  return {
    nc,
    js,
    jsm,
    models,
    async close() {
      await nc.drain().catch(() => nc.close());
    },
  };
}

/** Builds NATS headers from a record, skipping undefined values. */
export function makeHeaders(values: Record<string, string | number | undefined>): MsgHdrs {
  const h = natsHeaders();
  for (const [key, value] of Object.entries(values)) if (value !== undefined) h.set(key, String(value));
  return h;
}
