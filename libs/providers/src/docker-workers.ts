import { PassThrough, type Writable } from "node:stream";
import Docker from "dockerode";
import type { Clock, Hardware } from "@sloserve/contracts";
import type { Logger } from "@sloserve/bus";
import { ProviderEvents } from "./events.js";
import { EXECUTOR_SERVICE, ExecutorOutput, checkSpec, newWorkerId, pricePerHour } from "./executors.js";
import type { Market, ProviderEvent, WorkerInstance, WorkerProvider, WorkerSpec } from "./types.js";

/**
 * Workers as containers of a Docker engine (PROVIDER=docker), over the engine's API (its socket, with
 * dockerode). Each launch stands for a VM: one container of the project's image (the Dockerfile;
 * `scripts/docker-images.sh` builds it without a registry) running the kind's executor (`SERVICE`),
 * billed from the launch at the instance type's price, as the other providers.
 *
 * - Containers carry labels (`dockerLabels`): the worker id, kind, instance type, market, launch time,
 *   and `sloserve.launcher=<owner>`: this provider lists, watches and stops only containers with its
 *   owner's label, and after a restart finds them again by it (their output, read from the start,
 *   says whether they are ready).
 * - Environment (`dockerWorkerEnv`): SERVICE, WORKER_ID, NATS_URL and REDIS_URL as seen from inside a
 *   container, LOG_LEVEL, the kind's environment (threads, memory, the executors' NATS user) and the
 *   spec's; nothing of this process's own environment. The NATS CA file, when NATS uses TLS, is mounted
 *   read-only.
 * - A worker is `booting` until its executor prints its ready line (executors.ts `isReadyLine`, read
 *   from the container's output), then `running`.
 * - `terminate`: `docker stop` with `stopTimeoutS` (SIGTERM, on which the executor drains, then SIGKILL
 *   after the timeout), then the container is removed.
 * - A container that stops without being asked (a crash, `docker kill`, the OOM killer, a removal) is a
 *   `lost` event whose reason carries its exit status and its last line of output; the container is
 *   removed then. Exits are seen at once (the engine's wait) and by a watch that lists the containers
 *   every `watchEveryMs`.
 * - `close` stops watching; the containers keep running (as EC2's and Nomad's), for the next
 *   vm-autoscaler to find. Terminate them first to give them back.
 */

/** Label keys of the worker containers. */
export const DOCKER_LABELS = {
  worker: "sloserve.worker",
  kind: "sloserve.kind",
  instanceType: "sloserve.instance-type",
  market: "sloserve.market",
  launcher: "sloserve.launcher",
  launchedAt: "sloserve.launched-at",
  reason: "sloserve.reason",
} as const;

/** Where the NATS CA file is mounted inside a worker container. */
export const DOCKER_NATS_CA_PATH = "/etc/sloserve/nats-ca.pem";

export interface DockerWorkerOptions {
  /** The engine: `unix:///var/run/docker.sock`, `tcp://host:2375` (plain HTTP). @default "unix:///var/run/docker.sock" */
  host?: string;
  /** The project's image. @default "sloserve:latest" */
  image?: string;
  /** The containers' network (`host`: the host's, as the EC2 user data runs them). @default "host" */
  network?: string;
  /** Owner label (`sloserve.launcher`): only containers with it are this provider's. @default "sloserve" */
  owner?: string;
  /** NATS and Redis as seen from inside a container. */
  natsUrl: string;
  redisUrl: string;
  /** PEM file of NATS's CA on the engine's machine, mounted into the containers (NATS_TLS_CA). */
  natsTlsCaFile?: string;
  /** The executors' LOG_LEVEL. @default "info" */
  logLevel?: string;
  /** Time a stopped executor has to drain after SIGTERM before the engine kills it, s. @default 15 */
  stopTimeoutS?: number;
  /** CPUs of each container (`--cpus`); unset: no limit. */
  cpus?: number;
  /** Memory of each container, MiB (`--memory`, no swap); unset: no limit. */
  memoryMb?: number;
  /** Environment per hardware kind (WORKER_THREADS, the executors' NATS_USER/NATS_PASSWORD, …); a spec's `env` overrides it. */
  kindEnv?: Partial<Record<Hardware, Record<string, string>>>;
  /** Where the output of the containers launched here goes (the engine keeps it too: `docker logs`). @default discarded */
  logTo?: Writable;
  /** Lists the containers every so often to find exits the engine's wait missed; 0: only on `list`. @default 5000 */
  watchEveryMs?: number;
  /** How long a terminated worker stays in `list`. @default 3_600_000 */
  rememberMs?: number;
  clock: Clock;
  log: Logger;
  /** The engine's client (tests); made from `host` otherwise. */
  docker?: Docker;
}

