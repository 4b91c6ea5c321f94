import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startNats, startRedis, startService, type ServerHandle } from "@sloserve/stack";
import { probeExecutionProvider } from "@sloserve/runtime";

/**
 * executor-gpu on the machine at hand: without a usable CUDA execution provider it refuses to start
 * and says why; with one it comes up as a gpu worker.
 */

let nats: ServerHandle;
let redis: ServerHandle;
let cuda: boolean;

beforeAll(async () => {
  cuda = (await probeExecutionProvider("cuda")).ok;
  nats = await startNats();
  redis = await startRedis();
});

afterAll(async () => {
  await redis?.stop();
  await nats?.stop();
});

describe("e2e executor-gpu", () => {
  it("executor-gpu - refuses to start without CUDA, naming the problem and the fix (or starts with it)", async () => {
    const started = startService("executor-gpu", { NATS_URL: nats.url, REDIS_URL: redis.url }, { timeoutMs: 60_000 });
    if (cuda) {
      const s = await started;
      expect(String(s.info.worker)).toMatch(/^gpu-/);
      await s.stop();
    } else {
      await expect(started).rejects.toThrow(/exited \(code 1[\s\S]*executor-gpu needs an NVIDIA GPU and onnxruntime-node's CUDA build[\s\S]*ONNXRUNTIME_NODE_INSTALL=cuda12/);
    }
  });
});
