import { describe, expect, it } from "vitest";
import { ErrorCode, ManualClock, ServeError, encodeTensors } from "@sloserve/contracts";
import { FunctionHandler, directoryModelSource, isCallerFault } from "@sloserve/providers";
import { OBJECT, VARIANT, addModel, modelsDir, outputsOf, query, reference } from "./fixtures.js";

/**
 * The function handler shared by the local pool's containers and the Lambda function, in this process,
 * with a real ONNX model (PaddleOCR's direction classifier) read from a models directory.
 */

const T0 = 1_800_000_000_000;

function handler(dir = modelsDir(), clock = new ManualClock(T0)): FunctionHandler {
  return new FunctionHandler({ source: directoryModelSource(dir), clock, servedBy: { provider: "test" } });
}

async function failure(p: Promise<unknown>): Promise<ServeError> {
  const err = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(ServeError);
  return err as ServeError;
}

describe("function handler", () => {
  it("function handler - runs the query, loads the model once per container, says what served it", async () => {
    const fn = handler();
    const want = await reference(2, 3);
    const first = await fn.invoke({ variant: VARIANT, object: OBJECT, payload: query(2, 3), requestId: "q-1", deadlineMs: T0 + 10_000 });
    const out = outputsOf(first.payload);
    expect(out.shape).toEqual([2, 2]);
    expect(Array.from(out.data)).toEqual(Array.from(want));
    expect(first.coldStart).toBe(true);
    expect(first.loadMs).toBeGreaterThan(0);
    expect(out.meta.id).toBe("q-1");
    expect(out.meta.served_by).toEqual({ variant: VARIANT, hardware: "function", provider: "test", cold_start: true });
    const timing = out.meta.timing_ms as Record<string, number>;
    expect(Object.keys(timing).sort()).toEqual(["inference", "load", "total"]);
    expect(timing.total).toBeGreaterThanOrEqual((timing.load ?? 0) + (timing.inference ?? 0) - 0.01);

    const second = await fn.invoke({ variant: VARIANT, object: OBJECT, payload: query(1, 5), deadlineMs: T0 + 10_000 });
    expect(second.coldStart).toBe(false);
    expect(second.loadMs).toBe(0);
    expect(Array.from(outputsOf(second.payload).data)).toEqual(Array.from(await reference(1, 5)));
    expect((outputsOf(second.payload).meta.served_by as Record<string, unknown>).cold_start).toBe(false);
    expect(fn.loaded()).toEqual([OBJECT]);
    await fn.close();
  });

  it("function handler - a pre-warmed container's first query is warm", async () => {
    const fn = handler();
    expect(await fn.warm(OBJECT)).toMatchObject({ coldStart: true });
    const out = await fn.invoke({ variant: VARIANT, object: OBJECT, payload: query(), deadlineMs: T0 + 10_000 });
    expect(out.coldStart).toBe(false);
    await fn.close();
  });

  it("function handler - the query's faults keep their codes; the function's are internal", async () => {
    const fn = handler();
    const run = (payload: Uint8Array, object = OBJECT, deadlineMs = T0 + 10_000): Promise<unknown> => fn.invoke({ variant: VARIANT, object, payload, deadlineMs });

    const malformed = await failure(run(new Uint8Array([1, 2, 3])));
    expect(malformed.code).toBe(ErrorCode.badRequest);
    expect(malformed.message).toBe("malformed binary tensor message: shorter than its header");

    const shape = await failure(run(encodeTensors([{ name: "x", datatype: "FP32", shape: [1, 4, 48, 192], data: new Float32Array(4 * 48 * 192) }])));
    expect(shape.code).toBe(ErrorCode.invalidShape);
    expect(shape.message).toBe("input 'x' has shape [1, 4, 48, 192]; the model expects [-1, 3, -1, -1] (-1 = any size)");

    const name = await failure(run(encodeTensors([{ name: "image", datatype: "FP32", shape: [1, 3, 48, 192], data: new Float32Array(3 * 48 * 192) }])));
    expect(name.code).toBe(ErrorCode.unknownInput);

    const missing = await failure(run(query(), "model/absent.onnx"));
    expect(missing.code).toBe(ErrorCode.internal);
    expect(missing.message).toMatch(/^model object 'model\/absent.onnx' is not in the function's models directory \(.*model\/absent.onnx is missing\)$/);

    const escape = await failure(run(query(), "../../etc/passwd"));
    expect(escape.code).toBe(ErrorCode.invalidName);

    const late = await failure(run(query(), OBJECT, T0 - 5));
    expect(late.code).toBe(ErrorCode.deadlineExceeded);
    expect(late.message).toBe("the query's deadline passed 5 ms before it could run");

    expect([malformed, shape, name, escape].every((e) => isCallerFault(e.code))).toBe(true);
    expect([missing, late].some((e) => isCallerFault(e.code))).toBe(false);
    expect(fn.loaded()).toEqual([OBJECT]);
    await fn.close();
  });

  it("function handler - a failed load is not cached: once the model is there, it loads", async () => {
    const dir = modelsDir({ empty: true });
    const fn = handler(dir);
    const err = await failure(fn.invoke({ variant: VARIANT, object: OBJECT, payload: query(), deadlineMs: T0 + 10_000 }));
    expect(err.code).toBe(ErrorCode.internal);
    expect(fn.loaded()).toEqual([]);
    addModel(dir);
    const out = await fn.invoke({ variant: VARIANT, object: OBJECT, payload: query(), deadlineMs: T0 + 10_000 });
    expect(Array.from(outputsOf(out.payload).data)).toEqual(Array.from(await reference()));
    await fn.close();
  });
});
