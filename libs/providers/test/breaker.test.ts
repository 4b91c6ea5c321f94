import { afterEach, describe, expect, it } from "vitest";
import { setTimeout as sleep } from "node:timers/promises";
import { mockClient } from "aws-sdk-client-mock";
import { InvokeCommand, LambdaClient, type InvokeCommandOutput } from "@aws-sdk/client-lambda";
import { ErrorCode, ManualClock, ServeError, encodeTensors, httpStatusOf } from "@sloserve/contracts";
import {
  BreakerFunctionProvider,
  FallbackFunctionProvider,
  LambdaFunctionProvider,
  LocalFunctionPool,
  type BreakerOptions,
  type BreakerState,
  type BreakerStateChange,
  type FunctionProvider,
  type FunctionRequest,
} from "@sloserve/providers";
import { OBJECT, VARIANT, addModel, memoryLogger, modelsDir, outputsOf, query, reference } from "./fixtures.js";

/**
 * Circuit breakers on the function path: the Lambda provider on aws-sdk-client-mock (its errors open
 * the breaker; calls fail fast while open; after resetTimeout one trial call goes through and its
 * success closes it) and the real local pool (a model missing from its store opens it; the trial after
 * the model arrives closes it); then the fallback from one provider to the next, and the error when
 * both fail. Tests wait on the breakers' state-change events, with short reset timeouts.
 */

const T0 = 1_800_000_000_000;
const FUNCTION = "sloserve-functions";
const clock = new ManualClock(T0);
const { log, lines } = memoryLogger("breaker-test");
const lambda = mockClient(LambdaClient);
const encoder = new TextEncoder();
const closeLater: FunctionProvider[] = [];

const blob = (value: unknown): InvokeCommandOutput["Payload"] => encoder.encode(JSON.stringify(value)) as InvokeCommandOutput["Payload"];
const outputs = encodeTensors([{ name: "softmax_0.tmp_0", datatype: "FP32", shape: [1, 2], data: new Float32Array([0.9, 0.1]) }]);
const ok = (): InvokeCommandOutput => ({ StatusCode: 200, Payload: blob({ payload: Buffer.from(outputs).toString("base64"), durationMs: 5, loadMs: 0, coldStart: false }), $metadata: {} });
const boom = (): InvokeCommandOutput => ({ StatusCode: 200, FunctionError: "Unhandled", Payload: blob({ errorType: "Error", errorMessage: "boom" }), $metadata: {} });

function lambdaProvider(): LambdaFunctionProvider {
  return new LambdaFunctionProvider({ client: new LambdaClient({ region: "us-east-1" }), functionName: FUNCTION, memoryMb: 1024, clock, log });
}

function guard(inner: FunctionProvider, options: BreakerOptions = {}): BreakerFunctionProvider {
  const b = new BreakerFunctionProvider(inner, { clock, log, volumeThreshold: 3, errorThresholdPercentage: 50, resetTimeoutMs: 200, ...options });
  closeLater.push(b);
  return b;
}

function request(extra: Partial<FunctionRequest> = {}): FunctionRequest {
  return { variant: VARIANT, object: OBJECT, payload: query(), deadlineMs: clock.now() + 60_000, ...extra };
}

/** Resolves at the breaker's next change to `state`. */
function next(breaker: BreakerFunctionProvider, state: BreakerState): Promise<BreakerStateChange> {
  return new Promise((resolve) => {
    const off = breaker.onStateChange((change) => {
      if (change.state !== state) return;
      off();
      resolve(change);
    });
  });
}

