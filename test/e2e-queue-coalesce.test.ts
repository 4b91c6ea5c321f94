import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { connect, headers as natsHeaders, type Msg, type NatsConnection } from "@nats-io/transport-node";
import { jetstream, jetstreamManager } from "@nats-io/jetstream";
import { startStack, registerOverHttp, tempDir, type Stack, type ServiceHandle } from "@sloserve/stack";
import { contentTypes, decodeTensors, encodeTensors, headers, queueConsumer, streams, subjects, type ScaleCommand, type StateEvent, type Tensor } from "@sloserve/contracts";
import { referenceRunner, maxRelativeDiff } from "./support.js";
import { waitFor } from "@sloserve/testing";
import { trackActive } from "./faults.js";
import { sleep, smallModel } from "./fault-load.js";

/**
 * Micro-batches on the bus (services/dispatcher queue-coalescer.ts, docs/ARCHITECTURE.md "The query
 * path"), on the real local stack: queries sent together to one variant go onto its queue as a few
 * coalesced messages (seen on `q.<variant>` itself), and each is answered to its own caller, as if
 * alone; one bad query, or one past its deadline, in such a message fails alone; and an executor
 * killed holding coalesced messages leaves all of their queries to the other replica (redelivered
 * whole: `served_by.deliveries` 2 or more).
 */

let stack: Stack;
let nc: NatsConnection;
const model = smallModel(tempDir("coalesce"), "coalesce", "coalesce-mlp");
let variant = "";
let reference: Awaited<ReturnType<typeof referenceRunner>>;
let active = new Map<string, Set<string>>();
/** Messages seen on the variant's queue subject: how many queries each carried. */
const queued: number[] = [];
const BURST = 24;

const input = (i: number): Tensor => ({ name: "input", datatype: "FP32", shape: [1, 1, 28, 28], data: Float32Array.from({ length: 784 }, (_, k) => ((k * 7 + i * 13) % 29) / 29) });

interface Answer {
  i: number;
  error?: string;
  code?: string;
  id?: string;
  served_by?: { worker: string; deliveries: number; batch_size: number };
  outputs?: Tensor[];
}

/** Sends query `i` over NATS as binary tensors (a request id of its own); `payload` replaces its body. */
async function send(i: number, options: { deadlineMs?: number; payload?: Uint8Array } = {}): Promise<Answer> {
  const h = natsHeaders();
  h.set(headers.contentType, contentTypes.wire);
  h.set(headers.requestId, `req-${i}`);
  if (options.deadlineMs !== undefined) h.set(headers.deadline, String(options.deadlineMs));
  const m: Msg = await nc.request(subjects.inferVariant(variant), options.payload ?? encodeTensors([input(i)], { id: `q${i}` }), { timeout: 60_000, headers: h });
  const code = m.headers?.get(headers.error);
  if (code) return { i, code, error: new TextDecoder().decode(m.data), id: m.headers?.get(headers.requestId) };
  const { meta, tensors } = decodeTensors<{ id: string; served_by: Answer["served_by"] }>(m.data);
  return { i, id: meta.id, served_by: meta.served_by, outputs: tensors };
}

async function expectCorrect(a: Answer): Promise<void> {
  expect(a.code, `query ${a.i}: ${a.error}`).toBeUndefined();
  expect(a.id).toBe(`q${a.i}`);
  const [expected] = await reference([input(a.i)]);
  const [actual] = a.outputs ?? [];
  expect(maxRelativeDiff(actual!.data as Float32Array, expected!.data as Float32Array)).toBeLessThan(1e-4);
}

const alive = (s: ServiceHandle): boolean => s.process.exitCode === null && s.process.signalCode === null;
const executors = (): ServiceHandle[] => stack.services.filter((s) => s.name === "executor-cpu" && alive(s));

async function loadOn(worker: string): Promise<void> {
  const command: ScaleCommand = { id: `test-${worker}-${Date.now()}`, action: "load", variant, reason: "coalescing test", atMs: Date.now() };
  await jetstream(nc).publish(subjects.scaleModel(worker), JSON.stringify(command));
  await waitFor(`${variant} active on ${worker}`, () => active.get(variant)?.has(worker), { timeoutMs: 60_000, intervalMs: 100 });
}

