import type { WriteStream } from "node:fs";
import { join } from "node:path";
import { startNats, startRedis, startService, tempDir, logFile, type ServerHandle, type ServiceHandle } from "./processes.js";

/** The services that run as their own processes, in start order. */
export const SERVICES = ["registrar", "dispatcher", "model-autoscaler", "forecaster", "executor-cpu", "frontend"] as const;

export interface StackOptions {
  /** Working directory for server data and logs. @default a new temporary directory */
  dir?: string;
  /** Frontend port; 0 picks a free one. @default 0 */
  httpPort?: number;
  /** How many executor-cpu workers to start. @default 1 */
  cpuWorkers?: number;
  /** Threads per executor-cpu worker. */
  workerThreads?: number;
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
    const frontend = await start("frontend", { HTTP_PORT: String(options.httpPort ?? 0), HTTP_HOST: "127.0.0.1" });
    return { dir, nats, redis, services, httpUrl: `http://127.0.0.1:${String(frontend.info.port)}`, env, logPath, startService: start, stop };
  } catch (err) {
    await stop();
    throw err;
  }
}
