import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import type { FastifyInstance, RawReplyDefaultExpression, RawRequestDefaultExpression, RawServerDefault } from "fastify";
import { z } from "zod";
import { ErrorCode, ServeError, arrivalsReportSchema, costSummarySchema, describeZodError, forecastMessageSchema, subjects, workerReportSchema, type Clock } from "@sloserve/contracts";
import type { Bus, Logger } from "@sloserve/bus";
import type { Catalog } from "@sloserve/store";
import { DashboardFeed } from "./dashboard-feed.js";
import { dashboardHtml } from "./dashboard-page.js";

/**
 * The built-in dashboard (`GET /dashboard`): live throughput, latency percentiles against the SLOs, cost
 * per hour, workers and variants with their states, the last decisions with their reasons and forecast
 * against actual load. The frontend follows the bus (DashboardFeed) and serves its figures as JSON
 * (`GET /v1/dashboard`); the page draws them with Vega-Lite, whose browser bundles it serves from
 * node_modules (`/dashboard/vendor/…`: no CDN, the page works offline).
 */

export interface DashboardDeps {
  bus: Bus;
  catalog: Catalog;
  clock: Clock;
  log: Logger;
}

const require = createRequire(import.meta.url);

/** Decisions differ by source (model, vm, dispatcher, pipeline): any JSON object, read leniently. */
const decisionSchema = z.record(z.string(), z.unknown());

/** The browser bundles of vega and vega-lite, read once from their packages' build/ folders. */
function vendorBundles(): Record<string, Buffer> {
  const vegaBuild = dirname(require.resolve("vega"));
  const vegaLiteBuild = dirname(require.resolve("vega-lite"));
  return { "vega.min.js": readFileSync(join(vegaBuild, "vega.min.js")), "vega-lite.min.js": readFileSync(join(vegaLiteBuild, "vega-lite.min.js")) };
}

/** Follows the bus into a DashboardFeed, and registers the dashboard's routes; unsubscribes when the app closes. */
export async function registerDashboard(app: FastifyInstance<RawServerDefault, RawRequestDefaultExpression, RawReplyDefaultExpression, Logger>, deps: DashboardDeps): Promise<DashboardFeed> {
  const { bus, catalog, clock, log } = deps;
  const feed = new DashboardFeed((name) => {
    const v = catalog.variants.get(name);
    return v ? { model: v.model, hardware: v.hardware, threads: v.threads, profile: v.profile, settings: v.settings } : undefined;
  });
  const follow = <T>(subject: string, what: string, schema: z.ZodType<T>, apply: (data: T, subject: string) => void) =>
    bus.nc.subscribe(subject, {
      callback: (err, msg) => {
        if (err) return log.warn({ err, subject }, `dashboard: ${what} subscription failed`);
        try {
          const parsed = schema.safeParse(msg.json());
          if (parsed.success) apply(parsed.data, msg.subject);
          else log.debug({ subject: msg.subject, error: describeZodError(parsed.error) }, `dashboard: ignoring a malformed ${what}`);
        } catch (e) {
          log.debug({ err: e, subject: msg.subject }, `dashboard: ignoring a ${what} that is not JSON`);
        }
      },
    });
  const subs = [
    follow(subjects.arrivalsAll, "arrivals report", arrivalsReportSchema, (r) => feed.arrivals(r)),
    follow(subjects.workerMetricsAll, "worker report", workerReportSchema, (r) => feed.worker(r, clock.now())),
    follow(subjects.costSummary, "cost summary", costSummarySchema, (c) => feed.cost(c)),
    follow(subjects.forecastAll, "forecast", forecastMessageSchema, (f) => feed.forecast(f)),
    follow(subjects.decisionsAll, "decision", decisionSchema, (d, subject) => feed.decision(subject.split(".")[1] ?? "", d, clock.now())),
  ];
  app.addHook("onClose", async () => {
    for (const s of subs) s.unsubscribe();
  });

  const vendor = vendorBundles();
  app.get<{ Params: { file: string } }>("/dashboard/vendor/:file", async (req, reply) => {
    const body = vendor[req.params.file];
    if (!body) throw new ServeError(ErrorCode.badRequest, `no vendor file '${req.params.file}' (there are ${Object.keys(vendor).join(", ")})`);
    return reply.type("text/javascript; charset=utf-8").header("cache-control", "public, max-age=3600").send(body);
  });
  app.get("/v1/dashboard", async () => feed.snapshot(clock.now()));
  app.get("/dashboard", async (_req, reply) => reply.type("text/html; charset=utf-8").send(dashboardHtml));
  return feed;
}
