import { z } from "zod";
import { spotNoticeSchema, subjects, type Clock, type SpotNotice } from "@sloserve/contracts";
import type { Bus, Logger } from "@sloserve/bus";

/**
 * Spot interruption notices, from the instance to the bus (MArk §4.5: capacity lost to spot
 * interruptions is replaced, and overflow covers the gap).
 *
 * On the instance, `SpotWatcher` polls the instance metadata service (IMDSv2) every 5 s, as AWS
 * recommends: a session token from `PUT /latest/api/token` (header
 * `X-aws-ec2-metadata-token-ttl-seconds`), then `GET /latest/meta-data/spot/instance-action` with the
 * token (`X-aws-ec2-metadata-token`): 404 means no notice; `{"action": "terminate", "time":
 * "2024-05-01T12:02:00Z"}` means EC2 will act at `time` (two minutes' notice). It calls back once, then
 * stops polling. `spot-watcher-main.ts` runs it beside the executor (the EC2 user data starts both) and
 * publishes the notice on `events.spot.<worker>` (`publishSpotNotice`); on the other side
 * `natsSpotNotices` feeds the notices to the EC2 provider, which emits `interruption-notice`.
 */

export const IMDS_URL = "http://169.254.169.254";

const instanceActionSchema = z.object({
  action: z.enum(["terminate", "stop", "hibernate"]),
  time: z.string().refine((t) => Number.isFinite(Date.parse(t)), "an ISO 8601 time"),
});

export interface InstanceAction {
  action: SpotNotice["action"];
  /** When EC2 will act, epoch ms. */
  terminateAtMs: number;
}

export interface SpotWatcherOptions {
  /** The instance metadata service. @default "http://169.254.169.254" */
  imdsUrl?: string;
  /** Polling period. @default 5000 */
  everyMs?: number;
  /** Lifetime asked for the IMDSv2 session token, seconds (1..21600). @default 21600 */
  tokenTtlS?: number;
  /** Time allowed to each metadata request. @default 2000 */
  requestTimeoutMs?: number;
  clock: Clock;
  log: Logger;
  /** Called once, with the first notice seen. */
  onNotice(notice: InstanceAction & { atMs: number }): void | Promise<void>;
}

export class SpotWatcher {
  private readonly imdsUrl: string;
  private readonly everyMs: number;
  private readonly tokenTtlS: number;
  private readonly requestTimeoutMs: number;
  private token: { value: string; expiresAtMs: number } | undefined;
  private timer: NodeJS.Timeout | undefined;
  private running = false;
  private noticed = false;

