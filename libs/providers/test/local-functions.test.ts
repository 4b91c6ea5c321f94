import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { connectBus, type Bus } from "@sloserve/bus";
import { startNats, type ServerHandle } from "@sloserve/stack";
import { ErrorCode, ManualClock, ServeError, encodeTensors } from "@sloserve/contracts";
import { lambdaCost } from "@sloserve/policy";
import { LocalFunctionPool, type FunctionRequest, type FunctionResult, type LocalFunctionPoolOptions } from "@sloserve/providers";
import { MODEL_PATH, OBJECT, VARIANT, memoryLogger, outputsOf, query, reference } from "./fixtures.js";

/**
 * The local function pool with real function processes that read a real ONNX model (PaddleOCR's
 * direction classifier) from the model repository on a real nats-server. The injected manual clock
 * drives keep-alive (`sweep()` by hand); durations are real and measured, never asserted against a
 * bound. Medians of the measured cold starts and warm invocations are printed at the end.
 */

const T0 = 1_800_000_000_000;
let nats: ServerHandle;
let bus: Bus;
const pools: LocalFunctionPool[] = [];
const colds: number[] = [];
const warms: number[] = [];
const { log, lines } = memoryLogger("local-functions-test");

function pool(options: Partial<LocalFunctionPoolOptions> & { clock: ManualClock }): LocalFunctionPool {
  const p = new LocalFunctionPool({ models: { natsUrl: nats.url }, log, sweepIntervalMs: 0, ...options });
  pools.push(p);
  return p;
}

function request(clock: ManualClock, extra: Partial<FunctionRequest> = {}): FunctionRequest {
  return { variant: VARIANT, object: OBJECT, payload: query(1, 4), deadlineMs: clock.now() + 60_000, ...extra };
}

