import { afterEach, beforeAll, describe, expect, it } from "vitest";
import { mockClient } from "aws-sdk-client-mock";
import { InvokeCommand, LambdaClient, type InvokeCommandOutput } from "@aws-sdk/client-lambda";
import { ErrorCode, ManualClock, ServeError, encodeTensors } from "@sloserve/contracts";
import { LAMBDA_PRICING, lambdaCost } from "@sloserve/policy";
import { LambdaFunctionProvider, parseLogTail, type FunctionRequest } from "@sloserve/providers";
import { createLambdaHandler, handler, type LambdaResponse } from "../src/lambda-handler.js";
import { OBJECT, VARIANT, memoryLogger, modelsDir, outputsOf, query, reference } from "./fixtures.js";

/**
 * The Lambda path: the function's entry point (`handler`) run for real in this process with MODELS_DIR
 * pointing at a directory holding a real ONNX model; and the provider through aws-sdk-client-mock, for
 * the exact InvokeCommand it sends and for how it reads what Lambda answers (payload, FunctionError,
 * the billed duration in the log tail).
 */

const T0 = 1_800_000_000_000;
const FUNCTION = "sloserve-functions";
const encoder = new TextEncoder();
const decoder = new TextDecoder();

/** The SDK hands back a Uint8ArrayBlobAdapter, a Uint8Array with helpers; the provider reads it as bytes. */
const blob = (value: unknown): InvokeCommandOutput["Payload"] => encoder.encode(JSON.stringify(value)) as InvokeCommandOutput["Payload"];
const tail = (lines: string): string => Buffer.from(lines).toString("base64");
const report = (duration: number, billed: number, init?: number): string =>
  tail(
    `START RequestId: 6d1c Version: $LATEST\nEND RequestId: 6d1c\nREPORT RequestId: 6d1c\tDuration: ${duration} ms\tBilled Duration: ${billed} ms\tMemory Size: 2048 MB\tMax Memory Used: 181 MB` +
      (init !== undefined ? `\tInit Duration: ${init} ms\t\n` : "\t\n"),
  );

describe("lambda handler (in process, real model)", () => {
  beforeAll(() => {
    process.env.MODELS_DIR = modelsDir();
  });

  it("lambda handler - answers a query event with the model's outputs, cold then warm", async () => {
    const event = { variant: VARIANT, object: OBJECT, payload: Buffer.from(query(2, 7)).toString("base64"), requestId: "r-1", deadlineMs: Date.now() + 30_000 };
    const first = (await handler(event)) as Extract<LambdaResponse, { payload: string }>;
    expect(first.coldStart).toBe(true);
    expect(first.loadMs).toBeGreaterThan(0);
    const out = outputsOf(Buffer.from(first.payload, "base64"));
    expect(out.shape).toEqual([2, 2]);
    expect(Array.from(out.data)).toEqual(Array.from(await reference(2, 7)));
    expect(out.meta.served_by).toEqual({ variant: VARIANT, hardware: "function", provider: "lambda", cold_start: true });
    expect(out.meta.id).toBe("r-1");

    const second = (await handler(event)) as Extract<LambdaResponse, { payload: string }>;
    expect(second).toMatchObject({ coldStart: false, loadMs: 0 });
    // A warm-up ping to an instance in use is warm.
    expect(await handler({ warmup: {} })).toMatchObject({ warm: true, coldStart: false, loadMs: 0 });
  });

  it("lambda handler - a warm-up ping with a model loads it, and the next query is warm", async () => {
    const fresh = createLambdaHandler({ modelsDir: process.env.MODELS_DIR as string, clock: new ManualClock(T0) });
    const ping = await fresh({ warmup: { object: OBJECT, holdMs: 5 } });
    expect(ping).toMatchObject({ warm: true, coldStart: true });
    expect((ping as { loadMs: number }).loadMs).toBeGreaterThan(0);
    const answer = await fresh({ variant: VARIANT, object: OBJECT, payload: Buffer.from(query()).toString("base64"), deadlineMs: T0 + 1000 });
    expect(answer).toMatchObject({ coldStart: false, loadMs: 0 });
  });

  it("lambda handler - the query's faults are answers; the function's throw (FunctionError)", async () => {
    const bad = encodeTensors([{ name: "x", datatype: "INT32", shape: [1, 3, 48, 192], data: new Int32Array(3 * 48 * 192) }]);
    expect(await handler({ variant: VARIANT, object: OBJECT, payload: Buffer.from(bad).toString("base64"), deadlineMs: Date.now() + 30_000 })).toEqual({
      error: { code: ErrorCode.invalidDatatype, message: "input 'x' has datatype INT32; the model expects FP32" },
    });
    const malformed = await handler({ variant: VARIANT });
    expect(malformed).toMatchObject({ error: { code: ErrorCode.badRequest } });
    expect((malformed as { error: { message: string } }).error.message).toMatch(/^not a function query or warm-up event: /);
    await expect(handler({ variant: VARIANT, object: "model/absent.onnx", payload: Buffer.from(query()).toString("base64"), deadlineMs: Date.now() + 30_000 })).rejects.toThrow(
      /^model object 'model\/absent.onnx' is not in the function's models directory/,
    );
  });
});

