import { client } from "@sloserve/metrics";
import type { ArrivalsReport, VariantRecord } from "@sloserve/contracts";
import type { BreakerState, BreakerStateChange } from "@sloserve/providers";

/** `sloserve_function_breaker_state`'s value per state. */
const BREAKER_STATE_VALUE: Record<BreakerState, number> = { closed: 0, "half-open": 1, open: 2 };

/**
 * The dispatcher's Prometheus metrics (docs/METRICS.md "dispatcher"): every query it routed, by app,
 * model, variant and route (queue: the variant's JetStream queue; overflow: a function); every query
 * it refused, by kind and error code, and those refused for their app's quota, by app and limit; and,
 * from its per-second arrival reports, the overflow's outcomes and dollars and the tightest latency SLO
 * per model.
 *
 * On the query path: one increment of a child bound once per variant, no label set per query.
 */
export class DispatcherMetrics {
  private readonly queries: client.Counter<"app" | "model" | "variant" | "route">;
  private readonly refused: client.Counter<"kind" | "code">;
  private readonly quotaRefusals: client.Counter<"app" | "reason">;
  private readonly overflow: client.Counter<"app" | "outcome">;
  private readonly overflowCost: client.Counter<"app">;
  private readonly sloTarget: client.Gauge<"app" | "model">;
  private readonly loads: client.Counter<"hardware">;
  private readonly breakerState: client.Gauge<"provider">;
  private readonly breakerChanges: client.Counter<"provider" | "state">;
  private readonly bound = new Map<string, { queue: client.Counter.Internal; overflow: client.Counter.Internal }>();

  constructor(registry: client.Registry) {
    const registers = [registry];
    this.queries = new client.Counter({ name: "sloserve_dispatcher_queries_total", help: "Queries routed, by app, model, variant and route (queue: the variant's queue; overflow: a function)", labelNames: ["app", "model", "variant", "route"], registers });
    this.refused = new client.Counter({ name: "sloserve_dispatcher_refused_total", help: "Queries refused by the dispatcher, by kind (app, model, variant) and error code", labelNames: ["kind", "code"], registers });
    this.quotaRefusals = new client.Counter({ name: "sloserve_quota_refused_total", help: "Queries refused because their app was over its quota or its fair share, by app and the limit (rate_qps, max_concurrency, fair_share)", labelNames: ["app", "reason"], registers });
    this.overflow = new client.Counter({ name: "sloserve_overflow_queries_total", help: "Queries sent to a function provider (serverless overflow), by app and outcome (served, failed)", labelNames: ["app", "outcome"], registers });
    this.overflowCost = new client.Counter({ name: "sloserve_overflow_cost_dollars_total", help: "What the function invocations of overflowed queries cost", labelNames: ["app"], registers });
    this.sloTarget = new client.Gauge({ name: "sloserve_slo_target_seconds", help: "The tightest latency SLO among the model's queries in the last report period", labelNames: ["app", "model"], registers });
    this.loads = new client.Counter({ name: "sloserve_load_requests_total", help: "Variant loads the dispatcher asked a worker for (a query found no instance, or relief), by hardware", labelNames: ["hardware"], registers });
    this.breakerState = new client.Gauge({ name: "sloserve_function_breaker_state", help: "State of a function provider's circuit breaker: 0 closed, 1 half-open, 2 open", labelNames: ["provider"], registers });
    this.breakerChanges = new client.Counter({ name: "sloserve_function_breaker_transitions_total", help: "State changes of a function provider's circuit breaker, by the state entered", labelNames: ["provider", "state"], registers });
  }

  /** A query put on `variant`'s queue, or sent to a function. */
  routed(variant: VariantRecord, route: "queue" | "overflow"): void {
    let b = this.bound.get(variant.name);
    if (!b) {
      b = { queue: this.queries.labels(variant.app, variant.model, variant.name, "queue"), overflow: this.queries.labels(variant.app, variant.model, variant.name, "overflow") };
      this.bound.set(variant.name, b);
    }
    b[route].inc();
  }

  /** A query refused with an error (the error path: a label set per call is fine). */
  refusedQuery(kind: string, code: string): void {
    this.refused.inc({ kind, code });
  }

  /** A query refused for its app's quota or fair share (`reason`: the limit, rate_qps, max_concurrency or fair_share). */
  quotaRefused(app: string, reason: string): void {
    this.quotaRefusals.inc({ app, reason });
  }

  loadRequested(hardware: string): void {
    this.loads.inc({ hardware });
  }

  /** A function provider's breaker: its state at start (`transition` false) or a change of state (libs/providers breaker.ts). */
  breaker(change: Pick<BreakerStateChange, "provider" | "state">, transition = true): void {
    this.breakerState.set({ provider: change.provider }, BREAKER_STATE_VALUE[change.state]);
    if (transition) this.breakerChanges.inc({ provider: change.provider, state: change.state });
  }

  /** One arrival report (each second, per app): overflow outcomes and dollars, SLO targets. */
  report(r: ArrivalsReport): void {
    if (r.overflowed) {
      const failed = r.overflowFailed ?? 0;
      this.overflow.inc({ app: r.app, outcome: "served" }, r.overflowed - failed);
      this.overflow.inc({ app: r.app, outcome: "failed" }, failed);
      this.overflowCost.inc({ app: r.app }, r.overflowCostDollars ?? 0);
    }
    for (const [model, m] of Object.entries(r.models)) if (m.minSloMs !== null) this.sloTarget.set({ app: r.app, model }, m.minSloMs / 1000);
  }
}
