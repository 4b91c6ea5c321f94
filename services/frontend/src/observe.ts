import type { FastifyInstance, RawReplyDefaultExpression, RawRequestDefaultExpression, RawServerDefault } from "fastify";
import { AckPolicy, DeliverPolicy } from "@nats-io/jetstream";
import { ErrorCode, ServeError, streams, subjects, type Clock } from "@sloserve/contracts";
import type { Bus, Logger } from "@sloserve/bus";

/**
 * Read-only views of what the controllers published on the bus (the CLI's `decisions` and `cost`):
 *
 * - `GET /v1/decisions?limit=N&since_s=S&source=model|vm|dispatcher|pipeline`: the last N (default 50,
 *   at most 1000) scaling decisions of the last S seconds (default 3600), oldest first, each with its
 *   reason, read from the EVENTS stream (`decision.<source>.<worker>`).
 * - `GET /v1/cost`: the VM autoscaler's latest cost and fleet summary (`metrics.cost`, METRICS stream);
 *   503 until it has published one.
 */

/** Decisions read per request at most (the newest `limit` of them are kept). */
const MAX_SCANNED = 20_000;

interface DecisionQuery {
  limit?: string;
  since_s?: string;
  source?: string;
}

function positiveInt(name: string, value: string | undefined, fallback: number, max: number): number {
  if (value === undefined) return fallback;
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1 || n > max) throw new ServeError(ErrorCode.badRequest, `${name} must be an integer from 1 to ${max}, got ${JSON.stringify(value)}`);
  return n;
}

export async function registerObservationRoutes(app: FastifyInstance<RawServerDefault, RawRequestDefaultExpression, RawReplyDefaultExpression, Logger>, deps: { bus: Bus; clock: Clock }): Promise<void> {
  const { bus, clock } = deps;

  app.get<{ Querystring: DecisionQuery }>("/v1/decisions", async (req) => {
    const limit = positiveInt("limit", req.query.limit, 50, 1000);
    const sinceS = positiveInt("since_s", req.query.since_s, 3600, 86_400);
    const source = req.query.source;
    if (source !== undefined && !/^[a-z][a-z-]{0,31}$/.test(source)) throw new ServeError(ErrorCode.badRequest, `source must be a word such as model, vm, dispatcher or pipeline, got ${JSON.stringify(source)}`);
    // An ephemeral consumer from the window's start: its info says how many decisions there are to read.
    const info = await bus.jsm.consumers.add(streams.events.name, {
      filter_subject: source ? `decision.${source}.>` : subjects.decisionsAll,
      deliver_policy: DeliverPolicy.StartTime,
      opt_start_time: new Date(clock.now() - sinceS * 1000).toISOString(),
      ack_policy: AckPolicy.None,
      inactive_threshold: 30e9,
      mem_storage: true,
    });
    const kept: Array<Record<string, unknown>> = [];
    try {
      const consumer = await bus.js.consumers.get(streams.events.name, info.name);
      let remaining = Math.min(info.num_pending, MAX_SCANNED);
      while (remaining > 0) {
        const batch = await consumer.fetch({ max_messages: Math.min(remaining, 500), expires: 5000 });
        let got = 0;
        for await (const m of batch) {
          got++;
          remaining--;
          let body: Record<string, unknown>;
          try {
            body = m.json<Record<string, unknown>>();
          } catch {
            continue;
          }
          const [, from = "", target = ""] = m.subject.split(".");
          kept.push({ source: from, target, at_ms: typeof body.atMs === "number" ? body.atMs : Date.parse(m.timestamp), ...body });
          if (kept.length > limit) kept.shift();
        }
        if (got === 0) break;
      }
    } finally {
      await bus.jsm.consumers.delete(streams.events.name, info.name).catch(() => false);
    }
    return { at_ms: clock.now(), since_s: sinceS, decisions: kept };
  });

  app.get("/v1/cost", async () => {
    const latest = await bus.jsm.streams.getMessage(streams.metrics.name, { last_by_subj: subjects.costSummary });
    if (!latest) throw new ServeError(ErrorCode.unavailable, "no cost summary yet: the VM autoscaler publishes one every few seconds once it runs");
    return latest.json<Record<string, unknown>>();
  });
}
