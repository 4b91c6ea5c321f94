import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { createServer } from "node:net";
import { mkdtempSync, mkdirSync, createWriteStream, writeFileSync, type WriteStream } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve, dirname } from "node:path";
import { fileURLToPath } from "node:url";
import { natsTlsConf, type NatsServerTls } from "./nats-auth.js";

/**
 * Starts the real parts of the system as child processes: nats-server with JetStream,
 * redis-server, and the services. Used by `npm start` and by the integration tests (each suite
 * starts its own servers on free ports, so suites can run side by side).
 */

export const REPO_ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "../../..");

export interface Running {
  name: string;
  process: ChildProcess;
  stop(): Promise<void>;
}

export async function freePort(): Promise<number> {
  return new Promise((resolvePort, reject) => {
    const server = createServer();
    server.unref();
    server.on("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolvePort(port));
    });
  });
}

export function tempDir(prefix: string): string {
  return mkdtempSync(join(tmpdir(), `sloserve-${prefix}-`));
}

function requireBinary(binary: string): void {
  const found = spawnSync("sh", ["-c", `command -v ${binary}`], { encoding: "utf8" });
  if (found.status !== 0) {
    throw new Error(`${binary} is not installed: run 'npm start' or 'npm test' once (they install it), or 'apt-get install -y nats-server redis-server'`);
  }
}

/** Resolves when `matcher` sees a line on stdout/stderr; rejects if the process exits or time runs out. */
function waitForLine(proc: ChildProcess, name: string, matcher: (line: string) => boolean, timeoutMs: number, log?: WriteStream): Promise<string> {
  return new Promise((resolveLine, reject) => {
    let tail = "";
    let done = false;
    const timer = setTimeout(() => finish(new Error(`${name} did not become ready within ${timeoutMs} ms; last output:\n${tail.slice(-2000)}`)), timeoutMs);
    const finish = (err?: Error, line?: string): void => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      if (err) reject(err);
      else resolveLine(line as string);
    };
    let partial = "";
    const onData = (chunk: Buffer): void => {
      const text = chunk.toString();
      tail = (tail + text).slice(-4000);
      partial += text;
      const lines = partial.split("\n");
      partial = lines.pop() ?? "";
      for (const line of lines) if (!done && matcher(line)) finish(undefined, line);
    };
    proc.stdout?.on("data", onData);
    proc.stderr?.on("data", onData);
    if (log) {
      proc.stdout?.pipe(log, { end: false });
      proc.stderr?.pipe(log, { end: false });
    }
    proc.once("exit", (code, signal) => finish(new Error(`${name} exited (code ${code}, signal ${signal}) before it was ready; last output:\n${tail.slice(-2000)}`)));
  });
}

function stopper(proc: ChildProcess, graceMs = 10_000): () => Promise<void> {
  return () =>
    new Promise((done) => {
      if (proc.exitCode !== null || proc.signalCode !== null) return done();
      const kill = setTimeout(() => proc.kill("SIGKILL"), graceMs);
      proc.once("exit", () => {
        clearTimeout(kill);
        done();
      });
      proc.kill("SIGTERM");
    });
}

export interface ServerHandle extends Running {
  url: string;
  port: number;
  dir: string;
}

/** A node of a NATS cluster: its name, the cluster's name, its route, peers' route and monitoring ports. */
export interface NatsClusterMember {
  serverName: string;
  clusterName: string;
  routePort: number;
  peerRoutePorts: number[];
  monitorPort: number;
}

