import { z } from "zod";
import type { Clock, Hardware } from "@sloserve/contracts";
import type { Logger } from "@sloserve/bus";
import { pricePerSecond } from "@sloserve/policy";
import { ProviderEvents } from "./events.js";
import { checkSpec, pricePerHour } from "./executors.js";
import type { InstanceState, Market, ProviderEvent, WorkerInstance, WorkerProvider, WorkerSpec } from "./types.js";

/**
 * Workers as allocations of a Nomad job group (DESIGN §1: users deploy with docker-compose or Nomad),
 * over Nomad's HTTP API with Node's fetch. One group per hardware kind, each running that kind's
 * executor; a slot stands for the instance type configured for the group (its price).
 *
 * - `launch`: reads the group's count (`GET /v1/job/:job`), scales it up by one
 *   (`POST /v1/job/:job/scale` with `{Count, Target: {Group}, Message, Meta}`), and waits for the
 *   allocation that evaluation placed (`GET /v1/job/:job/allocations`, the allocation whose `EvalID` is
 *   the scale's): that allocation is the instance. If none is placed within `placementTimeoutMs` (no
 *   room in the cluster: the evaluation is blocked), the count goes back and the launch fails.
 * - Worker ids: the job's task must set `WORKER_ID = "nomad-${NOMAD_ALLOC_ID}"` (Nomad interpolates
 *   it), so the worker id of allocation `<id>` is `nomad-<id>` (`workerIdPrefix`).
 * - `terminate`: scales the group down by one, then stops the allocation
 *   (`POST /v1/allocation/:id/stop`) unless the scale-down already stopped it. Nomad chooses which
 *   allocations a scale-down stops (the highest name index, but a stopping allocation first), so when
 *   its scheduler runs between the two requests and picks another one, that one stops too and Nomad
 *   places a replacement for ours: the count ends right, one worker churns. Nomad has no API to scale
 *   down a chosen allocation. Tasks get the job's kill signal and drain within its `kill_timeout`.
 * - `list`: the groups' allocations. ClientStatus pending → booting, running → running (draining once
 *   asked to stop), complete/failed/lost → terminated, unknown (client disconnected) → running. An
 *   allocation that fails, is lost, completes by itself, or disappears is `lost`; one Nomad stopped on
 *   purpose (a scale-down or an operator's stop) just ends. Allocations nobody here launched (Nomad's
 *   replacements, a restart) are listed too. A watch timer lists every `watchEveryMs`.
 * Requests carry `X-Nomad-Token` when a token is set, and `namespace`/`region` when given.
 */

/** The group of that job that runs a hardware kind's executor: `executor-cpu`, `executor-gpu`, `executor-inferentia`. */
export function nomadExecutorGroup(kind: Hardware): string {
  return `executor-${kind}`;
}

/** Worker id of allocation `<id>`: the job sets WORKER_ID = "nomad-${NOMAD_ALLOC_ID}". */
export const NOMAD_WORKER_ID_PREFIX = "nomad-";

export interface NomadGroup {
  job: string;
  group: string;
  /** The instance type one allocation stands for (its price, from libs/policy's table). */
  instanceType: string;
  /** @default "on-demand" */
  market?: Market;
}

export interface NomadWorkerOptions {
  /** Nomad's HTTP address, e.g. "http://127.0.0.1:4646". */
  address: string;
  /** ACL token (X-Nomad-Token). */
  token?: string;
  namespace?: string;
  region?: string;
  /** The job group that runs each kind's executor. */
  groups: Partial<Record<Hardware, NomadGroup>>;
  /** Worker id = prefix + allocation id (the job sets WORKER_ID = "nomad-${NOMAD_ALLOC_ID}"). @default "nomad-" */
  workerIdPrefix?: string;
  /** How long a launch waits for its allocation. @default 60_000 */
  placementTimeoutMs?: number;
  /** Polling period while waiting for an allocation. @default 500 */
  pollEveryMs?: number;
  /** Lists allocations every so often to find lost ones; 0: only when `list` is called. @default 5000 */
  watchEveryMs?: number;
  /** How long an allocation that ended stays in `list` once Nomad no longer lists it (garbage-collected). @default 3_600_000 */
  rememberMs?: number;
  /** Time allowed to each request. @default 10_000 */
  requestTimeoutMs?: number;
  clock: Clock;
  log: Logger;
}

const jobSchema = z.object({
  ID: z.string(),
  TaskGroups: z.array(z.object({ Name: z.string(), Count: z.number().int().nonnegative() })).nullable(),
});
const allocationSchema = z.object({
  ID: z.string(),
  EvalID: z.string(),
  Name: z.string(),
  JobID: z.string(),
  TaskGroup: z.string(),
  DesiredStatus: z.string(),
  DesiredDescription: z.string().optional(),
  ClientStatus: z.string(),
  ClientDescription: z.string().optional(),
  /** Unix nanoseconds. */
  CreateTime: z.number(),
  ModifyTime: z.number(),
});
type Allocation = z.infer<typeof allocationSchema>;
const allocationsSchema = z.array(allocationSchema);
const evalResponseSchema = z.object({ EvalID: z.string() });

