import { randomBytes } from "node:crypto";
import type { FastifyInstance, RawReplyDefaultExpression, RawRequestDefaultExpression, RawServerDefault } from "fastify";
import client from "prom-client";
import {
  ErrorCode,
  ServeError,
  appQuotaSchema,
  checkName,
  describeZodError,
  keyQuotaSchema,
  keyQuotaSubject,
  subjects,
  type AppQuotaRecord,
  type Clock,
  type KeyQuotaChange,
  type KeyQuotaRecord,
  type QuotaChange,
} from "@sloserve/contracts";
import { QuotaAdmission, type QuotaTicket } from "@sloserve/policy";
import { startQuotaSync, type Bus, type Logger, type QuotaSync } from "@sloserve/bus";
import { QuotaStore, type ApiKeyStore, type MetadataStore } from "@sloserve/store";
import { checkKeyId } from "./keys.js";

/**
 * Apps' quotas at the frontend (docs/RELIABILITY.md "Quotas"; the rule: libs/policy access/quota.ts).
 *
 * - Admission: every HTTP and gRPC query of an app with a quota takes a slot and a token of this
 *   frontend's share before it is read ({@link FrontendQuotas.admit}), and with access control on one
 *   of its API key's quota first when the key has one; over a limit it is refused at once, 429
 *   `quota_exceeded` with `Retry-After` (gRPC RESOURCE_EXHAUSTED), and counted in
 *   `sloserve_quota_refused_total{app,reason}` (reason `key_rate_qps` or `key_max_concurrency` when
 *   its key's quota refused it). An admitted query goes to the dispatchers on
 *   `infer.<kind>.<name>.admitted`, which do not charge it again.
 * - Routes: `PUT /v1/apps/{app}/quota` `{"rate_qps", "burst", "max_concurrency"}` (admin) stores the
 *   quota in Redis and announces it on `quota.changed.<app>`; `GET` reads it back (404 `unknown_quota`,
 *   or `unknown_app` for an app with no models); `DELETE` (admin) removes it.
 * - API keys' quotas (access control on; admin only, as the key routes): `PUT`, `GET`, `DELETE
 *   /v1/keys/{key_id}/quota`, the same body, stored beside the apps' and announced on
 *   `quota.changed.key:<id>` (404 `unknown_key` for a key that does not exist); revoking a key
 *   removes its quota ({@link removeKeyQuota}).
 */

export class FrontendQuotas {
  /** `sloserve_quota_refused_total`, registered by the app in its registry. */
  readonly refused = new client.Counter({
    name: "sloserve_quota_refused_total",
    help: "Queries refused because their app or their API key was over its quota, by app and the limit (rate_qps, max_concurrency; key_rate_qps, key_max_concurrency: the key's)",
    labelNames: ["app", "reason"],
    registers: [],
  });

  constructor(
    readonly admission: QuotaAdmission,
    private readonly clock: Clock,
  ) {}

  /**
   * Admits a query of `app` sent with the API key `keyId` (undefined: access control off) under its
   * key's quota and its app's: its ticket, to release once the query ends however it ends; or throws
   * its `quota_exceeded`.
   */
  admit(app: string, keyId?: string): QuotaTicket {
    const a = this.admission.admitQuery(app, keyId, this.clock.now());
    if (a.admitted) return a.ticket;
    this.refused.inc({ app, reason: a.refusal.key === undefined ? a.refusal.limit : `key_${a.refusal.limit}` });
    throw a.refusal.error;
  }
}

/**
 * This process's quotas: its admission, under a process id of its own (each of several frontend
 * processes enforces its own share), filled from Redis and kept current on the bus (libs/bus
 * quota-sync.ts); the store, for the routes.
 */
export async function startFrontendQuotas(bus: Bus, store: MetadataStore, clock: Clock, log: Logger, options: { keys: boolean }): Promise<{ quotas: FrontendQuotas; quotaStore: QuotaStore; sync: QuotaSync }> {
  const quotaStore = new QuotaStore(store.redis);
  const quotas = new FrontendQuotas(new QuotaAdmission(`frontend-${randomBytes(3).toString("hex")}`, "frontend", clock.now()), clock);
  // API keys' quotas with access control on (without it no query has a key).
  const sync = await startQuotaSync(bus.nc, quotas.admission, { load: () => quotaStore.list(), loadKeys: options.keys ? () => quotaStore.listKeys() : undefined, clock, log });
  return { quotas, quotaStore, sync };
}

