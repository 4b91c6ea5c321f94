import type { FastifyInstance, RawReplyDefaultExpression, RawRequestDefaultExpression, RawServerDefault } from "fastify";
import { ErrorCode, ServeError, apiKeyRequestSchema, describeZodError, type ApiKeyRecord, type Clock } from "@sloserve/contracts";
import type { Logger } from "@sloserve/bus";
import type { ApiKeyStore } from "@sloserve/store";
import { newApiKey, sha256Hex, type Authenticator } from "./auth.js";

/**
 * Key management (admin keys only; docs/SECURITY.md):
 *
 * - `POST /v1/keys` `{"role": "user"|"app-admin"|"admin", "apps": ["digits"] | "*", "name"?}` → 201 with
 *   the key itself (`key`: shown this once; Redis keeps its SHA-256) and its `id`.
 * - `GET /v1/keys`: every stored key, without secrets (the bootstrap key from SLOSERVE_ADMIN_KEY is not stored).
 * - `DELETE /v1/keys/{id}`: revokes the key at once on this frontend, within AUTH_CACHE_MS on others,
 *   and removes its quota (quotas.ts `removeKeyQuota`).
 *
 * With access control off the routes refuse: keys made then would open the API once it is turned on.
 */

/** An API key id as the routes take it (12 hex digits), or 400. */
export function checkKeyId(id: string): string {
  if (!/^[0-9a-f]{12}$/.test(id)) throw new ServeError(ErrorCode.badRequest, `invalid key id ${JSON.stringify(id.slice(0, 64))}: an id is 12 hex digits (GET /v1/keys lists them)`);
  return id;
}

function describeKey(r: ApiKeyRecord): Record<string, unknown> {
  return { id: r.id, name: r.name, role: r.role, apps: r.apps, created_at_ms: r.createdAtMs };
}

export function registerKeyRoutes(
  app: FastifyInstance<RawServerDefault, RawRequestDefaultExpression, RawReplyDefaultExpression, Logger>,
  deps: { auth: { authenticator: Authenticator; keys: ApiKeyStore } | undefined; clock: Clock; removeQuota: (id: string) => Promise<unknown> },
): void {
  const { clock } = deps;
  const authOn = (): { authenticator: Authenticator; keys: ApiKeyStore } => {
    if (!deps.auth) throw new ServeError(ErrorCode.badRequest, "access control is off (the frontend runs with AUTH=false): there are no API keys to manage");
    return deps.auth;
  };

  app.post("/v1/keys", async (req, reply) => {
    const { keys } = authOn();
    const parsed = apiKeyRequestSchema.safeParse(req.body ?? {});
    if (!parsed.success) throw new ServeError(ErrorCode.badRequest, `send {"role": "user" | "app-admin" | "admin", "apps": ["<app>", …] or "*", "name"?}: ${describeZodError(parsed.error)}`);
    const { role, apps, name } = parsed.data;
    const { id, key } = newApiKey();
    const record: ApiKeyRecord = { id, name, role, apps: role === "admin" ? "*" : (apps ?? []), sha256: sha256Hex(key), createdAtMs: clock.now() };
    if (!(await keys.create(record))) throw new ServeError(ErrorCode.internal, `key id ${id} is taken (a 48-bit collision): ask again`);
    req.log.info({ keyId: id, role, apps: record.apps, by: req.apiKey?.id }, "API key created");
    return reply.code(201).send({ ...describeKey(record), key });
  });

  app.get("/v1/keys", async () => {
    const { keys } = authOn();
    return { keys: (await keys.list()).map(describeKey) };
  });

  app.delete<{ Params: { id: string } }>("/v1/keys/:id", async (req) => {
    const { authenticator, keys } = authOn();
    const id = checkKeyId(req.params.id);
    const record = await keys.revoke(id);
    if (!record) throw new ServeError(ErrorCode.unknownKey, `no API key with id ${id}`);
    authenticator.forget(id);
    // Its quota goes with it.
    const quota = await deps.removeQuota(id);
    req.log.info({ keyId: id, by: req.apiKey?.id, quotaRemoved: quota !== undefined }, "API key revoked");
    return { revoked: describeKey(record) };
  });
}