/** dockerode's connection options for a DOCKER_HOST value: `unix://<socket path>` or `tcp://host:port` (plain HTTP). */
export function dockerConnection(host: string): Docker.DockerOptions {
  const unix = /^unix:\/\/(\/.+)$/.exec(host);
  if (unix) return { socketPath: unix[1]! };
  const tcp = /^(?:tcp|http):\/\/([^/:]+|\[[^\]]+\]):(\d+)\/?$/.exec(host);
  if (tcp) return { host: tcp[1]!.replace(/^\[|\]$/g, ""), port: Number(tcp[2]), protocol: "http" };
  throw new Error(`docker host ${JSON.stringify(host)}: use unix:///path/to/docker.sock or tcp://host:port`);
}

export interface DockerLabelInput {
  workerId: string;
  kind: Hardware;
  instanceType: string;
  market: Market;
  owner: string;
  launchedAtMs: number;
  reason: string;
}

/** The labels of a worker container. */
export function dockerLabels(input: DockerLabelInput): Record<string, string> {
  return {
    [DOCKER_LABELS.worker]: input.workerId,
    [DOCKER_LABELS.kind]: input.kind,
    [DOCKER_LABELS.instanceType]: input.instanceType,
    [DOCKER_LABELS.market]: input.market,
    [DOCKER_LABELS.launcher]: input.owner,
    [DOCKER_LABELS.launchedAt]: String(input.launchedAtMs),
    [DOCKER_LABELS.reason]: input.reason.slice(0, 250),
  };
}

/** What a container's labels say about its worker, or why they are not one of ours. */
export function fromDockerLabels(labels: Record<string, string> | undefined, owner: string): Omit<DockerLabelInput, "reason"> | string {
  const l = labels ?? {};
  if (l[DOCKER_LABELS.launcher] !== owner) return `launcher label is ${JSON.stringify(l[DOCKER_LABELS.launcher])}, not ${JSON.stringify(owner)}`;
  const workerId = l[DOCKER_LABELS.worker];
  const kind = l[DOCKER_LABELS.kind];
  const instanceType = l[DOCKER_LABELS.instanceType];
  const market = l[DOCKER_LABELS.market] ?? "on-demand";
  const launchedAtMs = Number(l[DOCKER_LABELS.launchedAt]);
  if (!workerId) return `no ${DOCKER_LABELS.worker} label`;
  if (!kind || !(kind in EXECUTOR_SERVICE)) return `${DOCKER_LABELS.kind} label ${JSON.stringify(kind)} is not a hardware kind`;
  if (!instanceType) return `no ${DOCKER_LABELS.instanceType} label`;
  if (market !== "on-demand" && market !== "spot") return `${DOCKER_LABELS.market} label ${JSON.stringify(market)}`;
  if (!Number.isFinite(launchedAtMs)) return `${DOCKER_LABELS.launchedAt} label ${JSON.stringify(l[DOCKER_LABELS.launchedAt])} is not a time`;
  return { workerId, kind: kind as Hardware, instanceType, market, owner, launchedAtMs };
}

