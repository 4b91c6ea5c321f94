import { Redis } from "ioredis";
import {
  modelRecordSchema,
  variantRecordSchema,
  workerReportSchema,
  type ModelRecord,
  type VariantRecord,
  type VariantState,
  type WorkerReport,
  type Hardware,
  pipelineRecordSchema,
  type PipelineRecord,
  pipelinePlanStatusSchema,
  type PipelinePlanStatus,
} from "@sloserve/contracts";

/**
 * Metadata in Redis (DESIGN.md §2 "Metadata"). Static: models and their variants; pipeline specs. Dynamic: worker
 * heartbeats (with a TTL, so a dead worker disappears by itself), variant instances per worker, and
 * the forecaster's per-app history of unit max arrival rates (so a restart keeps what it learnt).
 * Services read it at start-up and on cache misses; the query path reads in-memory views instead.
 * Every key is defined in `key` below (the frontend's API keys: api-keys.ts).
 */

export interface InstanceRecord {
  variant: string;
  model: string;
  worker: string;
  hardware: Hardware;
  state: VariantState;
  reason: string;
  atMs: number;
}

const P = "sloserve";
const key = {
  models: `${P}:models`,
  model: (name: string) => `${P}:model:${name}`,
  appModels: (app: string) => `${P}:app:${app}:models`,
  apps: `${P}:apps`,
  variant: (name: string) => `${P}:variant:${name}`,
  modelVariants: (model: string) => `${P}:model:${model}:variants`,
  worker: (id: string) => `${P}:worker:${id}`,
  workers: `${P}:workers`,
  instances: `${P}:instances`,
  forecastHistory: (app: string) => `${P}:forecast:${app}:history`,
  pipeline: (name: string) => `${P}:pipeline:${name}`,
  pipelines: `${P}:pipelines`,
  pipelinePlan: (name: string) => `${P}:pipeline:${name}:plan`,
};

export class MetadataStore {
  constructor(readonly redis: Redis) {}

  static connect(url: string): MetadataStore {
    return new MetadataStore(new Redis(url, { maxRetriesPerRequest: 2, enableAutoPipelining: true, lazyConnect: false }));
  }

  async close(): Promise<void> {
    await this.redis.quit().catch(() => this.redis.disconnect());
  }

  async ping(): Promise<boolean> {
    try {
      return (await this.redis.ping()) === "PONG";
    } catch {
      return false;
    }
  }

  /** Stores a new model with its variants; false if the name is taken (atomic check). */
  async createModel(model: ModelRecord, variants: VariantRecord[]): Promise<boolean> {
    const created = await this.redis.set(key.model(model.name), JSON.stringify(model), "NX");
    if (created !== "OK") return false;
    const tx = this.redis.multi().sadd(key.models, model.name).sadd(key.apps, model.app).sadd(key.appModels(model.app), model.name);
    for (const v of variants) tx.set(key.variant(v.name), JSON.stringify(v)).sadd(key.modelVariants(model.name), v.name);
    await tx.exec();
    return true;
  }

  async deleteModel(name: string): Promise<ModelRecord | undefined> {
    const model = await this.getModel(name);
    if (!model) return undefined;
    const variants = await this.redis.smembers(key.modelVariants(name));
    const tx = this.redis.multi().del(key.model(name), key.modelVariants(name)).srem(key.models, name).srem(key.appModels(model.app), name);
    for (const v of variants) tx.del(key.variant(v));
    await tx.exec();
    return model;
  }

  async getModel(name: string): Promise<ModelRecord | undefined> {
    const raw = await this.redis.get(key.model(name));
    return raw ? modelRecordSchema.parse(JSON.parse(raw)) : undefined;
  }

  async listModels(): Promise<ModelRecord[]> {
    const names = (await this.redis.smembers(key.models)).sort();
    if (names.length === 0) return [];
    const raws = await this.redis.mget(names.map(key.model));
    return raws.filter((r): r is string => r !== null).map((r) => modelRecordSchema.parse(JSON.parse(r)));
  }

  async listAppModels(app: string): Promise<string[]> {
    return (await this.redis.smembers(key.appModels(app))).sort();
  }

  async putVariant(variant: VariantRecord): Promise<void> {
    await this.redis.multi().set(key.variant(variant.name), JSON.stringify(variant)).sadd(key.modelVariants(variant.model), variant.name).exec();
  }

  async deleteVariant(name: string): Promise<void> {
    const v = await this.getVariant(name);
    if (!v) return;
    await this.redis.multi().del(key.variant(name)).srem(key.modelVariants(v.model), name).exec();
  }

  async getVariant(name: string): Promise<VariantRecord | undefined> {
    const raw = await this.redis.get(key.variant(name));
    return raw ? variantRecordSchema.parse(JSON.parse(raw)) : undefined;
  }