interface NomadEntry {
  instance: WorkerInstance;
  group: NomadGroup;
  terminateAsked: boolean;
  /** Seen in a non-terminal state (so its disappearance means something). */
  live: boolean;
  done: boolean;
}

const TERMINAL = new Set(["complete", "failed", "lost"]);

export class NomadWorkerProvider implements WorkerProvider {
  readonly name = "nomad";
  private readonly entries = new Map<string, NomadEntry>();
  private readonly events: ProviderEvents;
  private readonly address: string;
  private readonly prefix: string;
  private readonly watchTimer: NodeJS.Timeout | undefined;
  /** Launches and terminations one at a time: each reads the count it changes. */
  private queue: Promise<unknown> = Promise.resolve();

  constructor(private readonly options: NomadWorkerOptions) {
    const problems: string[] = [];
    this.address = (options.address ?? "").replace(/\/+$/, "");
    if (!/^https?:\/\/[^/]+$/.test(this.address)) problems.push(`address must be Nomad's http(s)://host:port, got ${JSON.stringify(options.address)}`);
    const groups = Object.entries(options.groups ?? {});
    if (groups.length === 0) problems.push("groups: name the job group of at least one hardware kind");
    for (const [kind, group] of groups) {
      if (!group?.job || !group.group) problems.push(`groups.${kind}: job and group are required`);
      else {
        try {
          pricePerSecond(group.instanceType, group.market ?? "on-demand");
        } catch (err) {
          problems.push(`groups.${kind}: ${(err as Error).message}`);
        }
      }
    }
    if (!(Number.isFinite(options.pollEveryMs ?? 500) && (options.pollEveryMs ?? 500) > 0)) problems.push(`pollEveryMs must be > 0, got ${options.pollEveryMs}`);
    if (!(Number.isFinite(options.placementTimeoutMs ?? 60_000) && (options.placementTimeoutMs ?? 60_000) >= 0)) problems.push(`placementTimeoutMs must be ≥ 0, got ${options.placementTimeoutMs}`);
    const watchEveryMs = options.watchEveryMs ?? 5000;
    if (!Number.isFinite(watchEveryMs) || watchEveryMs < 0) problems.push(`watchEveryMs must be ≥ 0, got ${options.watchEveryMs}`);
    if (problems.length > 0) throw new Error(`invalid Nomad worker provider options: ${problems.join("; ")}`);
    this.prefix = options.workerIdPrefix ?? NOMAD_WORKER_ID_PREFIX;
    this.events = new ProviderEvents(this.name, options.log);
    if (watchEveryMs > 0) {
      this.watchTimer = setInterval(() => {
        this.list().catch((err: unknown) => options.log.warn({ err, provider: this.name, address: this.address }, "watching allocations failed"));
      }, watchEveryMs);
    }
  }

  launch(spec: WorkerSpec): Promise<WorkerInstance> {
    return this.serially(() => this.launchNow(spec));
  }

  private async launchNow(spec: WorkerSpec): Promise<WorkerInstance> {
    const group = this.options.groups[spec.kind];
    if (!group) throw new Error(`nomad: no job group runs ${spec.kind} workers (configured: ${Object.keys(this.options.groups).join(", ")})`);
    const { market, pricePerHour } = checkSpec(spec);
    if (spec.instanceType !== group.instanceType || market !== (group.market ?? "on-demand")) {
      throw new Error(`nomad: group ${group.job}/${group.group} runs ${group.instanceType} ${group.market ?? "on-demand"} slots, not ${spec.instanceType} ${market}`);
    }
    const count = await this.groupCount(group);
    const scale = await this.scale(group, count + 1, `sloserve: launch a ${spec.kind} worker: ${spec.reason}`, { "sloserve.action": "launch", "sloserve.kind": spec.kind, "sloserve.reason": spec.reason });
    const timeoutMs = this.options.placementTimeoutMs ?? 60_000;
    const pollEveryMs = this.options.pollEveryMs ?? 500;
    // Polls, not a clock: the time waited is counted in polling periods.
    for (let waitedMs = 0; ; waitedMs += pollEveryMs) {
      const placed = (await this.allocations(group.job)).find((a) => a.EvalID === scale.EvalID && a.TaskGroup === group.group && !this.entries.has(a.ID));
      if (placed) {
        const instance: WorkerInstance = {
          id: placed.ID,
          provider: this.name,
          workerId: this.prefix + placed.ID,
          kind: spec.kind,
          instanceType: group.instanceType,
          market,
          pricePerHour,
          launchedAtMs: this.options.clock.now(),
          state: clientState(placed, false),
          endedAtMs: null,
        };
        this.entries.set(placed.ID, { instance, group, terminateAsked: false, live: !TERMINAL.has(placed.ClientStatus), done: false });
        this.options.log.info({ provider: this.name, id: placed.ID, workerId: instance.workerId, job: group.job, group: group.group, count: count + 1, reason: spec.reason }, "launched worker");
        return { ...instance };
      }
      if (waitedMs >= timeoutMs) break;
      await sleep(pollEveryMs);
    }
    const message = `sloserve: launch abandoned: evaluation ${scale.EvalID} placed no allocation within ${timeoutMs} ms`;
    await this.scale(group, count, message, { "sloserve.action": "launch-abandoned", "sloserve.kind": spec.kind });
    throw new Error(`nomad: ${group.job}/${group.group} placed no allocation within ${timeoutMs} ms (no room in the cluster?); count set back to ${count}`);
  }