/** Waits until the server's `/healthz` answers 200: for a cluster member, JetStream is current with the meta leader. */
async function waitForHealthz(name: string, monitorPort: number, proc: ChildProcess, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let last = "";
  for (;;) {
    if (proc.exitCode !== null || proc.signalCode !== null) throw new Error(`${name} exited before JetStream was ready`);
    try {
      const response = await fetch(`http://127.0.0.1:${monitorPort}/healthz`, { signal: AbortSignal.timeout(2000) });
      if (response.status === 200) return;
      last = `${response.status} ${await response.text()}`;
    } catch (err) {
      last = (err as Error).message;
    }
    if (Date.now() > deadline) throw new Error(`${name}: JetStream not ready within ${timeoutMs} ms (/healthz: ${last})`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

export interface NatsServerOptions {
  dir?: string;
  port?: number;
  logTo?: WriteStream;
  cluster?: NatsClusterMember;
  /** An `authorization { … }` block (nats-auth.ts `natsAuthorizationConf`): users and their permissions. @default none: anyone may connect */
  authorization?: string;
  /** TLS on the client port (nats-auth.ts `natsTlsConf`). @default none */
  tls?: NatsServerTls;
}

export async function startNats(options: NatsServerOptions = {}): Promise<ServerHandle> {
  requireBinary("nats-server");
  const dir = options.dir ?? tempDir("nats");
  mkdirSync(dir, { recursive: true });
  const port = options.port ?? (await freePort());
  const config = join(dir, "nats.conf");
  const c = options.cluster;
  const cluster = c
    ? [
        `server_name: ${JSON.stringify(c.serverName)}`,
        `http: "127.0.0.1:${c.monitorPort}"`,
        `cluster {`,
        `  name: ${JSON.stringify(c.clusterName)}`,
        `  listen: "127.0.0.1:${c.routePort}"`,
        `  routes: [${c.peerRoutePorts.map((p) => JSON.stringify(`nats-route://127.0.0.1:${p}`)).join(", ")}]`,
        `}`,
      ]
    : [];
  writeFileSync(
    config,
    [
      `listen: "127.0.0.1:${port}"`,
      `max_payload: ${8 * 1024 * 1024}`,
      ...cluster,
      `jetstream {`,
      `  store_dir: ${JSON.stringify(join(dir, "jetstream"))}`,
      `  max_memory_store: ${1024 * 1024 * 1024}`,
      `}`,
      ...(options.authorization ? [options.authorization] : []),
      ...(options.tls ? [natsTlsConf(options.tls)] : []),
    ].join("\n"),
  );
  const proc = spawn("nats-server", ["-c", config], { stdio: ["ignore", "pipe", "pipe"] });
  const name = c ? `nats-server ${c.serverName}` : "nats-server";
  await waitForLine(proc, name, (l) => l.includes("Server is ready"), 20_000, options.logTo);
  // A cluster member is ready once its JetStream is current with the meta leader (itself or another).
  if (c) {
    try {
      await waitForHealthz(name, c.monitorPort, proc, 60_000);
    } catch (err) {
      await stopper(proc)();
      throw err;
    }
  }
  return { name, process: proc, url: `nats://127.0.0.1:${port}`, port, dir, stop: stopper(proc) };
}

export interface NatsCluster {
  nodes: ServerHandle[];
  /** Every node's client URL, comma-separated (what NATS_URL takes). */
  url: string;
  /** Starts node `i` again on its ports and store (after it was stopped or killed); it rejoins the cluster. */
  restart(i: number): Promise<ServerHandle>;
  stop(): Promise<void>;
}

/**
 * A NATS JetStream cluster of `size` nodes on loopback (free client and route ports, one store each),
 * routes between all of them, as compose and Nomad run it (deploy/). Resolves when every node knows
 * the JetStream meta leader.
 */
export async function startNatsCluster(options: { dir?: string; size?: number; logTo?: WriteStream; authorization?: string } = {}): Promise<NatsCluster> {
  const dir = options.dir ?? tempDir("nats-cluster");
  const size = options.size ?? 3;
  const taken = new Set<number>();
  const pick = async (): Promise<number> => {
    for (;;) {
      const p = await freePort();
      if (!taken.has(p)) {
        taken.add(p);
        return p;
      }
    }
  };
  const ports: number[] = [];
  const routePorts: number[] = [];
  const monitorPorts: number[] = [];
  for (let i = 0; i < size; i++) {
    ports.push(await pick());
    routePorts.push(await pick());
    monitorPorts.push(await pick());
  }
  const nodeOptions = ports.map((port, i) => ({
    dir: join(dir, `n${i + 1}`),
    port,
    ...(options.logTo ? { logTo: options.logTo } : {}),
    ...(options.authorization ? { authorization: options.authorization } : {}),
    cluster: { serverName: `n${i + 1}`, clusterName: "sloserve", routePort: routePorts[i] as number, peerRoutePorts: routePorts.filter((_, j) => j !== i), monitorPort: monitorPorts[i] as number },
  }));
  const settled = await Promise.allSettled(nodeOptions.map((o) => startNats(o)));
  const nodes = settled.flatMap((r) => (r.status === "fulfilled" ? [r.value] : []));
  const failed = settled.find((r): r is PromiseRejectedResult => r.status === "rejected");
  if (failed) {
    await Promise.all(nodes.map((n) => n.stop()));
    throw failed.reason;
  }
  return {
    nodes,
    url: nodes.map((n) => n.url).join(","),
    async restart(i) {
      const o = nodeOptions[i];
      if (!o) throw new Error(`no node ${i} in a cluster of ${size}`);
      await nodes[i]?.stop();
      nodes[i] = await startNats(o);
      return nodes[i];
    },
    async stop() {
      await Promise.all(nodes.map((n) => n.stop()));
    },
  };
}

/**
 * redis-server on loopback. `persist`: append-only file in `dir` (fsync every second), so a restart on
 * the same `dir` (after a stop or a SIGKILL) keeps the data, as compose and Nomad run it; without it,
 * nothing is written to disk.
 */
export async function startRedis(options: { dir?: string; port?: number; logTo?: WriteStream; persist?: boolean } = {}): Promise<ServerHandle> {
  requireBinary("redis-server");
  const dir = options.dir ?? tempDir("redis");
  mkdirSync(dir, { recursive: true });
  const port = options.port ?? (await freePort());
  const persistence = options.persist ? ["--appendonly", "yes", "--appendfsync", "everysec"] : ["--appendonly", "no"];
  const proc = spawn("redis-server", ["--port", String(port), "--bind", "127.0.0.1", "--dir", dir, "--save", "", ...persistence, "--protected-mode", "no"], { stdio: ["ignore", "pipe", "pipe"] });
  await waitForLine(proc, "redis-server", (l) => l.includes("Ready to accept connections"), 20_000, options.logTo);
  return { name: "redis-server", process: proc, url: `redis://127.0.0.1:${port}`, port, dir, stop: stopper(proc) };
}

export interface ServiceHandle extends Running {
  /** The fields of the service's "ready" log line (e.g. the frontend's port, a worker's id). */
  info: Record<string, unknown>;
}

/**
 * glibc malloc settings for the Node processes started here (services, and the executors the local
 * provider starts, which inherit them): buffers up to 32 MiB are served from the process's heap and
 * freed memory stays there (up to 256 MiB) instead of being mapped and unmapped at each allocation.
 * A 1 MB answer (ocr-rec) is copied several times on its way (nats.js's outbound and inbound buffers,
 * the reply encoding), and on the VMs this runs on every freshly mapped page costs a page fault
 * (bench/README.md, "the data path"). Settings given in the environment win.
 */
export const MALLOC_ENV: Readonly<Record<string, string>> = { MALLOC_MMAP_THRESHOLD_: String(32 * 1024 * 1024), MALLOC_TRIM_THRESHOLD_: String(64 * 1024 * 1024) };

/**
 * Starts a TypeScript entry point as its own process (with tsx) and waits for its JSON
 * `{"event":"ready", …}` line; the line's fields come back as `info`.
 */
export async function startScript(name: string, entry: string, env: Record<string, string>, options: { logTo?: WriteStream; timeoutMs?: number } = {}): Promise<ServiceHandle> {
  const proc = spawn(process.execPath, ["--import", "tsx", entry], {
    cwd: REPO_ROOT,
    env: { ...MALLOC_ENV, ...process.env, ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  const line = await waitForLine(
    proc,
    name,
    (l) => {
      if (!l.startsWith("{")) return false;
      try {
        return (JSON.parse(l) as { event?: string }).event === "ready";
      } catch {
        return false;
      }
    },
    // Generous: on a loaded machine, tsx compiling a service takes a minute or more; a process that exits fails at once.
    options.timeoutMs ?? 180_000,
    options.logTo,
  );
  const info = JSON.parse(line) as Record<string, unknown>;
  return { name, process: proc, info, stop: stopper(proc) };
}

/** Starts `services/<name>/src/main.ts` as its own process and waits for its "ready" line. */
export function startService(name: string, env: Record<string, string>, options: { logTo?: WriteStream; timeoutMs?: number } = {}): Promise<ServiceHandle> {
  return startScript(name, join(REPO_ROOT, "services", name, "src", "main.ts"), env, options);
}

export function logFile(path: string): WriteStream {
  mkdirSync(dirname(path), { recursive: true });
  const stream = createWriteStream(path, { flags: "a" });
  stream.setMaxListeners(0); // every child process pipes into it
  return stream;
}
