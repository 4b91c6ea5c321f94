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

/** `PUT /v1/apps/{app}/quota`: `{"rate_qps": R, "burst": B, "max_concurrency": C}`. */
const count = (what: string) =>
  z
    .number({ error: (issue) => (issue.input === undefined ? `missing: give ${what}` : `must be a number (${what})`) })
    .int(`must be a whole number (${what})`)
    .min(1, `must be at least 1 (${what})`)
    .max(QUOTA_MAX, `must be at most ${QUOTA_MAX}`);

/** `PUT /v1/apps/{app}/quota`: `{"rate_qps": R, "burst": B, "max_concurrency": C}`; errors name the field (`burst: must be at least 1 …`). */
export const appQuotaSchema = z
  .object({
    rate_qps: z
      .number({ error: (issue) => (issue.input === undefined ? "missing: give the queries per second the app may send" : "must be a number (queries per second)") })
      .positive("must be above 0 (queries per second)")
      .max(QUOTA_MAX, `must be at most ${QUOTA_MAX}`),
    burst: count("the queries admitted at once above the rate"),
    max_concurrency: count("the app's queries in flight at once"),
  })
  .strict();
export type AppQuota = z.infer<typeof appQuotaSchema>;

const appName = z.string().refine(isValidName, { message: "an app name is 1-64 letters, digits, '_' or '-', starting with a letter or digit" });

/** A stored quota: the app, its limits, and when it was set (the setting frontend's clock). */
export const appQuotaRecordSchema = appQuotaSchema.extend({ app: appName, updated_at_ms: z.number() });
export type AppQuotaRecord = z.infer<typeof appQuotaRecordSchema>;

/** `quota.changed.<app>`: the app's new quota, or null when it was removed. */
export const quotaChangeSchema = z.object({ app: appName, quota: appQuotaRecordSchema.nullable() });
export type QuotaChange = z.infer<typeof quotaChangeSchema>;

/** The processes that admit queries: frontends (HTTP, gRPC) and dispatchers (NATS callers). */
export const quotaRoles = ["frontend", "dispatcher"] as const;
export type QuotaRole = (typeof quotaRoles)[number];

/**
 * `quota.demand.<process>`, from every admitting process every `every_ms`: the queries each app offered
 * it (admitted or refused) per second over that period, for the apps with a quota that offered any.
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
