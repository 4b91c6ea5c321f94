import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { startNats, startRedis, startService, type ServerHandle, type ServiceHandle } from "@sloserve/stack";
import { subjects, type ArrivalsReport } from "@sloserve/contracts";

/**
 * The forecaster on real NATS and Redis, with the units shortened (2 s units, 1 s samples) so that
 * the test sees several: arrival reports in, per-unit max rates and forecasts out on forecast.<app>.
 */

let nats: ServerHandle;
let redis: ServerHandle;
let service: ServiceHandle;
let nc: NatsConnection;

beforeAll(async () => {
  nats = await startNats();
  redis = await startRedis();
  service = await startService("forecaster", { NATS_URL: nats.url, REDIS_URL: redis.url, UNIT_S: "2", SAMPLE_S: "1", HORIZON: "3", SEASON: "3" });
  nc = await connect({ servers: nats.url });
});

afterAll(async () => {
  await nc?.close();
  await service?.stop();
  await redis?.stop();
  await nats?.stop();
});

describe("e2e forecaster", () => {
  it("forecaster - turns per-second arrival reports into per-unit max rates and forecasts", async () => {
    const forecasts: Array<{ observed: number; values: number[]; method: string; historyUnits: number }> = [];
    const sub = nc.subscribe(subjects.forecast("shop"), { callback: (_e, m) => void forecasts.push(m.json()) });
    // Two dispatchers, each reporting 10 arrivals per second: 20 queries/s in all.
    // Reports are stamped at the middle of consecutive seconds, and sent on time.
    const base = Math.ceil(Date.now() / 1000);
    for (let i = 0; i < 9; i++) {
      const wait = (base + i) * 1000 + 500 - Date.now();
      if (wait > 0) await new Promise((r) => setTimeout(r, wait));
      for (const dispatcher of ["d1", "d2"]) {
        const report: ArrivalsReport = { app: "shop", dispatcher, atMs: (base + i) * 1000 + 500, windowMs: 1000, arrivals: 10, models: { m: { queries: 10, minSloMs: 100 } }, infeasible: 0 };
        nc.publish(subjects.arrivals("shop"), JSON.stringify(report));
      }
    }
    await new Promise((r) => setTimeout(r, 2500));
    sub.unsubscribe();
    expect(forecasts.length).toBeGreaterThanOrEqual(3);
    // Every unit between the first and the last (which may be partial) saw 20 queries/s.
    const full = forecasts.slice(1, -1);
    for (const f of full) expect(f.observed).toBe(20);
    const last = forecasts.at(-2)!;
    expect(last.values).toHaveLength(3);
    for (const v of last.values) expect(v).toBeGreaterThan(10);
    expect(last.historyUnits).toBeGreaterThanOrEqual(3);
    expect(forecasts.map((f) => f.method)).toContain("seasonal-naive(3)");
  });
});
