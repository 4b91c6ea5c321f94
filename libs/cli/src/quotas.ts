import type { AppQuotaRecord, KeyQuotaRecord } from "@sloserve/contracts";
import { CliError, exitCodes, seg, type Api } from "./client.js";
import { clockTime, textTable, type Out } from "./output.js";

/**
 * `sloserve quota set|get|delete APP`: an app's quota (`PUT`, `GET`, `DELETE /v1/apps/{app}/quota`;
 * docs/RELIABILITY.md "Quotas"); with `--key KEY_ID` instead of the app, an API key's
 * (`/v1/keys/{key_id}/quota`, access control on). Setting and removing one needs an admin key when
 * access control is on; a key's, reading it too.
 */

/** Whose quota: an app (the argument) or an API key (`--key`), exactly one of them. */
export type QuotaOwner = { app: string } | { key: string };

/** The owner from the command's argument and `--key`; a usage error unless exactly one is given. */
export function quotaOwner(app: string | undefined, key: string | undefined): QuotaOwner {
  if (app !== undefined && key !== undefined) throw new CliError(`give an app or --key KEY_ID, not both (got '${app}' and --key ${key})`, exitCodes.usage);
  if (key !== undefined) return { key };
  if (app !== undefined) return { app };
  throw new CliError("give the app whose quota it is, or --key KEY_ID for an API key's", exitCodes.usage);
}

type AnyQuota = AppQuotaRecord | KeyQuotaRecord;

const path = (o: QuotaOwner): string => ("app" in o ? `/v1/apps/${seg(o.app)}/quota` : `/v1/keys/${seg(o.key)}/quota`);
const nameOf = (q: AnyQuota): string => ("app" in q ? q.app : `API key ${q.key}`);

const table = (q: AnyQuota): string => {
  const owner: Record<string, string> = "app" in q ? { app: q.app } : { key: q.key };
  return textTable([{ ...owner, "rate (q/s)": q.rate_qps, burst: q.burst, "max in flight": q.max_concurrency, set: clockTime(q.updated_at_ms) }]);
};

export async function setQuota(api: Api, out: Out, owner: QuotaOwner, o: { rate: number; burst: number; concurrency: number }): Promise<void> {
  const q = await api.json<AnyQuota>("PUT", path(owner), { json: { rate_qps: o.rate, burst: o.burst, max_concurrency: o.concurrency } });
  out.emit(q, () => table(q));
}

export async function getQuota(api: Api, out: Out, owner: QuotaOwner): Promise<void> {
  const q = await api.get<AnyQuota>(path(owner));
  out.emit(q, () => table(q));
}

export async function deleteQuota(api: Api, out: Out, owner: QuotaOwner): Promise<void> {
  const r = await api.json<{ removed: AnyQuota }>("DELETE", path(owner));
  out.emit(r, () => `removed the quota of ${nameOf(r.removed)}: its queries are no longer limited${"app" in r.removed ? "" : " by it (their apps' quotas still apply)"}`);
}