  constructor(private readonly options: SpotWatcherOptions) {
    this.imdsUrl = (options.imdsUrl ?? IMDS_URL).replace(/\/+$/, "");
    this.everyMs = options.everyMs ?? 5000;
    this.tokenTtlS = options.tokenTtlS ?? 21_600;
    this.requestTimeoutMs = options.requestTimeoutMs ?? 2000;
    const problems: string[] = [];
    if (!/^https?:\/\//.test(this.imdsUrl)) problems.push(`imdsUrl must be an http URL, got ${JSON.stringify(options.imdsUrl)}`);
    if (!Number.isFinite(this.everyMs) || this.everyMs <= 0) problems.push(`everyMs must be > 0, got ${options.everyMs}`);
    if (!Number.isInteger(this.tokenTtlS) || this.tokenTtlS < 1 || this.tokenTtlS > 21_600) problems.push(`tokenTtlS must be an integer in 1..21600, got ${options.tokenTtlS}`);
    if (problems.length > 0) throw new Error(`invalid spot watcher options: ${problems.join("; ")}`);
  }

  /** Starts polling (the first poll at once). */
  start(): void {
    if (this.running || this.noticed) return;
    this.running = true;
    this.schedule(0);
  }

  stop(): void {
    this.running = false;
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
  }

  private schedule(delayMs: number): void {
    this.timer = setTimeout(() => void this.poll(), delayMs);
  }

  private async poll(): Promise<void> {
    if (!this.running) return;
    let action: InstanceAction | null = null;
    try {
      action = await this.check();
    } catch (err) {
      this.options.log.warn({ err, imdsUrl: this.imdsUrl }, "spot watcher: instance metadata poll failed; trying again");
    }
    if (!this.running) return;
    if (!action) {
      this.schedule(this.everyMs);
      return;
    }
    this.running = false;
    this.noticed = true;
    const atMs = this.options.clock.now();
    this.options.log.warn({ action: action.action, terminateAtMs: action.terminateAtMs, inMs: action.terminateAtMs - atMs }, "spot interruption notice");
    try {
      await this.options.onNotice({ ...action, atMs });
    } catch (err) {
      this.options.log.error({ err, action }, "spot watcher: handling the interruption notice failed");
    }
  }

  /** One look at the metadata service: the instance action, or null when there is none (404). */
  async check(): Promise<InstanceAction | null> {
    const response = await this.get("/latest/meta-data/spot/instance-action");
    if (response.status === 404) return null;
    const text = await response.text();
    if (!response.ok) throw new Error(`GET /latest/meta-data/spot/instance-action: HTTP ${response.status} ${text.slice(0, 200)}`);
    let parsed: z.infer<typeof instanceActionSchema>;
    try {
      parsed = instanceActionSchema.parse(JSON.parse(text));
    } catch (err) {
      throw new Error(`GET /latest/meta-data/spot/instance-action: unexpected body ${JSON.stringify(text.slice(0, 200))}: ${(err as Error).message}`);
    }
    return { action: parsed.action, terminateAtMs: Date.parse(parsed.time) };
  }

  /** This instance's id (`/latest/meta-data/instance-id`). */
  async instanceId(): Promise<string> {
    const response = await this.get("/latest/meta-data/instance-id");
    const text = (await response.text()).trim();
    if (!response.ok || text === "") throw new Error(`GET /latest/meta-data/instance-id: HTTP ${response.status} ${text.slice(0, 200)}`);
    return text;
  }

  /** A metadata GET with the session token; a rejected token (401) is renewed once. */
  private async get(path: string): Promise<Response> {
    let response = await this.fetch(path, { headers: { "X-aws-ec2-metadata-token": await this.sessionToken() } });
    if (response.status === 401) {
      await response.body?.cancel();
      this.token = undefined;
      response = await this.fetch(path, { headers: { "X-aws-ec2-metadata-token": await this.sessionToken() } });
    }
    return response;
  }

  private async sessionToken(): Promise<string> {
    const nowMs = this.options.clock.now();
    if (this.token && this.token.expiresAtMs > nowMs) return this.token.value;
    const response = await this.fetch("/latest/api/token", { method: "PUT", headers: { "X-aws-ec2-metadata-token-ttl-seconds": String(this.tokenTtlS) } });
    const text = await response.text();
    if (!response.ok || text === "") throw new Error(`PUT /latest/api/token: HTTP ${response.status} ${text.slice(0, 200)}`);
    // Renewed a minute before it expires (or halfway through a short lifetime).
    this.token = { value: text, expiresAtMs: nowMs + Math.max(this.tokenTtlS * 500, this.tokenTtlS * 1000 - 60_000) };
    return text;
  }

  private fetch(path: string, init: RequestInit): Promise<Response> {
    return fetch(`${this.imdsUrl}${path}`, { ...init, signal: AbortSignal.timeout(this.requestTimeoutMs) });
  }
}

/**
 * Publishes a notice on `events.spot.<worker>` (JetStream, EVENTS stream, so a VM autoscaler that
 * restarts within the two minutes can still read it); without the stream, on core NATS, saying so.
 */
export async function publishSpotNotice(bus: Bus, notice: SpotNotice, log: Logger): Promise<void> {
  const checked = spotNoticeSchema.parse(notice);
  const data = new TextEncoder().encode(JSON.stringify(checked));
  const subject = subjects.spotNotice(checked.worker);
  try {
    await bus.js.publish(subject, data);
  } catch (err) {
    log.warn({ err, subject }, "spot notice: JetStream publish failed; publishing on core NATS");
    bus.nc.publish(subject, data);
    await bus.nc.flush();
  }
}

/** Where a provider hears of spot notices: gives each to `handler` until closed. */
export type SpotNoticeSource = (handler: (notice: SpotNotice) => void) => { close(): Promise<void> };

/** Spot notices from the bus (`events.spot.*`); malformed ones are logged and dropped. */
export function natsSpotNotices(bus: Pick<Bus, "nc">, log: Logger): SpotNoticeSource {
  return (handler) => {
    const sub = bus.nc.subscribe(subjects.spotNoticeAll, {
      callback: (err, msg) => {
        if (err) {
          log.warn({ err, subject: subjects.spotNoticeAll }, "spot notice subscription error");
          return;
        }
        const parsed = spotNoticeSchema.safeParse(parseJson(msg.data));
        if (!parsed.success) {
          log.warn({ subject: msg.subject, error: parsed.error.message }, "ignoring a malformed spot notice");
          return;
        }
        handler(parsed.data);
      },
    });
    return {
      async close() {
        await sub.drain();
      },
    };
  };
}

function parseJson(data: Uint8Array): unknown {
  try {
    return JSON.parse(new TextDecoder().decode(data));
  } catch {
    return undefined;
  }
}
