import type { ModelRecord, VariantRecord } from "@sloserve/contracts";
import type { MetadataStore } from "./store.js";

/**
 * An in-memory copy of the model and variant metadata, kept current by registry events (the
 * caller wires `applyRegistered` / `applyUnregistered` to the bus) and filled from Redis at start
 * and on a miss. Lookups of known models never wait on Redis.
 */
export class Catalog {
  readonly models = new Map<string, ModelRecord>();
  readonly variants = new Map<string, VariantRecord>();
  readonly variantsByModel = new Map<string, VariantRecord[]>();

  constructor(private readonly store: MetadataStore) {}

  async load(): Promise<void> {
    const [models, variants] = await Promise.all([this.store.listModels(), this.store.listVariants()]);
    for (const m of models) this.models.set(m.name, m);
    for (const m of models) this.variantsByModel.set(m.name, []);
    for (const v of variants) this.addVariant(v);
  }

  applyRegistered(model: ModelRecord, variants: readonly VariantRecord[]): void {
    this.models.set(model.name, model);
    this.variantsByModel.set(model.name, []);
    for (const v of variants) this.addVariant(v);
  }

  applyUnregistered(name: string): void {
    this.models.delete(name);
    for (const v of this.variantsByModel.get(name) ?? []) this.variants.delete(v.name);
    this.variantsByModel.delete(name);
  }

  addVariant(v: VariantRecord): void {
    this.variants.set(v.name, v);
    const list = this.variantsByModel.get(v.model) ?? [];
    const i = list.findIndex((x) => x.name === v.name);
    if (i >= 0) list[i] = v;
    else list.push(v);
    this.variantsByModel.set(v.model, list);
  }

  /** The model from memory, else from Redis (then remembered). */
  async getModel(name: string): Promise<ModelRecord | undefined> {
    const known = this.models.get(name);
    if (known) return known;
    const model = await this.store.getModel(name);
    if (!model) return undefined;
    this.applyRegistered(model, await this.store.listVariants(name));
    return model;
  }

  async getVariant(name: string): Promise<VariantRecord | undefined> {
    const known = this.variants.get(name);
    if (known) return known;
    const v = await this.store.getVariant(name);
    if (v) {
      await this.getModel(v.model);
      this.addVariant(v);
    }
    return v;
  }
}
