import { createLogger, type Logger } from "./log.js";

/**
 * The shell every service process runs in: a logger with the service name, one "ready" line once
 * started (the launcher and the tests wait for it), and a clean stop on SIGINT/SIGTERM. A process that
 * is one of several behind a primary (the frontend's, processes.ts) names its line `readyEvent`
 * instead, so that only the primary's line says the service is ready.
 */
export async function runService(
  service: string,
  env: Record<string, string | undefined>,
  start: (log: Logger) => Promise<{ stop(): Promise<void>; info?: Record<string, unknown> }>,
  options: { readyEvent?: string } = {},
): Promise<void> {
  const log = createLogger(service, env.LOG_LEVEL ?? "info");
  let running: { stop(): Promise<void>; info?: Record<string, unknown> };
  try {
    running = await start(log);
  } catch (err) {
    log.fatal({ err }, "failed to start");
    process.exit(1);
  }
  log.info({ event: options.readyEvent ?? "ready", ...running.info }, options.readyEvent ?? "ready");
  let stopping = false;
  const stop = async (signal: string): Promise<void> => {
    if (stopping) return;
    stopping = true;
    log.info({ signal }, "stopping");
    const force = setTimeout(() => process.exit(1), 10_000);
    force.unref();
    try {
      await running.stop();
    } catch (err) {
      log.error({ err }, "error while stopping");
    }
    log.info("stopped");
    process.exit(0);
  };
  process.on("SIGINT", () => void stop("SIGINT"));
  process.on("SIGTERM", () => void stop("SIGTERM"));
  process.on("unhandledRejection", (err) => log.error({ err }, "unhandled rejection"));
}
