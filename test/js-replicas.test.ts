import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { connectBus, createLogger, streamConfigs, type Bus } from "@sloserve/bus";
import { MODEL_BUCKET } from "@sloserve/contracts";
import { startNatsCluster, type NatsCluster } from "@sloserve/stack";

/**
 * JS_REPLICAS on a real three-node JetStream cluster (libs/stack startNatsCluster): services that
 * start together create every stream and the model bucket with that many replicas; a service started
 * without it leaves them as they are (never scales them down); a later setting changes them.
 */

let cluster: NatsCluster;
const buses: Bus[] = [];
const log = createLogger("js-replicas-test", "silent");
const names = [...streamConfigs().map((c) => c.name), `OBJ_${MODEL_BUCKET}`];

beforeAll(async () => {
  cluster = await startNatsCluster();
}, 120_000);

afterAll(async () => {
  for (const bus of buses) await bus.close();
  await cluster?.stop();
});

async function connect(replicas?: number): Promise<Bus> {
  const bus = await connectBus({ servers: cluster.url, name: "replicas-test", log, replicas });
  buses.push(bus);
  return bus;
}

async function replicasOf(bus: Bus): Promise<Record<string, number>> {
  const out: Record<string, number> = {};
  for (const name of names) out[name] = (await bus.jsm.streams.info(name)).config.num_replicas;
  return out;
}

const all = (n: number): Record<string, number> => Object.fromEntries(names.map((name) => [name, n]));

describe("JS_REPLICAS", () => {
  it("replicas - four services starting at once create every stream and the bucket with 3 replicas", async () => {
    const started = await Promise.all([3, 3, 3, 3].map((r) => connect(r)));
    expect(await replicasOf(started[0]!)).toEqual(all(3));
  }, 120_000);

  it("replicas - a service without the setting keeps them; a new setting changes them", async () => {
    const unset = await connect(undefined);
    expect(await replicasOf(unset)).toEqual(all(3));
    const two = await connect(2);
    expect(await replicasOf(two)).toEqual(all(2));
  }, 120_000);
});