async function rejection(p: Promise<unknown>): Promise<ServeError> {
  const err = await p.then(
    () => new Error("expected a rejection"),
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(ServeError);
  return err as ServeError;
}

afterEach(async () => {
  lambda.reset();
  await Promise.all(closeLater.splice(0).map((p) => p.close()));
});

describe("function circuit breaker - lambda (aws-sdk-client-mock)", () => {
  it("breaker - lambda errors open it; calls fail fast while open; after resetTimeout one trial goes through and its success closes it", async () => {
    lambda.on(InvokeCommand).resolves(boom());
    const breaker = guard(lambdaProvider());
    const changes: BreakerStateChange[] = [];
    breaker.onStateChange((c) => changes.push(c));
    const opened = next(breaker, "open");

    for (let i = 0; i < 3; i++) {
      const err = await rejection(breaker.invoke(request()));
      expect(err.code).toBe(ErrorCode.internal);
      expect(err.message).toBe(`lambda function ${FUNCTION} failed (Unhandled): Error: boom`);
    }
    const open = await opened;
    expect(breaker.state).toBe("open");
    expect(open.reason).toBe(`3 of 3 calls failed in the last 10000 ms (threshold 50%, at least 3 calls); last: lambda function ${FUNCTION} failed (Unhandled): Error: boom`);

    // Open: refused at once, Lambda not called.
    const halfOpened = next(breaker, "half-open");
    const fast = await rejection(breaker.invoke(request()));
    expect(fast.code).toBe(ErrorCode.overflowUnavailable);
    expect(httpStatusOf(fast.code)).toBe(503);
    expect(fast.message).toBe(
      `function provider "lambda" is unavailable: its circuit breaker is open (last failure: lambda function ${FUNCTION} failed (Unhandled): Error: boom); a trial call is let through 200 ms after it opened`,
    );
    expect(lambda.commandCalls(InvokeCommand)).toHaveLength(3);

    // Half-open after resetTimeout: one trial call goes through; others are still refused while it runs.
    lambda.reset();
    lambda.on(InvokeCommand).callsFake(async () => {
      await sleep(50);
      return ok();
    });
    await halfOpened;
    expect(breaker.state).toBe("half-open");
    const closed = next(breaker, "closed");
    const trial = breaker.invoke(request());
    const during = await rejection(breaker.invoke(request()));
    expect(during.message).toBe('function provider "lambda" is unavailable: its circuit breaker is half-open and a trial call is in flight');
    const result = await trial;
    expect(Array.from(result.payload)).toEqual(Array.from(outputs));
    await closed;
    expect(breaker.state).toBe("closed");
    expect(lambda.commandCalls(InvokeCommand)).toHaveLength(1);
    expect(changes.map((c) => c.state)).toEqual(["open", "half-open", "closed"]);
    expect(changes.every((c) => c.provider === "lambda" && c.atMs === T0)).toBe(true);
    expect(lines.some((l) => l.msg === "function circuit breaker" && l.state === "open" && l.level === 40)).toBe(true);

    // Closed again: calls go through.
    await breaker.invoke(request());
    expect(breaker.breakerStats()).toMatchObject({ state: "closed", opened: 1 });
  });

  it("breaker - a failed trial opens it again; the next trial's success closes it", async () => {
    lambda.on(InvokeCommand).resolves(boom());
    const breaker = guard(lambdaProvider(), { resetTimeoutMs: 100 });
    const opened = next(breaker, "open");
    for (let i = 0; i < 3; i++) await rejection(breaker.invoke(request()));
    await opened;
    await next(breaker, "half-open");
    const reopened = next(breaker, "open");
    expect((await rejection(breaker.invoke(request()))).code).toBe(ErrorCode.internal);
    expect((await reopened).reason).toBe(`the half-open trial call failed: lambda function ${FUNCTION} failed (Unhandled): Error: boom`);
    expect(breaker.state).toBe("open");
    lambda.reset();
    lambda.on(InvokeCommand).resolves(ok());
    await next(breaker, "half-open");
    await breaker.invoke(request());
    expect(breaker.state).toBe("closed");
    expect(breaker.breakerStats().opened).toBe(2);
  });

  it("breaker - the query's own faults never open it", async () => {
    lambda.on(InvokeCommand).resolves({ StatusCode: 200, Payload: blob({ error: { code: "invalid_shape", message: "input 'x' has shape [1]" } }), $metadata: {} });
    const breaker = guard(lambdaProvider());
    for (let i = 0; i < 6; i++) expect((await rejection(breaker.invoke(request()))).code).toBe(ErrorCode.invalidShape);
    expect(breaker.breakerStats()).toMatchObject({ state: "closed", failures: 0, fires: 6 });
  });

  it("breaker - a call is bounded by the query's deadline or the cap, and counts as a failure past it", async () => {
    lambda.on(InvokeCommand).callsFake(async () => {
      await sleep(400);
      return ok();
    });
    const breaker = guard(lambdaProvider(), { capMs: 40 });
    const byDeadline = await rejection(breaker.invoke(request({ deadlineMs: clock.now() + 20 })));
    expect(byDeadline).toMatchObject({ code: ErrorCode.deadlineExceeded, message: `function provider "lambda" did not answer within 20 ms (the query's deadline)` });
    const byCap = await rejection(breaker.invoke(request()));
    expect(byCap).toMatchObject({ code: ErrorCode.deadlineExceeded, message: `function provider "lambda" did not answer within 40 ms (the 40 ms cap)` });
    expect(breaker.breakerStats()).toMatchObject({ failures: 2 });
    // A query already past its deadline is not sent, and not counted.
    const past = await rejection(breaker.invoke(request({ deadlineMs: clock.now() - 1 })));
    expect(past.message).toBe(`the query's deadline passed 1 ms before it was sent to function provider "lambda"`);
    expect(breaker.breakerStats()).toMatchObject({ fires: 2 });
  });
});

describe("function circuit breaker - the real local pool", () => {
  it("breaker - a model missing from the pool's store opens it; once the model is there, the trial succeeds and closes it", async () => {
    const dir = modelsDir({ empty: true });
    const pool = new LocalFunctionPool({ models: { dir }, clock, log, sweepIntervalMs: 0 });
    const breaker = guard(pool, { resetTimeoutMs: 300 });
    const opened = next(breaker, "open");
    for (let i = 0; i < 3; i++) {
      const err = await rejection(breaker.invoke(request()));
      expect(err.code).toBe(ErrorCode.internal);
      expect(err.message).toMatch(/^function local-1 failed: model object 'model\/ocr-cls.onnx' is not in the function's models directory/);
    }
    await opened;
    const halfOpened = next(breaker, "half-open");
    expect((await rejection(breaker.invoke(request()))).code).toBe(ErrorCode.overflowUnavailable);
    expect(pool.stats()).toMatchObject({ invocations: 3, errors: 3 });

    addModel(dir);
    await halfOpened;
    const closed = next(breaker, "closed");
    const result = await breaker.invoke(request());
    await closed;
    expect(Array.from(outputsOf(result.payload).data)).toEqual(Array.from(await reference()));
    expect(breaker.state).toBe("closed");
    expect(pool.stats()).toMatchObject({ invocations: 4, errors: 3 });
  });
});

describe("function fallback", () => {
  it("fallback - lambda failing, then open: the local pool serves; Lambda is no longer called once open", async () => {
    lambda.on(InvokeCommand).resolves(boom());
    const viaLambda = guard(lambdaProvider(), { volumeThreshold: 2, resetTimeoutMs: 60_000 });
    const viaLocal = guard(new LocalFunctionPool({ models: { dir: modelsDir() }, clock, log, sweepIntervalMs: 0 }));
    const functions = new FallbackFunctionProvider([viaLambda, viaLocal], { clock, log });
    expect(functions.name).toBe("lambda>local");
    const want = Array.from(await reference());

    for (let i = 0; i < 3; i++) {
      const result = await functions.invoke(request({ requestId: `f-${i}` }));
      expect(Array.from(outputsOf(result.payload).data)).toEqual(want);
      expect((outputsOf(result.payload).meta.served_by as Record<string, unknown>).provider).toBe("local");
    }
    expect(viaLambda.state).toBe("open");
    expect(lambda.commandCalls(InvokeCommand)).toHaveLength(2);
    const fallbacks = lines.filter((l) => l.msg === "function fallback served the query" && typeof l.requestId === "string" && l.requestId.startsWith("f-"));
    expect(fallbacks.map((l) => (l.attempts as Array<{ code: string }>)[0]?.code)).toEqual([ErrorCode.internal, ErrorCode.internal, ErrorCode.overflowUnavailable]);
    expect(functions.stats()).toMatchObject({ invocations: 2 + 3, errors: 2 });
  });

  it("fallback - both paths failing: one clear error naming each; the query's faults are not retried elsewhere", async () => {
    lambda.on(InvokeCommand).resolves(boom());
    const pool = new LocalFunctionPool({ models: { dir: modelsDir({ empty: true }) }, clock, log, sweepIntervalMs: 0 });
    const functions = new FallbackFunctionProvider([guard(lambdaProvider()), guard(pool)], { clock, log });
    const err = await rejection(functions.invoke(request()));
    expect(err.code).toBe(ErrorCode.overflowUnavailable);
    expect(err.message).toMatch(
      /^overflow failed on every function provider \(lambda: lambda function sloserve-functions failed \(Unhandled\): Error: boom; local: function local-1 failed: model object 'model\/ocr-cls.onnx' is not in the function's models directory \(.*\)\)$/,
    );
    expect((err.details?.attempts as unknown[]).length).toBe(2);

    lambda.reset();
    lambda.on(InvokeCommand).resolves({ StatusCode: 200, Payload: blob({ error: { code: "invalid_datatype", message: "input 'x' has datatype INT32; the model expects FP32" } }), $metadata: {} });
    const before = pool.stats().invocations;
    const fault = await rejection(functions.invoke(request()));
    expect(fault).toMatchObject({ code: ErrorCode.invalidDatatype, message: "input 'x' has datatype INT32; the model expects FP32" });
    expect(pool.stats().invocations).toBe(before);
  });
});
