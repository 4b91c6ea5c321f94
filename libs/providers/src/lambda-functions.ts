/**
 * The AWS Lambda function provider (DESIGN §3 "Serverless overflow"; MArk §4.1: a query that would miss
 * its SLO goes to Lambda at once; §4.5: concurrent pings pre-warm instances). It invokes the function
 * whose entry point is `lambda-handler.ts` through an injected `LambdaClient`:
 *
 *   InvokeCommand { FunctionName, Qualifier?, InvocationType: "RequestResponse", LogType: "Tail",
 *                   Payload: JSON { variant, object, payload: base64, requestId?, deadlineMs } }
 *
 * - The answer `{ payload: base64, durationMs, loadMs, coldStart }` becomes a FunctionResult.
 * - `FunctionError` set (the handler threw, timed out or ran out of memory): throws `internal` with the
 *   function's own errorType and errorMessage; `{ error: { code, message } }` (a query the caller got
 *   wrong, or one that arrived past its deadline) throws that code. An SDK error (throttling, missing
 *   function, network) throws `unavailable`.
 * - Billing: "Billed Duration: N ms" from the REPORT line of the log tail (LogResult, base64: the last
 *   4 KB of the log) when present, else the handler's duration rounded as Lambda rounds; cost =
 *   `lambdaCost(billed, memoryMb / 1024)` with the function's configured memory. Failed invocations are
 *   billed too and counted. "Init Duration: N ms" in the tail marks a cold start of the instance; it is
 *   added to `durationMs` and `initMs` (AWS bills INIT since August 2025, inside Billed Duration).
 * - Requests over Lambda's 6 MB synchronous payload limit are refused before sending (`payload_too_large`).
 */
import { InvokeCommand, type InvokeCommandOutput, type LambdaClient } from "@aws-sdk/client-lambda";
import { ErrorCode, ServeError, type Clock } from "@sloserve/contracts";
import { LAMBDA_PRICING, lambdaBilledMs, lambdaCost, type LambdaPricing } from "@sloserve/policy";
import type { Logger } from "@sloserve/bus";
import { fromFailure } from "./function-handler.js";
import type { LambdaQueryEvent, LambdaWarmupEvent } from "./lambda-handler.js";
import type { FunctionProvider, FunctionRequest, FunctionResult, PrewarmOptions } from "./types.js";

export interface LambdaFunctionProviderOptions {
  /** Sends the commands (tests: a LambdaClient under aws-sdk-client-mock). */
  client: Pick<LambdaClient, "send">;
  functionName: string;
  /** A version or alias. */
  qualifier?: string;
  /** The function's configured memory, MB: prices the invocations. */
  memoryMb: number;
  clock: Clock;
  log: Logger;
  /** @default "lambda" */
  name?: string;
  pricing?: LambdaPricing;
  /** How long each warm-up ping keeps its instance busy so that concurrent pings land on different instances. @default 250 */
  prewarmHoldMs?: number;
}

/** Lambda's limit on a synchronous invocation's request and response payloads. */
export const LAMBDA_PAYLOAD_LIMIT_BYTES = 6 * 1024 * 1024;

const encoder = new TextEncoder();
const decoder = new TextDecoder();

/** What the REPORT line of a Lambda log tail says. */
export interface LambdaReport {
  durationMs?: number;
  billedMs?: number;
  initMs?: number;
  memorySizeMb?: number;
}

/** Reads the REPORT line of a base64 LogResult ("REPORT RequestId: … Duration: 102.25 ms Billed Duration: 103 ms …"). */
export function parseLogTail(logResult: string | undefined): LambdaReport {
  if (!logResult) return {};
  const text = Buffer.from(logResult, "base64").toString("utf8");
  const num = (re: RegExp): number | undefined => {
    const m = re.exec(text);
    return m?.[1] !== undefined ? Number(m[1]) : undefined;
  };
  const report: LambdaReport = {};
  const duration = num(/(?<!Billed |Init )Duration: ([\d.]+) ms/);
  const billed = num(/Billed Duration: (\d+) ms/);
  const init = num(/Init Duration: ([\d.]+) ms/);
  const memory = num(/Memory Size: (\d+) MB/);
  if (duration !== undefined) report.durationMs = duration;
  if (billed !== undefined) report.billedMs = billed;
  if (init !== undefined) report.initMs = init;
  if (memory !== undefined) report.memorySizeMb = memory;
  return report;
}

interface QueryAnswer {
  payload?: unknown;
  durationMs?: unknown;
  loadMs?: unknown;
  coldStart?: unknown;
  warm?: unknown;
  error?: { code?: unknown; message?: unknown };
}

export class LambdaFunctionProvider implements FunctionProvider {
  readonly name: string;
  private readonly pricing: LambdaPricing;
  private readonly counts = { invocations: 0, coldStarts: 0, errors: 0, costDollars: 0 };

  constructor(private readonly options: LambdaFunctionProviderOptions) {
    this.name = options.name ?? "lambda";
    this.pricing = options.pricing ?? LAMBDA_PRICING;
  }

  private get memoryGb(): number {
    return this.options.memoryMb / 1024;
  }

