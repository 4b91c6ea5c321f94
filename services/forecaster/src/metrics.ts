import { ArrivalsObserved, client } from "@sloserve/metrics";
import type { ForecastMessage } from "./forecaster.js";

/**
 * The forecaster's Prometheus metrics (docs/METRICS.md "forecaster"): the arrival reports it read,
 * and per app after every unit (MArk §4.2: a minute's maximum rate over 5 s windows) what it observed,
 * what it had forecast for that same unit one unit earlier (forecast against actual, side by side
 * without a PromQL offset), and what it forecasts for the next one.
 */
export class ForecasterMetrics {
  readonly arrivals: ArrivalsObserved;
  private readonly observed: client.Gauge<"app">;
  private readonly forecastForObserved: client.Gauge<"app">;
  private readonly next: client.Gauge<"app">;
  private readonly forecasts: client.Counter<"app" | "method">;
  /** The forecast each app's last message made for the next unit. */
  private readonly pending = new Map<string, number>();

  constructor(registry: client.Registry) {
    const registers = [registry];
    this.arrivals = new ArrivalsObserved(registry);
    this.observed = new client.Gauge({ name: "sloserve_observed_queries_per_second", help: "The last closed unit's maximum arrival rate (over the sample windows), by app", labelNames: ["app"], registers });
    this.forecastForObserved = new client.Gauge({ name: "sloserve_forecast_for_observed_queries_per_second", help: "What was forecast, one unit ahead, for the unit in sloserve_observed_queries_per_second", labelNames: ["app"], registers });
    this.next = new client.Gauge({ name: "sloserve_forecast_queries_per_second", help: "The forecast maximum arrival rate of the unit that has just begun, by app", labelNames: ["app"], registers });
    this.forecasts = new client.Counter({ name: "sloserve_forecasts_total", help: "Forecasts published, by app and method", labelNames: ["app", "method"], registers });
  }

  /** The forecasts published at the close of a unit. */
  published(messages: readonly ForecastMessage[]): void {
    for (const m of messages) {
      this.observed.set({ app: m.app }, m.observed);
      const before = this.pending.get(m.app);
      if (before !== undefined) this.forecastForObserved.set({ app: m.app }, before);
      const next = m.values[0] ?? 0;
      this.pending.set(m.app, next);
      this.next.set({ app: m.app }, next);
      this.forecasts.inc({ app: m.app, method: m.method });
    }
  }
}
