import type { WriteStream } from "node:fs";
import { join } from "node:path";
import { startNats, startRedis, startService, tempDir, logFile, type ServerHandle, type ServiceHandle } from "./processes.js";

/** The services that run as their own processes, in start order. */
export const SERVICES = ["registrar", "dispatcher", "model-autoscaler", "forecaster", "executor-cpu", "vm-autoscaler", "frontend"] as const;

export interface StackOptions {
  /** Working directory for server data and logs. @default a new temporary directory */
  dir?: string;
  /** Frontend port; 0 picks a free one. @default 0 */
  httpPort?: number;
  /** How many executor-cpu workers to start. @default 1 */
  cpuWorkers?: number;
  /** Threads per executor-cpu worker (the stack's and those the vm-autoscaler launches). */
  workerThreads?: number;
  /**
   * CPU workers the vm-autoscaler may run in all, the stack's own included. It launches workers of its
   * own (local provider) up to this many, terminates only those (after the cool-down, never inside the
   * billing minimum, never below `cpuWorkers` in all), and replaces any worker lost.
   * @default cpuWorkers: it only replaces lost workers
   */
  maxWorkers?: number;
  /** Extra environment for the vm-autoscaler (BOOT_DELAY_MS, COOLDOWN_MS, METRICS_PORT, …). */
  vmAutoscalerEnv?: Record<string, string>;
  logLevel?: string;
  /** Where service logs go. @default <dir>/logs/stack.log */
  logTo?: WriteStream;
  /** Extra environment for every service. */
  env?: Record<string, string>;
}

export interface Stack {
  dir: string;
  nats: ServerHandle;
  redis: ServerHandle;
  services: ServiceHandle[];
  /** The frontend's base URL, e.g. http://127.0.0.1:8080 */
  httpUrl: string;
  env: Record<string, string>;
  logPath: string;
  startService(name: string, env?: Record<string, string>): Promise<ServiceHandle>;
  stop(): Promise<void>;
}

export async function startStack(options: StackOptions = {}): Promise<Stack> {
  const dir = options.dir ?? tempDir("stack");
  const logPath = join(dir, "logs", "stack.log");
  const log = options.logTo ?? logFile(logPath);
  const nats = await startNats({ dir: join(dir, "nats"), logTo: log });
  const redis = await startRedis({ dir: join(dir, "redis"), logTo: log });
  const env: Record<string, string> = { NATS_URL: nats.url, REDIS_URL: redis.url, LOG_LEVEL: options.logLevel ?? "info", ...options.env };
  const services: ServiceHandle[] = [];
  const start = async (name: string, extra: Record<string, string> = {}): Promise<ServiceHandle> => {
    const s = await startService(name, { ...env, ...extra }, { logTo: log });
    services.push(s);
    return s;
  };
  const stop = async (): Promise<void> => {
    for (const s of [...services].reverse()) await s.stop();
    await redis.stop();
    await nats.stop();
  };
  try {
    await Promise.all([start("registrar"), start("dispatcher"), start("model-autoscaler"), start("forecaster")]);
    const workers = options.cpuWorkers ?? 1;
    const threads: Record<string, string> = options.workerThreads ? { WORKER_THREADS: String(options.workerThreads) } : {};
    await Promise.all(Array.from({ length: workers }, () => start("executor-cpu", threads)));
    await start("vm-autoscaler", {
      PROVIDER: "local",
      // The fleet never goes below the stack's own size: it gives back only what it added.
      MIN_WORKERS: String(workers),
      MAX_WORKERS: String(options.maxWorkers ?? workers),
      ...threads,
      ...(options.logTo ? {} : { EXECUTOR_LOG_FILE: logPath }),
      ...options.vmAutoscalerEnv,
    });
    const frontend = await start("frontend", { HTTP_PORT: String(options.httpPort ?? 0), HTTP_HOST: "127.0.0.1" });
    return { dir, nats, redis, services, httpUrl: `http://127.0.0.1:${String(frontend.info.port)}`, env, logPath, startService: start, stop };
  } catch (err) {
    await stop();
    throw err;
  }
}
