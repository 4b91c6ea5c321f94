import type { AppQuotaRecord } from "@sloserve/contracts";
import { seg, type Api } from "./client.js";
import { clockTime, textTable, type Out } from "./output.js";

/**
 * `sloserve quota set|get|delete APP`: an app's quota (`PUT`, `GET`, `DELETE /v1/apps/{app}/quota`;
 * docs/RELIABILITY.md "Quotas"). Setting and removing one needs an admin key when access control is on.
 */

const table = (q: AppQuotaRecord): string =>
  textTable([{ app: q.app, "rate (q/s)": q.rate_qps, burst: q.burst, "max in flight": q.max_concurrency, set: clockTime(q.updated_at_ms) }]);

export async function setQuota(api: Api, out: Out, app: string, o: { rate: number; burst: number; concurrency: number }): Promise<void> {
  const q = await api.json<AppQuotaRecord>("PUT", `/v1/apps/${seg(app)}/quota`, { json: { rate_qps: o.rate, burst: o.burst, max_concurrency: o.concurrency } });
  out.emit(q, () => table(q));
}

export async function getQuota(api: Api, out: Out, app: string): Promise<void> {
  const q = await api.get<AppQuotaRecord>(`/v1/apps/${seg(app)}/quota`);
  out.emit(q, () => table(q));
}

export async function deleteQuota(api: Api, out: Out, app: string): Promise<void> {
  const r = await api.json<{ removed: AppQuotaRecord }>("DELETE", `/v1/apps/${seg(app)}/quota`);
  out.emit(r, () => `removed the quota of ${r.removed.app}: its queries are no longer limited`);
}
