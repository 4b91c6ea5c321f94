import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { connect, headers as natsHeaders, type NatsConnection, type Subscription } from "@nats-io/transport-node";
import { startStack, ocrModels, registerOverHttp, type Stack } from "@sloserve/stack";
import { contentTypes, decodeTensors, encodeTensors, headers, subjects, type WorkerReport } from "@sloserve/contracts";
import { waitFor } from "@sloserve/testing";
import { NatsTally } from "./fault-load.js";

/**
 * Machines and money, live: the whole stack (real nats-server, redis-server, every service as its own
 * process) with the vm-autoscaler on the local provider, shortened periods (cool-down 15 s, billing
 * minimum 20 s, boot delay 0.5 s), one executor-cpu of the stack's own with one thread, and room for
 * two more. PaddleOCR's text detector (3×320×320 inputs, ~60 ms a query on one thread here) is
 * registered over HTTP, unprofiled.
 *
 * 1. A load ramp (from half the worker's measured capacity up to 3 × it) keeps the stack's worker busy
 *    above 80%: the vm-autoscaler launches an executor process (INFaaS's utilisation rule).
 * 2. The load stops; the stack's executor (it runs the detector) is SIGKILLed: it is replaced within
 *    30 s and the replacement reloads the detector.
 * 3. The launched workers, idle, are terminated after the cool-down (never before the billing
 *    minimum); the fleet goes back to one worker (the stack's size, its floor), which answers.
 * Every query sent is counted as answered or as a clear error; none is left without a reply.
 */

const model = ocrModels().find((m) => m.name === "ocr-det")!;
const SIDE = 320;
let stack: Stack;
let nc: NatsConnection;
const decisions: Array<{ action: string; kind: string; worker?: string; trigger?: string; reason: string; atMs: number }> = [];
const results: Array<{ action: string; worker?: string; ok: boolean; variant?: string; reason?: string }> = [];
const lastReport = new Map<string, { report: WorkerReport; atMs: number }>();
let subs: Subscription[] = [];

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
/** Waits of this test: polled every 200 ms; a timeout prints the last decisions. */
const waiting = (timeoutMs: number) => ({ timeoutMs, intervalMs: 200, detail: () => `decisions: ${JSON.stringify(decisions.slice(-6))}` });
const live = (): string[] => [...lastReport].filter(([, r]) => Date.now() - r.atMs < 3000).map(([w]) => w);

const payload = encodeTensors([{ name: "x", datatype: "FP32", shape: [1, 3, SIDE, SIDE], data: new Float32Array(3 * SIDE * SIDE).fill(0.5) }]);
/** Queries of the detector with a 20 s deadline, one per `send()`, and their outcomes. */
const tally = new NatsTally(() => nc, subjects.inferModel(model.name), payload);
const inFlight = tally.inFlight;
const send = (): void => tally.send();

beforeAll(async () => {
  stack = await startStack({
    cpuWorkers: 1,
    workerThreads: 1,
    maxWorkers: 3,
    env: { VARIANT_HARDWARE: "cpu", VARIANT_BATCH_SIZES: "1,4", VARIANT_CPU_THREADS: "1", PROFILE_ON_REGISTER: "false" },
    vmAutoscalerEnv: { BOOT_DELAY_MS: "500", COOLDOWN_MS: "15000", BILLING_MINIMUM_MS: "20000" },
  });
  nc = await connect({ servers: stack.nats.url });
  subs = [
    nc.subscribe("decision.vm.*", { callback: (_e, m) => void decisions.push(m.json()) }),
    nc.subscribe("scale.result.vm.*", { callback: (_e, m) => void results.push(m.json()) }),
    nc.subscribe(subjects.workerMetricsAll, {
      callback: (_e, m) => {
        const r = m.json<WorkerReport>();
        lastReport.set(r.worker, { report: r, atMs: Date.now() });
      },
    }),
  ];
  const registered = await registerOverHttp(stack.httpUrl, model);
  expect(registered.status, JSON.stringify(registered.body)).toBe(201);
}, 180_000);

afterAll(async () => {
  for (const s of subs) s.unsubscribe();
  await nc?.close();
  await stack?.stop();
});