export interface DockerEnvInput {
  kind: Hardware;
  workerId: string;
  natsUrl: string;
  redisUrl: string;
  logLevel: string;
  /** The kind's environment (DockerWorkerOptions.kindEnv). */
  kindEnv?: Record<string, string> | undefined;
  /** The spec's environment (checked by checkSpec: it cannot set WORKER_ID, NATS_URL, REDIS_URL). */
  env?: Record<string, string> | undefined;
  /** NATS_TLS_CA inside the container, when the CA is mounted. */
  natsTlsCa?: string | undefined;
}

/** The executor's environment in its container, as `NAME=value` (the provider's own variables last: they win). */
export function dockerWorkerEnv(input: DockerEnvInput): string[] {
  const env: Record<string, string> = {
    ...input.kindEnv,
    ...input.env,
    SERVICE: EXECUTOR_SERVICE[input.kind],
    WORKER_ID: input.workerId,
    NATS_URL: input.natsUrl,
    REDIS_URL: input.redisUrl,
    LOG_LEVEL: input.logLevel,
    ...(input.natsTlsCa ? { NATS_TLS_CA: input.natsTlsCa } : {}),
  };
  return Object.entries(env).map(([name, value]) => `${name}=${value}`);
}

export interface DockerContainerInput {
  name: string;
  image: string;
  network: string;
  kind: Hardware;
  env: string[];
  labels: Record<string, string>;
  stopTimeoutS: number;
  /** PEM file of NATS's CA on the engine's machine, mounted at DOCKER_NATS_CA_PATH. */
  natsTlsCaFile?: string | undefined;
  /** CPUs (`--cpus`); undefined: no limit. */
  cpus?: number | undefined;
  /** Memory, MiB (`--memory`, and as much with swap: none); undefined: no limit. */
  memoryMb?: number | undefined;
}

/** The create request of a worker container (`docker run` equivalents in the comments). */
export function dockerContainerSpec(input: DockerContainerInput): Docker.ContainerCreateOptions {
  const hostConfig: Docker.HostConfig = {
    // --network host (or the named network)
    NetworkMode: input.network,
    // No restart: an executor that dies is a lost worker, which the vm-autoscaler replaces.
    RestartPolicy: { Name: "no" },
  };
  // A container stands for a VM: its CPUs and memory limited as the VM's (--cpus, --memory, --memory-swap).
  if (input.cpus !== undefined) hostConfig.NanoCpus = Math.round(input.cpus * 1e9);
  if (input.memoryMb !== undefined) hostConfig.Memory = hostConfig.MemorySwap = input.memoryMb * 1048576;
  if (input.natsTlsCaFile) hostConfig.Binds = [`${input.natsTlsCaFile}:${DOCKER_NATS_CA_PATH}:ro`];
  // The accelerators, as the EC2 user data gives them (--gpus all, --device /dev/neuron0).
  if (input.kind === "gpu") hostConfig.DeviceRequests = [{ Driver: "", Count: -1, DeviceIDs: [], Capabilities: [["gpu"]], Options: {} }];
  if (input.kind === "inferentia") hostConfig.Devices = [{ PathOnHost: "/dev/neuron0", PathInContainer: "/dev/neuron0", CgroupPermissions: "rwm" }];
  return {
    name: input.name,
    Image: input.image,
    Env: input.env,
    Labels: input.labels,
    // `docker stop` (ours or an operator's): SIGTERM, the executor drains, SIGKILL after the timeout.
    StopSignal: "SIGTERM",
    StopTimeout: input.stopTimeoutS,
    HostConfig: hostConfig,
  };
}

/** Why a container stopped, from its inspected state. */
export function exitReason(state: { ExitCode?: number; OOMKilled?: boolean; Error?: string } | undefined): string {
  if (!state) return "is gone (removed)";
  const code = state.ExitCode ?? -1;
  const signal = code > 128 && code < 160 ? SIGNALS[code - 128] : undefined;
  const parts = [`exited with code ${code}${signal ? ` (${signal})` : ""}`];
  if (state.OOMKilled) parts.push("killed for memory (OOM)");
  if (state.Error) parts.push(`engine error: ${state.Error}`);
  return parts.join(", ");
}

