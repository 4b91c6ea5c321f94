import { randomBytes } from "node:crypto";
import type { WriteStream } from "node:fs";
import { join } from "node:path";
import { natsRoleOfService, type NatsRole } from "@sloserve/contracts";
import { generateNatsPasswords, literalNatsPasswords, natsAuthorizationConf } from "./nats-auth.js";
import { freePort, startNats, startNatsCluster, startRedis, startService, tempDir, logFile, type NatsCluster, type ServerHandle, type ServiceHandle } from "./processes.js";

/** The services that run as their own processes, in start order. */
export const SERVICES = ["registrar", "dispatcher", "model-autoscaler", "forecaster", "executor-cpu", "vm-autoscaler", "frontend"] as const;

export interface StackOptions {
  /** Working directory for server data and logs. @default a new temporary directory */
  dir?: string;
  /** Frontend port; 0 picks a free one. @default 0 */
  httpPort?: number;
  /** The frontend's Open Inference Protocol gRPC port; 0 picks a free one. @default 0 */
  grpcPort?: number;
  /** Frontend processes on those ports (FRONTEND_PROCESSES; Node's cluster, services/frontend processes.ts). @default 1 */
  frontendProcesses?: number;
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
  /**
   * Environment of one service process, given what it would get (NATS_URL, …): e.g. a NATS_URL through
   * a fault-injecting proxy (test/fault-proxy.ts). Called for each process started, the stack's and
   * `startService`'s; what it returns overrides.
   */
  serviceEnv?: (name: string, env: Readonly<Record<string, string>>) => Record<string, string> | Promise<Record<string, string>>;
  /** How long each service may take to print its "ready" line. @default 60000 */
  startTimeoutMs?: number;
  /** Redis with an append-only file under `<dir>/redis`, so a restart keeps the registry (`npm start` does). @default false */
  persistRedis?: boolean;
  /**
   * Run NATS as a JetStream cluster of this many nodes on loopback (routes between all of them), with
   * JS_REPLICAS set to it, as compose and Nomad run it. @default 1: a single server
   */
  natsNodes?: number;
  /**
   * Access control on (docs/SECURITY.md). NATS: one user per role with its subject permissions
   * (libs/contracts nats-permissions.ts), passwords made for this run (`Stack.natsUsers`); each
   * service connects as its own user (NATS_USER, NATS_PASSWORD), the workers and function processes
   * the vm-autoscaler and dispatcher start as theirs. `npm start -- --auth`. HTTP and gRPC: the
   * frontend requires API keys (AUTH=true), with a bootstrap admin key made for this run (`Stack.adminKey`).
   * @default false
   */
  auth?: boolean;
}

/** A NATS user's name and password (what NATS_USER and NATS_PASSWORD take). */
export interface NatsUser {
  user: string;
  password: string;
}

export interface Stack {
  dir: string;
  nats: ServerHandle;
  redis: ServerHandle;
  /** The cluster when `natsNodes` > 1 (`nats` is then its first node; `env.NATS_URL` lists them all). */
  natsCluster?: NatsCluster;
  services: ServiceHandle[];
  /** The frontend's base URL, e.g. http://127.0.0.1:8080 */
  httpUrl: string;
  /** The frontend's Open Inference Protocol gRPC address, e.g. 127.0.0.1:8081 */
  grpcAddress: string;
  env: Record<string, string>;
  /** With `auth`: every NATS user (role) and its password for this run (`client` for your own connections, `admin` for everything). */
  natsUsers?: Record<NatsRole, NatsUser>;
  /** With `auth`: the frontend's bootstrap admin API key for this run (SLOSERVE_ADMIN_KEY; `Authorization: Bearer <key>`). */
  adminKey?: string;
  logPath: string;
  startService(name: string, env?: Record<string, string>): Promise<ServiceHandle>;
  /** Starts redis-server again on its port and directory once the running one has exited (stopped or killed). */
  restartRedis(): Promise<ServerHandle>;
  /**
   * Every running service's Prometheus endpoint, in start order: each service but the frontend is
   * given a free METRICS_PORT (unless its env names one) and says it in its ready line; the
   * frontend's is on its HTTP port. Workers the vm-autoscaler launches have none.
   */
  metricsTargets(): MetricsTarget[];
  stop(): Promise<void>;
}

/** A service's Prometheus endpoint: `url` is the full `http://127.0.0.1:<port>/metrics`. */
export interface MetricsTarget {
  service: string;
  url: string;
}

/**
 * The targets in Prometheus' file-based discovery format (`file_sd_configs`), one job per service:
 * `npm start` writes them to `.run/prometheus-targets.json` for a Prometheus on this machine.
 */
export function prometheusFileSd(targets: readonly MetricsTarget[]): Array<{ targets: string[]; labels: { job: string } }> {
  return targets.map((t) => ({ targets: [new URL(t.url).host], labels: { job: t.service } }));
}

/** The endpoints of the services that have one (ready line's `metricsPort`, or the frontend's `port`). */
export function metricsTargets(services: readonly ServiceHandle[]): MetricsTarget[] {
  const out: MetricsTarget[] = [];
  for (const s of services) {
    if (s.process.exitCode !== null || s.process.signalCode !== null) continue;
    const port = s.name === "frontend" ? s.info.port : s.info.metricsPort;
    if (typeof port === "number" && port > 0) out.push({ service: s.name, url: `http://127.0.0.1:${port}/metrics` });
  }
  return out;
}

