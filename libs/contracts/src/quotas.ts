import { z } from "zod";
import { isValidName } from "./names.js";

/**
 * Per-app quotas (docs/RELIABILITY.md "Quotas"): a token bucket (`rate_qps` tokens a second, at most
 * `burst` saved up) and a limit on the queries in flight (`max_concurrency`), for the app as a whole,
 * enforced by every frontend and dispatcher (libs/policy access/quota.ts). Set by
 * `PUT /v1/apps/{app}/quota`, kept in Redis (libs/store quotas.ts), announced on `quota.changed.<app>`;
 * each admitting process reports its demand on `quota.demand.<process>` so that the processes share
 * the quota out among themselves.
 */

/** The most a quota may say: a million queries a second, saved up or in flight (well past one cluster). */
export const QUOTA_MAX = 1_000_000;

/** A whole count of queries (burst, in flight); errors name what it counts. */
const count = (what: string) =>
  z
    .number({ error: (issue) => (issue.input === undefined ? `missing: give ${what}` : `must be a number (${what})`) })
    .int(`must be a whole number (${what})`)
    .min(1, `must be at least 1 (${what})`)
    .max(QUOTA_MAX, `must be at most ${QUOTA_MAX}`);

/** A quota's limits, `{"rate_qps": R, "burst": B, "max_concurrency": C}`, for `who` ("the app", "the key"); errors name the field (`burst: must be at least 1 …`). */
const quotaLimitsSchema = (who: string) =>
  z
    .object({
      rate_qps: z
        .number({ error: (issue) => (issue.input === undefined ? `missing: give the queries per second ${who} may send` : "must be a number (queries per second)") })
        .positive("must be above 0 (queries per second)")
        .max(QUOTA_MAX, `must be at most ${QUOTA_MAX}`),
      burst: count("the queries admitted at once above the rate"),
      max_concurrency: count(`${who}'s queries in flight at once`),
    })
    .strict();

/** `PUT /v1/apps/{app}/quota`: `{"rate_qps": R, "burst": B, "max_concurrency": C}`; errors name the field (`burst: must be at least 1 …`). */
export const appQuotaSchema = quotaLimitsSchema("the app");
export type AppQuota = z.infer<typeof appQuotaSchema>;

const appName = z.string().refine(isValidName, { message: "an app name is 1-64 letters, digits, '_' or '-', starting with a letter or digit" });

/** A stored quota: the app, its limits, and when it was set (the setting frontend's clock). */
export const appQuotaRecordSchema = appQuotaSchema.extend({ app: appName, updated_at_ms: z.number() });
export type AppQuotaRecord = z.infer<typeof appQuotaRecordSchema>;

/** `quota.changed.<app>`: the app's new quota, or null when it was removed. */
export const quotaChangeSchema = z.object({ app: appName, quota: appQuotaRecordSchema.nullable() });
export type QuotaChange = z.infer<typeof quotaChangeSchema>;

/**
 * Per-API-key quotas (access control on; docs/RELIABILITY.md "Quotas"): the same limits and rule as an
 * app's, for the queries sent with one key, enforced by the frontends only (keys exist there). Set by
 * `PUT /v1/keys/{key_id}/quota`, kept in Redis beside the apps' (libs/store quotas.ts), removed with the
 * key. In the admission table, the demand reports and on the bus a key's quota goes by the subject
 * `key:<id>` ({@link keyQuotaSubject}), which no app name can be (':' is not allowed in one); a
 * dispatcher never admits by key and ignores them.
 */
export const KEY_QUOTA_PREFIX = "key:";
/** The admission subject of an API key's quota: `key:<id>`. */
export const keyQuotaSubject = (keyId: string): string => `${KEY_QUOTA_PREFIX}${keyId}`;
/** The key id of a key quota's admission subject; undefined for an app's. */
export const keyOfQuotaSubject = (subject: string): string | undefined => (subject.startsWith(KEY_QUOTA_PREFIX) ? subject.slice(KEY_QUOTA_PREFIX.length) : undefined);

/** `PUT /v1/keys/{key_id}/quota`: `{"rate_qps": R, "burst": B, "max_concurrency": C}`, as an app's. */
export const keyQuotaSchema = quotaLimitsSchema("the key");
export type KeyQuota = z.infer<typeof keyQuotaSchema>;

/** A stored API key id: 12 hex digits (libs/contracts access.ts). */
const keyId = z.string().regex(/^[0-9a-f]{12}$/, "an API key id is 12 hex digits");

/** A stored key quota: the key's id, its limits, and when they were set (the setting frontend's clock). */
export const keyQuotaRecordSchema = keyQuotaSchema.extend({ key: keyId, updated_at_ms: z.number() });
export type KeyQuotaRecord = z.infer<typeof keyQuotaRecordSchema>;

/** `quota.changed.key:<id>`: the key's new quota, or null when it was removed (or the key revoked). */
export const keyQuotaChangeSchema = z.object({ key: keyId, quota: keyQuotaRecordSchema.nullable() });
export type KeyQuotaChange = z.infer<typeof keyQuotaChangeSchema>;

/** The processes that admit queries: frontends (HTTP, gRPC) and dispatchers (NATS callers). */
export const quotaRoles = ["frontend", "dispatcher"] as const;
export type QuotaRole = (typeof quotaRoles)[number];

/**
 * `quota.demand.<process>`, from every admitting process every `every_ms`: the queries each app offered
 * it (admitted or refused) per second over that period, for the apps with a quota that offered any;
 * a frontend's also hold its API keys' quotas, under `key:<id>` (not app names; dispatchers' shares ignore them).
 * `leaving`: the process stops; the others drop it at once.
 */
export const quotaDemandReportSchema = z.object({
  process: z.string().min(1).max(128),
  role: z.enum(quotaRoles),
  at_ms: z.number(),
  every_ms: z.number().positive(),
  apps: z.record(z.string(), z.number().nonnegative()),
  leaving: z.boolean().optional(),
});
export type QuotaDemandReport = z.infer<typeof quotaDemandReportSchema>;
