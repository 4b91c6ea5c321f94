// @integration
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { spawnSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { natsRoles } from "@sloserve/contracts";
import { loadOcrRunners, runOcrLocally } from "@sloserve/ocr";
import { renderTextImage } from "@sloserve/ocr/synthetic";
import { REPO_ROOT, bearer, digitsModels, freePort, generateNatsPasswords, natsPasswordEnv, ocrModels, ocrPipelineSpec, registerOverHttp, registerPipelineOverHttp, type BundledModel } from "@sloserve/stack";
import { waitFor } from "@sloserve/testing";
import { buildImages, dockerEngine, type DockerEngine } from "./docker-engine.js";

/**
 * docker-compose.yml run for real: a Docker engine (test/deploy/docker-engine.ts: started here as
 * `dockerd --iptables=false --bridge=none` when none answers), the project's images built without a
 * registry (scripts/docker-images.sh), then `docker-compose up` of the whole file under a project name
 * of its own, with fresh NATS passwords and admin key, free published ports, and the project's base
 * image (Debian's nats-server and redis-server) for the NATS and Redis containers. Through the
 * published ports only: the digits models and the OCR pipeline registered, a model-less query and an
 * OCR query answered; a NATS node killed under queries; `--scale executor-cpu=3`. Then `down -v`.
 */

const project = `sloserve-test-${randomBytes(3).toString("hex")}`;
const adminKey = randomBytes(24).toString("hex");
let engine: DockerEngine;
let env: NodeJS.ProcessEnv;
let http = "";

function compose(...args: string[]): string {
  const r = spawnSync("docker-compose", ["-p", project, "-f", "docker-compose.yml", ...args], { cwd: REPO_ROOT, env, encoding: "utf8", timeout: 300_000, maxBuffer: 64 * 1024 * 1024 });
  if (r.status !== 0) throw new Error(`docker-compose ${args.join(" ")} failed (${r.signal ?? r.status}):\n${`${r.stdout}\n${r.stderr}`.split("\n").slice(-30).join("\n")}`);
  return r.stdout;
}

/** The last lines of every container's log, for a failure's message. */
function logs(): string {
  const r = spawnSync("docker-compose", ["-p", project, "-f", "docker-compose.yml", "logs", "--no-color", "--tail", "15"], { cwd: REPO_ROOT, env, encoding: "utf8", timeout: 60_000, maxBuffer: 64 * 1024 * 1024 });
  return `${r.stdout}${r.stderr}`;
}

const auth = () => ({ ...bearer(adminKey) });

async function infer(app: string, i: number, slo: Record<string, number>): Promise<{ status: number; body: Record<string, unknown> }> {
  const data = Array.from({ length: 784 }, (_, k) => ((k * 7 + i * 13) % 255) / 255);
  const r = await fetch(`${http}/v1/apps/${app}/infer`, {
    method: "POST",
    headers: { "content-type": "application/json", ...auth() },
    body: JSON.stringify({ inputs: [{ name: "input", datatype: "FP32", shape: [1, 1, 28, 28], data }], slo }),
    signal: AbortSignal.timeout(10_000),
  });
  return { status: r.status, body: (await r.json()) as Record<string, unknown> };
}

interface Status {
  workers: Array<{ worker: string; hardware: string }>;
  instances: Array<{ worker: string; model: string; variant: string; state: string }>;
}
const status = async (): Promise<Status> => (await (await fetch(`${http}/v1/status`, { headers: auth() })).json()) as Status;

/**
 * Registers a model, as a user would right after `up`: again while the stack answers 5xx (the
 * JetStream cluster still electing its leaders, the registrar not yet subscribed), up to two minutes.
 */
async function register(model: BundledModel): Promise<void> {
  let last: { status: number; body: Record<string, unknown> } | undefined;
  await waitFor(`${model.name} registered`, async () => {
    last = await registerOverHttp(http, model, adminKey);
    if (last.status < 500) return true;
    return undefined;
  }, { timeoutMs: 120_000, intervalMs: 2_000 }).catch((error: Error) => {
    throw new Error(`${error.message}: ${JSON.stringify(last?.body)}\n${logs()}`);
  });
  expect([200, 201, 202], `${model.name}: ${JSON.stringify(last?.body)}`).toContain(last?.status);
}

beforeAll(async () => {
  engine = await dockerEngine();
  buildImages(engine);
  const passwords = generateNatsPasswords();
  const [httpPort, grpcPort, natsPort, monitorPort, metricsPort] = await Promise.all([freePort(), freePort(), freePort(), freePort(), freePort()]);
  env = {
    ...engine.env,
    ...Object.fromEntries(natsRoles.map((role) => [natsPasswordEnv(role), passwords[role]])),
    SLOSERVE_ADMIN_KEY: adminKey,
    NATS_IMAGE: "sloserve-base:bookworm",
    REDIS_IMAGE: "sloserve-base:bookworm",
    SLOSERVE_HTTP_PORT: String(httpPort),
    SLOSERVE_GRPC_PORT: String(grpcPort),
    SLOSERVE_NATS_PORT: String(natsPort),
    SLOSERVE_NATS_MONITOR_PORT: String(monitorPort),
    SLOSERVE_METRICS_PORT: String(metricsPort),
  };
  http = `http://127.0.0.1:${httpPort}`;
  compose("up", "-d", "--no-build");
  try {
    await waitFor("the frontend to answer through its published port", async () => (await fetch(`${http}/v1/status`, { headers: auth(), signal: AbortSignal.timeout(2_000) }).catch(() => undefined))?.ok, { timeoutMs: 180_000, intervalMs: 1_000 });
  } catch (error) {
    throw new Error(`${(error as Error).message}\n${logs()}`);
  }
}, 900_000);

afterAll(async () => {
  if (env) spawnSync("docker-compose", ["-p", project, "-f", "docker-compose.yml", "down", "-v", "--timeout", "5"], { cwd: REPO_ROOT, env, timeout: 120_000 });
  await engine?.stop();
}, 180_000);

describe("docker-compose.yml under a real Docker engine", () => {
  it("compose - the digits models and the OCR pipeline register through the published port; a model-less query is answered, and an OCR query with runOcrLocally's text", async () => {
    const digits = (await digitsModels()).filter((m) => ["digits-mlp-s", "digits-mlp-m", "digits-cnn-s"].includes(m.name));
    for (const model of [...digits, ...ocrModels()]) await register(model);
    const pipeline = await registerPipelineOverHttp(http, ocrPipelineSpec(), adminKey);
    expect(pipeline.status, JSON.stringify(pipeline.body)).toBe(201);

    const answered = await waitFor("a model-less digits query answered", async () => {
      const r = await infer("digits", 0, { latency_ms: 1_000, min_accuracy: 0.9 }).catch(() => undefined);
      return r?.status === 200 ? r.body : undefined;
    }, { timeoutMs: 180_000, intervalMs: 1_000 }).catch((error: Error) => {
      throw new Error(`${error.message}\n${logs()}`);
    });
    expect((answered.outputs as Array<{ shape: number[] }>)[0]?.shape).toEqual([1, 10]);
    expect(answered.served_by).toMatchObject({ hardware: "cpu" });

    const image = await renderTextImage({ lines: ["Oslo", "Paris"], font: "DejaVu Sans", sizePx: 32, background: "white", format: "png" });
    const ocr = await waitFor("an OCR pipeline query answered", async () => {
      const r = await fetch(`${http}/v1/pipelines/ocr/infer`, { method: "POST", headers: { "content-type": "image/png", ...auth() }, body: image.bytes, signal: AbortSignal.timeout(20_000) }).catch(() => undefined);
      return r?.status === 200 ? ((await r.json()) as { text: string }) : undefined;
    }, { timeoutMs: 240_000, intervalMs: 2_000 }).catch((error: Error) => {
      throw new Error(`${error.message}\n${logs()}`);
    });
    // The same text as the same models give in this process (libs/ocr runOcrLocally).
    const runners = await loadOcrRunners();
    try {
      expect(ocr.text).toBe((await runOcrLocally(image.bytes, runners, { contentType: "image/png" })).text);
    } finally {
      await runners.release();
    }
    expect(ocr.text.toLowerCase()).toContain("paris");
  }, 600_000);

  it("compose - a NATS node killed: the stack keeps answering on the other two", async () => {
    compose("kill", "nats-2");
    const started = Date.now();
    const results: boolean[] = [];
    for (let i = 0; Date.now() - started < 20_000; i++) {
      const r = await infer("digits", i, { latency_ms: 1_000, min_accuracy: 0.9 }).catch(() => undefined);
      results.push(r?.status === 200);
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    const ok = results.filter(Boolean).length;
    expect(ok, `${ok} of ${results.length} answered with nats-2 down\n${ok * 2 > results.length ? "" : logs()}`).toBeGreaterThan(results.length / 2);
    expect(results.slice(-10), "the last ten queries, nats-2 still down").toEqual(Array(10).fill(true));
    compose("up", "-d", "--no-build", "nats-2");
  }, 120_000);

  it("compose - --scale executor-cpu=3: the new executors are heard and, the first one stopped, serve a model registered after them", async () => {
    const before = compose("ps", "-q", "executor-cpu").trim().split("\n").filter(Boolean);
    compose("up", "-d", "--no-build", "--no-recreate", "--scale", "executor-cpu=3");
    const added = compose("ps", "-q", "executor-cpu").trim().split("\n").filter((c) => c && !before.includes(c));
    expect(added).toHaveLength(2);
    // An executor's id names its host, the container's short id: cpu-<12 hex>-<random>.
    const heard = await waitFor("the two new executor-cpu containers in /v1/status", async () => {
      const s = await status();
      const ids = added.map((c) => s.workers.find((w) => w.worker.startsWith(`cpu-${c.slice(0, 12)}-`))?.worker);
      return ids.every(Boolean) ? (ids as string[]) : undefined;
    }, { timeoutMs: 120_000, intervalMs: 1_000 });
    // The first executor stopped: a model registered now is profiled and served on the new ones.
    const first = spawnSync("docker", ["stop", "-t", "10", before[0]!], { env, encoding: "utf8", timeout: 60_000 });
    expect(first.status, first.stderr).toBe(0);
    const logreg = (await digitsModels()).find((m) => m.name === "digits-logreg")!;
    await register({ ...logreg, app: "digits-new", name: "digits-new-logreg" });
    const servedBy = new Set<string>();
    for (let i = 0; servedBy.size === 0 || i < 20; i++) {
      const r = await waitFor("a digits-new query answered", async () => {
        const a = await infer("digits-new", i, { latency_ms: 1_000, min_accuracy: 0.5 }).catch(() => undefined);
        return a?.status === 200 ? a.body : undefined;
      }, { timeoutMs: 180_000, intervalMs: 1_000 });
      servedBy.add((r.served_by as { worker: string }).worker);
    }
    const s = await status();
    const placed = s.instances.filter((i) => i.model === "digits-new-logreg").map((i) => i.worker);
    const workers = s.workers.map((w) => w.worker).join(", ");
    expect([...servedBy].filter((w) => heard.includes(w)), `served by ${[...servedBy].join(", ")}; placed on ${placed.join(", ")}; new: ${heard.join(", ")}; workers: ${workers}`).not.toHaveLength(0);
  }, 400_000);
});