const SIGNALS: Record<number, string> = { 1: "SIGHUP", 2: "SIGINT", 6: "SIGABRT", 9: "SIGKILL", 11: "SIGSEGV", 15: "SIGTERM" };

interface DockerEntry {
  instance: WorkerInstance;
  /** The container's id (its name is the worker id). */
  container: string;
  terminateAsked: boolean;
  /** Its end was handled (a loss reported, or a stop logged). */
  done: boolean;
  watching: boolean;
  output: ExecutorOutput;
  /** Ends when the output stream ends (the container stopped). */
  outputEnded: Promise<void>;
}

export class DockerWorkerProvider implements WorkerProvider {
  readonly name = "docker";
  private readonly entries = new Map<string, DockerEntry>();
  private readonly events: ProviderEvents;
  private readonly docker: Docker;
  private readonly image: string;
  private readonly network: string;
  private readonly owner: string;
  private readonly stopTimeoutS: number;
  private readonly watchTimer: NodeJS.Timeout | undefined;
  private readonly abort = new AbortController();
  /** Containers seen with labels that are not a worker's: warned about once. */
  private readonly strangers = new Set<string>();
  /** Worker ids whose container is being created and started. */
  private readonly launching = new Set<string>();
  private closed = false;

  constructor(private readonly options: DockerWorkerOptions) {
    const problems: string[] = [];
    if (!options.natsUrl) problems.push("natsUrl is required");
    if (!options.redisUrl) problems.push("redisUrl is required");
    this.image = options.image ?? "sloserve:latest";
    this.network = options.network ?? "host";
    this.owner = options.owner ?? "sloserve";
    this.stopTimeoutS = options.stopTimeoutS ?? 15;
    if (!this.image) problems.push("image is required");
    if (!this.network) problems.push("network is required");
    if (!/^[A-Za-z0-9_.-]+$/.test(this.owner)) problems.push(`owner ${JSON.stringify(this.owner)}: use letters, digits, '_', '.', '-'`);
    if (!Number.isInteger(this.stopTimeoutS) || this.stopTimeoutS <= 0) problems.push(`stopTimeoutS must be a whole number of seconds > 0, got ${options.stopTimeoutS}`);
    const watchEveryMs = options.watchEveryMs ?? 5000;
    if (!Number.isFinite(watchEveryMs) || watchEveryMs < 0) problems.push(`watchEveryMs must be ≥ 0, got ${options.watchEveryMs}`);
    let docker = options.docker;
    if (!docker) {
      try {
        docker = new Docker(dockerConnection(options.host ?? "unix:///var/run/docker.sock"));
      } catch (err) {
        problems.push((err as Error).message);
      }
    }
    if (problems.length > 0 || !docker) throw new Error(`invalid docker worker provider options: ${problems.join("; ")}`);
    this.docker = docker;
    this.events = new ProviderEvents(this.name, options.log);
    if (watchEveryMs > 0) {
      this.watchTimer = setInterval(() => {
        this.list().catch((err: unknown) => options.log.warn({ err, provider: this.name, host: options.host }, "watching the worker containers failed"));
      }, watchEveryMs);
      this.watchTimer.unref();
    }
  }