  async listVariants(model?: string): Promise<VariantRecord[]> {
    const names = model
      ? await this.redis.smembers(key.modelVariants(model))
      : (await Promise.all((await this.redis.smembers(key.models)).map((m) => this.redis.smembers(key.modelVariants(m))))).flat();
    if (names.length === 0) return [];
    const raws = await this.redis.mget(names.sort().map(key.variant));
    return raws.filter((r): r is string => r !== null).map((r) => variantRecordSchema.parse(JSON.parse(r)));
  }

  /** Latest report of a worker; expires after `ttlMs` without a heartbeat. */
  async putWorker(report: WorkerReport, ttlMs: number): Promise<void> {
    await this.redis.multi().set(key.worker(report.worker), JSON.stringify(report), "PX", ttlMs).sadd(key.workers, report.worker).exec();
  }

  async removeWorker(id: string): Promise<void> {
    await this.redis.multi().del(key.worker(id)).srem(key.workers, id).exec();
    const instances = await this.listInstances();
    const gone = instances.filter((i) => i.worker === id).map((i) => `${i.variant}|${i.worker}`);
    if (gone.length) await this.redis.hdel(key.instances, ...gone);
  }

  /** Live workers (heartbeat not expired). Expired ones are pruned from the index. */
  async listWorkers(): Promise<WorkerReport[]> {
    const ids = await this.redis.smembers(key.workers);
    if (ids.length === 0) return [];
    const raws = await this.redis.mget(ids.map(key.worker));
    const live: WorkerReport[] = [];
    const dead: string[] = [];
    raws.forEach((raw, i) => {
      if (raw) live.push(workerReportSchema.parse(JSON.parse(raw)));
      else dead.push(ids[i] as string);
    });
    if (dead.length) await this.redis.srem(key.workers, ...dead);
    return live;
  }

  async setInstance(instance: InstanceRecord): Promise<void> {
    const field = `${instance.variant}|${instance.worker}`;
    if (instance.state === "inactive") await this.redis.hdel(key.instances, field);
    else await this.redis.hset(key.instances, field, JSON.stringify(instance));
  }

  async listInstances(): Promise<InstanceRecord[]> {
    const all = await this.redis.hgetall(key.instances);
    return Object.values(all).map((raw) => JSON.parse(raw) as InstanceRecord);
  }

  /**
   * Appends one unit's max arrival rate (queries/s) to an app's forecast history, keeps the newest
   * `keep` units, and returns the history, oldest first.
   */
  async appendForecastHistory(app: string, maxRate: number, keep: number): Promise<number[]> {
    const k = key.forecastHistory(app);
    await this.redis.multi().rpush(k, String(maxRate)).ltrim(k, -keep, -1).exec();
    return this.getForecastHistory(app);
  }

  /** An app's forecast history (unit max arrival rates, queries/s), oldest first; empty when none. */
  async getForecastHistory(app: string): Promise<number[]> {
    return (await this.redis.lrange(key.forecastHistory(app), 0, -1)).map(Number);
  }

  /** Stores a new pipeline spec; false if the name is taken (atomic check). */
  async createPipeline(record: PipelineRecord): Promise<boolean> {
    const created = await this.redis.set(key.pipeline(record.spec.name), JSON.stringify(record), "NX");
    if (created !== "OK") return false;
    await this.redis.sadd(key.pipelines, record.spec.name);
    return true;
  }

  async getPipeline(name: string): Promise<PipelineRecord | undefined> {
    const raw = await this.redis.get(key.pipeline(name));
    return raw ? pipelineRecordSchema.parse(JSON.parse(raw)) : undefined;
  }

  async listPipelines(): Promise<PipelineRecord[]> {
    const names = (await this.redis.smembers(key.pipelines)).sort();
    if (names.length === 0) return [];
    const raws = await this.redis.mget(names.map(key.pipeline));
    return raws.filter((r): r is string => r !== null).map((r) => pipelineRecordSchema.parse(JSON.parse(r)));
  }

  /** Removes a pipeline; the removed record, or undefined if there was none. */
  async deletePipeline(name: string): Promise<PipelineRecord | undefined> {
    const record = await this.getPipeline(name);
    if (!record) return undefined;
    await this.redis.multi().del(key.pipeline(name)).del(key.pipelinePlan(name)).srem(key.pipelines, name).exec();
    return record;
  }

  /** The pipeline controller's current plan of a pipeline (services/model-autoscaler pipelines.ts). */
  async putPipelinePlan(status: PipelinePlanStatus): Promise<void> {
    await this.redis.set(key.pipelinePlan(status.pipeline), JSON.stringify(status));
  }

  async getPipelinePlan(name: string): Promise<PipelinePlanStatus | undefined> {
    const raw = await this.redis.get(key.pipelinePlan(name));
    return raw ? pipelinePlanStatusSchema.parse(JSON.parse(raw)) : undefined;
  }

  async deletePipelinePlan(name: string): Promise<void> {
    await this.redis.del(key.pipelinePlan(name));
  }
}