describe("lambda provider (aws-sdk-client-mock)", () => {
  const lambda = mockClient(LambdaClient);
  const clock = new ManualClock(T0);
  const { log, lines } = memoryLogger("lambda-test");
  const provider = (extra: Partial<ConstructorParameters<typeof LambdaFunctionProvider>[0]> = {}): LambdaFunctionProvider =>
    new LambdaFunctionProvider({ client: new LambdaClient({ region: "us-east-1" }), functionName: FUNCTION, memoryMb: 2048, clock, log, ...extra });
  const request: FunctionRequest = { variant: VARIANT, object: OBJECT, payload: query(1, 2), requestId: "q-7", deadlineMs: T0 + 2000 };

  afterEach(() => lambda.reset());

  it("lambda provider - sends the exact InvokeCommand and prices the billed duration of the log tail", async () => {
    const outputs = encodeTensors([{ name: "softmax_0.tmp_0", datatype: "FP32", shape: [1, 2], data: new Float32Array([0.25, 0.75]) }]);
    lambda.on(InvokeCommand).resolves({
      StatusCode: 200,
      Payload: blob({ payload: Buffer.from(outputs).toString("base64"), durationMs: 41.7, loadMs: 0, inferenceMs: 40, coldStart: false }),
      LogResult: report(42.31, 43),
      ExecutedVersion: "7",
    });
    const p = provider({ qualifier: "live" });
    const result = await p.invoke(request);

    const calls = lambda.commandCalls(InvokeCommand);
    expect(calls).toHaveLength(1);
    const input = calls[0]?.args[0].input;
    expect({ ...input, Payload: undefined }).toEqual({ FunctionName: FUNCTION, Qualifier: "live", InvocationType: "RequestResponse", LogType: "Tail", Payload: undefined });
    const sent = decoder.decode(input?.Payload as Uint8Array);
    expect(sent).toBe(JSON.stringify({ variant: VARIANT, object: OBJECT, payload: Buffer.from(request.payload).toString("base64"), requestId: "q-7", deadlineMs: T0 + 2000 }));

    expect(Array.from(result.payload)).toEqual(Array.from(outputs));
    // billed from "Billed Duration: 43 ms": 2e-7 + 2 GB · 0.043 s · 1.66667e-5 $/GB-s
    expect(result).toMatchObject({ durationMs: 41.7, billedMs: 43, coldStart: false, initMs: 0, memoryMb: 2048 });
    expect(result.costDollars).toBeCloseTo(2e-7 + 2 * 0.043 * 0.0000166667, 15);
    expect(result.costDollars).toBe(lambdaCost(43, 2, LAMBDA_PRICING));
    expect(p.stats()).toEqual({ invocations: 1, coldStarts: 0, errors: 0, costDollars: result.costDollars });
  });

  it("lambda provider - an Init Duration marks a cold start; without a log tail the reported duration is billed", async () => {
    lambda
      .on(InvokeCommand)
      .resolvesOnce({ StatusCode: 200, Payload: blob({ payload: "", durationMs: 180.2, loadMs: 150, coldStart: true }), LogResult: report(181, 612, 430.5) })
      .resolvesOnce({ StatusCode: 200, Payload: blob({ payload: "", durationMs: 12.2, loadMs: 0, coldStart: false }) });
    const p = provider();
    const cold = await p.invoke(request);
    // duration = the handler's 180.2 ms + INIT 430.5 ms; the cold start = INIT + the model load
    expect(cold).toMatchObject({ coldStart: true, billedMs: 612, initMs: 430.5 + 150 });
    expect(cold.durationMs).toBeCloseTo(610.7, 9);
    const warm = await p.invoke(request);
    expect(warm).toMatchObject({ coldStart: false, durationMs: 12.2, billedMs: 13 });
    expect(warm.costDollars).toBe(lambdaCost(13, 2));
    expect(p.stats()).toMatchObject({ invocations: 2, coldStarts: 1, errors: 0 });
    expect(p.stats().costDollars).toBeCloseTo(lambdaCost(612, 2) + lambdaCost(13, 2), 15);
  });

  it("lambda provider - FunctionError: throws internal with the function's message, billed and counted", async () => {
    lambda.on(InvokeCommand).resolves({
      StatusCode: 200,
      FunctionError: "Unhandled",
      Payload: blob({ errorType: "ServeError", errorMessage: "model object 'model/ocr-cls.onnx' is not in the function's models directory", trace: [] }),
      LogResult: report(3.1, 4),
    });
    const p = provider();
    const err = (await p.invoke(request).catch((e: unknown) => e)) as ServeError;
    expect(err).toBeInstanceOf(ServeError);
    expect(err.code).toBe(ErrorCode.internal);
    expect(err.message).toBe(`lambda function ${FUNCTION} failed (Unhandled): ServeError: model object 'model/ocr-cls.onnx' is not in the function's models directory`);
    expect(p.stats()).toEqual({ invocations: 1, coldStarts: 0, errors: 1, costDollars: lambdaCost(4, 2) });
  });

  it("lambda provider - a query the function refuses keeps its code; SDK errors are unavailable; oversized events are not sent", async () => {
    const throttled = Object.assign(new Error("Rate Exceeded."), { name: "TooManyRequestsException" });
    lambda
      .on(InvokeCommand)
      .resolvesOnce({ StatusCode: 200, Payload: blob({ error: { code: "invalid_shape", message: "input 'x' has shape [1]" } }), LogResult: report(1, 1) })
      .rejectsOnce(throttled);
    const p = provider();
    await expect(p.invoke(request)).rejects.toMatchObject({ code: ErrorCode.invalidShape, message: "input 'x' has shape [1]" });
    await expect(p.invoke(request)).rejects.toMatchObject({ code: ErrorCode.unavailable, message: `lambda invoke of ${FUNCTION} failed: TooManyRequestsException: Rate Exceeded.` });

    const calls = lambda.commandCalls(InvokeCommand).length;
    const huge = { ...request, payload: new Uint8Array(5 * 1024 * 1024) };
    await expect(p.invoke(huge)).rejects.toMatchObject({ code: ErrorCode.payloadTooLarge });
    expect(lambda.commandCalls(InvokeCommand)).toHaveLength(calls);
    expect(p.stats()).toMatchObject({ invocations: 3, errors: 3 });
  });

  it("lambda provider - prewarm sends n concurrent warm-up pings", async () => {
    lambda.on(InvokeCommand).resolves({ StatusCode: 200, Payload: blob({ warm: true, coldStart: true, loadMs: 120, durationMs: 380 }), LogResult: report(380, 800, 420) });
    const p = provider({ prewarmHoldMs: 300 });
    await p.prewarm(3, { object: OBJECT });
    const calls = lambda.commandCalls(InvokeCommand);
    expect(calls).toHaveLength(3);
    for (const call of calls) {
      const input = call.args[0].input;
      expect(input.FunctionName).toBe(FUNCTION);
      expect(input.InvocationType).toBe("RequestResponse");
      expect(JSON.parse(decoder.decode(input.Payload as Uint8Array))).toEqual({ warmup: { holdMs: 300, object: OBJECT } });
    }
    // pings are billed, not counted as queries
    expect(p.stats()).toEqual({ invocations: 0, coldStarts: 0, errors: 0, costDollars: 3 * lambdaCost(800, 2) });
    expect(lines.some((l) => l.msg === "lambda pre-warm" && l.pings === 3 && l.started === 3)).toBe(true);
  });

  it("lambda provider - through the mock to the real handler and back", async () => {
    const fn = createLambdaHandler({ modelsDir: modelsDir(), clock });
    lambda.on(InvokeCommand).callsFake(async (input: { Payload: Uint8Array }) => {
      const answer = await fn(JSON.parse(decoder.decode(input.Payload)));
      return { StatusCode: 200, Payload: blob(answer) };
    });
    const p = provider();
    const result = await p.invoke({ ...request, payload: query(3, 9) });
    const out = outputsOf(result.payload);
    expect(Array.from(out.data)).toEqual(Array.from(await reference(3, 9)));
    expect(out.meta.served_by).toMatchObject({ provider: "lambda", cold_start: true });
    expect(result.coldStart).toBe(true);
    expect(result.billedMs).toBe(Math.ceil(result.durationMs));
  });

  it("lambda provider - parseLogTail reads the REPORT line", () => {
    expect(parseLogTail(report(102.25, 103, 150.55))).toEqual({ durationMs: 102.25, billedMs: 103, initMs: 150.55, memorySizeMb: 2048 });
    expect(parseLogTail(tail("START RequestId: x\n"))).toEqual({});
    expect(parseLogTail(undefined)).toEqual({});
  });
});