  terminate(id: string, reason: string): Promise<void> {
    return this.serially(() => this.terminateNow(id, reason));
  }

  private async terminateNow(id: string, reason: string): Promise<void> {
    if (!this.entries.has(id)) await this.list();
    const entry = this.entries.get(id);
    if (!entry) throw new Error(`nomad: allocation ${JSON.stringify(id)} is not a worker of the configured groups`);
    if (entry.instance.state === "terminated" || entry.terminateAsked) return;
    entry.terminateAsked = true;
    const { group, instance } = entry;
    this.options.log.info({ provider: this.name, id, workerId: instance.workerId, reason }, "terminating worker");
    const count = await this.groupCount(group);
    await this.scale(group, Math.max(0, count - 1), `sloserve: terminate worker ${instance.workerId}: ${reason}`, { "sloserve.action": "terminate", "sloserve.allocation": id, "sloserve.reason": reason });
    const now = (await this.allocations(group.job)).find((a) => a.ID === id);
    if (now && now.DesiredStatus === "run" && !TERMINAL.has(now.ClientStatus)) {
      await this.request("POST", `/v1/allocation/${encodeURIComponent(id)}/stop`, undefined, evalResponseSchema);
    }
    instance.state = now && TERMINAL.has(now.ClientStatus) ? "terminated" : "draining";
    instance.endedAtMs ??= this.options.clock.now();
  }

  async list(): Promise<WorkerInstance[]> {
    const nowMs = this.options.clock.now();
    const seen = new Set<string>();
    const jobs = [...new Set(Object.values(this.options.groups).map((g) => g.job))];
    for (const job of jobs) {
      for (const alloc of await this.allocations(job)) {
        const group = Object.values(this.options.groups).find((g) => g.job === job && g.group === alloc.TaskGroup);
        if (!group) continue;
        seen.add(alloc.ID);
        this.observe(this.entries.get(alloc.ID) ?? this.adopt(alloc, group), alloc, nowMs);
      }
    }
    for (const [id, entry] of this.entries) {
      const { instance } = entry;
      if (!seen.has(id) && entry.live && instance.state !== "terminated") {
        instance.state = "terminated";
        instance.endedAtMs ??= nowMs;
        if (!entry.terminateAsked) this.lose(entry, "allocation no longer listed by Nomad", nowMs);
      }
      // Forgotten once Nomad no longer lists it (garbage-collected) and it ended long enough ago.
      if (!seen.has(id) && instance.state === "terminated" && instance.endedAtMs !== null && nowMs - instance.endedAtMs > (this.options.rememberMs ?? 3_600_000)) this.entries.delete(id);
    }
    return [...this.entries.values()].map((e) => ({ ...e.instance })).sort((a, b) => a.launchedAtMs - b.launchedAtMs || a.id.localeCompare(b.id));
  }

  /** An allocation nobody here launched: Nomad's replacement, or one from before a restart. */
  private adopt(alloc: Allocation, group: NomadGroup): NomadEntry {
    const kind = (Object.entries(this.options.groups).find(([, g]) => g === group)?.[0] ?? "cpu") as Hardware;
    const market = group.market ?? "on-demand";
    const terminal = TERMINAL.has(alloc.ClientStatus);
    const instance: WorkerInstance = {
      id: alloc.ID,
      provider: this.name,
      workerId: this.prefix + alloc.ID,
      kind,
      instanceType: group.instanceType,
      market,
      pricePerHour: pricePerHour(group.instanceType, market),
      launchedAtMs: Math.floor(alloc.CreateTime / 1e6),
      state: clientState(alloc, false),
      endedAtMs: terminal ? Math.floor(alloc.ModifyTime / 1e6) : null,
    };
    // One that had ended before we first saw it is history, not a loss.
    const entry: NomadEntry = { instance, group, terminateAsked: false, live: !terminal, done: terminal };
    this.entries.set(alloc.ID, entry);
    return entry;
  }