  async launch(spec: WorkerSpec): Promise<WorkerInstance> {
    if (this.closed) throw new Error("docker worker provider is closed");
    const { market, pricePerHour: price } = checkSpec(spec);
    const workerId = newWorkerId(spec.kind, "docker");
    const launchedAtMs = this.options.clock.now();
    const env = dockerWorkerEnv({
      kind: spec.kind,
      workerId,
      natsUrl: this.options.natsUrl,
      redisUrl: this.options.redisUrl,
      logLevel: this.options.logLevel ?? "info",
      kindEnv: this.options.kindEnv?.[spec.kind],
      env: spec.env,
      natsTlsCa: this.options.natsTlsCaFile ? DOCKER_NATS_CA_PATH : undefined,
    });
    const labels = dockerLabels({ workerId, kind: spec.kind, instanceType: spec.instanceType, market, owner: this.owner, launchedAtMs, reason: spec.reason });
    const create = dockerContainerSpec({ name: workerId, image: this.image, network: this.network, kind: spec.kind, env, labels, stopTimeoutS: this.stopTimeoutS, natsTlsCaFile: this.options.natsTlsCaFile, cpus: this.options.cpus, memoryMb: this.options.memoryMb });
    // Not taken for a container from before a restart by a list() while it is being created.
    this.launching.add(workerId);
    let container: Docker.Container;
    try {
      container = await this.createContainer(create);
      try {
        await container.start();
      } catch (err) {
        await this.removeContainer(container.id, workerId);
        throw new Error(`docker: container ${workerId} (${this.image}) did not start: ${(err as Error).message}`, { cause: err });
      }
    } finally {
      this.launching.delete(workerId);
    }
    const instance: WorkerInstance = { id: workerId, provider: this.name, workerId, kind: spec.kind, instanceType: spec.instanceType, market, pricePerHour: price, launchedAtMs, state: "booting", endedAtMs: null };
    const entry = this.entry(instance, container.id);
    this.options.log.info({ provider: this.name, id: workerId, container: container.id.slice(0, 12), image: this.image, network: this.network, kind: spec.kind, instanceType: spec.instanceType, market, reason: spec.reason }, "launched worker container");
    this.watch(entry, true);
    return { ...instance };
  }

  /** Creates the container; pulls the image once when the engine does not have it. */
  private async createContainer(create: Docker.ContainerCreateOptions): Promise<Docker.Container> {
    try {
      return await this.docker.createContainer(create);
    } catch (err) {
      if ((err as { statusCode?: number }).statusCode !== 404) throw new Error(`docker: creating container ${create.name}: ${(err as Error).message}`, { cause: err });
    }
    this.options.log.info({ provider: this.name, image: this.image }, "image not on the engine: pulling it");
    try {
      const stream = await this.docker.pull(this.image);
      await new Promise<void>((resolvePull, reject) => this.docker.modem.followProgress(stream, (err) => (err ? reject(err) : resolvePull())));
    } catch (err) {
      throw new Error(`docker: image ${this.image} is not on the engine and could not be pulled (${(err as Error).message}); build it with scripts/docker-images.sh or set DOCKER_IMAGE`, { cause: err });
    }
    return this.docker.createContainer(create);
  }

  private entry(instance: WorkerInstance, container: string): DockerEntry {
    const entry: DockerEntry = {
      instance,
      container,
      terminateAsked: false,
      done: false,
      watching: false,
      output: new ExecutorOutput(instance.workerId, () => {
        if (instance.state !== "booting") return;
        instance.state = "running";
        this.options.log.info({ provider: this.name, id: instance.id }, "worker running");
      }),
      outputEnded: Promise.resolve(),
    };
    this.entries.set(instance.id, entry);
    return entry;
  }

  /**
   * Follows a container: its output from the start (the ready line; the last line for a loss's reason),
   * and its exit (the engine's wait). `forward`: its output also goes to `logTo` (not for containers
   * found after a restart, whose output was forwarded before).
   */
  private watch(entry: DockerEntry, forward: boolean): void {
    if (entry.watching || this.closed) return;
    entry.watching = true;
    const container = this.docker.getContainer(entry.container);
    const signal = this.abort.signal;
    entry.outputEnded = (async () => {
      const stream = await container.logs({ follow: true, stdout: true, stderr: true, abortSignal: signal });
      const out = new PassThrough();
      const err = new PassThrough();
      for (const s of [out, err]) {
        s.on("data", (chunk: Buffer) => entry.output.push(chunk));
        if (forward && this.options.logTo) s.pipe(this.options.logTo, { end: false });
      }
      this.docker.modem.demuxStream(stream, out, err);
      await new Promise<void>((resolveEnd) => {
        stream.once("end", resolveEnd);
        stream.once("close", resolveEnd);
        stream.once("error", resolveEnd);
      });
    })().catch((err: unknown) => {
      if (!signal.aborted) this.options.log.warn({ err, provider: this.name, id: entry.instance.id }, "following a worker container's output failed");
    });
    void (async () => {
      try {
        await container.wait({ abortSignal: signal });
      } catch (err) {
        if (signal.aborted) return;
        if ((err as { statusCode?: number }).statusCode !== 404) {
          // The engine went away or the connection broke: the watch (list) finds out what happened.
          this.options.log.warn({ err, provider: this.name, id: entry.instance.id }, "waiting on a worker container failed; the watch will look again");
          entry.watching = false;
          return;
        }
      }
      await this.ended(entry);
    })();
  }

