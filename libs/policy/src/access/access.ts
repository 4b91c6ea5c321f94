import type { ApiKeyGrant, ApiKeyRole } from "@sloserve/contracts";

/**
 * Access decisions of the frontend's API keys (docs/SECURITY.md): whether a key may do an action on
 * the apps a request touches, with the reason either way. Pure: the frontend's HTTP hooks and its
 * gRPC methods resolve what a request touches (a model's app, a pipeline's apps) and call this.
 *
 * - `query`: run inference (a model, an app model-less, a pipeline); every role.
 * - `read`: list and describe models, variants, profiles and pipelines; every role.
 * - `manage`: register and delete models and pipelines; `app-admin` and `admin`.
 * - `cluster`: what is not one app's (workers, status, decisions, cost, the dashboard's data, keys); `admin` only.
 * - `quota`: set or remove an app's quota (reading it is `read`); `admin` only: a tenant does not lift its own limits.
 *
 * A key for a list of apps may touch only those; a request touching no app (a pipeline made of steps
 * only, or a name that resolves to nothing) is for keys of every app only. Refusals do not name the
 * app a foreign model or pipeline belongs to, so a key cannot learn another app's names from them.
 */

export type AccessAction = "query" | "read" | "manage" | "cluster" | "quota";

export interface AccessDecision {
  allowed: boolean;
  reason: string;
}

/** What each role may do. */
export const accessByRole: Readonly<Record<ApiKeyRole, readonly AccessAction[]>> = {
  user: ["query", "read"],
  "app-admin": ["query", "read", "manage"],
  admin: ["query", "read", "manage", "cluster", "quota"],
};

const verbs: Record<AccessAction, string> = {
  query: "send queries",
  read: "list or describe models and pipelines",
  manage: "register or delete models and pipelines",
  cluster: "use cluster-wide routes (status, workers, decisions, cost, dashboard, keys)",
  quota: "set or remove apps' quotas",
};

/** How a key is named in reasons: its id, and its name when it has one. */
export function describeGrant(grant: ApiKeyGrant): string {
  return `key ${grant.id}${grant.name ? ` (${grant.name})` : ""}`;
}

/**
 * Whether `grant` may do `action` on a target (`what`, e.g. "model 'digits-mlp-s'") that touches
 * `apps`. The role decides the action; then every app touched must be one of the key's. Without a
 * target (a listing, which then shows the key's apps only) the role alone decides.
 */
export function authorize(grant: ApiKeyGrant, action: AccessAction, target?: { what: string; apps: readonly string[] }): AccessDecision {
  const key = describeGrant(grant);
  if (!accessByRole[grant.role].includes(action)) {
    const roles = (Object.keys(accessByRole) as ApiKeyRole[]).filter((r) => accessByRole[r].includes(action));
    return { allowed: false, reason: `${key} has role ${grant.role}, which may not ${verbs[action]}: that needs role ${roles.join(" or ")}` };
  }
  if (action === "cluster" || grant.apps === "*") return { allowed: true, reason: `${key} (role ${grant.role}) may ${verbs[action]} in every app` };
  if (target === undefined) return { allowed: true, reason: `${key} may ${verbs[action]} in its app(s) ${grant.apps.join(", ")}` };
  const mine = grant.apps;
  if (target.apps.length === 0) return { allowed: false, reason: `${key} is for app(s) ${mine.join(", ")}: ${target.what} is not in them (only a key for every app may use it)` };
  if (target.apps.some((a) => !mine.includes(a))) return { allowed: false, reason: `${key} is for app(s) ${mine.join(", ")}: ${target.what} is not in them` };
  return { allowed: true, reason: `${key} may ${verbs[action]} in app(s) ${target.apps.join(", ")}` };
}

/** Whether a listing shows an entry touching `apps` to `grant` (everything when access control is off: no grant). */
export function canSee(grant: ApiKeyGrant | undefined, apps: readonly string[]): boolean {
  return grant === undefined || authorize(grant, "read", { what: "", apps }).allowed;
}

/**
 * The apps a pipeline touches: those of its app stages, and the apps of its model stages' models
 * (`appOfModel`: undefined for a model not registered, which touches nothing: its queries fail
 * anyway). Sorted, each once.
 */
export function pipelineApps(stages: ReadonlyArray<{ model?: string | undefined; app?: string | undefined }>, appOfModel: (model: string) => string | undefined): string[] {
  const apps = new Set<string>();
  for (const s of stages) {
    if (s.app !== undefined) apps.add(s.app);
    const owner = s.model === undefined ? undefined : appOfModel(s.model);
    if (owner !== undefined) apps.add(owner);
  }
  return [...apps].sort();
}
