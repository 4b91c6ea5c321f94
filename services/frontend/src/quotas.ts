import { randomBytes } from "node:crypto";
import type { FastifyInstance, RawReplyDefaultExpression, RawRequestDefaultExpression, RawServerDefault } from "fastify";
import client from "prom-client";
import { ErrorCode, ServeError, appQuotaSchema, checkName, describeZodError, subjects, type AppQuotaRecord, type Clock, type QuotaChange } from "@sloserve/contracts";
import { QuotaAdmission, type QuotaTicket } from "@sloserve/policy";
import { startQuotaSync, type Bus, type Logger, type QuotaSync } from "@sloserve/bus";
import { QuotaStore, type MetadataStore } from "@sloserve/store";

/**
 * Apps' quotas at the frontend (docs/RELIABILITY.md "Quotas"; the rule: libs/policy access/quota.ts).
 *
 * - Admission: every HTTP and gRPC query of an app with a quota takes a slot and a token of this
 *   frontend's share before it is read ({@link FrontendQuotas.admit}); over the limit it is refused at
 *   once, 429 `quota_exceeded` with `Retry-After` (gRPC RESOURCE_EXHAUSTED), and counted in
 *   `sloserve_quota_refused_total{app,reason}`. An admitted query goes to the dispatchers on
 *   `infer.<kind>.<name>.admitted`, which do not charge it again.
 * - Routes: `PUT /v1/apps/{app}/quota` `{"rate_qps", "burst", "max_concurrency"}` (admin) stores the
 *   quota in Redis and announces it on `quota.changed.<app>`; `GET` reads it back (404 `unknown_quota`,
 *   or `unknown_app` for an app with no models); `DELETE` (admin) removes it.
 */

export class FrontendQuotas {
  /** `sloserve_quota_refused_total`, registered by the app in its registry. */
  readonly refused = new client.Counter({ name: "sloserve_quota_refused_total", help: "Queries refused because their app was over its quota, by app and the limit (rate_qps, max_concurrency)", labelNames: ["app", "reason"], registers: [] });

  constructor(
    readonly admission: QuotaAdmission,
    private readonly clock: Clock,
  ) {}

  /** Admits a query of `app` (its ticket, to release once the query ends however it ends) or throws its `quota_exceeded`. */
  admit(app: string): QuotaTicket {
    const a = this.admission.admit(app, this.clock.now());
    if (a.admitted) return a.ticket;
    this.refused.inc({ app, reason: a.refusal.limit });
    throw a.refusal.error;
  }
}

/**
 * This process's quotas: its admission, under a process id of its own (each of several frontend
 * processes enforces its own share), filled from Redis and kept current on the bus (libs/bus
 * quota-sync.ts); the store, for the routes.
 */
export async function startFrontendQuotas(bus: Bus, store: MetadataStore, clock: Clock, log: Logger): Promise<{ quotas: FrontendQuotas; quotaStore: QuotaStore; sync: QuotaSync }> {
  const quotaStore = new QuotaStore(store.redis);
  const quotas = new FrontendQuotas(new QuotaAdmission(`frontend-${randomBytes(3).toString("hex")}`, "frontend", clock.now()), clock);
  const sync = await startQuotaSync(bus.nc, quotas.admission, { load: () => quotaStore.list(), clock, log });
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