function record(r: FunctionResult): FunctionResult {
  (r.coldStart ? colds : warms).push(r.durationMs);
  return r;
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

const median = (xs: number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length === 0 ? NaN : s.length % 2 ? (s[(s.length - 1) / 2] as number) : ((s[s.length / 2 - 1] as number) + (s[s.length / 2] as number)) / 2;
};

beforeAll(async () => {
  nats = await startNats();
  bus = await connectBus({ servers: nats.url, name: "local-functions-test", log });
  await bus.models.putBlob({ name: OBJECT }, readFileSync(MODEL_PATH));
});

afterEach(async () => {
  await Promise.all(pools.splice(0).map((p) => p.close()));
});

afterAll(async () => {
  console.log(`local function pool on this machine: cold start median ${median(colds).toFixed(0)} ms (n=${colds.length}), warm invocation median ${median(warms).toFixed(1)} ms (n=${warms.length})`);
  await bus?.close();
  await nats?.stop();
});

describe("local function pool", () => {
  it("local functions - a cold start (process + model load), then warm invocations; priced as Lambda", async () => {
    const clock = new ManualClock(T0);
    const p = pool({ clock, memoryMb: 2048 });
    const want = await reference(1, 4);

    const cold = record(await p.invoke(request(clock, { requestId: "c-1" })));
    expect(cold.coldStart).toBe(true);
    expect(cold.initMs).toBeGreaterThan(0);
    expect(cold.durationMs).toBeGreaterThan(cold.initMs as number);
    const out = outputsOf(cold.payload);
    expect(Array.from(out.data)).toEqual(Array.from(want));
    expect(out.meta.served_by).toEqual({ variant: VARIANT, hardware: "function", provider: "local", container: "local-1", cold_start: true });
    expect(out.meta.id).toBe("c-1");
    expect(cold.billedMs).toBe(Math.ceil(cold.durationMs));
    expect(cold.costDollars).toBe(lambdaCost(cold.durationMs, 2));
    expect(cold.memoryMb).toBe(2048);
    expect(lines.some((l) => l.msg === "function container started" && l.container === "local-1" && typeof l.startMs === "number")).toBe(true);

    let cost = cold.costDollars;
    for (let i = 0; i < 5; i++) {
      const warm = record(await p.invoke(request(clock)));
      expect(warm.coldStart).toBe(false);
      expect(warm.initMs).toBe(0);
      expect(Array.from(outputsOf(warm.payload).data)).toEqual(Array.from(want));
      cost += warm.costDollars;
    }
    expect(p.stats()).toEqual({ invocations: 6, coldStarts: 1, errors: 0, costDollars: cost });
    expect(p.poolStats()).toEqual({ containers: 1, starting: 0, idle: 1, busy: 0, waiting: 0 });
  });

  it("local functions - FUNCTION_BACKEND=emulated: a container starts and fetches the model (a cold start), each invocation waits the calibrated latency and answers zeros of the declared outputs", async () => {
    const clock = new ManualClock(T0);
    const dir = mkdtempSync(join(tmpdir(), "emulated-functions-"));
    const calibration = join(dir, "calibration.json");
    // A 300 ms median for the variant at batch 1 (P99 the same: no spread), far above the real model's few ms.
    writeFileSync(calibration, JSON.stringify({ variants: { [VARIANT]: { batches: { "1": { p50: 300, p99: 300 } } } } }));
    const p = pool({ clock, env: { FUNCTION_BACKEND: "emulated", EMULATED_CALIBRATION: calibration } });
    const want = await reference(1, 4);
    const cold = await p.invoke(request(clock, { requestId: "e-1" }));
    expect(cold.coldStart).toBe(true);
    const out = outputsOf(cold.payload);
    expect(out.meta.served_by).toEqual({ variant: VARIANT, hardware: "function", provider: "local", container: "local-1", backend: "emulated", cold_start: true });
    // Zeros of the model's output shape.
    expect(out.data.length).toBe(want.length);
    expect(Array.from(out.data).every((x) => x === 0)).toBe(true);
    for (let i = 0; i < 3; i++) {
      const warm = await p.invoke(request(clock));
      expect(warm.coldStart).toBe(false);
      expect(warm.durationMs).toBeGreaterThanOrEqual(299);
      expect((outputsOf(warm.payload).meta.timing_ms as { inference: number }).inference).toBeGreaterThanOrEqual(299);
    }
    rmSync(dir, { recursive: true, force: true });
  });

  it("local functions - keep-alive: an idle container exits keepAliveMs after its last use; the next query starts cold", async () => {
    const clock = new ManualClock(T0);
    const p = pool({ clock, keepAliveMs: 600_000 });
    record(await p.invoke(request(clock)));
    const [pid] = p.pids();
    clock.advance(599_999);
    expect(await p.sweep()).toEqual([]);
    record(await p.invoke(request(clock))); // used again: its keep-alive starts over
    clock.advance(599_999);
    expect(await p.sweep()).toEqual([]);
    clock.advance(1);
    expect(await p.sweep()).toEqual(["local-1"]);
    expect(alive(pid as number)).toBe(false);
    expect(p.poolStats().containers).toBe(0);
    expect(lines.some((l) => l.msg === "function container retired" && l.reason === "idle for 600000 ms ≥ keep-alive 600000 ms")).toBe(true);

    const again = record(await p.invoke(request(clock)));
    expect(again.coldStart).toBe(true);
    expect((outputsOf(again.payload).meta.served_by as Record<string, unknown>).container).toBe("local-2");
  });

  it("local functions - at most maxConcurrency containers; beyond, queries wait for one", async () => {
    const clock = new ManualClock(T0);
    const p = pool({ clock, maxConcurrency: 2 });
    const results = await Promise.all(Array.from({ length: 5 }, (_, i) => p.invoke(request(clock, { payload: query(1, i + 1) }))));
    for (const [i, r] of results.entries()) expect(Array.from(outputsOf(r.payload).data)).toEqual(Array.from(await reference(1, i + 1)));
    const containers = new Set(results.map((r) => (outputsOf(r.payload).meta.served_by as Record<string, unknown>).container));
    expect(containers).toEqual(new Set(["local-1", "local-2"]));
    // two queries started the two containers; the three that waited found them warm
    expect(p.stats()).toMatchObject({ invocations: 5, coldStarts: 2, errors: 0 });
    expect(p.poolStats()).toEqual({ containers: 2, starting: 0, idle: 2, busy: 0, waiting: 0 });
  });

  it("local functions - a query that waits past its deadline fails; whenFull: reject refuses at once", async () => {
    const clock = new ManualClock(T0);
    const queued = pool({ clock, maxConcurrency: 1 });
    const first = queued.invoke(request(clock));
    const late = await queued.invoke(request(clock, { deadlineMs: clock.now() + 1 })).catch((e: unknown) => e);
    expect(late).toBeInstanceOf(ServeError);
    expect(late).toMatchObject({ code: ErrorCode.deadlineExceeded, message: "waited 1 ms for a free function container (all 1 busy, maxConcurrency 1) until the query's deadline" });
    record(await first);

    const rejecting = pool({ clock, maxConcurrency: 1, whenFull: "reject", name: "local-r" });
    const running = rejecting.invoke(request(clock));
    await expect(rejecting.invoke(request(clock))).rejects.toMatchObject({
      code: ErrorCode.noCapacity,
      message: 'local function pool "local-r": all 1 containers are busy (maxConcurrency 1)',
    });
    record(await running);
    expect(rejecting.stats()).toMatchObject({ invocations: 2, errors: 1 });
  });

  it("local functions - prewarm(n) starts n containers with the model loaded; the next queries are warm; asking again starts nothing", async () => {
    const clock = new ManualClock(T0);
    const p = pool({ clock, maxConcurrency: 4 });
    await p.prewarm(2, { object: OBJECT });
    expect(p.poolStats()).toEqual({ containers: 2, starting: 0, idle: 2, busy: 0, waiting: 0 });
    const pids = p.pids();
    const costOfPrewarm = p.stats().costDollars;
    expect(costOfPrewarm).toBeGreaterThan(2 * lambdaCost(0, 2)); // two pings: requests + their GB-seconds

    const both = await Promise.all([p.invoke(request(clock)), p.invoke(request(clock))]);
    for (const r of both) expect(record(r).coldStart).toBe(false);
    await p.prewarm(2, { object: OBJECT });
    expect(p.pids()).toEqual(pids);
    expect(p.stats()).toMatchObject({ invocations: 2, coldStarts: 0 });
    expect(p.stats().costDollars).toBeCloseTo(costOfPrewarm + (both[0] as FunctionResult).costDollars + (both[1] as FunctionResult).costDollars, 15);
  });

  it("local functions - the query's faults come back with their codes; a container lost mid-query fails it, and the pool replaces it", async () => {
    const clock = new ManualClock(T0);
    const p = pool({ clock });
    const bad = encodeTensors([{ name: "x", datatype: "FP32", shape: [1, 4, 48, 192], data: new Float32Array(4 * 48 * 192) }]);
    await expect(p.invoke(request(clock, { payload: bad }))).rejects.toMatchObject({ code: ErrorCode.invalidShape, message: "input 'x' has shape [1, 4, 48, 192]; the model expects [-1, 3, -1, -1] (-1 = any size)" });
    await expect(p.invoke(request(clock, { object: "model/absent.onnx" }))).rejects.toMatchObject({
      code: ErrorCode.internal,
      message: "function local-1 failed: model object 'model/absent.onnx' is not in the model repository (NATS object store bucket 'models')",
    });

    const [pid] = p.pids();
    const inFlight = p.invoke(request(clock, { payload: query(32, 2) }));
    await new Promise((resolve) => setImmediate(resolve)); // the query is handed over; 32 images take far longer than this
    process.kill(pid as number, "SIGKILL");
    const err = (await inFlight.catch((e: unknown) => e)) as ServeError;
    expect(err.code).toBe(ErrorCode.internal);
    // Killed while it ran the query, or (had the message not left yet) while it was being sent.
    expect(err.message).toMatch(/^(function container local-1 exited \(code null, signal SIGKILL\)(; last output: [\s\S]*)?|cannot send to function container local-1: .+)$/);
    expect(lines.some((l) => l.msg === "function container lost" && l.container === "local-1")).toBe(true);

    const next = record(await p.invoke(request(clock)));
    expect(next.coldStart).toBe(true);
    expect((outputsOf(next.payload).meta.served_by as Record<string, unknown>).container).toBe("local-2");
    expect(p.stats()).toMatchObject({ invocations: 4, errors: 3, coldStarts: 1 });
  });

  it("local functions - close() stops every container and refuses new work", async () => {
    const clock = new ManualClock(T0);
    const p = pool({ clock });
    await p.prewarm(2);
    const pids = p.pids();
    expect(pids).toHaveLength(2);
    expect(pids.map(alive)).toEqual([true, true]);
    await p.close();
    expect(pids.map(alive)).toEqual([false, false]);
    await expect(p.invoke(request(clock))).rejects.toMatchObject({ code: ErrorCode.unavailable, message: 'local function pool "local" is closed' });
  });
});
