import { createServer, connect as tcpConnect, type Server, type Socket } from "node:net";

/**
 * A TCP proxy that injects network faults, in the test process (no separate binary, no root, no
 * network namespace): placed between a service and nats-server, or between HTTP callers and the
 * frontend. Bytes are never lost or reordered (TCP does not let an application see either); what a
 * lossy or slow link does to TCP is what it does here:
 *
 * - `latencyMs` ± `jitterMs`: each chunk is held that long (in order: a chunk never overtakes the one
 *   before it, as in one TCP stream);
 * - `delayChance` / `delayMs`: a lost packet, as TCP shows it: the chunk and everything after it wait
 *   for the retransmission (`delayMs`, ~ an RTO);
 * - `stall()` / `heal()`: nothing moves either way, connections stay open (a link that goes silent, a
 *   full switch buffer); what was held is delivered on `heal()`;
 * - `cut(downMs)`: every connection through it is reset at once, and for `downMs` new ones are
 *   refused (closed on accept), as when a link or a NAT entry is lost; clients then reconnect.
 */

export interface LinkFaults {
  latencyMs?: number;
  jitterMs?: number;
  delayChance?: number;
  delayMs?: number;
}

interface Direction {
  queue: Array<{ chunk: Buffer; atMs: number }>;
  lastAtMs: number;
  to: Socket;
  timer?: NodeJS.Timeout | undefined;
}

export class FaultProxy {
  private faults: LinkFaults = {};
  private stalled = false;
  private downUntilMs = 0;
  private readonly pairs = new Set<{ a: Socket; b: Socket; dirs: Direction[] }>();
  /** Connections accepted in all (a reconnect adds one). */
  accepted = 0;
  private rng: () => number;

  private constructor(
    private readonly server: Server,
    readonly port: number,
    seed: number,
  ) {
    let s = seed >>> 0;
    // mulberry32: the same faults on every run.
    this.rng = () => {
      s = (s + 0x6d2b79f5) >>> 0;
      let t = s;
      t = Math.imul(t ^ (t >>> 15), t | 1);
      t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
      return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
    };
  }

  /** A proxy on a free loopback port to `target` (host:port, or a URL such as nats://127.0.0.1:4222). */
  static async start(target: string, seed = 1): Promise<FaultProxy> {
    const { hostname, port } = new URL(target.includes("://") ? target : `tcp://${target}`);
    const server = createServer({ noDelay: true });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const proxy = new FaultProxy(server, (server.address() as { port: number }).port, seed);
    server.on("connection", (client) => proxy.accept(client, hostname, Number(port)));
    return proxy;
  }

  /** `nats://127.0.0.1:<port>` */
  get natsUrl(): string {
    return `nats://127.0.0.1:${this.port}`;
  }

  get httpUrl(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  get connections(): number {
    return this.pairs.size;
  }

  /** Latency, jitter and delayed chunks from now on (`{}`: none). */
  set(faults: LinkFaults): void {
    this.faults = faults;
  }

  stall(): void {
    this.stalled = true;
    for (const p of this.pairs) for (const d of p.dirs) clearTimeout(d.timer);
  }

  /** Ends every fault; what a stall held goes on at once. */
  heal(): void {
    this.faults = {};
    this.stalled = false;
    this.downUntilMs = 0;
    const now = Date.now();
    for (const p of this.pairs)
      for (const d of p.dirs) {
        for (const q of d.queue) q.atMs = Math.min(q.atMs, now);
        d.lastAtMs = Math.min(d.lastAtMs, now);
        this.pump(d);
      }
  }

  /** Resets every connection through the proxy; refuses new ones for `downMs`. */
  cut(downMs = 0): void {
    this.downUntilMs = Date.now() + downMs;
    for (const p of [...this.pairs]) {
      p.a.resetAndDestroy();
      p.b.resetAndDestroy();
    }
  }

  async close(): Promise<void> {
    this.cut();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private accept(client: Socket, host: string, port: number): void {
    if (Date.now() < this.downUntilMs) {
      client.resetAndDestroy();
      return;
    }
    this.accepted++;
    client.setNoDelay(true);
    const upstream = tcpConnect({ host, port, noDelay: true });
    const toUp: Direction = { queue: [], lastAtMs: 0, to: upstream };
    const toClient: Direction = { queue: [], lastAtMs: 0, to: client };
    const pair = { a: client, b: upstream, dirs: [toUp, toClient] };
    this.pairs.add(pair);
    const end = (): void => {
      if (!this.pairs.delete(pair)) return;
      for (const d of pair.dirs) clearTimeout(d.timer);
      client.destroy();
      upstream.destroy();
    };
    client.on("data", (chunk) => this.enqueue(toUp, chunk));
    upstream.on("data", (chunk) => this.enqueue(toClient, chunk));
    for (const s of [client, upstream]) {
      s.on("error", end);
      s.on("close", end);
    }
  }

  private enqueue(d: Direction, chunk: Buffer): void {
    const f = this.faults;
    const now = Date.now();
    let delay = (f.latencyMs ?? 0) + (f.jitterMs ? (this.rng() * 2 - 1) * f.jitterMs : 0);
    if (f.delayChance && this.rng() < f.delayChance) delay += f.delayMs ?? 200;
    // In order, as one TCP stream delivers.
    const atMs = Math.max(d.lastAtMs, now + Math.max(0, delay));
    d.lastAtMs = atMs;
    d.queue.push({ chunk, atMs });
    if (d.queue.length === 1) this.pump(d);
  }

  private pump(d: Direction): void {
    clearTimeout(d.timer);
    d.timer = undefined;
    if (this.stalled) return;
    const now = Date.now();
    while (d.queue.length > 0 && d.queue[0]!.atMs <= now) {
      if (!d.to.destroyed) d.to.write(d.queue.shift()!.chunk);
      else d.queue.shift();
    }
    if (d.queue.length > 0) d.timer = setTimeout(() => this.pump(d), d.queue[0]!.atMs - now);
  }
}