  /** The container stopped (or is gone): the instance ends; a stop nobody asked for is a loss, and its container is removed. */
  private async ended(entry: DockerEntry): Promise<void> {
    if (entry.done) return;
    entry.done = true;
    const { instance } = entry;
    const nowMs = this.options.clock.now();
    const wasReady = instance.state !== "booting";
    instance.state = "terminated";
    instance.endedAtMs ??= nowMs;
    const state = await this.inspectState(entry);
    const why = exitReason(state);
    if (entry.terminateAsked) {
      this.options.log.info({ provider: this.name, id: instance.id, exitCode: state?.ExitCode }, `worker container ${why}`);
      return;
    }
    // Its last words, when the output has them (a moment at most).
    await Promise.race([entry.outputEnded, sleep(1000)]);
    const last = entry.output.lastLine();
    this.events.emit({ type: "lost", id: instance.id, atMs: nowMs, reason: `container ${why}${wasReady ? "" : " before it was ready"}${last ? `; last output: ${last}` : ""}` });
    if (state) await this.remove(entry);
  }

  private async inspectState(entry: DockerEntry): Promise<{ ExitCode?: number; OOMKilled?: boolean; Error?: string; Running?: boolean } | undefined> {
    try {
      return (await this.docker.getContainer(entry.container).inspect()).State;
    } catch (err) {
      if ((err as { statusCode?: number }).statusCode !== 404) this.options.log.warn({ err, provider: this.name, id: entry.instance.id }, "inspecting a worker container failed");
      return undefined;
    }
  }

  private remove(entry: DockerEntry): Promise<void> {
    return this.removeContainer(entry.container, entry.instance.id);
  }

  /** Removes a container (killed first if it runs); one already gone is fine, any other failure is logged. */
  private async removeContainer(container: string, id: string): Promise<void> {
    try {
      await this.docker.getContainer(container).remove({ force: true });
    } catch (err) {
      const status = (err as { statusCode?: number }).statusCode;
      // 404: gone already; 409: its removal is already in progress.
      if (status === 404 || status === 409) return;
      this.options.log.error({ err, provider: this.name, id, container: container.slice(0, 12) }, "removing a worker container failed");
    }
  }

  async terminate(id: string, reason: string): Promise<void> {
    if (!this.entries.has(id)) await this.list();
    const entry = this.entries.get(id);
    if (!entry) throw new Error(`docker: no worker container ${JSON.stringify(id)} of launcher ${JSON.stringify(this.owner)} (known: ${[...this.entries.keys()].join(", ") || "none"})`);
    const { instance } = entry;
    if (instance.state === "terminated" || entry.terminateAsked) return;
    const before = instance.state;
    entry.terminateAsked = true;
    instance.state = "draining";
    this.options.log.info({ provider: this.name, id, reason, stopTimeoutS: this.stopTimeoutS }, "terminating worker: docker stop");
    const container = this.docker.getContainer(entry.container);
    try {
      // SIGTERM, then SIGKILL after the timeout; returns once the container has stopped.
      await container.stop({ t: this.stopTimeoutS });
    } catch (err) {
      const status = (err as { statusCode?: number }).statusCode;
      // 304: it had stopped already; 404: it is gone.
      if (status !== 304 && status !== 404) {
        entry.terminateAsked = false;
        instance.state = before;
        throw new Error(`docker: stopping container ${id}: ${(err as Error).message}`, { cause: err });
      }
    }
    await this.ended(entry);
    await this.remove(entry);
  }

