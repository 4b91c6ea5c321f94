import type { NatsConnection, Subscription } from "@nats-io/transport-node";
import { describeZodError, keyQuotaChangeSchema, keyQuotaSubject, quotaChangeSchema, quotaDemandReportSchema, subjects, type AppQuota, type AppQuotaRecord, type Clock, type KeyQuotaRecord, type QuotaDemandReport } from "@sloserve/contracts";
import type { Logger } from "./log.js";
import { runEvery } from "./ticker.js";

/**
 * The quotas' traffic on the bus, for every process that admits queries (frontends and dispatchers):
 * the quota table filled from a snapshot at start and every {@link QUOTA_REFRESH_MS} after (against a
 * change lost with a connection), each change applied as it is announced on `quota.changed.<app>`,
 * this process's demand published on `quota.demand.<process>` every report period (empty or not, so
 * that the processes know each other) and the others' applied as they come. The table and its rule
 * are libs/policy's `QuotaAdmission` (access/quota.ts); the snapshot comes from `load` (libs/store
 * `QuotaStore.list`). With `loadKeys` (frontends, access control on) API keys' quotas too, as
 * `key:<id>` in the table, from `quota.changed.key:<id>` and `QuotaStore.listKeys`; without it (dispatchers)
 * key quota changes are ignored.
 */

/** How often the whole quota table is read again, ms. */
export const QUOTA_REFRESH_MS = 10_000;

/** What the sync drives (libs/policy `QuotaAdmission`). */
export interface QuotaTable {
  readonly process: string;
  readonly options: { reportEveryMs: number };
  setQuota(app: string, quota: AppQuota | undefined, nowMs: number): void;
  replaceQuotas(quotas: ReadonlyMap<string, AppQuota>, readAtMs: number, nowMs: number): void;
  observe(report: QuotaDemandReport, nowMs: number): void;
  report(nowMs: number, leaving?: boolean): QuotaDemandReport;
}

export interface QuotaSync {
  /** Stops reporting (a last report says the process leaves) and listening. */
  stop(): void;
}

const limits = (r: AppQuotaRecord | KeyQuotaRecord): AppQuota => ({ rate_qps: r.rate_qps, burst: r.burst, max_concurrency: r.max_concurrency });
/** The subjects of API keys' quota changes: `quota.changed.key:<id>`. */
const KEY_CHANGE_PREFIX = subjects.keyQuotaChanged("");

/** Subscribes, reads the snapshot, then reports every period; resolves once the table holds the snapshot. */
export async function startQuotaSync(
  nc: NatsConnection,
  table: QuotaTable,
  deps: { load: () => Promise<AppQuotaRecord[]>; loadKeys?: (() => Promise<KeyQuotaRecord[]>) | undefined; clock: Clock; log: Logger; refreshMs?: number },
): Promise<QuotaSync> {
  const { clock, log } = deps;
  // Subscribed before the snapshot is read, so that no change falls between the two.
  const subs: Subscription[] = [
    nc.subscribe(subjects.quotaChangedAll, {
      callback: (_err, msg) => {
        if (msg.subject.startsWith(KEY_CHANGE_PREFIX)) {
          if (!deps.loadKeys) return; // a dispatcher: keys' quotas are the frontends'
          const parsed = keyQuotaChangeSchema.safeParse(msg.json());
          if (!parsed.success) return log.warn({ subject: msg.subject, error: describeZodError(parsed.error) }, "ignoring malformed key quota change");
          const { key, quota } = parsed.data;
          table.setQuota(keyQuotaSubject(key), quota ? limits(quota) : undefined, clock.now());
          log.info({ keyId: key, quota }, quota ? "key quota set" : "key quota removed");
          return;
        }
        const parsed = quotaChangeSchema.safeParse(msg.json());
        if (!parsed.success) return log.warn({ subject: msg.subject, error: describeZodError(parsed.error) }, "ignoring malformed quota change");
        const { app, quota } = parsed.data;
        table.setQuota(app, quota ? limits(quota) : undefined, clock.now());
        log.info({ app, quota }, quota ? "quota set" : "quota removed");
      },
    }),
    nc.subscribe(subjects.quotaDemandAll, {
      callback: (_err, msg) => {
        const parsed = quotaDemandReportSchema.safeParse(msg.json());
        if (!parsed.success) return log.warn({ subject: msg.subject, error: describeZodError(parsed.error) }, "ignoring malformed quota demand report");
        table.observe(parsed.data, clock.now());
      },
    }),
  ];
  const refresh = async (): Promise<void> => {
    const readAtMs = clock.now();
    const [records, keyRecords] = await Promise.all([deps.load(), deps.loadKeys?.() ?? []]);
    const quotas = new Map(records.map((r) => [r.app, limits(r)]));
    for (const r of keyRecords) quotas.set(keyQuotaSubject(r.key), limits(r));
    table.replaceQuotas(quotas, readAtMs, clock.now());
  };
  await refresh();
  const publish = (leaving: boolean): void => nc.publish(subjects.quotaDemand(table.process), JSON.stringify(table.report(clock.now(), leaving)));
  publish(false);
  const reporter = setInterval(() => publish(false), table.options.reportEveryMs);
  const refresher = runEvery(deps.refreshMs ?? QUOTA_REFRESH_MS, refresh, log, "quota refresh");
  return {
    stop() {
      clearInterval(reporter);
      clearInterval(refresher);
      for (const s of subs) s.unsubscribe();
      if (!nc.isClosed()) publish(true);
    },
  };
}
