import { createHash, randomBytes, timingSafeEqual } from "node:crypto";
import { ErrorCode, ServeError, type ApiKeyGrant, type Clock } from "@sloserve/contracts";
import type { ApiKeyStore } from "@sloserve/store";

/**
 * Who is calling: API keys (docs/SECURITY.md). A key is `sls_<id>_<secret>`: the id (12 hex digits)
 * finds its record in Redis (libs/store api-keys.ts), which holds the SHA-256 of the whole key, compared
 * in constant time. The bootstrap admin key (SLOSERVE_ADMIN_KEY) is any string of 32 characters or
 * more, kept in memory as its hash only. Keys checked are remembered for `cacheMs` (by hash), so the
 * query path reads Redis once per key and interval; revoking through this frontend forgets the key at
 * once, through another within `cacheMs`.
 */

const KEY_RE = /^sls_([0-9a-f]{12})_[A-Za-z0-9_-]{43}$/;
/** Keys remembered at most: beyond that the cache starts over (a flood of distinct keys cannot grow it). */
const MAX_CACHED = 10_000;

export const sha256Hex = (text: string): string => createHash("sha256").update(text).digest("hex");

/** A new key: its id and the secret key itself (shown once to whoever asked for it). */
export function newApiKey(): { id: string; key: string } {
  const id = randomBytes(6).toString("hex");
  return { id, key: `sls_${id}_${randomBytes(32).toString("base64url")}` };
}

const sameHash = (a: string, b: string): boolean => a.length === b.length && timingSafeEqual(Buffer.from(a, "hex"), Buffer.from(b, "hex"));

const missing = "this frontend requires an API key: send the header 'Authorization: Bearer <key>' (or 'x-api-key: <key>'; over gRPC, the metadata 'authorization: Bearer <key>')";

/** The key a caller sent: `authorization: Bearer <key>` or else `x-api-key: <key>` (HTTP headers or gRPC metadata); undefined when none. */
export function tokenOf(authorization: unknown, apiKey: unknown): string | undefined {
  if (typeof authorization === "string" && authorization !== "") {
    const m = /^Bearer[ \t]+(\S+)[ \t]*$/i.exec(authorization);
    if (!m) throw new ServeError(ErrorCode.unauthenticated, "the authorization header must be 'Bearer <key>'");
    return m[1];
  }
  if (typeof apiKey === "string" && apiKey.trim() !== "") return apiKey.trim();
  return undefined;
}

/** The grant of the bootstrap admin key. */
export const bootstrapAdmin: ApiKeyGrant = { id: "bootstrap", name: "SLOSERVE_ADMIN_KEY", role: "admin", apps: "*" };

export class Authenticator {
  private readonly adminHash: string | undefined;
  private readonly cacheMs: number;
  private readonly cache = new Map<string, { grant: ApiKeyGrant; untilMs: number }>();

  constructor(
    private readonly keys: ApiKeyStore,
    private readonly clock: Clock,
    options: { adminKey?: string | undefined; cacheMs: number },
  ) {
    this.adminHash = options.adminKey ? sha256Hex(options.adminKey) : undefined;
    this.cacheMs = options.cacheMs;
  }

  /** The grant of the key sent; a ServeError `unauthenticated` (401) without one or for one not known. */
  async authenticate(token: string | undefined): Promise<ApiKeyGrant> {
    if (token === undefined) throw new ServeError(ErrorCode.unauthenticated, missing);
    const hash = sha256Hex(token);
    if (this.adminHash !== undefined && sameHash(hash, this.adminHash)) return bootstrapAdmin;
    const now = this.clock.now();
    const cached = this.cache.get(hash);
    if (cached && cached.untilMs > now) return cached.grant;
    const id = KEY_RE.exec(token)?.[1];
    const record = id === undefined ? undefined : await this.keys.get(id);
    if (!record || !sameHash(record.sha256, hash)) {
      this.cache.delete(hash);
      throw new ServeError(ErrorCode.unauthenticated, "unknown API key: revoked, mistyped, or made for another sloserve");
    }
    const grant: ApiKeyGrant = { id: record.id, name: record.name, role: record.role, apps: record.apps };
    if (this.cache.size >= MAX_CACHED) this.cache.clear();
    this.cache.set(hash, { grant, untilMs: now + this.cacheMs });
    return grant;
  }

  /** Forgets a key at once (revoked through this frontend). */
  forget(id: string): void {
    for (const [hash, entry] of this.cache) if (entry.grant.id === id) this.cache.delete(hash);
  }
}
