import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { mkdirSync, writeFileSync } from "node:fs";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { dirname, join } from "node:path";
import { connect, headers as natsHeaders, type NatsConnection } from "@nats-io/transport-node";
import { contentTypes, encodeTensors, headers, subjects, type Tensor } from "@sloserve/contracts";
import { connectBus, createLogger, systemClock, type Bus } from "@sloserve/bus";
import { createLambdaHandler } from "@sloserve/providers";
import { startStack, registerOverHttp, tempDir, waitForProfiles, type Stack } from "@sloserve/stack";
import { smallModel, sleep } from "./fault-load.js";

/**
 * Fault: the function path failing, live. The stack runs with OVERFLOW=lambda,local: `lambda` is the
 * real LambdaFunctionProvider (the AWS SDK's LambdaClient, signed requests and all) pointed by
 * AWS_ENDPOINT_URL_LAMBDA at a Lambda Invoke endpoint in this process, `local` the real pool of
 * function processes; each behind the dispatcher's opossum breaker (libs/providers breaker.ts).
 * The endpoint first answers every invocation as Lambda does when the handler throws (200 with
 * X-Amz-Function-Error: Unhandled); once "recovered" it runs the real Lambda handler
 * (libs/providers lambda-handler.ts) on the model's bytes from the model repository.
 *
 * Every query overflows, whatever the machine's speed: a model-less query over NATS that spent its
 * SLO upstream (x-received-ms 10 s ago, SLO 5 s, deadline 30 s ahead) has no budget left on the local
 * path, so the dispatcher's overflow rule (MArk §4.1) sends it to the function path at once.
 * The breaker's state is read from the dispatcher's metrics (`sloserve_function_breaker_state`,
 * `sloserve_function_breaker_transitions_total`). docs/RELIABILITY.md has the measured numbers.
 */

const APP = "fnfault";
const model = smallModel(tempDir("fault-fn"), APP, "fnfault-mlp", 17);
/** Reset timeout of the breakers: the time open before a trial call. */
const RESET_MS = 4000;

/** The Lambda Invoke API (POST /2015-03-31/functions/<name>/invocations) in this process. */
class LambdaEndpoint {
  failing = true;
  readonly counts = { failed: 0, served: 0, warmups: 0 };
  private readonly modelsDir = tempDir("fault-fn-lambda");
  private readonly handler = createLambdaHandler({ modelsDir: this.modelsDir, clock: systemClock });
  private server: Server | undefined;
  private readonly fetched = new Set<string>();

  constructor(private readonly repository: () => Bus | undefined) {}

  async start(): Promise<string> {
    this.server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on("data", (c: Buffer) => chunks.push(c));
      req.on("end", () => {
        this.invoke(JSON.parse(Buffer.concat(chunks).toString("utf8")) as Record<string, unknown>).then(
          ({ body, functionError }) => {
            res.writeHead(200, { "content-type": "application/json", "x-amz-executed-version": "$LATEST", ...(functionError ? { "x-amz-function-error": "Unhandled" } : {}) });
            res.end(JSON.stringify(body));
          },
          (err: Error) => {
            res.writeHead(200, { "content-type": "application/json", "x-amz-function-error": "Unhandled" });
            res.end(JSON.stringify({ errorType: err.name, errorMessage: err.message }));
          },
        );
      });
    });
    await new Promise<void>((r) => this.server!.listen(0, "127.0.0.1", r));
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  private async invoke(event: Record<string, unknown>): Promise<{ body: unknown; functionError: boolean }> {
    const warmup = "warmup" in event;
    if (warmup) this.counts.warmups++;
    if (this.failing) {
      if (!warmup) this.counts.failed++;
      return { body: { errorType: "Error", errorMessage: "the function is failing (fault test)" }, functionError: true };
    }
    const object = (event["object"] ?? (event["warmup"] as { object?: unknown } | undefined)?.object) as string | undefined;
    if (object) await this.fetchModel(object);
    const answer = await this.handler(event);
    if (!warmup) this.counts.served++;
    return { body: answer, functionError: false };
  }

  /** The function's bundled models directory, filled from the model repository on first use. */
  private async fetchModel(object: string): Promise<void> {
    if (this.fetched.has(object)) return;
    const path = join(this.modelsDir, object);
    const bytes = await this.repository()?.models.getBlob(object);
    if (!bytes) throw new Error(`model object ${object} is not in the repository`);
    mkdirSync(dirname(path), { recursive: true });
    writeFileSync(path, bytes);
    this.fetched.add(object);
  }

  async stop(): Promise<void> {
    await new Promise((r) => (this.server ? this.server.close(r) : r(undefined)));
  }
}

let stack: Stack;
let nc: NatsConnection;
let bus: Bus;
const lambda = new LambdaEndpoint(() => bus);

beforeAll(async () => {
  const endpoint = await lambda.start();
  stack = await startStack({
    cpuWorkers: 1,
    workerThreads: 1,
    env: {
      OVERFLOW: "lambda,local",
      LAMBDA_FUNCTION: "sloserve-fault",
      AWS_ENDPOINT_URL_LAMBDA: endpoint,
      AWS_REGION: "us-east-1",
      AWS_ACCESS_KEY_ID: "fault-test",
      AWS_SECRET_ACCESS_KEY: "fault-test",
      FUNCTION_POOL_SIZE: "1",
      BREAKER_VOLUME: "3",
      BREAKER_RESET_MS: String(RESET_MS),
      VARIANT_HARDWARE: "cpu",
      VARIANT_BATCH_SIZES: "1",
      VARIANT_CPU_THREADS: "1",
    },
  });
  const registered = await registerOverHttp(stack.httpUrl, model);
  expect(registered.status, JSON.stringify(registered.body)).toBe(201);
  await waitForProfiles(stack.httpUrl, model.name, "cpu", 180_000);
  nc = await connect({ servers: stack.nats.url });
  bus = await connectBus({ servers: stack.nats.url, name: "fault-function-path", log: createLogger("fault-function-path", "warn"), ensure: false });
}, 400_000);

