import { z } from "zod";
import { commonEnvSchema, compileOptions } from "@sloserve/contracts";
import { connectBus, runService, systemClock } from "@sloserve/bus";
import { SpotWatcher, IMDS_URL, publishSpotNotice } from "./spot-watcher.js";

/**
 * spot-watcher: runs beside an executor on a spot instance (the EC2 user data starts it:
 * `node --import tsx libs/providers/src/spot-watcher-main.ts`). Polls the instance metadata service
 * and publishes the interruption notice once on `events.spot.<WORKER_ID>`; then it idles until the
 * instance goes. It refuses to start where no metadata service answers (not on EC2).
 */
const envSchema = commonEnvSchema.extend({
  WORKER_ID: z.string().regex(/^[A-Za-z0-9][A-Za-z0-9_-]{0,127}$/).describe("The executor's worker id on this instance."),
  IMDS_URL: z.string().url().default(IMDS_URL).describe("TODO IMDS_URL"),
  SPOT_POLL_MS: z.coerce.number().int().min(10).default(5000).describe("Polling period, ms."),
});

await runService("spot-watcher", process.env, async (log) => {
  const options = compileOptions(envSchema, process.env, "spot-watcher");
  const bus = await connectBus({ servers: options.NATS_URL, name: `spot-watcher ${options.WORKER_ID}`, log, ensure: false });
  let instanceId = "";
  const watcher = new SpotWatcher({
    imdsUrl: options.IMDS_URL,
    everyMs: options.SPOT_POLL_MS,
    clock: systemClock,
    log,
    onNotice: async (notice) => {
      await publishSpotNotice(bus, { worker: options.WORKER_ID, instanceId, ...notice }, log);
      log.info({ worker: options.WORKER_ID, instanceId, ...notice }, "spot notice published");
    },
  });
  try {
    instanceId = await watcher.instanceId();
  } catch (err) {
    await bus.close();
    throw new Error(`no instance metadata service at ${options.IMDS_URL} (is this an EC2 instance?): ${(err as Error).message}`);
  }
  watcher.start();
  return {
    info: { worker: options.WORKER_ID, instanceId, imdsUrl: options.IMDS_URL, everyMs: options.SPOT_POLL_MS },
    async stop() {
      watcher.stop();
      await bus.close();
    },
  };
});