/**
 * The NATS credentials of a service process: its own user, and for the vm-autoscaler and the
 * dispatcher those of the executors and function processes they start (EXECUTOR_NATS_USER…,
 * FUNCTION_NATS_USER…; libs/bus `natsChildEnv`).
 */
export function natsServiceEnv(service: string, users: Record<NatsRole, NatsUser>): Record<string, string> {
  const role = natsRoleOfService(service);
  if (!role) throw new Error(`no NATS user for the service '${service}' (libs/contracts natsRoleOfService)`);
  const as = (prefix: string, u: NatsUser): Record<string, string> => ({ [`${prefix}NATS_USER`]: u.user, [`${prefix}NATS_PASSWORD`]: u.password });
  return {
    ...as("", users[role]),
    ...(role === "vm-autoscaler" ? as("EXECUTOR_", users.executor) : {}),
    ...(role === "dispatcher" ? as("FUNCTION_", users.function) : {}),
  };
}

export async function startStack(options: StackOptions = {}): Promise<Stack> {
  const dir = options.dir ?? tempDir("stack");
  const logPath = join(dir, "logs", "stack.log");
  const log = options.logTo ?? logFile(logPath);
  const natsNodes = options.natsNodes ?? 1;
  const passwords = options.auth ? generateNatsPasswords() : undefined;
  const authorization = passwords ? { authorization: natsAuthorizationConf(literalNatsPasswords(passwords)) } : {};
  const natsCluster = natsNodes > 1 ? await startNatsCluster({ dir: join(dir, "nats"), size: natsNodes, logTo: log, ...authorization }) : undefined;
  const nats = natsCluster?.nodes[0] ?? (await startNats({ dir: join(dir, "nats"), logTo: log, ...authorization }));
  const natsUsers = passwords ? (Object.fromEntries(Object.entries(passwords).map(([role, password]) => [role, { user: role, password }])) as Record<NatsRole, NatsUser>) : undefined;
  const redisOptions = { dir: join(dir, "redis"), logTo: log, persist: options.persistRedis ?? false };
  let redis = await startRedis(redisOptions);
  const env: Record<string, string> = {
    NATS_URL: natsCluster?.url ?? nats.url,
    REDIS_URL: redis.url,
    LOG_LEVEL: options.logLevel ?? "info",
    ...(natsCluster ? { JS_REPLICAS: String(natsNodes) } : {}),
    ...options.env,
  };
  const services: ServiceHandle[] = [];
  // The frontend's access control (API keys): its bootstrap admin key, given to the frontend only.
  const adminKey = options.auth ? randomBytes(32).toString("hex") : undefined;
  const start = async (name: string, extra: Record<string, string> = {}): Promise<ServiceHandle> => {
    // Each service but the frontend gets a metrics port of its own; the frontend, the admin key when auth is on.
    const own: Record<string, string> = name === "frontend" ? (adminKey ? { AUTH: "true", SLOSERVE_ADMIN_KEY: adminKey } : {}) : { METRICS_PORT: String(await freePort()) };
    const merged = { ...env, ...own, ...(natsUsers ? natsServiceEnv(name, natsUsers) : {}), ...extra };
    const s = await startService(name, { ...merged, ...(await options.serviceEnv?.(name, merged)) }, { logTo: log, ...(options.startTimeoutMs ? { timeoutMs: options.startTimeoutMs } : {}) });
    services.push(s);
    return s;
  };
  const stop = async (): Promise<void> => {
    for (const s of [...services].reverse()) await s.stop();
    await redis.stop();
    await (natsCluster ?? nats).stop();
  };
  const restartRedis = async (): Promise<ServerHandle> => {
    await redis.stop(); // returns at once when it has already exited
    redis = await startRedis({ ...redisOptions, port: redis.port });
    result.redis = redis;
    return redis;
  };
  const result: Stack = { dir, nats, redis, ...(natsCluster ? { natsCluster } : {}), services, httpUrl: "", grpcAddress: "", env, ...(natsUsers ? { natsUsers } : {}), ...(adminKey ? { adminKey } : {}), logPath, startService: start, restartRedis, metricsTargets: () => metricsTargets(services), stop };
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
    const frontend = await start("frontend", {
      HTTP_PORT: String(options.httpPort ?? 0),
      HTTP_HOST: "127.0.0.1",
      GRPC_PORT: String(options.grpcPort ?? 0),
      ...(options.frontendProcesses ? { FRONTEND_PROCESSES: String(options.frontendProcesses) } : {}),
    });
    // https when the frontend serves TLS (TLS_CERT_FILE and TLS_KEY_FILE in `env`).
    result.httpUrl = `${frontend.info.tls === true ? "https" : "http"}://127.0.0.1:${String(frontend.info.port)}`;
    result.grpcAddress = `127.0.0.1:${String(frontend.info.grpcPort)}`;
    return result;
  } catch (err) {
    await stop();
    throw err;
  }
}
