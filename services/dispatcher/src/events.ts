import type { Subscription } from "@nats-io/transport-node";
import { describeZodError, forecastMessageSchema, spotNoticeSchema, stateEventSchema, subjects, workerReportSchema, type Clock } from "@sloserve/contracts";
import type { Bus, Logger } from "@sloserve/bus";
import type { Catalog } from "@sloserve/store";
import type { ClusterView } from "./cluster.js";
import type { SelectionView } from "./selection-view.js";
import type { Dispatcher } from "./dispatch.js";
import type { OverflowPath } from "./overflow.js";

/** The dispatcher's in-memory views, kept current by events. */
export interface DispatcherViews {
  catalog: Catalog;
  cluster: ClusterView;
  selection: SelectionView;
}

/** Puts a model's variants (profiles) into the selection index. */
export function syncModel(views: DispatcherViews, model: string): void {
  for (const v of views.catalog.variantsByModel.get(model) ?? []) views.selection.upsert(v);
}

/**
 * Keeps the views current: registry events (models, variants, profiles), state events (instances;
 * a settled load; a variant gone everywhere is rescued) and worker reports (heartbeats, load), stamped
 * with the clock's time. Subscribe before reading the snapshot so that nothing falls between the two.
 * With overflow on, also forecasts (`forecast.<app>`) and spot interruption notices, on which it may
 * pre-warm functions (MArk §4.5).
 */
export function followEvents(bus: Bus, views: DispatcherViews, dispatcher: Dispatcher, clock: Clock, log: Logger, overflow?: OverflowPath): Subscription[] {
  const { catalog, cluster, selection } = views;
  return [
    ...(overflow ? followPrewarmEvents(bus, cluster, overflow, log) : []),
    bus.nc.subscribe(subjects.registryEvents, {
      callback: (_err, msg) => {
        try {
          const [, , kind, model] = msg.subject.split(".");
          const before = new Set((catalog.variantsByModel.get(model ?? "") ?? []).map((v) => v.name));
          if (catalog.applyEvent(msg.subject, msg.json())) {
            const after = new Set((catalog.variantsByModel.get(model ?? "") ?? []).map((v) => v.name));
            for (const name of before) if (!after.has(name)) selection.remove(name);
            if (kind !== "unregistered") syncModel(views, model ?? "");
            selection.refreshRuntime(cluster);
          }
        } catch (err) {
          log.warn({ err, subject: msg.subject }, "ignoring malformed registry event");
        }
      },
    }),
    bus.nc.subscribe(subjects.stateAll, {
      callback: (_err, msg) => {
        try {
          const parsed = stateEventSchema.safeParse(msg.json());
          if (!parsed.success) return log.warn({ subject: msg.subject, error: describeZodError(parsed.error) }, "ignoring malformed state event");
          cluster.applyState(parsed.data);
          if (parsed.data.state !== "loading") dispatcher.settled(parsed.data.variant);
          selection.refreshRuntime(cluster);
          if (parsed.data.state === "inactive" && !(cluster.instances.get(parsed.data.variant)?.size ?? 0)) void dispatcher.rescue(parsed.data.variant);
        } catch (err) {
          log.warn({ err, subject: msg.subject }, "ignoring malformed state event");
        }
      },
    }),
    bus.nc.subscribe(subjects.workerMetricsAll, {
      callback: (_err, msg) => {
        try {
          const parsed = workerReportSchema.safeParse(msg.json());
          if (!parsed.success) return log.warn({ subject: msg.subject, error: describeZodError(parsed.error) }, "ignoring malformed worker report");
          cluster.applyReport(parsed.data, clock.now());
          selection.refreshRuntime(cluster);
        } catch (err) {
          log.warn({ err, subject: msg.subject }, "ignoring malformed worker report");
        }
      },
    }),
  ];
}

/** Forecasts and spot notices, the pre-warming triggers besides a lost heartbeat (Dispatcher.tick). */
function followPrewarmEvents(bus: Bus, cluster: DispatcherViews["cluster"], overflow: OverflowPath, log: Logger): Subscription[] {
  return [
    bus.nc.subscribe(subjects.forecastAll, {
      callback: (_err, msg) => {
        try {
          const parsed = forecastMessageSchema.safeParse(msg.json());
          if (!parsed.success) return log.warn({ subject: msg.subject, error: describeZodError(parsed.error) }, "ignoring malformed forecast");
          void overflow.forecast(parsed.data);
        } catch (err) {
          log.warn({ err, subject: msg.subject }, "ignoring malformed forecast");
        }
      },
    }),
    bus.nc.subscribe(subjects.spotNoticeAll, {
      callback: (_err, msg) => {
        try {
          const parsed = spotNoticeSchema.safeParse(msg.json());
          if (!parsed.success) return log.warn({ subject: msg.subject, error: describeZodError(parsed.error) }, "ignoring malformed spot notice");
          const worker = cluster.workers.get(parsed.data.worker);
          if (!worker) return log.info({ worker: parsed.data.worker }, "spot notice for a worker this dispatcher does not know: nothing to pre-warm for");
          void overflow.capacityLost([worker.report]);
        } catch (err) {
          log.warn({ err, subject: msg.subject }, "ignoring malformed spot notice");
        }
      },
    }),
  ];
}
