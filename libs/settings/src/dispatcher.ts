import { z } from "zod";
import { commonEnvSchema } from "@sloserve/contracts";
import { BREAKER_DEFAULTS } from "@sloserve/providers/defaults";
import { emulationSettings } from "./emulation.js";
import { hostSettings } from "./machine.js";

/** Function providers the dispatcher can overflow to. */
export const OVERFLOW_PROVIDERS = ["local", "lambda"] as const;
export type OverflowProviderName = (typeof OVERFLOW_PROVIDERS)[number];

const overflowSchema = z
  .string()
  .default("off")
  .transform((raw, ctx): OverflowProviderName[] => {
    const value = raw.trim().toLowerCase();
    if (value === "off" || value === "") return [];
    const names = value.split(",").map((s) => s.trim());
    for (const n of names) {
      if (!(OVERFLOW_PROVIDERS as readonly string[]).includes(n)) {
        ctx.addIssue({ code: "custom", message: `'${n}' is not a function provider: use off, local, lambda, or two of them in order (e.g. lambda,local)` });
        return z.NEVER;
      }
    }
    if (new Set(names).size !== names.length) {
      ctx.addIssue({ code: "custom", message: `'${raw}' names a provider twice` });
      return z.NEVER;
    }
    return names as OverflowProviderName[];
  });

/** The dispatcher's settings (services/dispatcher): serverless overflow and its circuit breaker, queue coalescing. */
export const dispatcherSettings = commonEnvSchema
  .extend({
    OVERFLOW: overflowSchema.meta({ description: "Serverless overflow (MArk §4.1): `off`, `local` (a pool of function processes on this machine), `lambda` (AWS Lambda), or two in order: the first behind its circuit breaker, the second its fallback (e.g. `lambda,local`). The vm-autoscaler's SCALING_POLICY `infaas` and `static` run without overflow: set `off` with them.", defaultText: "\"off\" (`npm start` sets local; off with SCALING_POLICY infaas or static)" }),
    QUEUE_COALESCE: z.enum(["true", "false"]).default("true").transform((v) => v === "true").describe("Small queries pending for the same variant go onto its queue as one message (micro-batches on the bus, docs/ARCHITECTURE.md \"The query path\"); `false`: one message per query."),
    FAIR_SHARE: z.enum(["true", "false"]).default("true").transform((v) => v === "true").describe("Weighted fair admission between apps on a congested worker pool (libs/policy access/fair-share.ts, docs/ARCHITECTURE.md \"The query path\"): when two or more apps ask a hardware kind's workers for more than all of their time, an app over its share (weighted by its quota's rate) is refused `fair_share_exceeded` (429); `false`: off."),
    LAMBDA_FUNCTION: z.string().min(1).optional().describe("The Lambda function that runs queries (name or ARN); needed with `lambda`."),
    LAMBDA_QUALIFIER: z.string().min(1).optional().describe("A version or alias of the Lambda function."),
    FUNCTION_MEMORY_MB: z.coerce.number().int().min(128).max(10_240).default(2048).describe("Memory size of a function, MB (Lambda's 128-10240): Lambda's configuration; prices the local pool's invocations."),
    FUNCTION_POOL_SIZE: z.coerce.number().int().min(1).max(256).default(4).describe("Most local function containers at once."),
    FUNCTION_KEEP_ALIVE_MS: z.coerce.number().int().positive().default(600_000).describe("An idle local function container exits after this long."),
    FUNCTION_BACKEND: z.enum(["onnx", "emulated"]).default("onnx").describe("The local function containers' engine: `onnx` (the model, on onnxruntime) or `emulated`: each invocation waits a latency drawn as an emulated CPU worker's for the variant (EMULATED_CALIBRATION, else EMULATED_LATENCY_MS) and answers zeros, `served_by.backend` `emulated`; the containers are still processes that start cold and fetch the model, but open no onnxruntime session. For fleet-scale runs with emulated workers (`npm run replay -- --emulated`), where functions stand for Lambda's, off this host; never for real queries."),
    ...emulationSettings,
    ...hostSettings,
    BREAKER_CAP_MS: z.coerce.number().int().positive().default(BREAKER_DEFAULTS.capMs).describe("Circuit breaker: longest one function call may take, ms, even when the query's deadline is further."),
    BREAKER_ERROR_PERCENT: z.coerce.number().min(1).max(100).default(BREAKER_DEFAULTS.errorThresholdPercentage).describe("Circuit breaker: opens when more than this percentage of the calls in its window failed."),
    BREAKER_VOLUME: z.coerce.number().int().min(1).default(BREAKER_DEFAULTS.volumeThreshold).describe("Circuit breaker: calls in the window before it may open."),
    BREAKER_RESET_MS: z.coerce.number().int().positive().default(BREAKER_DEFAULTS.resetTimeoutMs).describe("Circuit breaker: time open before a trial call, ms."),
    FUNCTION_NATS_USER: z.string().optional().meta({ description: "local overflow: the NATS user of the function processes it starts (with FUNCTION_NATS_PASSWORD; docs/SECURITY.md).", defaultText: "unset (the functions get no NATS user)" }),
    FUNCTION_NATS_PASSWORD: z.string().optional().meta({ description: "local overflow: the NATS password of FUNCTION_NATS_USER.", defaultText: "unset" }),
    BREAKER_WINDOW_MS: z.coerce.number().int().positive().default(BREAKER_DEFAULTS.rollingWindowMs).describe("Circuit breaker: the rolling window its percentages are taken over, ms."),
  })
  .superRefine((o, ctx) => {
    if (o.OVERFLOW.includes("lambda") && !o.LAMBDA_FUNCTION) ctx.addIssue({ code: "custom", path: ["LAMBDA_FUNCTION"], message: "OVERFLOW names lambda: set LAMBDA_FUNCTION to the function's name or ARN" });
  });

export type DispatcherSettings = z.infer<typeof dispatcherSettings>;
