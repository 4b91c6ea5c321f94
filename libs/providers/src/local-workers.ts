import { spawn, type ChildProcess } from "node:child_process";
import type { Writable } from "node:stream";
import type { Clock, Hardware } from "@sloserve/contracts";
import type { Logger } from "@sloserve/bus";
import { ProviderEvents } from "./events.js";
import { ExecutorOutput, REPO_ROOT, checkSpec, executorFor, newWorkerId } from "./executors.js";
import type { ProviderEvent, WorkerInstance, WorkerProvider, WorkerSpec } from "./types.js";

/**
 * Workers as processes on this machine (DESIGN §4, the default provider): each launch stands for a VM.
 * After `bootDelayMs` (the VM's boot) it starts the kind's executor (`services/executor-<kind>/src/main.ts`
 * under `node --import tsx`, from the repository root) with its own WORKER_ID, and bills it from the
 * launch at the instance type's price (libs/policy's table), so scaling and money are real and can be
 * watched. The instance is `running` once the executor prints its "ready" line.
 *
 * - `terminate`: SIGTERM, on which the executor drains (`Worker.stop`: it stops taking commands, its
 *   instances finish the queries they hold, queued queries stay in their JetStream queues for the other
 *   replicas), then SIGKILL after `stopTimeoutMs`. A worker still booting is simply not started.
 * - An exit nobody asked for (a crash, a SIGKILL, an executor that refuses to start) is a `lost` event
 *   whose reason carries the exit status and the process's last line of output.
 * - The provider's id of an instance is its worker id (there is no process while it boots); `pid(id)`
 *   gives the process.
 */

export interface LocalWorkerOptions {
  natsUrl: string;
  redisUrl: string;
  /** The executors' LOG_LEVEL. @default "info" */
  logLevel?: string;
  /** Time from launch to the executor process starting, standing for a VM's boot. @default 2000 */
  bootDelayMs?: number;
  /** Time a terminated executor has to drain after SIGTERM before SIGKILL. @default 15_000 */
  stopTimeoutMs?: number;
  /** Environment per hardware kind, e.g. `{ cpu: { WORKER_THREADS: "1" } }`; a spec's `env` overrides it. */
  kindEnv?: Partial<Record<Hardware, Record<string, string>>>;
  /** Where the executors' stdout and stderr go (e.g. libs/stack `logFile`). @default discarded */
  logTo?: Writable;
  /** Timestamps of launches, ends and events. */
  clock: Clock;
  log: Logger;
  /** Repository root holding `services/`. @default this checkout */
  root?: string;
}

interface LocalEntry {
  instance: WorkerInstance;
  spec: WorkerSpec;
  bootTimer?: NodeJS.Timeout;
  process?: ChildProcess;
  terminateAsked: boolean;
  /** Resolves when the process has exited (or at once when it never started). */
  exited?: Promise<void>;
}

export class LocalWorkerProvider implements WorkerProvider {
  readonly name = "local";
  private readonly entries = new Map<string, LocalEntry>();
  private readonly events: ProviderEvents;
  private readonly bootDelayMs: number;
  private readonly stopTimeoutMs: number;
  private closed = false;

  constructor(private readonly options: LocalWorkerOptions) {
    const problems: string[] = [];
    if (!options.natsUrl) problems.push("natsUrl is required");
    if (!options.redisUrl) problems.push("redisUrl is required");
    this.bootDelayMs = options.bootDelayMs ?? 2000;
    this.stopTimeoutMs = options.stopTimeoutMs ?? 15_000;
    if (!Number.isFinite(this.bootDelayMs) || this.bootDelayMs < 0) problems.push(`bootDelayMs must be a number ≥ 0, got ${options.bootDelayMs}`);
    if (!Number.isFinite(this.stopTimeoutMs) || this.stopTimeoutMs <= 0) problems.push(`stopTimeoutMs must be a number > 0, got ${options.stopTimeoutMs}`);
    if (problems.length > 0) throw new Error(`invalid local worker provider options: ${problems.join("; ")}`);
    this.events = new ProviderEvents(this.name, options.log);
  }

  async launch(spec: WorkerSpec): Promise<WorkerInstance> {
    if (this.closed) throw new Error("local worker provider is closed");
    const { market, pricePerHour } = checkSpec(spec);
    executorFor(spec.kind, this.options.root ?? REPO_ROOT);
    const workerId = newWorkerId(spec.kind, "local");
    const instance: WorkerInstance = {
      id: workerId,
      provider: this.name,
      workerId,
      kind: spec.kind,
      instanceType: spec.instanceType,
      market,
      pricePerHour,
      launchedAtMs: this.options.clock.now(),
      state: "booting",
      endedAtMs: null,
    };
    const entry: LocalEntry = { instance, spec, terminateAsked: false };
    entry.bootTimer = setTimeout(() => {
      try {
        this.boot(entry);
      } catch (err) {
        // The executor could not even be spawned (its entry went away, bad arguments): a loss.
        entry.bootTimer = undefined;
        instance.state = "terminated";
        instance.endedAtMs = this.options.clock.now();
        this.options.log.error({ err, provider: this.name, id: instance.id }, "could not start the executor");
        this.events.emit({ type: "lost", id: instance.id, atMs: instance.endedAtMs, reason: `executor could not be started: ${(err as Error).message}` });
      }
    }, this.bootDelayMs);
    this.entries.set(instance.id, entry);
    this.options.log.info({ provider: this.name, id: instance.id, kind: spec.kind, instanceType: spec.instanceType, market, reason: spec.reason, bootDelayMs: this.bootDelayMs }, "launching worker");
    return { ...instance };
  }

