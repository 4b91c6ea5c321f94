import { z } from "zod";
import { batchingTunedEventSchema, modelProfiledEventSchema, modelRecordSchema, variantRecordSchema, type ModelRecord, type VariantRecord } from "@sloserve/contracts";

const registeredEvent = z.object({ model: modelRecordSchema, variants: z.array(variantRecordSchema) });
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
    this.byApp = undefined;
    for (const m of models) this.variantsByModel.set(m.name, []);
    for (const v of variants) this.addVariant(v);
  }

  applyRegistered(model: ModelRecord, variants: readonly VariantRecord[]): void {
    this.models.set(model.name, model);
    this.byApp = undefined;
    this.variantsByModel.set(model.name, []);
    for (const v of variants) this.addVariant(v);
  }

  /**
   * Applies one `registry.event.*` message (registered, unregistered, profiled, tuned). Returns false for
   * events it does not keep (e.g. profiling progress). Throws on a malformed event.
   */
  applyEvent(subject: string, body: unknown): boolean {
    const [, , kind, name] = subject.split(".");
    if (kind === "registered") {
      const e = registeredEvent.parse(body);
      this.applyRegistered(e.model, e.variants);
    } else if (kind === "unregistered") {
      this.applyUnregistered(name ?? "");
    } else if (kind === "profiled") {
      const e = modelProfiledEventSchema.parse(body);
      for (const v of e.variants) this.addVariant(v);
      for (const r of e.removed) this.removeVariant(r);
    } else if (kind === "tuned") {
      // Batching re-tuned (new Wbatch): the updated records replace the known ones.
      for (const v of batchingTunedEventSchema.parse(body).variants) this.addVariant(v);
    } else return false;
    return true;
  }

  removeVariant(name: string): void {
    const v = this.variants.get(name);
    if (!v) return;
    this.variants.delete(name);
    const list = this.variantsByModel.get(v.model);
    if (list) this.variantsByModel.set(v.model, list.filter((x) => x.name !== name));
  }

  applyUnregistered(name: string): void {
    this.models.delete(name);
    this.byApp = undefined;
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

  /** app → its models in name order; rebuilt after a change (model-less queries read it per query). */
  private byApp: Map<string, ModelRecord[]> | undefined;

  /** Models of an app, in name order. */
  modelsOfApp(app: string): readonly ModelRecord[] {
    if (!this.byApp) {
      this.byApp = new Map();
      for (const m of [...this.models.values()].sort((a, b) => a.name.localeCompare(b.name))) {
        const list = this.byApp.get(m.app);
        if (list) list.push(m);
        else this.byApp.set(m.app, [m]);
      }
    }
    return this.byApp.get(app) ?? [];
  }

  /** A known model's inputs and outputs (pipeline checks: libs/policy `PipelineEnvironment.model`). */
  signature(model: string): { inputs: ModelRecord["inputs"]; outputs: ModelRecord["outputs"] } | undefined {
    const m = this.models.get(model);
    return m ? { inputs: m.inputs, outputs: m.outputs } : undefined;
  }

  /** An app's signature: its models share their inputs; the outputs of the first (in name order). */
  appSignature(app: string): { inputs: ModelRecord["inputs"]; outputs: ModelRecord["outputs"] } | undefined {
    const m = this.modelsOfApp(app)[0];
    return m ? { inputs: m.inputs, outputs: m.outputs } : undefined;
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