  private async send(event: LambdaQueryEvent | LambdaWarmupEvent): Promise<{ answer: QueryAnswer; report: LambdaReport; functionError: string | undefined; billedMs: number; costDollars: number }> {
    const body = encoder.encode(JSON.stringify(event));
    if (body.length > LAMBDA_PAYLOAD_LIMIT_BYTES) {
      throw new ServeError(ErrorCode.payloadTooLarge, `the query is ${body.length} bytes as a Lambda event; Lambda takes at most ${LAMBDA_PAYLOAD_LIMIT_BYTES} bytes`);
    }
    let out: InvokeCommandOutput;
    try {
      out = await this.options.client.send(
        new InvokeCommand({
          FunctionName: this.options.functionName,
          ...(this.options.qualifier !== undefined ? { Qualifier: this.options.qualifier } : {}),
          InvocationType: "RequestResponse",
          LogType: "Tail",
          Payload: body,
        }),
      );
    } catch (err) {
      const e = err as Error;
      throw new ServeError(ErrorCode.unavailable, `lambda invoke of ${this.options.functionName} failed: ${e.name}: ${e.message}`);
    }
    if (!out) throw new ServeError(ErrorCode.internal, `lambda invoke of ${this.options.functionName} returned no response`);
    const report = parseLogTail(out.LogResult);
    let answer: QueryAnswer = {};
    let parseError = false;
    try {
      if (out.Payload && out.Payload.length > 0) answer = JSON.parse(decoder.decode(out.Payload)) as QueryAnswer;
    } catch {
      parseError = true;
    }
    // Every invocation is billed, failed ones too: what the log tail says, else the handler's own
    // duration (plus INIT), else the request charge alone.
    const billedMs = report.billedMs ?? (typeof answer.durationMs === "number" ? lambdaBilledMs(answer.durationMs + (report.initMs ?? 0), this.pricing) : 0);
    const costDollars = lambdaCost(billedMs, this.memoryGb, this.pricing);
    this.counts.costDollars += costDollars;
    if (parseError) {
      throw new ServeError(ErrorCode.internal, `lambda function ${this.options.functionName} answered with a payload that is not JSON${out.FunctionError ? ` (FunctionError ${out.FunctionError})` : ""}`);
    }
    return { answer, report, functionError: out.FunctionError, billedMs, costDollars };
  }

  private functionFailed(functionError: string, answer: QueryAnswer): ServeError {
    const raw = answer as { errorType?: unknown; errorMessage?: unknown };
    const type = typeof raw.errorType === "string" ? raw.errorType : "Error";
    const message = typeof raw.errorMessage === "string" ? raw.errorMessage : "no message";
    return new ServeError(ErrorCode.internal, `lambda function ${this.options.functionName} failed (${functionError}): ${type}: ${message}`, { functionError, errorType: type });
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
    const event: LambdaQueryEvent = {
      variant: request.variant,
      object: request.object,
      payload: Buffer.from(request.payload.buffer, request.payload.byteOffset, request.payload.byteLength).toString("base64"),
      ...(request.requestId !== undefined ? { requestId: request.requestId } : {}),
      deadlineMs: request.deadlineMs,
    };
    const { answer, report, functionError, billedMs, costDollars } = await this.send(event);
    if (functionError) throw this.functionFailed(functionError, answer);
    if (answer.error) throw fromFailure(answer.error, `lambda function ${this.options.functionName}`);
    if (typeof answer.payload !== "string" || typeof answer.durationMs !== "number") {
      throw new ServeError(ErrorCode.internal, `lambda function ${this.options.functionName} answered without payload and durationMs`);
    }
    const initDurationMs = report.initMs ?? 0;
    const loadMs = typeof answer.loadMs === "number" ? answer.loadMs : 0;
    const coldStart = answer.coldStart === true || report.initMs !== undefined;
    const durationMs = answer.durationMs + initDurationMs;
    if (coldStart) this.counts.coldStarts++;
    if (report.memorySizeMb !== undefined && report.memorySizeMb !== this.options.memoryMb) {
      this.options.log.warn({ provider: this.name, configured: this.options.memoryMb, reported: report.memorySizeMb }, "lambda memory size differs from the configured one; costs use the configured one");
    }
    const bytes = Buffer.from(answer.payload, "base64");
    return {
      payload: new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength),
      durationMs,
      billedMs,
      coldStart,
      initMs: coldStart ? initDurationMs + loadMs : 0,
      memoryMb: this.options.memoryMb,
      costDollars,
    };
  }

  /**
   * n concurrent warm-up pings (MArk §4.5), each holding its instance `prewarmHoldMs` so that Lambda
   * starts n instances; each loads `options.object` when given. Their cost is counted.
   */
  async prewarm(n: number, options: PrewarmOptions = {}): Promise<void> {
    const count = Math.max(0, Math.floor(n));
    const event: LambdaWarmupEvent = { warmup: { holdMs: this.options.prewarmHoldMs ?? 250, ...(options.object !== undefined ? { object: options.object } : {}) } };
    const results = await Promise.allSettled(
      Array.from({ length: count }, async () => {
        const { answer, report, functionError } = await this.send(event);
        if (functionError) throw this.functionFailed(functionError, answer);
        if (answer.error) throw new ServeError(ErrorCode.internal, `warm-up ping failed: ${String(answer.error.message)}`);
        return answer.coldStart === true || report.initMs !== undefined;
      }),
    );
    const failed = results.filter((r): r is PromiseRejectedResult => r.status === "rejected");
    const started = results.filter((r) => r.status === "fulfilled" && r.value).length;
    this.options.log.info({ provider: this.name, pings: count, started, failed: failed.length, object: options.object }, "lambda pre-warm");
    if (failed.length > 0) {
      throw new ServeError(ErrorCode.unavailable, `pre-warm of ${this.options.functionName}: ${failed.length} of ${count} pings failed: ${(failed[0]?.reason as Error).message}`);
    }
  }

  stats(): { invocations: number; coldStarts: number; errors: number; costDollars: number } {
    return { ...this.counts };
  }

  /** The client belongs to the caller; nothing to release here. */
  async close(): Promise<void> {}
}
