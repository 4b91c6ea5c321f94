import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { availableParallelism } from "node:os";
import { connect, headers as natsHeaders, type NatsConnection, type Subscription } from "@nats-io/transport-node";
import { startStack, registerOverHttp, tempDir, waitForProfiles, type Stack } from "@sloserve/stack";
import { arrivalsReportSchema, contentTypes, decodeTensors, encodeTensors, headers, subjects, type Tensor, type WorkerReport } from "@sloserve/contracts";
import { waitFor } from "@sloserve/testing";
import { heavyModel } from "./support.js";

/**
 * One host, as `npm start` runs it: the stack's CPU worker offers all of the machine's cores
 * (WORKER_THREADS's default), the vm-autoscaler may run two more local workers (PROVIDER=local, the
 * native engine), and the dispatcher overflows to the local function pool (OVERFLOW=local). Every
 * local worker or function container would be one more process on the same cores, taking from the
 * worker it was meant to relieve (libs/policy scaling/host-room.ts). Under a closed loop far above
 * what the worker serves within a 100 ms SLO (a heavy MLP):
 * - the vm-autoscaler launches nothing: its rules ask for a worker and it holds, naming the host's cores;
 * - the dispatcher overflows nothing: every answer comes from the worker;
 * - every query is answered or refused with a clear error.
 */

const APP = "heavy";
const SLO_MS = 100;
const CLIENTS = 16;
const LOAD_MS = 10_000;

let stack: Stack;
let nc: NatsConnection;
const decisions: Array<{ action: string; kind: string; reason: string }> = [];
const arrivals: Array<{ overflowed: number }> = [];
let subs: Subscription[] = [];

beforeAll(async () => {
  stack = await startStack({
    cpuWorkers: 1,
    maxWorkers: 3,
    env: { OVERFLOW: "local", VARIANT_HARDWARE: "cpu", VARIANT_BATCH_SIZES: "1", VARIANT_CPU_THREADS: "1" },
    vmAutoscalerEnv: { BOOT_DELAY_MS: "500" },
  });
  const r = await registerOverHttp(stack.httpUrl, heavyModel(tempDir("one-host")));
  expect(r.status, JSON.stringify(r.body)).toBe(201);
  await waitForProfiles(stack.httpUrl, "heavy-mlp", "cpu", 180_000);
  nc = await connect({ servers: stack.nats.url });
  subs = [
    nc.subscribe("decision.vm.*", { callback: (_e, m) => void decisions.push(m.json()) }),
    nc.subscribe(subjects.arrivals(APP), {
      callback: (_e, m) => {
        const parsed = arrivalsReportSchema.safeParse(m.json());
        if (parsed.success) arrivals.push({ overflowed: parsed.data.overflowed ?? 0 });
      },
    }),
  ];
}, 300_000);

afterAll(async () => {
  for (const s of subs) s.unsubscribe();
  await nc?.close();
  await stack?.stop();
});

const image: Tensor = { name: "input", datatype: "FP32", shape: [1, 1, 28, 28], data: new Float32Array(28 * 28).fill(0.25) };
type Outcome = { kind: "answer"; hardware: string } | { kind: "error"; code: string } | { kind: "lost"; message: string };

/** A model-less query over NATS with its SLO, counted from when it is sent. */
async function query(): Promise<Outcome> {
  const h = natsHeaders();
  h.set(headers.contentType, contentTypes.wire);
  h.set(headers.sloLatencyMs, String(SLO_MS));
  h.set(headers.receivedAt, String(Date.now()));
  try {
    const m = await nc.request(subjects.inferApp(APP), encodeTensors([image]), { timeout: 45_000, headers: h });
    const code = m.headers?.get(headers.error);
    if (code) return { kind: "error", code };
    return { kind: "answer", hardware: String(decodeTensors<{ served_by: { hardware: string } }>(m.data).meta.served_by.hardware) };
  } catch (err) {
    return { kind: "lost", message: (err as Error).message };
  }
}

describe("e2e one host", () => {
  it("one host - saturated: no local launch and no local overflow onto cores the worker already offers; every query answered or clearly refused", async () => {
    const reports: WorkerReport[] = [];
    const reportsSub = nc.subscribe(subjects.workerMetricsAll, { callback: (_e, m) => void reports.push(m.json<WorkerReport>()) });
    // Warm: the variant loads on the worker, which reports its host and all the cores.
    let warm: Outcome | undefined;
    for (let i = 0; i < 20 && !(warm?.kind === "answer" && warm.hardware === "cpu"); i++) warm = await query();
    expect(warm).toMatchObject({ kind: "answer", hardware: "cpu" });
    await waitFor("a report with the variant active", () => reports.some((r) => r.variants.some((v) => v.state === "active")), { timeoutMs: 15_000, intervalMs: 100 });
    reportsSub.unsubscribe();
    const worker = reports.at(-1)!;
    expect(worker.threads).toBe(availableParallelism());
    expect(worker.host).toBeTruthy();

    // CLIENTS callers, each sending its next query when the last is answered, for LOAD_MS.
    const outcomes: Outcome[] = [];
    const until = Date.now() + LOAD_MS;
    await Promise.all(
      Array.from({ length: CLIENTS }, async () => {
        while (Date.now() < until) outcomes.push(await query());
      }),
    );
    // Two more VM ticks read the load's last seconds.
    await new Promise((r) => setTimeout(r, 4000));

    const answers = outcomes.filter((o): o is Extract<Outcome, { kind: "answer" }> => o.kind === "answer");
    const errors = outcomes.filter((o): o is Extract<Outcome, { kind: "error" }> => o.kind === "error");
    const summary = { sent: outcomes.length, answered: answers.length, byFunction: answers.filter((a) => a.hardware === "function").length, errors: errors.map((e) => e.code), lost: outcomes.filter((o) => o.kind === "lost").length, decisions: decisions.slice(-4) };
    console.log(`e2e-one-host: ${JSON.stringify(summary)}`);
    expect(summary.lost, JSON.stringify(summary)).toBe(0);
    for (const e of errors) expect(["deadline_exceeded", "no_capacity"]).toContain(e.code);
    expect(answers.length).toBeGreaterThan(0);
    // Nothing ran beside the worker on its cores.
    expect(summary.byFunction, JSON.stringify(summary)).toBe(0);
    expect(arrivals.reduce((s, a) => s + a.overflowed, 0)).toBe(0);
    expect(decisions.filter((d) => d.action === "launch"), JSON.stringify(summary)).toEqual([]);
    // The vm-autoscaler's rules asked for more, and it said why it held.
    const held = decisions.filter((d) => d.action === "hold" && d.reason.includes(`the host's ${availableParallelism()} cores`));
    expect(held.length, JSON.stringify(decisions.slice(-6))).toBeGreaterThan(0);
    expect(held[0]?.reason).toMatch(/at the limit of 1 cpu worker\(s\) \(the host's \d+ cores: \d+ offered by 1 worker\(s\), a new one offers \d+\)/);
  }, 120_000);
});
