import {
  DescribeInstancesCommand,
  RunInstancesCommand,
  TerminateInstancesCommand,
  type EC2Client,
  type Instance,
  type RunInstancesCommandInput,
  type Tag,
  type _InstanceType,
} from "@aws-sdk/client-ec2";
import { hardwareSchema, type Clock, type Hardware, type SpotNotice } from "@sloserve/contracts";
import type { Logger } from "@sloserve/bus";
import { INSTANCE_PRICES } from "@sloserve/policy";
import { ProviderEvents } from "./events.js";
import { REPO_ROOT, checkSpec, executorFor, newWorkerId, pricePerHour } from "./executors.js";
import { encodeUserData, userDataScript, type NatsWorkerCredentials } from "./ec2-user-data.js";
import type { SpotNoticeSource } from "./spot-watcher.js";
import type { InstanceState, Market, ProviderEvent, WorkerInstance, WorkerProvider, WorkerSpec } from "./types.js";

/**
 * Workers on EC2 (DESIGN §4; MArk §4 runs on EC2 with on-demand and spot instances).
 *
 * - `launch`: one RunInstances from a launch template (AMI with Docker, network, instance profile),
 *   with the instance type, on-demand or one-time spot (interruption: terminate), user data that starts
 *   the executor and, on spot, the spot watcher (ec2-user-data.ts), and tags: `Name`,
 *   `sloserve:worker-id`, `sloserve:kind`, `sloserve:reason`, `sloserve:cluster`. The worker id is the
 *   ClientToken, so a retried request launches nothing twice.
 * - `terminate`: TerminateInstances (EC2 stops billing at shutting-down; Docker stops the executor
 *   with SIGTERM on the way down, so it drains). Only instances of this cluster are terminated.
 * - `list`: DescribeInstances filtered by `tag:sloserve:cluster`, every page. Instances of the cluster
 *   this process did not launch (a restart) are rebuilt from their tags. An instance that shuts down,
 *   stops or disappears without being asked is `lost` (its state reason, e.g.
 *   `Server.SpotInstanceTermination`, is the reason). A watch timer lists every `watchEveryMs`.
 * - Spot notices: the spot watcher on the instance publishes `events.spot.<worker>`; given a
 *   `spotNotices` source (`natsSpotNotices(bus, log)`), the provider marks the instance draining and
 *   emits `interruption-notice`, on which the VM autoscaler launches a replacement and drains the
 *   worker. Then EC2 takes it back and it is `lost` (or it is terminated first, by request).
 *
 * Timestamps come from the injected clock; an instance found by DescribeInstances takes its
 * LaunchTime.
 */

export const TAGS = {
  workerId: "sloserve:worker-id",
  kind: "sloserve:kind",
  reason: "sloserve:reason",
  cluster: "sloserve:cluster",
} as const;

export type LaunchTemplateRef = { name: string; version?: string } | { id: string; version?: string };

export interface Ec2WorkerOptions {
  client: EC2Client;
  /** The launch template (AMI with Docker, subnet, security groups, instance profile, IMDSv2). Version @default "$Latest" */
  launchTemplate: LaunchTemplateRef;
  /** The `sloserve:cluster` tag: the instances this provider owns. */
  cluster: string;
  /** The project's container image (built from the repository's Dockerfile). */
  image: string;
  natsUrl: string;
  redisUrl: string;
  /** The executors' LOG_LEVEL. @default "info" */
  logLevel?: string;
  /** The workers' NATS user, its password and the TLS CA from SSM Parameter Store (ec2-user-data.ts); none: NATS without users. */
  nats?: NatsWorkerCredentials | undefined;
  /** Environment per hardware kind, e.g. `{ cpu: { WORKER_THREADS: "4" } }`; a spec's `env` overrides it. */
  kindEnv?: Partial<Record<Hardware, Record<string, string>>>;
  /** Interruption notices from the spot watchers (e.g. `natsSpotNotices(bus, log)`). */
  spotNotices?: SpotNoticeSource;
  /** DescribeInstances every so often to find lost instances; 0: only when `list` is called. @default 15_000 */
  watchEveryMs?: number;
  /** How long an instance that ended stays in `list` once DescribeInstances no longer shows it (EC2 shows terminated ones about an hour). @default 3_600_000 */
  rememberMs?: number;
  clock: Clock;
  log: Logger;
  /** Repository root, to check that a kind's executor exists. @default this checkout */
  root?: string;
}

