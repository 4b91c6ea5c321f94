import { readFileSync } from "node:fs";
import type { NatsConnection } from "@nats-io/transport-node";
import { subjects, type StateEvent } from "@sloserve/contracts";
import type { Stack } from "@sloserve/stack";
import { sleep } from "./fault-load.js";

/**
 * Shared by test/e2e-faults.test.ts, the fuzz test and the soak script (test/fault-load.ts has the
 * model and the light load of the NATS and Redis fault tests): a load
 * generator that tallies every query it sends as answered, clearly failed (an HTTP status with a JSON
 * error code, or a refused connection) or hung (no answer by its deadline plus a grace), so that a
 * test can check sent = answered + failed and hung = 0.
 *
 * `npm run chaos` runs the same tests with CHAOS=1: longer runs, more kills, 10 000 fuzz cases.
 */

/** True under `npm run chaos`: the long versions of the fault and fuzz runs. */
export const CHAOS = process.env["CHAOS"] === "1";

export type Outcome = { kind: "answered"; status: number; ms: number; body: Record<string, unknown> } | { kind: "failed"; status: number; code: string; message: string; ms: number } | { kind: "hung"; ms: number };

/** How long past its deadline a query may take to be answered or failed before it counts as hung. */
export const GRACE_MS = 5_000;

/**
 * One HTTP query with a deadline (`timeout_ms` in its parameters): answered (2xx), failed (an HTTP
 * error with a JSON `code`, or a connection refused/reset: the caller knows at once), or hung.
 */
export async function query(url: string, body: Record<string, unknown>, deadlineMs: number): Promise<Outcome> {
  const t0 = performance.now();
  const ms = (): number => performance.now() - t0;
  let response: Response;
  try {
    response = await fetch(url, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ ...body, parameters: { timeout_ms: deadlineMs } }),
      signal: AbortSignal.timeout(deadlineMs + GRACE_MS),
    });
  } catch (err) {
    const e = err as Error & { cause?: { code?: string } };
    if (e.name === "TimeoutError" || e.name === "AbortError") return { kind: "hung", ms: ms() };
    return { kind: "failed", status: 0, code: e.cause?.code ?? e.name, message: e.message, ms: ms() };
  }
  let parsed: Record<string, unknown>;
  try {
    parsed = (await response.json()) as Record<string, unknown>;
  } catch {
    return { kind: "failed", status: response.status, code: "not_json", message: "the reply is not JSON", ms: ms() };
  }
  if (response.ok) return { kind: "answered", status: response.status, ms: ms(), body: parsed };
  return { kind: "failed", status: response.status, code: String(parsed["code"]), message: String(parsed["error"]), ms: ms() };
}

/** Counts outcomes; `failures` by `status code`. */
export class Tally {
  sent = 0;
  answered = 0;
  hung = 0;
  readonly failures = new Map<string, number>();
  readonly latencies: number[] = [];
  private readonly pending = new Set<Promise<void>>();

  track(p: Promise<Outcome>, onOutcome?: (o: Outcome) => void): void {
    this.sent++;
    const done = p.then((o) => {
      if (o.kind === "answered") {
        this.answered++;
        this.latencies.push(o.ms);
      } else if (o.kind === "hung") this.hung++;
      else {
        const key = `${o.status} ${o.code}`;
        this.failures.set(key, (this.failures.get(key) ?? 0) + 1);
      }
      onOutcome?.(o);
    });
    this.pending.add(done);
    void done.finally(() => this.pending.delete(done));
  }

  get failed(): number {
    let n = 0;
    for (const v of this.failures.values()) n += v;
    return n;
  }

  get inFlight(): number {
    return this.pending.size;
  }

  /** Waits for every query sent so far to end (each ends by its deadline plus the grace). */
  async settle(): Promise<void> {
    while (this.pending.size > 0) await Promise.all([...this.pending]);
  }

  summary(): { sent: number; answered: number; failed: number; hung: number; failures: Record<string, number> } {
    return { sent: this.sent, answered: this.answered, failed: this.failed, hung: this.hung, failures: Object.fromEntries(this.failures) };
  }
}

/**
 * Sends `send()` at `ratePerS` (open loop: a slow answer does not slow the sender) until `stop()` says
 * so; `onTick` runs every 100 ms (to kill something at the right moment).
 */