  private observe(entry: NomadEntry, alloc: Allocation, nowMs: number): void {
    const { instance } = entry;
    instance.state = clientState(alloc, entry.terminateAsked);
    if (!TERMINAL.has(alloc.ClientStatus)) {
      entry.live = true;
      return;
    }
    instance.endedAtMs ??= nowMs;
    if (entry.done || entry.terminateAsked) return;
    entry.done = true;
    const why = `${alloc.ClientStatus}${alloc.ClientDescription ? ` (${alloc.ClientDescription})` : ""}`;
    if (alloc.ClientStatus === "complete" && alloc.DesiredStatus === "stop") {
      // Stopped on purpose by Nomad (a scale-down's choice, an operator's `alloc stop`): not a loss.
      this.options.log.info({ provider: this.name, id: alloc.ID, desired: alloc.DesiredDescription }, "allocation stopped by Nomad");
      return;
    }
    this.lose(entry, `allocation ${why}`, nowMs);
  }

  private lose(entry: NomadEntry, reason: string, nowMs: number): void {
    entry.done = true;
    this.events.emit({ type: "lost", id: entry.instance.id, atMs: nowMs, reason });
  }

  private async groupCount(group: NomadGroup): Promise<number> {
    const job = await this.request("GET", `/v1/job/${encodeURIComponent(group.job)}`, undefined, jobSchema);
    const found = job.TaskGroups?.find((g) => g.Name === group.group);
    if (!found) throw new Error(`nomad: job ${group.job} has no group ${group.group} (groups: ${(job.TaskGroups ?? []).map((g) => g.Name).join(", ") || "none"})`);
    return found.Count;
  }

  private scale(group: NomadGroup, count: number, message: string, meta: Record<string, string>): Promise<z.infer<typeof evalResponseSchema>> {
    return this.request("POST", `/v1/job/${encodeURIComponent(group.job)}/scale`, { Count: count, Target: { Group: group.group }, Message: message, Meta: meta }, evalResponseSchema);
  }

  private allocations(job: string): Promise<Allocation[]> {
    return this.request("GET", `/v1/job/${encodeURIComponent(job)}/allocations`, undefined, allocationsSchema);
  }

  private async request<S extends z.ZodType>(method: "GET" | "POST", path: string, body: unknown, schema: S): Promise<z.infer<S>> {
    const query = new URLSearchParams();
    if (this.options.namespace) query.set("namespace", this.options.namespace);
    if (this.options.region) query.set("region", this.options.region);
    const url = `${this.address}${path}${query.size > 0 ? `?${query.toString()}` : ""}`;
    const headers: Record<string, string> = {};
    if (this.options.token) headers["X-Nomad-Token"] = this.options.token;
    if (body !== undefined) headers["Content-Type"] = "application/json";
    let response: Response;
    try {
      response = await fetch(url, { method, headers, body: body === undefined ? undefined : JSON.stringify(body), signal: AbortSignal.timeout(this.options.requestTimeoutMs ?? 10_000) });
    } catch (err) {
      throw new Error(`nomad: ${method} ${path}: ${(err as Error).message}`, { cause: err });
    }
    const text = await response.text();
    if (!response.ok) throw new Error(`nomad: ${method} ${path}: HTTP ${response.status} ${text.trim().slice(0, 300)}`);
    let parsed: unknown;
    try {
      parsed = JSON.parse(text);
    } catch {
      throw new Error(`nomad: ${method} ${path}: not JSON: ${JSON.stringify(text.slice(0, 200))}`);
    }
    const checked = schema.safeParse(parsed);
    if (!checked.success) throw new Error(`nomad: ${method} ${path}: unexpected answer: ${checked.error.message}`);
    return checked.data;
  }

  private serially<T>(work: () => Promise<T>): Promise<T> {
    const next = this.queue.then(work, work);
    // The queue only orders the work: the caller gets `next`, with its error.
    this.queue = next.then(settled, settled);
    return next;
  }

  onEvent(listener: (event: ProviderEvent) => void): void {
    this.events.on(listener);
  }

  /** Stops watching; the allocations keep running (terminate them first to give them back). */
  close(): Promise<void> {
    if (this.watchTimer) clearInterval(this.watchTimer);
    return this.queue.then(() => undefined);
  }
}

function clientState(alloc: Allocation, terminateAsked: boolean): InstanceState {
  if (TERMINAL.has(alloc.ClientStatus)) return "terminated";
  if (terminateAsked || alloc.DesiredStatus !== "run") return "draining";
  return alloc.ClientStatus === "pending" ? "booting" : "running";
}

function settled(): void {}

function sleep(ms: number): Promise<void> {
  return new Promise((resolveSleep) => setTimeout(resolveSleep, ms));
}
