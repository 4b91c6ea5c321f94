/**
 * The local function provider: a pool of real function processes standing for AWS Lambda (DESIGN §3
 * "Serverless overflow" and §4; MArk §4.1, §4.5), so that overflow, cold starts, keep-alive and
 * pre-warming are real and observable on one machine, priced as Lambda would price them.
 *
 * - **Containers** are child processes (`function-runtime.ts`, forked with tsx, IPC with
 *   `serialization: "advanced"`), each serving one invocation at a time with the shared function
 *   handler. They read models themselves: from the model repository (`models: { natsUrl }`: the NATS
 *   object store bucket, one connection per container, as a worker) or from a directory
 *   (`models: { dir }`, as a Lambda layer). The pool never carries model bytes.
 * - **Cold start** is real and measured: an invocation that starts a container (or waits for one
 *   starting) pays process start + runtime init + model load; one that finds an idle container
 *   without its model pays the load. `coldStart: true`, `initMs` says how much, and `durationMs`
 *   includes it (as Lambda now bills INIT).
 * - **Which container, keep-alive, pre-warm**: the pure rules of libs/policy function-pool.ts
 *   (`chooseContainer`, `expiredContainers`, `planPrewarm`). An idle container is retired
 *   `keepAliveMs` after its last use (default 10 min) by `sweep()`, which a timer calls every
 *   `sweepIntervalMs` (and tests call by hand with a manual clock).
 * - **maxConcurrency** containers at most (default 4); beyond it an invocation waits for a container
 *   until its deadline (`whenFull: "queue"`, the default: queueing costs less than failing, and the
 *   breaker's deadline bounds it) or is refused with `no_capacity` (`"reject"`, as Lambda throttles).
 * - **Cost**: each invocation, failed ones included, is priced with `lambdaCost(durationMs,
 *   memoryMb / 1024)`; pre-warm pings too (Lambda bills them). Waiting in the queue is not billed.
 *   `memoryMb` is what the pool stands for; it is not enforced on the processes.
 * - **Clocks**: timestamps (last use, keep-alive, deadlines) come from the injected clock; durations are
 *   measured with `performance.now()`. Containers get the time left to the deadline, not the deadline,
 *   so a test's manual clock does not confuse their real one.
 */