interface Ec2Entry {
  instance: WorkerInstance;
  terminateAsked: boolean;
  noticed: boolean;
  /** DescribeInstances has listed it at least once (a fresh launch may not show yet). */
  described: boolean;
  lost: boolean;
}

const CLUSTER_RE = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$/;

export class Ec2WorkerProvider implements WorkerProvider {
  readonly name = "ec2";
  private readonly entries = new Map<string, Ec2Entry>();
  private readonly events: ProviderEvents;
  private readonly watchTimer: NodeJS.Timeout | undefined;
  private readonly notices: { close(): Promise<void> } | undefined;
  private readonly rememberMs: number;

  constructor(private readonly options: Ec2WorkerOptions) {
    const problems: string[] = [];
    if (!CLUSTER_RE.test(options.cluster ?? "")) problems.push(`cluster ${JSON.stringify(options.cluster)}: use 1-64 letters, digits, '_', '.' or '-'`);
    const template = options.launchTemplate as { name?: string; id?: string } | undefined;
    if (!template || (!template.name && !template.id) || (template.name && template.id)) problems.push("launchTemplate needs a name or an id (one of them)");
    if (!options.image) problems.push("image is required (the project's container image)");
    if (!options.natsUrl) problems.push("natsUrl is required");
    if (!options.redisUrl) problems.push("redisUrl is required");
    if (options.nats && (!options.nats.user || !options.nats.passwordParameter)) problems.push("nats needs a user and the SSM parameter of its password");
    const watchEveryMs = options.watchEveryMs ?? 15_000;
    if (!Number.isFinite(watchEveryMs) || watchEveryMs < 0) problems.push(`watchEveryMs must be ≥ 0, got ${options.watchEveryMs}`);
    if (problems.length > 0) throw new Error(`invalid EC2 worker provider options: ${problems.join("; ")}`);
    this.rememberMs = options.rememberMs ?? 3_600_000;
    this.events = new ProviderEvents(this.name, options.log);
    this.notices = options.spotNotices?.((notice) => this.handleSpotNotice(notice));
    if (watchEveryMs > 0) {
      this.watchTimer = setInterval(() => {
        this.list().catch((err: unknown) => options.log.warn({ err, provider: this.name, cluster: options.cluster }, "watching instances: DescribeInstances failed"));
      }, watchEveryMs);
    }
  }