beforeAll(async () => {
  stack = await startStack({ cpuWorkers: 2, workerThreads: 1, env: { VARIANT_HARDWARE: "cpu", VARIANT_BATCH_SIZES: "8", VARIANT_CPU_THREADS: "1", PROFILE_ON_REGISTER: "false", QUEUE_COALESCE: "true" } });
  nc = await connect({ servers: stack.nats.url });
  reference = await referenceRunner(model.path);
  active = trackActive(nc);
  const r = await registerOverHttp(stack.httpUrl, model);
  expect(r.status, JSON.stringify(r.body)).toBe(201);
  variant = (r.body as { variants: Array<{ name: string; quantization: string }> }).variants.find((v) => v.quantization === "fp32")!.name;
  // A core subscription sees what the dispatcher publishes to the variant's queue.
  nc.subscribe(subjects.queue(variant), {
    callback: (_e, m) => {
      queued.push(Number(m.headers?.get(headers.queries)) || 1);
    },
  });
  await loadOn(String(executors()[0]!.info["worker"]));
  await expectCorrect(await send(0));
}, 300_000);

afterAll(async () => {
  await nc?.close();
  await stack?.stop();
});

describe("e2e queue coalescing", () => {
  it("coalescing - queries sent together share queue messages, and each is answered correctly to its own caller", async () => {
    queued.length = 0;
    const answers = await Promise.all(Array.from({ length: BURST }, (_, i) => send(i + 1)));
    for (const a of answers) await expectCorrect(a);
    await waitFor("the queue messages seen", () => queued.reduce((a, b) => a + b, 0) >= BURST, { timeoutMs: 10_000, intervalMs: 100 });
    expect(queued.reduce((a, b) => a + b, 0)).toBe(BURST);
    // Fewer messages than queries: some carried several (at most a batch each).
    expect(queued.length).toBeLessThan(BURST);
    expect(Math.max(...queued)).toBeLessThanOrEqual(8);
  });

  it("coalescing - a bad query and one past its deadline in a coalesced message fail alone; the others are answered", async () => {
    queued.length = 0;
    const good = encodeTensors([input(1)], { id: "bad" });
    // Its meta passes the dispatcher's check (names, shapes, datatypes); its data is cut short, which only the executor reads.
    const truncated = good.subarray(0, good.byteLength - 1024);
    const answers = await Promise.all(
      Array.from({ length: BURST }, (_, i) => (i === 5 ? send(100 + i, { payload: truncated }) : i === 9 ? send(100 + i, { deadlineMs: Date.now() - 1 }) : send(100 + i))),
    );
    for (const a of answers) {
      if (a.i === 105) {
        expect(a.code, a.error).toBe("bad_request");
        expect(a.error).toMatch(/runs past the end/);
        expect(a.id).toBe("req-105");
      } else if (a.i === 109) {
        expect(a.code, a.error).toBe("deadline_exceeded");
        expect(a.id).toBe("req-109");
      } else await expectCorrect(a);
    }
    expect(queued.length).toBeLessThan(BURST);
  });

  it("coalescing - an executor killed holding coalesced messages: all of their queries are answered by the other replica", async () => {
    const [victim, other] = executors();
    const otherId = String(other!.info["worker"]);
    queued.length = 0;
    // Frozen, its open pull still takes the queue's messages (the other replica has none yet); one
    // frozen between two pulls would take none: let it go on and try again.
    const jsm = await jetstreamManager(nc);
    for (;;) {
      victim!.process.kill("SIGSTOP");
      if ((await jsm.consumers.info(streams.queries.name, queueConsumer(variant))).num_waiting > 0) break;
      victim!.process.kill("SIGCONT");
      await sleep(200);
    }
    const pending = Array.from({ length: BURST }, (_, i) => send(200 + i));
    await waitFor("the queries queued", () => queued.reduce((a, b) => a + b, 0) >= BURST, { timeoutMs: 20_000, intervalMs: 100 });
    await loadOn(otherId);
    victim!.process.kill("SIGKILL");
    const answers = await Promise.all(pending);
    for (const a of answers) {
      await expectCorrect(a);
      expect(a.served_by?.worker).toBe(otherId);
    }
    // The first message went to the victim's open pull: its queries came back (its size, at least, were redelivered).
    expect(Math.max(...queued)).toBeGreaterThan(1);
    expect(answers.filter((a) => (a.served_by?.deliveries ?? 0) >= 2).length).toBeGreaterThanOrEqual(queued[0]!);
  }, 120_000);
});
