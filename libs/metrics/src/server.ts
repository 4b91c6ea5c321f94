import { createServer } from "node:http";
import client from "prom-client";

/**
 * The one Prometheus endpoint every service serves (`GET /metrics` on METRICS_PORT; 0: none), over a
 * registry of its own with the process's default metrics (`process_*`, `nodejs_*`). Metric names
 * follow Prometheus' conventions: `sloserve_` prefix, snake_case, base units in the name (`_seconds`,
 * `_bytes`, `_dollars`), `_total` on counters (docs/METRICS.md lists them).
 */

/** The little of a logger the endpoint needs (pino's fits). */
export interface MetricsLog {
  error(obj: Record<string, unknown>, msg: string): void;
}

/** A registry of the service's own, with the default process metrics in it. */
export function createRegistry(): client.Registry {
  const registry = new client.Registry();
  client.collectDefaultMetrics({ register: registry });
  return registry;
}

export interface MetricsServer {
  /** The port it listens on (the one asked for, or the one the system picked for 0 when `anyPort`). */
  port: number;
  close(): Promise<void>;
}

/**
 * Serves `GET /metrics` (the registry in Prometheus' text format) on `port`; anything else is a 404
 * naming the one route. `port` 0: no endpoint (undefined). Rejects when the port is taken.
 */
export async function serveMetrics(registry: client.Registry, options: { port: number; host?: string }, log: MetricsLog): Promise<MetricsServer | undefined> {
  if (options.port === 0) return undefined;
  const server = createServer((req, res) => {
    if (req.method !== "GET" || (req.url ?? "").split("?")[0] !== "/metrics") {
      res.writeHead(404, { "content-type": "application/json" }).end(JSON.stringify({ error: `no route ${req.method ?? ""} ${req.url ?? ""}: the only one is GET /metrics` }));
      return;
    }
    registry
      .metrics()
      .then((text) => res.writeHead(200, { "content-type": registry.contentType }).end(text))
      .catch((err: unknown) => {
        log.error({ err }, "rendering the metrics failed");
        res.writeHead(500, { "content-type": "application/json" }).end(JSON.stringify({ error: `rendering the metrics failed: ${(err as Error).message}` }));
      });
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", (err: Error) => reject(new Error(`the metrics endpoint cannot listen on ${options.host ?? "0.0.0.0"}:${options.port}: ${err.message}`)));
    server.listen(options.port, options.host ?? "0.0.0.0", () => resolve());
  });
  const address = server.address();
  return {
    port: typeof address === "object" && address ? address.port : options.port,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

/** A service's metrics: its registry, and the endpoint serving it (port 0: none). */
export interface ServiceMetrics {
  registry: client.Registry;
  /** The endpoint's port; 0: no endpoint. */
  port: number;
  close(): Promise<void>;
}

/**
 * What every service's main does: a registry, served on METRICS_PORT at METRICS_HOST (the common
 * options of libs/contracts `commonEnvSchema`). The port goes into the service's "ready" line.
 */
export async function startServiceMetrics(options: { METRICS_PORT: number; METRICS_HOST: string }, log: MetricsLog): Promise<ServiceMetrics> {
  const registry = createRegistry();
  const server = await serveMetrics(registry, { port: options.METRICS_PORT, host: options.METRICS_HOST }, log);
  return { registry, port: server?.port ?? 0, close: async () => server?.close() };
}
