import { spawn, spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import { closeSync, existsSync, mkdirSync, openSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { REPO_ROOT } from "@sloserve/stack";
import { waitFor } from "@sloserve/testing";

/**
 * A Docker engine for the deployment tests: the one DOCKER_HOST names, else the one on
 * /var/run/docker.sock, else one started here as the machine's docs say it runs without a bridge or
 * iptables (`dockerd --iptables=false --bridge=none`), with its images in .cache/docker (kept, so the
 * base image is built once) and its sockets and pid file in a folder of its own under /run (never
 * another engine's). `stop()` ends only an engine started here.
 */
export interface DockerEngine {
  /** DOCKER_HOST for the docker CLI, docker-compose and dockerode. */
  host: string;
  /** The environment for a child process that talks to this engine. */
  env: NodeJS.ProcessEnv;
  /** Where the engine's own log goes, when it was started here. */
  log?: string;
  stop(): Promise<void>;
}

/** `docker version` against `host`: does an engine answer there? */
function answers(host: string): boolean {
  return spawnSync("docker", ["version", "--format", "{{.Server.Version}}"], { env: { ...process.env, DOCKER_HOST: host }, encoding: "utf8", timeout: 10_000 }).status === 0;
}

/** What is missing for the deployment tests, or undefined when the docker CLI, dockerd and debootstrap are all here. */
export function missingTools(): string | undefined {
  const missing = ["docker", "dockerd", "debootstrap", "docker-compose"].filter((t) => spawnSync("sh", ["-c", `command -v ${t}`]).status !== 0);
  return missing.length > 0 ? `${missing.join(", ")} missing: run scripts/ensure-deps.sh (Debian's docker.io, debootstrap, docker-compose)` : undefined;
}

export async function dockerEngine(): Promise<DockerEngine> {
  const missing = missingTools();
  if (missing) throw new Error(missing);
  const given = process.env.DOCKER_HOST;
  if (given) {
    if (!answers(given)) throw new Error(`DOCKER_HOST=${given}: no Docker engine answers there`);
    return { host: given, env: { ...process.env, DOCKER_HOST: given }, stop: async () => {} };
  }
  const system = "unix:///var/run/docker.sock";
  if (existsSync("/var/run/docker.sock") && answers(system)) return { host: system, env: { ...process.env, DOCKER_HOST: system }, stop: async () => {} };

  // One engine per checkout: its run folder is named after the repository's path (a socket path must stay short).
  const tag = createHash("sha256").update(REPO_ROOT).digest("hex").slice(0, 10);
  const run = `/run/sloserve-docker-${tag}`;
  const data = join(REPO_ROOT, ".cache", "docker");
  mkdirSync(run, { recursive: true });
  mkdirSync(data, { recursive: true });
  const host = `unix://${run}/docker.sock`;
  const env = { ...process.env, DOCKER_HOST: host };
  if (answers(host)) return { host, env, stop: async () => {} };
  const log = join(data, "dockerd.log");
  const out = openSync(log, "a");
  const args = ["--iptables=false", "--ip6tables=false", "--bridge=none", "--data-root", data, "--exec-root", join(run, "exec"), "--pidfile", join(run, "dockerd.pid"), "-H", host];
  // Its own process group, no inherited pipes: a test run's output never waits on the engine.
  const daemon = spawn("dockerd", args, { detached: true, stdio: ["ignore", out, out] });
  closeSync(out);
  let exited: string | undefined;
  daemon.once("exit", (code, signal) => (exited = `dockerd exited (${signal ?? code}); its log: ${log}`));
  daemon.unref();
  try {
    await waitFor("dockerd to answer", () => {
      if (exited) throw new Error(`${exited}\n${readFileSync(log, "utf8").split("\n").slice(-15).join("\n")}`);
      return answers(host);
    }, { timeoutMs: 90_000, intervalMs: 500 });
  } catch (error) {
    if (daemon.pid && !exited) process.kill(-daemon.pid, "SIGKILL");
    throw error;
  }
  return {
    host,
    env,
    log,
    stop: async () => {
      if (!daemon.pid || exited) return;
      process.kill(-daemon.pid, "SIGTERM");
      await waitFor("dockerd to stop", () => exited !== undefined, { timeoutMs: 30_000, intervalMs: 200 }).catch(() => process.kill(-daemon.pid!, "SIGKILL"));
    },
  };
}

/** Builds sloserve-base:bookworm (once per engine) and sloserve:latest with scripts/docker-images.sh; its output on failure. */
export function buildImages(engine: DockerEngine): void {
  const built = spawnSync("bash", [join(REPO_ROOT, "scripts", "docker-images.sh")], { cwd: REPO_ROOT, env: engine.env, encoding: "utf8", timeout: 600_000, maxBuffer: 64 * 1024 * 1024 });
  if (built.status !== 0) throw new Error(`scripts/docker-images.sh failed (${built.signal ?? built.status}):\n${`${built.stdout}\n${built.stderr}`.split("\n").slice(-40).join("\n")}`);
}
