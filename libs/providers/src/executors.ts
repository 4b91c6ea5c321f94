import { randomBytes } from "node:crypto";
import { existsSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import type { Hardware } from "@sloserve/contracts";
import { INSTANCE_PRICES, pricePerSecond } from "@sloserve/policy";
import type { Market, WorkerSpec } from "./types.js";

/** The repository root (services run from it: `node --import tsx services/<name>/src/main.ts`). */
export const REPO_ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "../../..");

/** The executor service that runs each hardware kind. */
export const EXECUTOR_SERVICE: Readonly<Record<Hardware, string>> = {
  cpu: "executor-cpu",
  gpu: "executor-gpu",
  inferentia: "executor-inferentia",
};

/** `services/<executor>/src/main.ts` relative to the repository root. */
export function executorEntry(kind: Hardware): string {
  return join("services", EXECUTOR_SERVICE[kind], "src", "main.ts");
}

/**
 * The executor service of a hardware kind, checked to exist in this repository (the image the EC2
 * user data runs is built from it too): a kind without an executor is refused before anything is
 * launched or paid for.
 */
export function executorFor(kind: Hardware, root = REPO_ROOT): { service: string; entry: string } {
  const service = EXECUTOR_SERVICE[kind];
  if (!service) throw new Error(`unknown hardware kind ${JSON.stringify(kind)}: use cpu, gpu or inferentia`);
  const entry = executorEntry(kind);
  if (!existsSync(join(root, entry))) {
    throw new Error(`no executor for ${kind} workers: ${entry} does not exist in this repository`);
  }
  return { service, entry };
}

/** A fresh worker id: `<kind>-<provider>-<8 hex>` (a NATS subject token, within the executors' 64 characters). */
export function newWorkerId(kind: Hardware, provider: string): string {
  return `${kind}-${provider}-${randomBytes(4).toString("hex")}`;
}

const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;
/** Variables a provider sets itself; a spec's `env` may not override them. */
const RESERVED_ENV = ["WORKER_ID", "NATS_URL", "REDIS_URL"];

/**
 * Checks a launch request before anything is started or paid for: a known instance type (prices come
 * from libs/policy's table), of the spec's hardware kind, a reason, and environment variable names
 * that a shell and the executors accept. Returns the dollars per hour it will cost.
 */
export function checkSpec(spec: WorkerSpec): { market: Market; pricePerHour: number } {
  const problems: string[] = [];
  const market = spec.market ?? "on-demand";
  if (market !== "on-demand" && market !== "spot") problems.push(`market ${JSON.stringify(market)}: use "on-demand" or "spot"`);
  const type = INSTANCE_PRICES[spec.instanceType];
  if (!type) problems.push(`unknown instance type ${JSON.stringify(spec.instanceType)} (known: ${Object.keys(INSTANCE_PRICES).join(", ")})`);
  else if (type.kind !== spec.kind) problems.push(`instance type ${spec.instanceType} is ${type.kind} hardware, not ${spec.kind}`);
  if (typeof spec.reason !== "string" || spec.reason.trim() === "") problems.push("a reason is required (it is logged and tagged)");
  for (const name of Object.keys(spec.env ?? {})) {
    if (!ENV_NAME.test(name)) problems.push(`environment variable name ${JSON.stringify(name)}: use letters, digits and '_', not starting with a digit`);
    else if (RESERVED_ENV.includes(name)) problems.push(`environment variable ${name} is set by the provider`);
  }
  if (problems.length > 0) throw new Error(`invalid worker spec: ${problems.join("; ")}`);
  return { market, pricePerHour: pricePerHour(spec.instanceType, market) };
}

/** Dollars per hour of an instance type (libs/policy's price table), to the nano-dollar (no float dust). */
export function pricePerHour(instanceType: string, market: Market): number {
  return Math.round(pricePerSecond(instanceType, market) * 3600 * 1e9) / 1e9;
}

/** The executor's `{"event":"ready","worker":<id>,…}` line (runService in libs/bus prints it once started). */
export function isReadyLine(line: string, workerId: string): boolean {
  if (!line.startsWith("{")) return false;
  try {
    const parsed = JSON.parse(line) as { event?: unknown; worker?: unknown };
    return parsed.event === "ready" && (parsed.worker === undefined || parsed.worker === workerId);
  } catch {
    return false;
  }
}

/** A line of the executor's output for a reason: a JSON log line as its message and error, else the text; at most 500 characters. */
export function readableLine(line: string): string {
  if (line.startsWith("{")) {
    try {
      const parsed = JSON.parse(line) as { msg?: unknown; err?: { message?: unknown } };
      const parts = [parsed.msg, parsed.err?.message].filter((p): p is string => typeof p === "string" && p !== "");
      if (parts.length > 0) return parts.join(": ").slice(0, 500);
    } catch {
      // Not JSON after all: the text itself.
    }
  }
  return line.slice(0, 500);
}

/**
 * An executor's output followed line by line (stdout and stderr alike, in chunks as they come): calls
 * `onReady` once, on its ready line (isReadyLine), and keeps its last line for the reason of a loss.
 */
export class ExecutorOutput {
  private partial = "";
  private last = "";
  private ready = false;

  constructor(
    private readonly workerId: string,
    private readonly onReady: () => void,
  ) {}

  push(chunk: Buffer | string): void {
    this.partial += chunk.toString();
    const lines = this.partial.split("\n");
    this.partial = lines.pop() ?? "";
    for (const line of lines) {
      if (line.trim() !== "") this.last = line;
      if (!this.ready && isReadyLine(line, this.workerId)) {
        this.ready = true;
        this.onReady();
      }
    }
    if (this.partial.length > 64_000) this.partial = this.partial.slice(-64_000);
  }

  /** The last thing it printed (an unfinished line included), readable (readableLine); "" when nothing. */
  lastLine(): string {
    return readableLine(this.partial.trim() || this.last);
  }
}