  /** Starts the executor process: the VM has booted. */
  private boot(entry: LocalEntry): void {
    entry.bootTimer = undefined;
    const { instance, spec } = entry;
    const root = this.options.root ?? REPO_ROOT;
    const { entry: script } = executorFor(instance.kind, root);
    const env: Record<string, string | undefined> = {
      ...process.env,
      // Its own NATS user comes in kindEnv (libs/bus natsChildEnv), never the launcher's (spawn drops undefined).
      NATS_USER: undefined,
      NATS_PASSWORD: undefined,
      ...this.options.kindEnv?.[instance.kind],
      ...spec.env,
      WORKER_ID: instance.workerId,
      NATS_URL: this.options.natsUrl,
      REDIS_URL: this.options.redisUrl,
      LOG_LEVEL: this.options.logLevel ?? "info",
    };
    const proc = spawn(process.execPath, ["--import", "tsx", script], { cwd: root, env, stdio: ["ignore", "pipe", "pipe"] });
    entry.process = proc;
    const output = new ExecutorOutput(instance.workerId, () => {
      if (instance.state !== "booting") return;
      instance.state = "running";
      this.options.log.info({ provider: this.name, id: instance.id, pid: proc.pid }, "worker running");
    });
    const onData = (chunk: Buffer): void => output.push(chunk);
    proc.stdout.on("data", onData);
    proc.stderr.on("data", onData);
    if (this.options.logTo) {
      proc.stdout.pipe(this.options.logTo, { end: false });
      proc.stderr.pipe(this.options.logTo, { end: false });
    }
    entry.exited = new Promise((resolveExit) => {
      let done = false;
      const ended = (why: string): void => {
        if (done) return;
        done = true;
        const nowMs = this.options.clock.now();
        const wasReady = instance.state !== "booting";
        instance.state = "terminated";
        instance.endedAtMs = nowMs;
        if (entry.terminateAsked) {
          this.options.log.info({ provider: this.name, id: instance.id, why }, "worker stopped");
        } else {
          const last = output.lastLine();
          const reason = `executor ${why}${wasReady ? "" : " before it was ready"}${last ? `; last output: ${last}` : ""}`;
          this.events.emit({ type: "lost", id: instance.id, atMs: nowMs, reason });
        }
        resolveExit();
      };
      proc.once("exit", (code, signal) => ended(signal ? `killed by ${signal}` : `exited with code ${code}`));
      proc.once("error", (err) => ended(`could not be started: ${err.message}`));
    });
  }

  async terminate(id: string, reason: string): Promise<void> {
    const entry = this.entries.get(id);
    if (!entry) throw new Error(`local: no worker ${JSON.stringify(id)} (known: ${[...this.entries.keys()].join(", ") || "none"})`);
    const { instance } = entry;
    if (instance.state === "terminated") return;
    if (!entry.terminateAsked) this.options.log.info({ provider: this.name, id, reason }, "terminating worker");
    entry.terminateAsked = true;
    if (entry.bootTimer) {
      // Still booting: the executor never starts.
      clearTimeout(entry.bootTimer);
      entry.bootTimer = undefined;
      instance.state = "terminated";
      instance.endedAtMs = this.options.clock.now();
      return;
    }
    const proc = entry.process;
    if (!proc) return;
    instance.state = "draining";
    if (proc.exitCode === null && proc.signalCode === null) {
      const kill = setTimeout(() => {
        this.options.log.warn({ provider: this.name, id, pid: proc.pid, stopTimeoutMs: this.stopTimeoutMs }, "worker did not drain in time: SIGKILL");
        proc.kill("SIGKILL");
      }, this.stopTimeoutMs);
      proc.kill("SIGTERM");
      await entry.exited;
      clearTimeout(kill);
    } else {
      await entry.exited;
    }
  }

  list(): Promise<WorkerInstance[]> {
    return Promise.resolve([...this.entries.values()].map((e) => ({ ...e.instance })).sort((a, b) => a.launchedAtMs - b.launchedAtMs || a.id.localeCompare(b.id)));
  }

  onEvent(listener: (event: ProviderEvent) => void): void {
    this.events.on(listener);
  }

  /** The executor's process id, once it has booted and until it exits. */
  pid(id: string): number | undefined {
    const proc = this.entries.get(id)?.process;
    return proc && proc.exitCode === null && proc.signalCode === null ? proc.pid : undefined;
  }

  /** Terminates every worker it started (each drains), then refuses new launches. */
  async close(): Promise<void> {
    this.closed = true;
    const live = [...this.entries.values()].filter((e) => e.instance.state !== "terminated");
    const results = await Promise.allSettled(live.map((e) => this.terminate(e.instance.id, "provider closing")));
    results.forEach((result, i) => {
      if (result.status === "rejected") this.options.log.error({ err: result.reason as unknown, provider: this.name, id: live[i]?.instance.id }, "could not terminate a worker while closing");
    });
  }
}
