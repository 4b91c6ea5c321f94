import type { Redis } from "ioredis";
import { apiKeyRecordSchema, type ApiKeyRecord } from "@sloserve/contracts";

/**
 * The frontend's API keys in Redis (docs/SECURITY.md): one record per key under
 * `sloserve:apikey:<id>` (role, apps, name, the SHA-256 of the secret key; never the key itself) and
 * the set of ids `sloserve:apikeys`. A revoked key's record is deleted.
 */

const P = "sloserve";
const key = {
  apiKey: (id: string) => `${P}:apikey:${id}`,
  apiKeys: `${P}:apikeys`,
};

export class ApiKeyStore {
  constructor(readonly redis: Redis) {}

  /** Stores a new key; false if its id is taken (atomic check). */
  async create(record: ApiKeyRecord): Promise<boolean> {
    const created = await this.redis.set(key.apiKey(record.id), JSON.stringify(apiKeyRecordSchema.parse(record)), "NX");
    if (created !== "OK") return false;
    await this.redis.sadd(key.apiKeys, record.id);
    return true;
  }

  async get(id: string): Promise<ApiKeyRecord | undefined> {
    const raw = await this.redis.get(key.apiKey(id));
    return raw ? apiKeyRecordSchema.parse(JSON.parse(raw)) : undefined;
  }

  /** Every stored key, by id. */
  async list(): Promise<ApiKeyRecord[]> {
    const ids = (await this.redis.smembers(key.apiKeys)).sort();
    if (ids.length === 0) return [];
    const raws = await this.redis.mget(ids.map(key.apiKey));
    return raws.filter((r): r is string => r !== null).map((r) => apiKeyRecordSchema.parse(JSON.parse(r)));
  }

  /** Deletes a key; the deleted record, or undefined if there was none. */
  async revoke(id: string): Promise<ApiKeyRecord | undefined> {
    const record = await this.get(id);
    if (!record) return undefined;
    await this.redis.multi().del(key.apiKey(id)).srem(key.apiKeys, id).exec();
    return record;
  }
}