  async launch(spec: WorkerSpec): Promise<WorkerInstance> {
    const { market, pricePerHour } = checkSpec(spec);
    const { service } = executorFor(spec.kind, this.options.root ?? REPO_ROOT);
    const workerId = newWorkerId(spec.kind, "ec2");
    const input = this.runInstancesInput(spec, market, service, workerId);
    const output = await this.options.client.send(new RunInstancesCommand(input));
    const launched = output.Instances?.[0];
    if (!launched?.InstanceId) throw new Error(`RunInstances for ${workerId} answered without an instance (request ${output.$metadata.requestId ?? "?"})`);
    const instance: WorkerInstance = {
      id: launched.InstanceId,
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
    this.entries.set(instance.id, { instance, terminateAsked: false, noticed: false, described: false, lost: false });
    this.options.log.info({ provider: this.name, id: instance.id, workerId, kind: spec.kind, instanceType: spec.instanceType, market, reason: spec.reason }, "launched worker");
    return { ...instance };
  }

  /** The RunInstances request of a launch. */
  private runInstancesInput(spec: WorkerSpec, market: Market, service: string, workerId: string): RunInstancesCommandInput {
    const { launchTemplate: template, cluster } = this.options;
    const script = userDataScript({
      workerId,
      cluster,
      kind: spec.kind,
      instanceType: spec.instanceType,
      market,
      service,
      image: this.options.image,
      natsUrl: this.options.natsUrl,
      redisUrl: this.options.redisUrl,
      logLevel: this.options.logLevel ?? "info",
      env: { ...this.options.kindEnv?.[spec.kind], ...spec.env },
      spotWatcher: market === "spot",
      nats: this.options.nats,
    });
    const tags: Tag[] = [
      { Key: "Name", Value: `sloserve-${cluster}-${workerId}` },
      { Key: TAGS.workerId, Value: workerId },
      { Key: TAGS.kind, Value: spec.kind },
      { Key: TAGS.reason, Value: spec.reason.slice(0, 256) },
      { Key: TAGS.cluster, Value: cluster },
    ];
    return {
      LaunchTemplate: "name" in template ? { LaunchTemplateName: template.name, Version: template.version ?? "$Latest" } : { LaunchTemplateId: template.id, Version: template.version ?? "$Latest" },
      InstanceType: spec.instanceType as _InstanceType,
      MinCount: 1,
      MaxCount: 1,
      ClientToken: workerId,
      UserData: encodeUserData(script),
      TagSpecifications: [{ ResourceType: "instance", Tags: tags }],
      ...(market === "spot" ? { InstanceMarketOptions: { MarketType: "spot", SpotOptions: { SpotInstanceType: "one-time", InstanceInterruptionBehavior: "terminate" } } } : {}),
    };
  }

  async terminate(id: string, reason: string): Promise<void> {
    if (!this.entries.has(id)) await this.list();
    const entry = this.entries.get(id);
    if (!entry) throw new Error(`ec2: instance ${JSON.stringify(id)} is not a worker of cluster ${this.options.cluster}`);
    if (entry.instance.state === "terminated") return;
    entry.terminateAsked = true;
    this.options.log.info({ provider: this.name, id, workerId: entry.instance.workerId, reason }, "terminating worker");
    const output = await this.options.client.send(new TerminateInstancesCommand({ InstanceIds: [id] }));
    const state = output.TerminatingInstances?.find((t) => t.InstanceId === id)?.CurrentState?.Name;
    entry.instance.state = state === "terminated" ? "terminated" : "draining";
    entry.instance.endedAtMs ??= this.options.clock.now();
  }

  async list(): Promise<WorkerInstance[]> {
    const described = await this.describe();
    const nowMs = this.options.clock.now();
    const seen = new Set<string>();
    for (const ec2 of described) {
      if (!ec2.InstanceId) continue;
      seen.add(ec2.InstanceId);
      const entry = this.entries.get(ec2.InstanceId) ?? this.adopt(ec2);
      if (!entry) continue;
      entry.described = true;
      this.observe(entry, ec2, nowMs);
    }
    for (const [id, entry] of this.entries) {
      const { instance } = entry;
      if (!seen.has(id) && entry.described && instance.state !== "terminated") {
        instance.state = "terminated";
        instance.endedAtMs ??= nowMs;
        if (!entry.terminateAsked) this.lose(entry, "no longer listed by DescribeInstances", nowMs);
      }
      // Forgotten once EC2 no longer lists it and it ended long enough ago.
      if (!seen.has(id) && instance.state === "terminated" && instance.endedAtMs !== null && nowMs - instance.endedAtMs > this.rememberMs) this.entries.delete(id);
    }
    return [...this.entries.values()].map((e) => ({ ...e.instance })).sort((a, b) => a.launchedAtMs - b.launchedAtMs || a.id.localeCompare(b.id));
  }

  /** Every instance of the cluster, all pages. */
  private async describe(): Promise<Instance[]> {
    const instances: Instance[] = [];
    let token: string | undefined;
    do {
      const page = await this.options.client.send(
        new DescribeInstancesCommand({ Filters: [{ Name: `tag:${TAGS.cluster}`, Values: [this.options.cluster] }], MaxResults: 100, ...(token ? { NextToken: token } : {}) }),
      );
      for (const reservation of page.Reservations ?? []) instances.push(...(reservation.Instances ?? []));
      token = page.NextToken || undefined;
    } while (token);
    return instances;
  }

  /** An instance of the cluster this process did not launch: rebuilt from its tags. */
  private adopt(ec2: Instance): Ec2Entry | undefined {
    const tag = (key: string): string | undefined => ec2.Tags?.find((t) => t.Key === key)?.Value;
    const kind = hardwareSchema.safeParse(tag(TAGS.kind));
    const type = ec2.InstanceType ?? "";
    if (!kind.success) {
      this.options.log.warn({ provider: this.name, id: ec2.InstanceId, kind: tag(TAGS.kind) }, "instance of the cluster without a valid sloserve:kind tag: not a worker");
      return undefined;
    }
    const market: Market = ec2.InstanceLifecycle === "spot" ? "spot" : "on-demand";
    let hourly = 0;
    if (INSTANCE_PRICES[type]) hourly = pricePerHour(type, market);
    else this.options.log.warn({ provider: this.name, id: ec2.InstanceId, instanceType: type }, "instance type not in the price table: counted at $0");
    const instance: WorkerInstance = {
      id: ec2.InstanceId as string,
      provider: this.name,
      workerId: tag(TAGS.workerId) ?? (ec2.InstanceId as string),
      kind: kind.data,
      instanceType: type,
      market,
      pricePerHour: hourly,
      launchedAtMs: ec2.LaunchTime?.getTime() ?? this.options.clock.now(),
      state: "booting",
      endedAtMs: null,
    };
    const entry: Ec2Entry = { instance, terminateAsked: false, noticed: false, described: true, lost: false };
    this.entries.set(instance.id, entry);
    return entry;
  }

  /** Applies a DescribeInstances state; an instance going away unasked is lost. */
  private observe(entry: Ec2Entry, ec2: Instance, nowMs: number): void {
    const { instance } = entry;
    const name = ec2.State?.Name;
    let state: InstanceState;
    switch (name) {
      case "pending":
        state = entry.terminateAsked || entry.noticed ? "draining" : "booting";
        break;
      case "running":
        state = entry.terminateAsked || entry.noticed ? "draining" : "running";
        break;
      case "shutting-down":
      case "stopping":
        state = "draining";
        break;
      case "stopped":
      case "terminated":
        state = "terminated";
        break;
      default:
        this.options.log.warn({ provider: this.name, id: instance.id, state: name }, "unknown EC2 instance state: unchanged");
        return;
    }
    const goingAway = name === "shutting-down" || name === "stopping" || name === "stopped" || name === "terminated";
    if (goingAway) {
      instance.endedAtMs ??= nowMs;
      if (!entry.terminateAsked) {
        const why = ec2.StateReason ? `${ec2.StateReason.Code ?? ""}${ec2.StateReason.Message ? `: ${ec2.StateReason.Message}` : ""}` : ec2.StateTransitionReason;
        this.lose(entry, `instance ${name}${why ? ` (${why})` : ""}`, nowMs);
      }
    }
    instance.state = state;
  }

  private lose(entry: Ec2Entry, reason: string, nowMs: number): void {
    if (entry.lost) return;
    entry.lost = true;
    this.events.emit({ type: "lost", id: entry.instance.id, atMs: nowMs, reason: entry.noticed ? `spot interruption: ${reason}` : reason });
  }

  /**
   * A spot watcher's notice: the instance will be taken back at `terminateAtMs`. The instance is
   * marked draining and `interruption-notice` goes to the listeners (once per instance). Notices of
   * instances this provider does not know (another cluster on the same bus) are ignored.
   */
  handleSpotNotice(notice: SpotNotice): void {
    const entry = this.entries.get(notice.instanceId) ?? [...this.entries.values()].find((e) => e.instance.workerId === notice.worker);
    if (!entry) {
      this.options.log.debug({ provider: this.name, ...notice }, "spot notice for an instance of another cluster: ignored");
      return;
    }
    if (entry.noticed || entry.instance.state === "terminated") return;
    entry.noticed = true;
    entry.instance.state = "draining";
    this.events.emit({ type: "interruption-notice", id: entry.instance.id, atMs: notice.atMs, terminateAtMs: notice.terminateAtMs });
  }

  onEvent(listener: (event: ProviderEvent) => void): void {
    this.events.on(listener);
  }

  /** Stops watching; the instances keep running (terminate them first to give them back). */
  async close(): Promise<void> {
    if (this.watchTimer) clearInterval(this.watchTimer);
    await this.notices?.close();
  }
}
