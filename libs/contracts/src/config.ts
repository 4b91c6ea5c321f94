import { z } from "zod";
import { describeZodError } from "./schemas.js";

/**
 * Service options: a zod schema with documented defaults, compiled from an environment record
 * that is passed in (never read globally), collecting every error at once.
 */
export function compileOptions<S extends z.ZodType>(schema: S, env: Record<string, string | undefined>, prefix = ""): z.infer<S> {
  const result = schema.safeParse(env);
  if (!result.success) {
    throw new Error(`invalid configuration${prefix ? ` for ${prefix}` : ""}: ${describeZodError(result.error)}`);
  }
  return result.data;
}

/** Common options for every service, read from the environment. */
export const commonEnvSchema = z.object({
  NATS_URL: z.string().default("nats://127.0.0.1:4222"),
  REDIS_URL: z.string().default("redis://127.0.0.1:6379"),
  LOG_LEVEL: z.enum(["trace", "debug", "info", "warn", "error", "fatal", "silent"]).default("info"),
  /**
   * Replicas of the JetStream streams and the model bucket (3 on a three-node NATS cluster: compose,
   * Nomad). Unset: new ones get 1 and existing ones keep theirs. @default unset
   */
  JS_REPLICAS: z.coerce.number().int().min(1).max(5).optional(),
  /** Prometheus metrics (`GET /metrics`) on this port; 0: none (the frontend has them on its HTTP port too). @default 0 */
  METRICS_PORT: z.coerce.number().int().min(0).max(65535).default(0),
  METRICS_HOST: z.string().default("0.0.0.0"),
});