  async list(): Promise<WorkerInstance[]> {
    const nowMs = this.options.clock.now();
    const containers = await this.docker.listContainers({ all: true, filters: { label: [`${DOCKER_LABELS.launcher}=${this.owner}`] } });
    const seen = new Set<string>();
    for (const c of containers) {
      const labels = fromDockerLabels(c.Labels, this.owner);
      if (this.strangers.has(c.Id)) continue;
      if (typeof labels === "string") {
        this.strangers.add(c.Id);
        this.options.log.warn({ provider: this.name, container: c.Id.slice(0, 12), names: c.Names, problem: labels }, "a container with our launcher label is not a worker: left alone");
        continue;
      }
      if (this.launching.has(labels.workerId)) continue;
      seen.add(labels.workerId);
      // A paused container is alive (its heartbeats stop: the vm-autoscaler's timeout judges it).
      const live = c.State === "running" || c.State === "created" || c.State === "restarting" || c.State === "paused";
      let entry = this.entries.get(labels.workerId);
      if (!entry) {
        if (!live) {
          // Ended before we saw it (while no vm-autoscaler ran): history, not a loss; it goes.
          this.options.log.warn({ provider: this.name, id: labels.workerId, state: c.State, status: c.Status }, "found a stopped worker container of ours: removing it");
          await this.removeContainer(c.Id, labels.workerId);
          continue;
        }
        try {
          entry = this.adopt(labels, c.Id);
        } catch (err) {
          // An instance type the price table does not know (a label edited by hand): not ours to run.
          this.strangers.add(c.Id);
          this.options.log.warn({ err, provider: this.name, id: labels.workerId, container: c.Id.slice(0, 12) }, "a worker container of ours could not be taken back: left alone");
          continue;
        }
      }
      if (live) this.watch(entry, false);
      else if (!entry.done) await this.ended(entry);
    }
    for (const [id, entry] of this.entries) {
      if (!seen.has(id) && entry.instance.state !== "terminated" && !entry.terminateAsked) await this.ended(entry);
      const ended = entry.instance.endedAtMs;
      if (entry.instance.state === "terminated" && ended !== null && nowMs - ended > (this.options.rememberMs ?? 3_600_000)) this.entries.delete(id);
    }
    return [...this.entries.values()].map((e) => ({ ...e.instance })).sort((a, b) => a.launchedAtMs - b.launchedAtMs || a.id.localeCompare(b.id));
  }

  /** A running container of ours that this process did not launch (it ran before a restart). */
  private adopt(labels: Omit<DockerLabelInput, "reason">, container: string): DockerEntry {
    const instance: WorkerInstance = {
      id: labels.workerId,
      provider: this.name,
      workerId: labels.workerId,
      kind: labels.kind,
      instanceType: labels.instanceType,
      market: labels.market,
      pricePerHour: pricePerHour(labels.instanceType, labels.market),
      launchedAtMs: labels.launchedAtMs,
      // Its output, read from the start, says whether it is ready.
      state: "booting",
      endedAtMs: null,
    };
    this.options.log.info({ provider: this.name, id: labels.workerId, container: container.slice(0, 12), launchedAtMs: labels.launchedAtMs }, "found a worker container of ours");
    return this.entry(instance, container);
  }

  onEvent(listener: (event: ProviderEvent) => void): void {
    this.events.on(listener);
  }

  /** Stops watching; the containers keep running (terminate them first to give them back). */
  close(): Promise<void> {
    this.closed = true;
    if (this.watchTimer) clearInterval(this.watchTimer);
    this.abort.abort();
    return Promise.resolve();
  }
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolveSleep) => setTimeout(resolveSleep, ms).unref());
}
