import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { createRng } from "@sloserve/policy";
import type { BundledModel, Stack } from "@sloserve/stack";
import { headers as natsHeaders, type NatsConnection } from "@nats-io/transport-node";
import { contentTypes, headers } from "@sloserve/contracts";
import { Network, exportNetwork } from "@sloserve/zoo";

/**
 * Light query load for the fault tests (test/fault-*.test.ts): one query every `everyMs`, each with its
 * own deadline (`parameters.timeout_ms`), each outcome kept. A query is answered (200), clearly failed
 * (an HTTP error status with a JSON `{error, code}` body), or hung: no answer by its deadline plus
 * `graceMs` (the client gives up then), or a connection error. The tests require sent = answered +
 * clearly failed.
 */

export interface Outcome {
  index: number;
  sentAtMs: number;
  doneAtMs: number;
  status: number;
  /** The error code and message of a clear failure, e.g. "deadline_exceeded". */
  code?: string;
  message?: string;
  hung: boolean;
}

export interface Load {
  outcomes: Outcome[];
  /** Stops sending and waits for every query sent to end. */
  stop(): Promise<Outcome[]>;
}

export function startLoad(url: string, body: (i: number) => unknown, options: { everyMs: number; timeoutMs: number; graceMs: number }): Load {
  const outcomes: Outcome[] = [];
  const pending: Array<Promise<void>> = [];
  let index = 0;
  const one = async (i: number): Promise<void> => {
    const sentAtMs = Date.now();
    let status = 0;
    let code: string | undefined;
    let message: string | undefined;
    try {
      const response = await fetch(url, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ ...(body(i) as object), parameters: { timeout_ms: options.timeoutMs } }),
        signal: AbortSignal.timeout(options.timeoutMs + options.graceMs),
      });
      const answer = (await response.json()) as { error?: unknown; code?: unknown };
      status = response.status;
      if (status !== 200 && typeof answer.error === "string" && typeof answer.code === "string") [code, message] = [answer.code, answer.error];
    } catch {
      status = 0;
    }
    const clear = status === 200 || (status >= 400 && code !== undefined);
    outcomes.push({ index: i, sentAtMs, doneAtMs: Date.now(), status, ...(code ? { code, message } : {}), hung: !clear });
  };
  const timer = setInterval(() => pending.push(one(index++)), options.everyMs);
  return {
    outcomes,
    async stop() {
      clearInterval(timer);
      await Promise.all(pending);
      return outcomes.sort((a, b) => a.index - b.index);
    },
  };
}

/** Counts: sent, answered, failed clearly (by code), hung; answered among those sent in [fromMs, toMs). */
export function summarize(outcomes: readonly Outcome[], window?: { fromMs: number; toMs: number }) {
  const failed: Record<string, number> = {};
  for (const o of outcomes) if (o.status !== 200 && !o.hung) failed[o.code ?? "?"] = (failed[o.code ?? "?"] ?? 0) + 1;
  const inWindow = window ? outcomes.filter((o) => o.sentAtMs >= window.fromMs && o.sentAtMs < window.toMs) : [];
  return {
    sent: outcomes.length,
    answered: outcomes.filter((o) => o.status === 200).length,
    failedClearly: outcomes.filter((o) => o.status !== 200 && !o.hung).length,
    failed,
    hung: outcomes.filter((o) => o.hung).length,
    longestMs: Math.max(0, ...outcomes.map((o) => o.doneAtMs - o.sentAtMs)),
    sentInWindow: inWindow.length,
    answeredInWindow: inWindow.filter((o) => o.status === 200).length,
    /** The distinct failure messages, numbers taken out (a few of them). */
    messages: [...new Set(outcomes.flatMap((o) => (o.message ? [o.message.replace(/\d+/g, "N")] : [])))].slice(0, 5),
  };
}

/** A small classifier (784 → 32 → 10, random weights) to serve under faults: cheap, so the load stays light. */
export function smallModel(dir: string, app: string, name: string, seed = 11): BundledModel {
  const network = new Network([{ type: "flatten" }, { type: "dense", units: 32 }, { type: "relu" }, { type: "dense", units: 10 }], [1, 28, 28], createRng(seed));
  const path = join(dir, `${name}.onnx`);
  writeFileSync(path, exportNetwork(network, name));
  return { app, name, task: "image-classification", dataset: "none", path };
}

/** The body of query `i` to a model made by smallModel. */
export function smallQuery(i: number): unknown {
  return { id: `q${i}`, inputs: [{ name: "input", datatype: "FP32", shape: [1, 1, 28, 28], data: Array.from({ length: 784 }, (_, k) => ((k * 7 + i * 13) % 29) / 29) }] };
}

export const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** A counter's value in a service's /metrics (summed over its processes), over the series whose labels include `labels`. */
export async function metricsCounter(stack: Stack, service: string, name: string, labels: Record<string, string>): Promise<number> {
  const target = stack.metricsTargets().find((t) => t.service === service);
  if (!target) throw new Error(`${service} has no metrics endpoint`);
  const text = await (await fetch(target.url)).text();
  let total = 0;
  for (const line of text.split("\n")) {
    const m = /^(\w+)\{([^}]*)\} (\S+)$/.exec(line);
    if (!m || m[1] !== name) continue;
    const got = Object.fromEntries([...(m[2] ?? "").matchAll(/(\w+)="([^"]*)"/g)].map((x) => [x[1], x[2]]));
    if (Object.entries(labels).every(([k, v]) => got[k] === v)) total += Number(m[3]);
  }
  return total;
}

/**
 * Queries sent over NATS one at a time (`send`), each with a deadline, and what came of them: answered,
 * an error reply by its code, or no reply at all; `inFlight` holds the ones still waiting.
 */
export class NatsTally {
  sent = 0;
  ok = 0;
  noReply = 0;
  readonly errors = new Map<string, number>();
  readonly inFlight = new Set<Promise<void>>();

  constructor(
    private readonly nc: () => NatsConnection,
    private readonly subject: string,
    private readonly payload: Uint8Array,
    private readonly deadlineMs = 20_000,
  ) {}

  send(): void {
    this.sent++;
    const h = natsHeaders();
    h.set(headers.contentType, contentTypes.wire);
    h.set(headers.deadline, String(Date.now() + this.deadlineMs));
    const p = this.nc()
      .request(this.subject, this.payload, { timeout: this.deadlineMs * 3, headers: h })
      .then((reply) => {
        const code = reply.headers?.get(headers.error) ?? "";
        if (code === "") this.ok++;
        else this.errors.set(code, (this.errors.get(code) ?? 0) + 1);
      })
      .catch(() => void this.noReply++)
      .finally(() => this.inFlight.delete(p));
    this.inFlight.add(p);
  }
}