export async function openLoop(ratePerS: number, send: (i: number) => void, stop: (sent: number, elapsedMs: number) => boolean, onTick?: (sent: number, elapsedMs: number) => Promise<void> | void): Promise<number> {
  const t0 = Date.now();
  let sent = 0;
  for (;;) {
    const elapsed = Date.now() - t0;
    if (stop(sent, elapsed)) return sent;
    const owed = Math.floor((elapsed / 1000) * ratePerS) - sent;
    for (let k = 0; k < owed; k++) send(sent++);
    await onTick?.(sent, elapsed);
    await sleep(100);
  }
}

/**
 * The time one query takes alone on this machine (median of 5, after a warm-up): the fault tests set
 * their load from it, so that it is the same share of capacity on a fast machine as on a slow one.
 */
export async function soloMs(run: () => Promise<Outcome>): Promise<number> {
  await run();
  const times: number[] = [];
  for (let i = 0; i < 5; i++) {
    const o = await run();
    if (o.kind !== "answered") throw new Error(`a solo query was not answered: ${JSON.stringify(o)}`);
    times.push(o.ms);
  }
  return times.sort((a, b) => a - b)[2]!;
}

/** Resident memory of a process, bytes (Linux /proc). */
export function rssBytes(pid: number | undefined): number {
  if (pid === undefined) return 0;
  try {
    const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
    return m ? Number(m[1]) * 1024 : 0;
  } catch {
    return 0;
  }
}

/** RSS of every live service of a stack, by service name (several of a kind: name#2, …). */
export function stackRss(stack: Stack): Record<string, number> {
  const out: Record<string, number> = {};
  for (const s of stack.services) {
    if (s.process.exitCode !== null || s.process.signalCode !== null) continue;
    let key = s.name;
    for (let n = 2; key in out; n++) key = `${s.name}#${n}`;
    out[key] = rssBytes(s.process.pid);
  }
  return out;
}

/**
 * Every service's RSS once the stack has settled: sampled every `everyMs` until, for every service, the
 * last `samples` readings lie within `tolerance` of each other (or `maxMs` passed), then the median of
 * those readings per service. A one-time step (a session opened, moved between threads or released; a
 * heap grown or given back) settles; a leak under load does not go away when the load stops.
 */
export async function settledRss(stack: Stack, { everyMs = 500, samples = 6, tolerance = 0.03, maxMs = 30_000 } = {}): Promise<Record<string, number>> {
  const history: Array<Record<string, number>> = [];
  const started = Date.now();
  for (;;) {
    history.push(stackRss(stack));
    const last = history.slice(-samples);
    const names = Object.keys(last[last.length - 1]!);
    const steady = last.length === samples && names.every((n) => {
      const v = last.map((h) => h[n] ?? 0);
      return Math.max(...v) <= (1 + tolerance) * Math.min(...v);
    });
    if (steady || Date.now() - started >= maxMs) {
      return Object.fromEntries(names.map((n) => {
        const v = last.map((h) => h[n] ?? 0).sort((a, b) => a - b);
        return [n, v[Math.floor(v.length / 2)]!];
      }));
    }
    await sleep(everyMs);
  }
}

/** Services of the stack that died (exit code or signal), other than those the test killed. */
export function deadServices(stack: Stack, killed: ReadonlySet<number | undefined> = new Set()): string[] {
  return stack.services.filter((s) => !killed.has(s.process.pid) && (s.process.exitCode !== null || s.process.signalCode !== null)).map((s) => `${s.name} (pid ${s.process.pid}, code ${s.process.exitCode}, signal ${s.process.signalCode})`);
}

/**
 * The workers each variant is Active on, kept from the state events (`state.>`): a test waits on it
 * for a load it asked for.
 */
export function trackActive(nc: NatsConnection): Map<string, Set<string>> {
  const active = new Map<string, Set<string>>();
  nc.subscribe(subjects.stateAll, {
    callback: (_e, m) => {
      const ev = m.json<StateEvent>();
      const set = active.get(ev.variant) ?? new Set();
      if (ev.state === "active") set.add(ev.worker);
      else set.delete(ev.worker);
      active.set(ev.variant, set);
    },
  });
  return active;
}