afterAll(async () => {
  await nc?.close();
  await bus?.close();
  await stack?.stop();
  await lambda.stop();
});

const image: Tensor = { name: "input", datatype: "FP32", shape: [1, 1, 28, 28], data: Float32Array.from({ length: 784 }, (_, k) => (k % 29) / 29) };

/** One model-less query that overflows (its SLO spent upstream): 200, or the error code it got. */
async function query(): Promise<{ ok: true } | { ok: false; code: string; message: string }> {
  const now = Date.now();
  const h = natsHeaders();
  h.set(headers.contentType, contentTypes.wire);
  h.set(headers.sloLatencyMs, "5000");
  h.set(headers.receivedAt, String(now - 10_000));
  h.set(headers.deadline, String(now + 30_000));
  const m = await nc.request(subjects.inferApp(APP), encodeTensors([image]), { timeout: 35_000, headers: h });
  const code = m.headers?.get(headers.error);
  return code ? { ok: false, code, message: m.json<{ error: string }>().error } : { ok: true };
}

/** The lambda breaker as the dispatcher's metrics show it: state (0 closed, 1 half-open, 2 open) and transitions by state entered. */
async function breaker(): Promise<{ state: number | undefined; entered: Record<string, number> }> {
  const target = stack.metricsTargets().find((t) => t.service === "dispatcher");
  const text = await (await fetch(target!.url)).text();
  const state = /^sloserve_function_breaker_state\{provider="lambda"\} (\d+)/m.exec(text)?.[1];
  const entered: Record<string, number> = {};
  for (const m of text.matchAll(/^sloserve_function_breaker_transitions_total\{provider="lambda",state="([a-z-]+)"\} (\d+)/gm)) entered[m[1]!] = Number(m[2]);
  return { state: state === undefined ? undefined : Number(state), entered };
}

describe("fault: the function path failing", () => {
  it("fault - Lambda failing: its breaker opens, queries fall back to the local pool; recovered: half-open, closed, Lambda serves", async () => {
    expect((await breaker()).state, "the breaker is closed at start").toBe(0);
    const outcomes: Array<Awaited<ReturnType<typeof query>>> = [];

    // Lambda failing: each query is answered by the local pool after Lambda's failure, until the
    // breaker has seen enough failures to open.
    let view = await breaker();
    for (let i = 0; i < 30 && view.state !== 2; i++) {
      outcomes.push(await query());
      view = await breaker();
    }
    expect(view.state, "the lambda breaker opened").toBe(2);
    expect(view.entered["open"]).toBe(1);
    expect(lambda.counts.failed, "invocations Lambda failed before the breaker opened").toBeGreaterThanOrEqual(3);
    // While it is open, queries do not reach Lambda at all (unless the reset timeout let a trial through meanwhile).
    const failedBefore = lambda.counts.failed;
    for (let i = 0; i < 3; i++) outcomes.push(await query());
    const during = await breaker();
    if ((during.entered["half-open"] ?? 0) === 0) expect(lambda.counts.failed, "calls while open reached Lambda").toBe(failedBefore);
    expect(outcomes.filter((o) => !o.ok), "every query answered by the fallback").toEqual([]);
    const failingPhase = { queries: outcomes.length, lambdaFailed: lambda.counts.failed };

    // Lambda recovers: after the reset timeout a trial call goes through, succeeds and closes the breaker.
    lambda.failing = false;
    const recoveredAt = Date.now();
    for (let i = 0; i < 200 && view.state !== 0; i++) {
      outcomes.push(await query());
      view = await breaker();
      if (view.state !== 0) await sleep(250);
    }
    expect(view.state, "the lambda breaker closed again").toBe(0);
    expect(view.entered["half-open"]).toBeGreaterThanOrEqual(1);
    expect(view.entered["closed"]).toBeGreaterThanOrEqual(1);
    expect(lambda.counts.served, "the trial call was served by Lambda").toBeGreaterThanOrEqual(1);
    const closedAfterMs = Date.now() - recoveredAt;

    // Closed: Lambda, the first provider, serves every query again.
    const servedBefore = lambda.counts.served;
    for (let i = 0; i < 5; i++) outcomes.push(await query());
    expect(lambda.counts.served - servedBefore).toBe(5);
    expect(outcomes.filter((o) => !o.ok), "every query answered").toEqual([]);
    console.log(
      `function path: ${failingPhase.queries} queries while Lambda failed (${failingPhase.lambdaFailed} invocations failed, breaker open after them, the rest fell back to the local pool); recovered: closed ${closedAfterMs} ms later (reset ${RESET_MS} ms); ${outcomes.length} sent, ${outcomes.filter((o) => o.ok).length} answered; Lambda served ${lambda.counts.served}; transitions ${JSON.stringify(view.entered)}`,
    );
  }, 240_000);
});
