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
  NATS_URL: z.string().default("nats://127.0.0.1:4222").describe("The NATS servers, comma-separated (nats://host:port; tls:// with NATS_TLS_CA)."),
  REDIS_URL: z.string().default("redis://127.0.0.1:6379").describe("The Redis server holding the metadata (apps, models, variants, workers, API keys)."),
  LOG_LEVEL: z.enum(["trace", "debug", "info", "warn", "error", "fatal", "silent"]).default("info").describe("pino log level of the service."),
  JS_REPLICAS: z.coerce.number().int().min(1).max(5).optional().meta({ description: "Replicas of the JetStream streams and the model bucket (3 on a three-node NATS cluster: compose, Nomad). Unset: new ones get 1 and existing ones keep theirs.", defaultText: "unset" }),
  METRICS_PORT: z.coerce.number().int().min(0).max(65535).default(0).describe("Prometheus metrics (`GET /metrics`) on this port; 0: none (the frontend has them on its HTTP port too)."),
  METRICS_HOST: z.string().default("0.0.0.0").describe("The interface the Prometheus metrics listen on (with METRICS_PORT)."),
  // Read by libs/bus connectBus (connection.ts); listed here so that they are checked and documented.
  NATS_USER: z.string().optional().meta({ description: "NATS user of this service (with NATS_PASSWORD); docs/SECURITY.md.", defaultText: "unset (no NATS authentication)" }),
  NATS_PASSWORD: z.string().optional().meta({ description: "NATS password of NATS_USER.", defaultText: "unset" }),
  NATS_TLS_CA: z.string().optional().meta({ description: "PEM file of the CA that signed the NATS servers' certificates: TLS to NATS.", defaultText: "unset (plain TCP)" }),
  NATS_TLS_CERT: z.string().optional().meta({ description: "PEM client certificate for NATS (mutual TLS, with NATS_TLS_KEY).", defaultText: "unset" }),
  NATS_TLS_KEY: z.string().optional().meta({ description: "PEM private key of NATS_TLS_CERT.", defaultText: "unset" }),
});
