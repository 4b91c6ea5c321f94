import { describe, expect, it } from "vitest";
import { createServer } from "node:net";
import { client, createRegistry, serveMetrics, startServiceMetrics, ArrivalsObserved } from "../src/index.js";

const silent = { error: () => undefined };

describe("metrics - the endpoint", () => {
  it("metrics - serves the registry at GET /metrics in Prometheus' text format, 404 elsewhere", async () => {
    const registry = createRegistry();
    const counter = new client.Counter({ name: "sloserve_test_total", help: "a test counter", labelNames: ["app"], registers: [registry] });
    counter.inc({ app: "digits" }, 3);
    const served = await startServiceMetrics({ METRICS_PORT: 0, METRICS_HOST: "127.0.0.1" }, silent);
    expect(served.port).toBe(0); // 0: no endpoint
    await served.close();
    const server = await serveMetrics(registry, { port: await freePort(), host: "127.0.0.1" }, silent);
    try {
      const r = await fetch(`http://127.0.0.1:${server!.port}/metrics`);
      expect(r.status).toBe(200);
      expect(r.headers.get("content-type")).toBe(registry.contentType);
      const text = await r.text();
      expect(text).toContain('sloserve_test_total{app="digits"} 3');
      expect(text).toContain("process_cpu_seconds_total");
      const other = await fetch(`http://127.0.0.1:${server!.port}/`, { method: "POST" });
      expect(other.status).toBe(404);
      expect(await other.json()).toEqual({ error: "no route POST /: the only one is GET /metrics" });
    } finally {
      await server?.close();
    }
  });

  it("metrics - a port already taken is an error naming it", async () => {
    const blocker = createServer();
    const port = await new Promise<number>((resolve) => blocker.listen(0, "127.0.0.1", () => resolve((blocker.address() as { port: number }).port)));
    try {
      await expect(serveMetrics(createRegistry(), { port, host: "127.0.0.1" }, silent)).rejects.toThrow(`the metrics endpoint cannot listen on 127.0.0.1:${port}: listen EADDRINUSE`);
    } finally {
      blocker.close();
    }
  });

  it("metrics - arrivals observed: the queries of every report, by app", async () => {
    const registry = new client.Registry();
    const observed = new ArrivalsObserved(registry);
    for (const arrivals of [4, 0, 7]) observed.observe({ app: "digits", dispatcher: "d1", atMs: 1000, windowMs: 1000, arrivals, infeasible: 0, models: {} });
    expect(await registry.getSingleMetricAsString("sloserve_arrivals_observed_total")).toContain('sloserve_arrivals_observed_total{app="digits"} 11');
  });
});

function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const s = createServer();
    s.listen(0, "127.0.0.1", () => {
      const { port } = s.address() as { port: number };
      s.close(() => resolve(port));
    });
  });
}
