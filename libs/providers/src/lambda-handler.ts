/**
 * The AWS Lambda entry point of the function path (DESIGN §3 "Serverless overflow"; MArk §4.1): the
 * shared function handler behind `export const handler`. `LambdaFunctionProvider` invokes it.
 *
 * Models are read from a directory bundled with the function: MODELS_DIR (default `/opt/models`, where a
 * Lambda layer's `models/` folder lands), one file per object name (`/opt/models/model/ocr-cls.onnx`).
 * How to build and deploy: docs/ARCHITECTURE.md, "Serverless overflow: function providers".
 *
 * Events (JSON):
 * - a query `{ variant, object, payload: base64 (binary tensor encoding), requestId?, deadlineMs }` →
 *   `{ payload: base64, durationMs, loadMs, inferenceMs, coldStart }`;
 * - a warm-up ping `{ warmup: { object?, holdMs? } }` (MArk §4.5: concurrent pings start instances;
 *   `holdMs` keeps this one busy so that concurrent pings land on different instances) →
 *   `{ warm: true, coldStart, loadMs, durationMs }`.
 * A query the caller got wrong (malformed payload, inputs that don't fit the model) is answered
 * `{ error: { code, message } }`: it is an answer, not a failure of the function. Anything else throws,
 * so Lambda reports a FunctionError (and logs it), which the provider's circuit breaker counts.
 */
import { setTimeout as sleep } from "node:timers/promises";
import { z } from "zod";
import { ErrorCode, ServeError, describeZodError, type Clock } from "@sloserve/contracts";
import { FunctionHandler, isCallerFault, toFailure, type FunctionFailure } from "./function-handler.js";
import { directoryModelSource } from "./model-sources.js";

const queryEventSchema = z.object({
  variant: z.string().min(1),
  object: z.string().min(1),
  payload: z.string(),
  requestId: z.string().optional(),
  deadlineMs: z.number(),
});
const warmupEventSchema = z.object({
  warmup: z.object({ object: z.string().min(1).optional(), holdMs: z.number().int().min(0).max(10_000).optional() }),
});

export type LambdaQueryEvent = z.infer<typeof queryEventSchema>;
export type LambdaWarmupEvent = z.infer<typeof warmupEventSchema>;

export type LambdaResponse =
  | { payload: string; durationMs: number; loadMs: number; inferenceMs: number; coldStart: boolean }
  | { warm: true; coldStart: boolean; loadMs: number; durationMs: number }
  | { error: FunctionFailure };

export interface LambdaHandlerOptions {
  /** Directory holding `<object>` files. */
  modelsDir: string;
  clock: Clock;
}

/** A handler with its own container state (models, first-use flag); `handler` below is one per Lambda instance. */
export function createLambdaHandler(options: LambdaHandlerOptions): (event: unknown) => Promise<LambdaResponse> {
  const fn = new FunctionHandler({ source: directoryModelSource(options.modelsDir), clock: options.clock, servedBy: { provider: "lambda" } });
  return async (event: unknown): Promise<LambdaResponse> => {
    const started = performance.now();
    const warmup = warmupEventSchema.safeParse(event);
    if (warmup.success) {
      const { coldStart, loadMs } = await fn.warm(warmup.data.warmup.object);
      if (warmup.data.warmup.holdMs) await sleep(warmup.data.warmup.holdMs);
      return { warm: true, coldStart, loadMs, durationMs: performance.now() - started };
    }
    const query = queryEventSchema.safeParse(event);
    if (!query.success) return { error: { code: ErrorCode.badRequest, message: `not a function query or warm-up event: ${describeZodError(query.error)}` } };
    try {
      const { payload, ...invocation } = query.data;
      const out = await fn.invoke({ ...invocation, payload: Buffer.from(payload, "base64") });
      return {
        payload: Buffer.from(out.payload.buffer, out.payload.byteOffset, out.payload.byteLength).toString("base64"),
        durationMs: out.durationMs,
        loadMs: out.loadMs,
        inferenceMs: out.inferenceMs,
        coldStart: out.coldStart,
      };
    } catch (err) {
      if (err instanceof ServeError && (isCallerFault(err.code) || err.code === ErrorCode.deadlineExceeded)) return { error: toFailure(err) };
      throw err;
    }
  };
}

let instance: ((event: unknown) => Promise<LambdaResponse>) | undefined;

/** The Lambda entry point (configure the function's handler as `index.handler`). */
export const handler = async (event: unknown): Promise<LambdaResponse> => {
  // The wall clock inline rather than @sloserve/bus's systemClock: that package would bring the NATS
  // client into the function's bundle.
  instance ??= createLambdaHandler({ modelsDir: process.env.MODELS_DIR ?? "/opt/models", clock: { now: () => Date.now() } });
  return instance(event);
};
