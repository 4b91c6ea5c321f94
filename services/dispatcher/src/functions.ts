import { LambdaClient } from "@aws-sdk/client-lambda";
import type { Clock } from "@sloserve/contracts";
import { natsChildEnv, type Logger } from "@sloserve/bus";
import { BreakerFunctionProvider, FallbackFunctionProvider, LambdaFunctionProvider, LocalFunctionPool, type FunctionProvider } from "@sloserve/providers";
import type { DispatcherOptions, OverflowProviderName } from "./options.js";

/**
 * The function path the dispatcher overflows to, as OVERFLOW names it: each provider behind its own
 * circuit breaker (libs/providers breaker.ts), the first one tried first and the next as its fallback.
 * Undefined when OVERFLOW is off. `watch` is given each breaker (main.ts: its state to the metrics).
 */
export function createFunctionPath(options: DispatcherOptions, clock: Clock, log: Logger, watch?: (breaker: BreakerFunctionProvider) => void): FunctionProvider | undefined {
  if (options.OVERFLOW.length === 0) return undefined;
  const breakers = options.OVERFLOW.map(
    (name) =>
      new BreakerFunctionProvider(createProvider(name, options, clock, log), {
        clock,
        log,
        capMs: options.BREAKER_CAP_MS,
        errorThresholdPercentage: options.BREAKER_ERROR_PERCENT,
        volumeThreshold: options.BREAKER_VOLUME,
        resetTimeoutMs: options.BREAKER_RESET_MS,
        rollingWindowMs: options.BREAKER_WINDOW_MS,
      }),
  );
  if (watch) for (const b of breakers) watch(b);
  return breakers.length === 1 ? breakers[0] : new FallbackFunctionProvider(breakers, { clock, log });
}

function createProvider(name: OverflowProviderName, options: DispatcherOptions, clock: Clock, log: Logger): FunctionProvider {
  if (name === "local") {
    return new LocalFunctionPool({
      models: { natsUrl: options.NATS_URL },
      clock,
      log,
      memoryMb: options.FUNCTION_MEMORY_MB,
      maxConcurrency: options.FUNCTION_POOL_SIZE,
      keepAliveMs: options.FUNCTION_KEEP_ALIVE_MS,
      // The function processes connect to NATS as the function user (FUNCTION_NATS_USER/_PASSWORD), not as the dispatcher.
      env: {
        LOG_LEVEL: options.LOG_LEVEL,
        ...natsChildEnv(process.env, "FUNCTION"),
        FUNCTION_BACKEND: options.FUNCTION_BACKEND,
        EMULATED_LATENCY_MS: `${options.EMULATED_LATENCY_MS.batchMs}+${options.EMULATED_LATENCY_MS.itemMs}`,
        ...(options.EMULATED_CALIBRATION !== undefined ? { EMULATED_CALIBRATION: options.EMULATED_CALIBRATION } : {}),
      },
    });
  }
  // The options' check guarantees LAMBDA_FUNCTION with lambda.
  return new LambdaFunctionProvider({
    client: new LambdaClient({}),
    functionName: options.LAMBDA_FUNCTION ?? "",
    ...(options.LAMBDA_QUALIFIER ? { qualifier: options.LAMBDA_QUALIFIER } : {}),
    memoryMb: options.FUNCTION_MEMORY_MB,
    clock,
    log,
  });
}