import { fork, type ChildProcess } from "node:child_process";
import { dirname, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { z } from "zod";
import { ErrorCode, ServeError, describeZodError, type Clock } from "@sloserve/contracts";
import { LAMBDA_PRICING, chooseContainer, expiredContainers, lambdaBilledMs, lambdaCost, planPrewarm, type FunctionContainerState, type FunctionContainerView, type LambdaPricing } from "@sloserve/policy";
import type { Logger } from "@sloserve/bus";
import { fromFailure } from "./function-handler.js";
import type { FromContainer, ToContainer } from "./function-protocol.js";
import type { FunctionProvider, FunctionRequest, FunctionResult, PrewarmOptions } from "./types.js";

const optionsSchema = z.object({
  name: z.string().min(1).default("local"),
  memoryMb: z.number().int().min(128).max(10_240).default(2048),
  keepAliveMs: z.number().int().positive().default(600_000),
  maxConcurrency: z.number().int().positive().default(4),
  whenFull: z.enum(["queue", "reject"]).default("queue"),
  sweepIntervalMs: z.number().int().nonnegative().default(1000),
  startTimeoutMs: z.number().int().positive().default(60_000),
  threads: z.number().int().min(1).max(64).default(1),
});

export interface LocalFunctionPoolOptions {
  /** Where containers read models: the model repository (NATS object store) or a directory of `<object>` files. */
  models: { natsUrl: string } | { dir: string };
  clock: Clock;
  log: Logger;
  /** Provider name (logs, container ids). @default "local" */
  name?: string;
  /** Memory size the pool stands for, MB (Lambda's 128-10240): prices invocations; not enforced. @default 2048 */
  memoryMb?: number;
  /** An idle container exits this long after its last use. @default 600_000 (10 min) */
  keepAliveMs?: number;
  /** Containers at most. @default 4 */
  maxConcurrency?: number;
  /** Beyond maxConcurrency: wait for a container until the deadline, or refuse with `no_capacity`. @default "queue" */
  whenFull?: "queue" | "reject";
  /** How often the keep-alive sweep runs; 0 = only when `sweep()` is called. @default 1000 */
  sweepIntervalMs?: number;
  /** A container that is not ready this long after its fork is killed. @default 60_000 */
  startTimeoutMs?: number;
  /** onnxruntime threads per container. @default 1 */
  threads?: number;
  pricing?: LambdaPricing;
  /** Extra environment for the containers (e.g. LOG_LEVEL). */
  env?: Record<string, string>;
  /** The container entry (tests only). @default src/function-runtime.ts */
  entry?: string;
}

const DEFAULT_ENTRY = fileURLToPath(new URL("./function-runtime.ts", import.meta.url));
const STOP_GRACE_MS = 5000;

type Reply = Extract<FromContainer, { type: "reply" }>;

class Container {
  state: FunctionContainerState = "starting";
  claimed = false;
  retiring = false;
  exited = false;
  readonly objects = new Set<string>();
  /** The object an invocation or pre-warm is loading, shown to the policy as held. */
  loading: string | undefined;
  lastUsedMs: number;
  /** Fork → ready, ms (measured once ready). */
  startMs: number | undefined;
  readonly forkedAt = performance.now();
  readonly ready: Promise<void>;
  stderrTail = "";
  private nextId = 0;
  private readonly replies = new Map<number, { resolve: (r: Reply) => void; reject: (e: Error) => void }>();
  private readonly exitedPromise: Promise<void>;

  constructor(
    readonly id: string,
    readonly child: ChildProcess,
    nowMs: number,
    startTimeoutMs: number,
    onReady: (c: Container) => void,
  ) {
    this.lastUsedMs = nowMs;
    child.stderr?.on("data", (chunk: Buffer) => {
      this.stderrTail = (this.stderrTail + chunk.toString()).slice(-2000);
      process.stderr.write(chunk);
    });
    this.exitedPromise = new Promise((done) => child.once("exit", () => done()));
    this.ready = new Promise<void>((resolveReady, rejectReady) => {
      const timer = setTimeout(() => {
        rejectReady(new ServeError(ErrorCode.internal, `function container ${id} was not ready within ${startTimeoutMs} ms`));
        child.kill("SIGKILL");
      }, startTimeoutMs);
      child.on("message", (message: FromContainer) => {
        if (message.type === "ready") {
          clearTimeout(timer);
          this.startMs = performance.now() - this.forkedAt;
          onReady(this);
          resolveReady();
          return;
        }
        const waiting = this.replies.get(message.id);
        if (!waiting) return;
        this.replies.delete(message.id);
        waiting.resolve(message);
      });
      child.once("exit", (code, signal) => {
        clearTimeout(timer);
        this.exited = true;
        const err = new ServeError(ErrorCode.internal, `function container ${id} exited (code ${code}, signal ${signal})${this.stderrTail ? `; last output: ${this.stderrTail.trim().slice(-500)}` : ""}`);
        rejectReady(err);
        for (const w of this.replies.values()) w.reject(err);
        this.replies.clear();
      });
    });
  }

  call(message: Omit<Extract<ToContainer, { type: "invoke" }>, "id"> | Omit<Extract<ToContainer, { type: "warm" }>, "id">): Promise<Reply> {
    if (this.exited) return Promise.reject(new ServeError(ErrorCode.internal, `function container ${this.id} has exited`));
    const id = this.nextId++;
    return new Promise((resolveCall, rejectCall) => {
      this.replies.set(id, { resolve: resolveCall, reject: rejectCall });
      this.child.send({ ...message, id } as ToContainer, (err: Error | null) => {
        if (!err) return;
        this.replies.delete(id);
        rejectCall(new ServeError(ErrorCode.internal, `cannot send to function container ${this.id}: ${err.message}`));
      });
    });
  }

  /** Closes the IPC channel (the runtime releases and exits), then kills it if it lingers. */
  async stop(): Promise<void> {
    if (this.exited) return;
    const kill = setTimeout(() => this.child.kill("SIGKILL"), STOP_GRACE_MS);
    if (this.child.connected) this.child.disconnect();
    else this.child.kill("SIGTERM");
    await this.exitedPromise;
    clearTimeout(kill);
  }

  view(): FunctionContainerView {
    return {
      id: this.id,
      state: this.state,
      objects: this.loading !== undefined ? [...this.objects, this.loading] : [...this.objects],
      lastUsedMs: this.lastUsedMs,
      claimed: this.claimed,
    };
  }
}

interface Waiter {
  object: string;
  resolve: (c: Container) => void;
  reject: (e: Error) => void;
  timer: NodeJS.Timeout;
}

export class LocalFunctionPool implements FunctionProvider {
  readonly name: string;
  private readonly config: z.infer<typeof optionsSchema>;
  private readonly pricing: LambdaPricing;
  private readonly entry: string;
  private readonly containers = new Map<string, Container>();
  private readonly waiters: Waiter[] = [];
  private readonly sweeper: NodeJS.Timeout | undefined;
  private seq = 0;
  private closed = false;
  private readonly counts = { invocations: 0, coldStarts: 0, errors: 0, costDollars: 0 };

  constructor(private readonly options: LocalFunctionPoolOptions) {
    const parsed = optionsSchema.safeParse({
      name: options.name, memoryMb: options.memoryMb, keepAliveMs: options.keepAliveMs, maxConcurrency: options.maxConcurrency,
      whenFull: options.whenFull, sweepIntervalMs: options.sweepIntervalMs, startTimeoutMs: options.startTimeoutMs, threads: options.threads,
    });
    if (!parsed.success) throw new Error(`invalid local function pool options: ${describeZodError(parsed.error)}`);
    this.config = parsed.data;
    this.name = parsed.data.name;
    this.pricing = options.pricing ?? LAMBDA_PRICING;
    this.entry = options.entry ?? DEFAULT_ENTRY;
    if (this.config.sweepIntervalMs > 0) {
      this.sweeper = setInterval(() => {
        this.sweep().catch((err: unknown) => this.options.log.warn({ err, provider: this.name }, "keep-alive sweep failed"));
      }, this.config.sweepIntervalMs);
      this.sweeper.unref();
    }
  }

  private get memoryGb(): number {
    return this.config.memoryMb / 1024;
  }

  private views(): FunctionContainerView[] {
    return [...this.containers.values()].map((c) => c.view());
  }

  async invoke(request: FunctionRequest): Promise<FunctionResult> {
    this.counts.invocations++;
    try {
      return await this.run(request);
    } catch (err) {
      this.counts.errors++;
      throw err;
    }
  }

  private async run(request: FunctionRequest): Promise<FunctionResult> {
    if (this.closed) throw new ServeError(ErrorCode.unavailable, `local function pool "${this.name}" is closed`);
    if (request.deadlineMs <= this.options.clock.now()) {
      throw new ServeError(ErrorCode.deadlineExceeded, `the query's deadline passed ${this.options.clock.now() - request.deadlineMs} ms before it reached a function`);
    }
    const container = await this.acquire(request.object, request.deadlineMs);
    const acquired = performance.now();
    try {
      const waitedForStart = container.state === "starting";
      if (waitedForStart) await container.ready;
      const startWaitMs = performance.now() - acquired;
      container.loading = request.object;
      const reply = await container.call({
        type: "invoke",
        invocation: {
          variant: request.variant,
          object: request.object,
          payload: request.payload,
          ...(request.requestId !== undefined ? { requestId: request.requestId } : {}),
          budgetMs: request.deadlineMs - this.options.clock.now(),
        },
      });
      const durationMs = performance.now() - acquired;
      const costDollars = lambdaCost(durationMs, this.memoryGb, this.pricing);
      this.counts.costDollars += costDollars;
      if (!reply.ok) throw fromFailure(reply.failure, `function ${container.id} failed`);
      if (!("output" in reply)) throw new ServeError(ErrorCode.internal, `function container ${container.id} answered an invocation with a pre-warm reply`);
      container.objects.add(request.object);
      const coldStart = waitedForStart || reply.output.coldStart;
      if (coldStart) this.counts.coldStarts++;
      const initMs = (waitedForStart ? startWaitMs : 0) + reply.output.loadMs;
      if (coldStart) this.options.log.info({ provider: this.name, container: container.id, initMs, startWaitMs: waitedForStart ? startWaitMs : 0, loadMs: reply.output.loadMs, durationMs }, "function cold start");
      return {
        payload: reply.output.payload,
        durationMs,
        billedMs: lambdaBilledMs(durationMs, this.pricing),
        coldStart,
        initMs,
        memoryMb: this.config.memoryMb,
        costDollars,
      };
    } finally {
      container.loading = undefined;
      this.release(container);
    }
  }

  /** Takes a container for one invocation or pre-warm, following `chooseContainer`. */
  private acquire(object: string, deadlineMs: number): Promise<Container> {
    const taken = this.take(object, this.config.whenFull);
    if (taken) return Promise.resolve(taken);
    return new Promise((resolveWait, rejectWait) => {
      const waitMs = Math.max(0, deadlineMs - this.options.clock.now());
      const waiter: Waiter = {
        object,
        resolve: resolveWait,
        reject: rejectWait,
        timer: setTimeout(() => {
          const i = this.waiters.indexOf(waiter);
          if (i >= 0) this.waiters.splice(i, 1);
          rejectWait(new ServeError(ErrorCode.deadlineExceeded, `waited ${waitMs} ms for a free function container (all ${this.containers.size} busy, maxConcurrency ${this.config.maxConcurrency}) until the query's deadline`));
        }, waitMs),
      };
      this.waiters.push(waiter);
    });
  }

  /** A container for `object` now, or undefined to wait (`whenFull: "queue"`); throws `no_capacity` when refusing. */
  private take(object: string, whenFull: "queue" | "reject"): Container | undefined {
    const choice = chooseContainer(this.views(), object, { maxConcurrency: this.config.maxConcurrency, whenFull });
    this.options.log.debug({ provider: this.name, object, ...choice }, "function container choice");
    switch (choice.action) {
      case "warm":
      case "load": {
        const c = this.containers.get(choice.id) as Container;
        c.state = "busy";
        return c;
      }
      case "claim": {
        const c = this.containers.get(choice.id) as Container;
        c.claimed = true;
        return c;
      }
      case "start": {
        const c = this.start();
        c.claimed = true;
        return c;
      }
      case "wait":
        return undefined;
      case "reject":
        throw new ServeError(ErrorCode.noCapacity, `local function pool "${this.name}": ${choice.reason}`);
    }
  }

  private release(c: Container): void {
    if (c.exited || !this.containers.has(c.id)) return;
    if (c.state === "starting") {
      // The claimant gave up before the container was ready: it becomes idle when ready.
      c.claimed = false;
      return;
    }
    c.state = "idle";
    c.claimed = false;
    c.lastUsedMs = this.options.clock.now();
    this.pump();
  }

  /** Hands free containers to waiting invocations, oldest first. */
  private pump(): void {
    while (this.waiters.length > 0 && !this.closed) {
      const head = this.waiters[0] as Waiter;
      const c = this.take(head.object, "queue");
      if (!c) return;
      this.waiters.shift();
      clearTimeout(head.timer);
      head.resolve(c);
    }
  }

  private start(): Container {
    const id = `${this.name}-${++this.seq}`;
    const env: Record<string, string | undefined> = { ...process.env, ...this.options.env, FUNCTION_ID: id, FUNCTION_THREADS: String(this.config.threads) };
    delete env.NATS_URL;
    delete env.MODELS_DIR;
    // Its own NATS user comes in options.env (libs/bus natsChildEnv), never the dispatcher's.
    if (this.options.env?.NATS_USER === undefined) delete env.NATS_USER;
    if (this.options.env?.NATS_PASSWORD === undefined) delete env.NATS_PASSWORD;
    if ("natsUrl" in this.options.models) env.NATS_URL = this.options.models.natsUrl;
    else env.MODELS_DIR = this.options.models.dir;
    const child = fork(this.entry, [], {
      execArgv: ["--import", "tsx"],
      serialization: "advanced",
      env,
      cwd: resolve(dirname(this.entry), ".."),
      stdio: ["ignore", "inherit", "pipe", "ipc"],
    });
    const container = new Container(id, child, this.options.clock.now(), this.config.startTimeoutMs, (c) => {
      this.options.log.info({ provider: this.name, container: c.id, startMs: c.startMs }, "function container started");
      if (c.claimed) c.state = "busy";
      else {
        c.state = "idle";
        c.lastUsedMs = this.options.clock.now();
        this.pump();
      }
    });
    container.ready.catch((err: unknown) => this.options.log.warn({ err, provider: this.name, container: id }, "function container failed to start"));
    child.on("error", (err) => this.options.log.warn({ err, provider: this.name, container: id }, "function container process error"));
    child.once("exit", (code, signal) => {
      const known = this.containers.delete(id);
      if (known && !container.retiring && !this.closed) {
        this.options.log.warn({ provider: this.name, container: id, code, signal, state: container.state }, "function container lost");
      }
      if (known) this.pump();
    });
    this.containers.set(id, container);
    return container;
  }

  /**
   * Retires idle containers unused for `keepAliveMs` (by the injected clock); resolves with their ids
   * once they have exited.
   */
  async sweep(): Promise<string[]> {
    const expired = expiredContainers(this.views(), this.options.clock.now(), this.config.keepAliveMs);
    const stopping: Array<Promise<void>> = [];
    for (const e of expired) {
      const c = this.containers.get(e.id);
      if (!c) continue;
      c.retiring = true;
      this.containers.delete(c.id);
      this.options.log.info({ provider: this.name, container: c.id, reason: e.reason }, "function container retired");
      stopping.push(c.stop());
    }
    await Promise.all(stopping);
    return expired.map((e) => e.id);
  }

  /**
   * Makes sure `n` containers exist (or, with `object`, that n hold that model), starting or loading
   * the missing ones within maxConcurrency (`planPrewarm`); resolves once they are warm. Ahead of a
   * forecast surge or a loss of capacity (MArk §4.5).
   */
  async prewarm(n: number, options: PrewarmOptions = {}): Promise<void> {
    if (this.closed) throw new ServeError(ErrorCode.unavailable, `local function pool "${this.name}" is closed`);
    const plan = planPrewarm(this.views(), n, this.config.maxConcurrency, options.object);
    this.options.log.info({ provider: this.name, n, object: options.object, load: plan.load, start: plan.start, reason: plan.reason }, "function pre-warm");
    const jobs: Array<Promise<void>> = [];
    for (const id of plan.load) {
      const c = this.containers.get(id) as Container;
      c.state = "busy";
      jobs.push(this.warm(c, options.object));
    }
    for (let i = 0; i < plan.start; i++) {
      const c = this.start();
      c.claimed = true;
      jobs.push(this.warm(c, options.object));
    }
    const failed = (await Promise.allSettled(jobs)).filter((r): r is PromiseRejectedResult => r.status === "rejected");
    if (failed.length > 0) {
      throw new ServeError(ErrorCode.internal, `pre-warm of ${this.name}: ${failed.length} of ${jobs.length} containers failed: ${failed.map((f) => (f.reason as Error).message).join("; ")}`);
    }
  }

  private async warm(c: Container, object: string | undefined): Promise<void> {
    const started = performance.now();
    try {
      if (c.state === "starting") await c.ready;
      c.loading = object;
      const reply = await c.call(object !== undefined ? { type: "warm", object } : { type: "warm" });
      this.counts.costDollars += lambdaCost(performance.now() - started, this.memoryGb, this.pricing);
      if (!reply.ok) throw fromFailure(reply.failure, `pre-warm of function ${c.id} failed`);
      if (object !== undefined) c.objects.add(object);
    } finally {
      c.loading = undefined;
      this.release(c);
    }
  }

  stats(): { invocations: number; coldStarts: number; errors: number; costDollars: number } {
    return { ...this.counts };
  }

  /** Containers by state and invocations waiting for one. */
  poolStats(): { containers: number; starting: number; idle: number; busy: number; waiting: number } {
    const views = this.views();
    const count = (s: FunctionContainerState): number => views.filter((v) => v.state === s).length;
    return { containers: views.length, starting: count("starting"), idle: count("idle"), busy: count("busy"), waiting: this.waiters.length };
  }

  /** Process ids of the running containers (for tests and diagnostics). */
  pids(): number[] {
    return [...this.containers.values()].map((c) => c.child.pid).filter((p): p is number => p !== undefined);
  }

  /** Refuses new work, fails waiting invocations, and stops every container. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    if (this.sweeper) clearInterval(this.sweeper);
    for (const w of this.waiters.splice(0)) {
      clearTimeout(w.timer);
      w.reject(new ServeError(ErrorCode.unavailable, `local function pool "${this.name}" closed while the query waited for a container`));
    }
    const all = [...this.containers.values()];
    this.containers.clear();
    await Promise.all(all.map((c) => c.stop()));
  }
}
