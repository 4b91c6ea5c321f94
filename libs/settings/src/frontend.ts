import { z } from "zod";
import { commonEnvSchema } from "@sloserve/contracts";

/** The frontend's settings (services/frontend): the HTTP and gRPC APIs, access control, TLS. */
export const frontendSettings = commonEnvSchema.extend({
  HTTP_PORT: z.coerce.number().int().min(0).max(65535).default(8080).describe("Port of the HTTP API (KServe v2 / Open Inference Protocol, the model-less and management routes) and the dashboard; 0: a free port."),
  HTTP_HOST: z.string().default("0.0.0.0").describe("Interface the HTTP API listens on."),
  GRPC_PORT: z.coerce.number().int().min(0).max(65535).default(8081).describe("The Open Inference Protocol over gRPC (grpc.ts); 0: a free port."),
  GRPC_HOST: z.string().optional().meta({ description: "Interface the gRPC API listens on.", defaultText: "HTTP_HOST" }),
  MAX_BODY_BYTES: z.coerce.number().int().positive().default(8 * 1024 * 1024).describe("Largest HTTP request body accepted (queries), bytes; larger ones get 413."),
  MAX_MODEL_BYTES: z.coerce.number().int().positive().default(512 * 1024 * 1024).describe("Largest ONNX model accepted by model registration, bytes."),
  DEFAULT_TIMEOUT_MS: z.coerce.number().int().positive().default(30_000).describe("Deadline of a query that names no SLO or timeout, ms."),
  AUTH: z.enum(["true", "false"]).default("false").transform((v) => v === "true").describe("Access control: API keys on every route and gRPC method but health, metrics and the dashboard page (docs/SECURITY.md)."),
  SLOSERVE_ADMIN_KEY: z.string().min(32, "SLOSERVE_ADMIN_KEY must be at least 32 characters (e.g. openssl rand -hex 32)").optional().describe("The bootstrap admin key (any string of 32 characters or more, e.g. `openssl rand -hex 32`); required with AUTH=true."),
  AUTH_CACHE_MS: z.coerce.number().int().min(0).default(5000).describe("How long a checked key is trusted before Redis is read again (a key revoked through another frontend), ms."),
  TLS_CERT_FILE: z.string().min(1).optional().meta({ description: "HTTPS and gRPC over TLS: PEM certificate chain and private key files (both or neither).", defaultText: "unset (plain HTTP and gRPC)" }),
  TLS_KEY_FILE: z.string().min(1).optional().describe("The private key of TLS_CERT_FILE (PEM)."),
  FRONTEND_PROCESSES: z.coerce.number().int().min(1).max(64).default(1).describe(
    "Frontend processes sharing HTTP_PORT and GRPC_PORT (Node's cluster: a primary forks them, spreads connections round-robin, forks another when one dies, and on SIGTERM stops them, each draining its requests); `npm start -- --frontends N`. `/metrics` and Triton's statistics answer with every process's counts summed; the dashboard, catalog and key cache are each process's own view of the bus and Redis.",
  ),
}).superRefine((o, ctx) => {
  if (o.AUTH && !o.SLOSERVE_ADMIN_KEY) ctx.addIssue({ code: "custom", path: ["SLOSERVE_ADMIN_KEY"], message: "AUTH=true needs SLOSERVE_ADMIN_KEY, the bootstrap admin key (e.g. openssl rand -hex 32)" });
  if ((o.TLS_CERT_FILE === undefined) !== (o.TLS_KEY_FILE === undefined)) ctx.addIssue({ code: "custom", path: ["TLS_CERT_FILE"], message: "give both TLS_CERT_FILE and TLS_KEY_FILE, or neither" });
});
export type FrontendSettings = z.infer<typeof frontendSettings>;