describe("e2e vm-autoscaler", () => {
  it("vm-autoscaler - launches on a load ramp, replaces a killed executor with its variants, gives its workers back after the cool-down", async () => {
    const stackWorker = stack.services.find((s) => s.name === "executor-cpu")!;
    const stackWorkerId = String(stackWorker.info.worker);
    // Warm: the first query loads the detector on the stack's worker.
    send();
    await waitFor("the first answer", () => tally.ok + tally.noReply + [...tally.errors.values()].reduce((a, b) => a + b, 0) >= 1, waiting(60_000));
    expect(tally.ok).toBe(1);

    // The detector's run time on this machine (the executors' own measure in each answer, without the
    // hops and the batch wait), from queries sent one at a time: the ramp is set against it, so that it
    // saturates the worker on a fast machine as on a slow one.
    const soloMs: number[] = [];
    for (let i = 0; i < 4; i++) {
      const h = natsHeaders();
      h.set(headers.contentType, contentTypes.wire);
      h.set(headers.deadline, String(Date.now() + 20_000));
      const reply = await nc.request(subjects.inferModel(model.name), payload, { timeout: 60_000, headers: h });
      expect(reply.headers?.get(headers.error) ?? "", new TextDecoder().decode(reply.data)).toBe("");
      soloMs.push(decodeTensors<{ timing_ms: { inference: number } }>(reply.data).meta.timing_ms.inference);
    }
    const capacity = 1000 / Math.max(1, [...soloMs].sort((a, b) => a - b)[1]!);

    // 1. The ramp: from half the worker's capacity up by a quarter of it every 4 s (at most 3 ×),
    //    until a worker is launched.
    const started = Date.now();
    let rate = 0;
    let launched: (typeof decisions)[number] | undefined;
    let owed = 0;
    while (!launched && Date.now() - started < 60_000) {
      const elapsed = Date.now() - started;
      rate = capacity * Math.min(3, 0.5 + 0.25 * Math.floor(elapsed / 4000));
      owed += rate / 4;
      for (; owed >= 1; owed--) send();
      await sleep(250);
      launched = decisions.find((d) => d.action === "launch");
    }
    expect(launched, `no launch after 60 s at up to ${rate.toFixed(1)} queries/s (one query's run time: ${soloMs.map((m) => m.toFixed(1)).join(", ")} ms)`).toBeDefined();
    expect(launched?.reason).toMatch(/utilisation above 80%|overloaded|placement|SLO monitor/);
    const first = await waitFor("the launched worker's result", () => results.find((r) => r.action === "launch" && r.ok)?.worker, waiting(10_000));
    await waitFor("the launched executor's heartbeat", () => live().includes(first), waiting(30_000));

    // 2. The drop, then the stack's executor dies.
    await waitFor("every query of the ramp answered", () => inFlight.size === 0, waiting(60_000));
    const killedAt = Date.now();
    stackWorker.process.kill("SIGKILL");
    const replaced = await waitFor("the replacement", () => decisions.find((d) => d.action === "replace" && d.worker === stackWorkerId), waiting(30_000));
    expect(replaced.reason).toMatch(/^heartbeat lost for \d+ s \(> 10 s\): replace it and restore 1 variant\(s\)$/);
    const replacement = await waitFor("the replacement's launch", () => results.find((r) => r.action === "launch" && r.ok && r.reason?.startsWith(`replace ${stackWorkerId}:`))?.worker, waiting(10_000));
    await waitFor("the detector reloaded on the replacement", () => lastReport.get(replacement)?.report.variants.some((v) => v.variant.startsWith(`${model.name}--`) && v.state === "active"), waiting(30_000 - (Date.now() - killedAt)));
    expect(Date.now() - killedAt).toBeLessThan(30_000);
    expect(results.some((r) => r.action === "reload" && r.worker === replacement && r.ok)).toBe(true);

    // 3. Idle: the launched workers go after the cool-down, the fleet is back to one worker.
    await waitFor("the fleet back to one worker", () => live().length === 1 && decisions.some((d) => d.action === "terminate"), waiting(90_000));
    const terminations = decisions.filter((d) => d.action === "terminate");
    for (const t of terminations) expect(t.reason).toMatch(/^no active variant for \d+ s \(≥ 15 s\)/);
    // Holds before the billing minimum are allowed; a termination before it is not (checked by the
    // provider's launch time in the cost summary below).
    const summary = await new Promise<{ instances: Array<{ worker: string; launchedAtMs: number; endedAtMs: number | null; dollars: number }>; totalDollars: number }>((resolve) => {
      const s = nc.subscribe(subjects.costSummary, { max: 1, callback: (_e, m) => resolve(m.json()) });
      setTimeout(() => s.unsubscribe(), 15_000);
    });
    for (const i of summary.instances) if (i.endedAtMs !== null && terminations.some((t) => t.worker === i.worker)) expect(i.endedAtMs - i.launchedAtMs).toBeGreaterThanOrEqual(20_000);
    expect(summary.totalDollars).toBeGreaterThan(0);

    // The one worker left answers.
    send();
    await waitFor("the last answer", () => inFlight.size === 0, waiting(60_000));
    const errors = [...tally.errors.values()].reduce((a, b) => a + b, 0);
    const breakdown = `sent ${tally.sent}: ${tally.ok} answered, errors ${JSON.stringify(Object.fromEntries(tally.errors))}, no reply ${tally.noReply}`;
    expect(tally.ok + errors + tally.noReply, breakdown).toBe(tally.sent);
    expect(tally.noReply, breakdown).toBe(0);
    expect(tally.ok, breakdown).toBeGreaterThan(tally.sent / 2);
    for (const code of tally.errors.keys()) expect(["deadline_exceeded", "no_capacity"], breakdown).toContain(code);
  }, 240_000);
});
