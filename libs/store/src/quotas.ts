import type { Redis } from "ioredis";
import { appQuotaRecordSchema, keyQuotaRecordSchema, type AppQuotaRecord, type KeyQuotaRecord } from "@sloserve/contracts";

/**
 * Apps' quotas in Redis (docs/RELIABILITY.md "Quotas"): one record per app under `sloserve:quota:<app>`
 * (its limits and when they were set) and the set of apps with one, `sloserve:quotas`. Frontends and
 * dispatchers read them all at start and now and then; changes reach them on `quota.changed.<app>`,
 * so the query path never reads Redis. API keys' quotas beside them: `sloserve:keyquota:<id>` and the
 * set of keys with one, `sloserve:keyquotas` (read by the frontends only; removed with the key).
 */

const P = "sloserve";
const key = {
  quota: (app: string) => `${P}:quota:${app}`,
  quotas: `${P}:quotas`,
  keyQuota: (id: string) => `${P}:keyquota:${id}`,
  keyQuotas: `${P}:keyquotas`,
};

/** Records of one kind in Redis: each under `<prefix><id>`, and the set of their ids. */
class RecordSet<T> {
  constructor(
    private readonly redis: Redis,
    private readonly keyOf: (id: string) => string,
    private readonly setKey: string,
    private readonly schema: { parse(value: unknown): T },
    private readonly idOf: (record: T) => string,
  ) {}

  async put(record: T): Promise<void> {
    const valid = this.schema.parse(record);
    const id = this.idOf(valid);
    await this.redis.multi().set(this.keyOf(id), JSON.stringify(valid)).sadd(this.setKey, id).exec();
  }

  async get(id: string): Promise<T | undefined> {
    const raw = await this.redis.get(this.keyOf(id));
    return raw ? this.schema.parse(JSON.parse(raw)) : undefined;
  }

  /** Every record, by id. */
  async list(): Promise<T[]> {
    const ids = (await this.redis.smembers(this.setKey)).sort();
    if (ids.length === 0) return [];
    const raws = await this.redis.mget(ids.map(this.keyOf));
    return raws.filter((r): r is string => r !== null).map((r) => this.schema.parse(JSON.parse(r)));
  }

  /** Removes a record; the removed one, or undefined if there was none. */
  async delete(id: string): Promise<T | undefined> {
    const record = await this.get(id);
    if (!record) return undefined;
    await this.redis.multi().del(this.keyOf(id)).srem(this.setKey, id).exec();
    return record;
  }
}

export class QuotaStore {
  private readonly apps: RecordSet<AppQuotaRecord>;
  private readonly keys: RecordSet<KeyQuotaRecord>;

  constructor(readonly redis: Redis) {
    this.apps = new RecordSet(redis, key.quota, key.quotas, appQuotaRecordSchema, (r) => r.app);
    this.keys = new RecordSet(redis, key.keyQuota, key.keyQuotas, keyQuotaRecordSchema, (r) => r.key);
  }

  /** Sets (or replaces) an app's quota. */
  put(record: AppQuotaRecord): Promise<void> {
    return this.apps.put(record);
  }

  get(app: string): Promise<AppQuotaRecord | undefined> {
    return this.apps.get(app);
  }

  /** Every app's quota, by app name. */
  list(): Promise<AppQuotaRecord[]> {
    return this.apps.list();
  }

  /** Removes an app's quota; the removed record, or undefined if there was none. */
  delete(app: string): Promise<AppQuotaRecord | undefined> {
    return this.apps.delete(app);
  }

  /** Sets (or replaces) an API key's quota. */
  putKey(record: KeyQuotaRecord): Promise<void> {
    return this.keys.put(record);
  }

  getKey(id: string): Promise<KeyQuotaRecord | undefined> {
    return this.keys.get(id);
  }

  /** Every API key's quota, by key id. */
  listKeys(): Promise<KeyQuotaRecord[]> {
    return this.keys.list();
  }

  /** Removes an API key's quota; the removed record, or undefined if there was none. */
  deleteKey(id: string): Promise<KeyQuotaRecord | undefined> {
    return this.keys.delete(id);
  }
}