export function registerQuotaRoutes(
  app: FastifyInstance<RawServerDefault, RawRequestDefaultExpression, RawReplyDefaultExpression, Logger>,
  deps: { bus: Bus; store: MetadataStore; quotaStore: QuotaStore; quotas: FrontendQuotas; clock: Clock },
): void {
  const { bus, store, quotaStore, quotas, clock } = deps;
  const announce = (change: QuotaChange): void => bus.nc.publish(subjects.quotaChanged(change.app), JSON.stringify(change));
  /** 404: the app has no models (`unknown_app`), or no quota (`unknown_quota`). */
  const noQuota = async (name: string): Promise<ServeError> => {
    if ((await store.listAppModels(name)).length === 0) return new ServeError(ErrorCode.unknownApp, `no app named '${name}' (it has no models)`);
    return new ServeError(ErrorCode.unknownQuota, `app '${name}' has no quota: its queries are not limited (set one with PUT /v1/apps/${name}/quota {"rate_qps": R, "burst": B, "max_concurrency": C})`);
  };

  app.put<{ Params: { app: string } }>("/v1/apps/:app/quota", async (req) => {
    const name = checkName("app", req.params.app);
    const parsed = appQuotaSchema.safeParse(req.body ?? {});
    if (!parsed.success) throw new ServeError(ErrorCode.badRequest, `send {"rate_qps": R, "burst": B, "max_concurrency": C}: ${describeZodError(parsed.error)}`);
    if ((await store.listAppModels(name)).length === 0) throw new ServeError(ErrorCode.unknownApp, `no app named '${name}' (it has no models): register a model in it first`);
    const now = clock.now();
    const record: AppQuotaRecord = { app: name, ...parsed.data, updated_at_ms: now };
    await quotaStore.put(record);
    // This frontend at once; the others (and the dispatchers) when the change reaches them.
    quotas.admission.setQuota(name, parsed.data, now);
    announce({ app: name, quota: record });
    req.log.info({ app: name, quota: parsed.data, by: req.apiKey?.id }, "quota set");
    return record;
  });

  app.get<{ Params: { app: string } }>("/v1/apps/:app/quota", async (req) => {
    const name = checkName("app", req.params.app);
    const record = await quotaStore.get(name);
    if (!record) throw await noQuota(name);
    return record;
  });

  app.delete<{ Params: { app: string } }>("/v1/apps/:app/quota", async (req) => {
    const name = checkName("app", req.params.app);
    const record = await quotaStore.delete(name);
    if (!record) throw await noQuota(name);
    quotas.admission.setQuota(name, undefined, clock.now());
    announce({ app: name, quota: null });
    req.log.info({ app: name, by: req.apiKey?.id }, "quota removed");
    return { removed: record };
  });
}

type QuotaDeps = { bus: Bus; quotaStore: QuotaStore; quotas: FrontendQuotas; clock: Clock };

const announceKey = (bus: Bus, change: KeyQuotaChange): void => bus.nc.publish(subjects.keyQuotaChanged(change.key), JSON.stringify(change));

/** Removes an API key's quota (the key revoked, or `DELETE /v1/keys/{id}/quota`): from Redis, this frontend, and the others on the bus. The removed record, if there was one. */
export async function removeKeyQuota(deps: QuotaDeps, id: string): Promise<KeyQuotaRecord | undefined> {
  const record = await deps.quotaStore.deleteKey(id);
  if (!record) return undefined;
  deps.quotas.admission.setQuota(keyQuotaSubject(id), undefined, deps.clock.now());
  announceKey(deps.bus, { key: id, quota: null });
  return record;
}

/** `PUT`, `GET`, `DELETE /v1/keys/{key_id}/quota` (access control on; the access rules make them admin only). */
export function registerKeyQuotaRoutes(app: FastifyInstance<RawServerDefault, RawRequestDefaultExpression, RawReplyDefaultExpression, Logger>, deps: QuotaDeps & { keys: ApiKeyStore | undefined }): void {
  const { quotaStore, quotas, clock } = deps;
  /** The key's id, checked: 400 with access control off or for an id that is not one. */
  const keyId = (given: string): { id: string; keys: ApiKeyStore } => {
    if (!deps.keys) throw new ServeError(ErrorCode.badRequest, "access control is off (the frontend runs with AUTH=false): there are no API keys to set quotas for (set an app's quota: PUT /v1/apps/{app}/quota)");
    return { id: checkKeyId(given), keys: deps.keys };
  };
  /** 404 `unknown_key` for a key that does not exist (revoked, or never made). */
  const mustExist = async (id: string, keys: ApiKeyStore): Promise<void> => {
    if (!(await keys.get(id))) throw new ServeError(ErrorCode.unknownKey, `no API key with id ${id} (GET /v1/keys lists them)`);
  };
  const existingKey = async (given: string): Promise<string> => {
    const { id, keys } = keyId(given);
    await mustExist(id, keys);
    return id;
  };
  const noQuota = (id: string): ServeError =>
    new ServeError(ErrorCode.unknownQuota, `API key '${id}' has no quota: its queries are limited by their apps' quotas only (set one with PUT /v1/keys/${id}/quota {"rate_qps": R, "burst": B, "max_concurrency": C})`);

  app.put<{ Params: { id: string } }>("/v1/keys/:id/quota", async (req) => {
    const { id, keys } = keyId(req.params.id);
    const parsed = keyQuotaSchema.safeParse(req.body ?? {});
    if (!parsed.success) throw new ServeError(ErrorCode.badRequest, `send {"rate_qps": R, "burst": B, "max_concurrency": C}: ${describeZodError(parsed.error)}`);
    await mustExist(id, keys);
    const now = clock.now();
    const record: KeyQuotaRecord = { key: id, ...parsed.data, updated_at_ms: now };
    await quotaStore.putKey(record);
    // This frontend at once; the others when the change reaches them (dispatchers ignore it).
    quotas.admission.setQuota(keyQuotaSubject(id), parsed.data, now);
    announceKey(deps.bus, { key: id, quota: record });
    req.log.info({ keyId: id, quota: parsed.data, by: req.apiKey?.id }, "key quota set");
    return record;
  });

  app.get<{ Params: { id: string } }>("/v1/keys/:id/quota", async (req) => {
    const id = await existingKey(req.params.id);
    const record = await quotaStore.getKey(id);
    if (!record) throw noQuota(id);
    return record;
  });

  app.delete<{ Params: { id: string } }>("/v1/keys/:id/quota", async (req) => {
    const id = await existingKey(req.params.id);
    const record = await removeKeyQuota(deps, id);
    if (!record) throw noQuota(id);
    req.log.info({ keyId: id, by: req.apiKey?.id }, "key quota removed");
    return { removed: record };
  });
}
