/**
 * A function container of the local pool: a process forked by `LocalFunctionPool` (with tsx), serving
 * one invocation at a time through the shared function handler. It stands for a Lambda instance: it
 * starts cold (process start, then each model's first load), keeps its models for its life, and exits
 * when the pool retires it (keep-alive) or when the pool goes away (IPC channel closed).
 *
 * Models come from the model repository (NATS_URL: the `models` object store bucket; each container
 * opens its own connection, as a worker does) or from a directory (MODELS_DIR, as a Lambda layer).
 * Environment: FUNCTION_ID, NATS_URL or MODELS_DIR, FUNCTION_THREADS (onnxruntime threads, default 1),
 * LOG_LEVEL (default "warn"), FUNCTION_BACKEND (`emulated`: invocations wait a drawn latency and answer
 * zeros, function-handler.ts `emulation`, with EMULATED_CALIBRATION and EMULATED_LATENCY_MS as the
 * dispatcher's settings say). Logs are JSON lines on stdout.
 */
import { randomInt } from "node:crypto";
import { z } from "zod";
import { createRng } from "@sloserve/policy";
import { readEmulationCalibration } from "@sloserve/executor/emulation";
import { ErrorCode, compileOptions, linearLatencySchema } from "@sloserve/contracts";
import { connectBus, createLogger, systemClock, type Bus } from "@sloserve/bus";
import { FunctionHandler, toFailure, type ModelSource } from "./function-handler.js";
import { directoryModelSource, objectStoreModelSource } from "./model-sources.js";
import type { FromContainer, ToContainer } from "./function-protocol.js";

const envSchema = z
  .object({
    FUNCTION_ID: z.string().min(1),
    NATS_URL: z.string().min(1).optional(),
    MODELS_DIR: z.string().min(1).optional(),
    FUNCTION_THREADS: z.coerce.number().int().min(1).max(64).default(1),
    LOG_LEVEL: z.enum(["trace", "debug", "info", "warn", "error", "fatal", "silent"]).default("warn"),
    FUNCTION_BACKEND: z.enum(["onnx", "emulated"]).default("onnx"),
    EMULATED_CALIBRATION: z.string().min(1).optional(),
    EMULATED_LATENCY_MS: linearLatencySchema,
  })
  .refine((env) => (env.NATS_URL === undefined) !== (env.MODELS_DIR === undefined), { message: "set exactly one of NATS_URL and MODELS_DIR" });

if (!process.send) throw new Error("function-runtime must be started by the local function pool (it has no IPC channel)");
const env = compileOptions(envSchema, process.env, "function-runtime");
const log = createLogger("function-runtime", env.LOG_LEVEL).child({ container: env.FUNCTION_ID });

function send(message: FromContainer): void {
  process.send?.(message, undefined, undefined, (err: Error | null) => {
    if (err) log.warn({ err, type: message.type }, "could not reply to the pool (it went away?)");
  });
}

let bus: Bus | undefined;
let source: ModelSource;
if (env.NATS_URL !== undefined) {
  bus = await connectBus({ servers: env.NATS_URL, name: `function-${env.FUNCTION_ID}`, log, ensure: false });
  source = objectStoreModelSource(bus);
} else {
  source = directoryModelSource(env.MODELS_DIR as string);
}
const emulation =
  env.FUNCTION_BACKEND === "emulated"
    ? { fallback: env.EMULATED_LATENCY_MS, rng: createRng(randomInt(2 ** 31)), ...(env.EMULATED_CALIBRATION !== undefined ? { calibration: readEmulationCalibration(env.EMULATED_CALIBRATION) } : {}) }
    : undefined;
const handler = new FunctionHandler({ source, clock: systemClock, servedBy: { provider: "local", container: env.FUNCTION_ID }, intraOpThreads: env.FUNCTION_THREADS, ...(emulation ? { emulation } : {}) });

async function serve(message: ToContainer): Promise<void> {
  try {
    if (message.type === "invoke") {
      const { budgetMs, ...rest } = message.invocation;
      const output = await handler.invoke({ ...rest, deadlineMs: systemClock.now() + budgetMs });
      send({ type: "reply", id: message.id, ok: true, output });
    } else {
      const warmed = await handler.warm(message.object);
      send({ type: "reply", id: message.id, ok: true, warmed });
    }
  } catch (err) {
    const failure = toFailure(err);
    if (failure.code === ErrorCode.internal) log.warn({ err, id: message.id }, "function invocation failed");
    send({ type: "reply", id: message.id, ok: false, failure });
  }
}

function leave(): void {
  void (async () => {
    await handler.close();
    await bus?.close();
  })().then(
    () => process.exit(0),
    (err: unknown) => {
      log.warn({ err }, "closing the function runtime failed");
      process.exit(0);
    },
  );
}

process.on("message", (message: ToContainer) => void serve(message));
// The pool is gone, or retired us by closing the channel (perhaps while we were starting): release and leave.
process.on("disconnect", leave);
if (!process.connected) leave();
send({ type: "ready", initMs: performance.now() });
log.info({ initMs: performance.now() }, "function container ready");
