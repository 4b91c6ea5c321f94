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

export class QuotaStore {
  constructor(readonly redis: Redis) {}

  /** Sets (or replaces) an app's quota. */
  async put(record: AppQuotaRecord): Promise<void> {
    const valid = appQuotaRecordSchema.parse(record);
    await this.redis.multi().set(key.quota(valid.app), JSON.stringify(valid)).sadd(key.quotas, valid.app).exec();
  }

  async get(app: string): Promise<AppQuotaRecord | undefined> {
    const raw = await this.redis.get(key.quota(app));
    return raw ? appQuotaRecordSchema.parse(JSON.parse(raw)) : undefined;
  }

  /** Every app's quota, by app name. */
  async list(): Promise<AppQuotaRecord[]> {
    const apps = (await this.redis.smembers(key.quotas)).sort();
    if (apps.length === 0) return [];
    const raws = await this.redis.mget(apps.map(key.quota));
    return raws.filter((r): r is string => r !== null).map((r) => appQuotaRecordSchema.parse(JSON.parse(r)));
  }

  /** Removes an app's quota; the removed record, or undefined if there was none. */
  async delete(app: string): Promise<AppQuotaRecord | undefined> {
    const record = await this.get(app);
    if (!record) return undefined;
    await this.redis.multi().del(key.quota(app)).srem(key.quotas, app).exec();
    return record;
  }

  /** Sets (or replaces) an API key's quota. */
  async putKey(record: KeyQuotaRecord): Promise<void> {
    const valid = keyQuotaRecordSchema.parse(record);
    await this.redis.multi().set(key.keyQuota(valid.key), JSON.stringify(valid)).sadd(key.keyQuotas, valid.key).exec();
  }

  async getKey(id: string): Promise<KeyQuotaRecord | undefined> {
    const raw = await this.redis.get(key.keyQuota(id));
    return raw ? keyQuotaRecordSchema.parse(JSON.parse(raw)) : undefined;
  }

  /** Every API key's quota, by key id. */
  async listKeys(): Promise<KeyQuotaRecord[]> {
    const ids = (await this.redis.smembers(key.keyQuotas)).sort();
    if (ids.length === 0) return [];
    const raws = await this.redis.mget(ids.map(key.keyQuota));
    return raws.filter((r): r is string => r !== null).map((r) => keyQuotaRecordSchema.parse(JSON.parse(r)));
  }

  /** Removes an API key's quota; the removed record, or undefined if there was none. */
  async deleteKey(id: string): Promise<KeyQuotaRecord | undefined> {
    const record = await this.getKey(id);
    if (!record) return undefined;
    await this.redis.multi().del(key.keyQuota(id)).srem(key.keyQuotas, id).exec();
    return record;
  }
}
