import type { FastifyInstance, FastifyRequest, RawReplyDefaultExpression, RawRequestDefaultExpression, RawServerDefault } from "fastify";
import type * as grpc from "@grpc/grpc-js";
import { ErrorCode, ServeError, isValidName, pipelineNameSchema, pipelineSpecSchema, type ApiKeyGrant } from "@sloserve/contracts";
import { accessByRole, authorize, pipelineApps, type AccessAction } from "@sloserve/policy";
import type { Logger } from "@sloserve/bus";
import type { Catalog, MetadataStore } from "@sloserve/store";
import { tokenOf, type Authenticator } from "./auth.js";

/**
 * Access control of every HTTP route and gRPC method (docs/SECURITY.md): one rule per route, in the
 * tables below; a route without a rule fails the frontend's start (fail closed). Each rule names the
 * action (libs/policy access.ts) and how to find the apps the request touches. Open routes (health,
 * server metadata, Prometheus metrics, the dashboard's page and scripts) need no key. Others: the key
 * is checked when the request arrives (401 before any body is read), the rule once its parameters are
 * known (a pipeline registration's spec: once its body is parsed). With access control off (AUTH=false)
 * no rule is applied and every route is open, as before.
 */

declare module "fastify" {
  interface FastifyRequest {
    /** The caller's key once checked; null when access control is off (or on an open route). */
    apiKey: ApiKeyGrant | null;
  }
}

type App = FastifyInstance<RawServerDefault, RawRequestDefaultExpression, RawReplyDefaultExpression, Logger>;

export interface AccessControl {
  auth: Authenticator;
  catalog: Catalog;
  store: MetadataStore;
}

/** What a request touches; undefined: nothing to check, the handler refuses the request (an invalid name or spec). */
type Target = { what: string; apps: string[] } | undefined;
type Resolve = (ctl: AccessControl, req: FastifyRequest) => Promise<Target>;

interface Rule {
  action: AccessAction | "open";
  /** The apps touched (absent: a listing filtered to the key's apps, or a cluster-wide route). */
  target?: Resolve;
  /** The target is in the body: checked once it is parsed. */
  afterBody?: boolean;
}

const param = (req: FastifyRequest, name: string): string => String((req.params as Record<string, unknown>)[name] ?? "");

/** A name the OIP routes and gRPC resolve as a model or else an app (query.ts resolveTarget). */
export async function nameTarget(catalog: Catalog, name: string): Promise<Target> {
  if (!isValidName(name)) return undefined;
  const model = await catalog.getModel(name);
  // Not a model: an app's name (model-less), or nothing (the handler answers 404 to a key of that app).
  return model ? { what: `model '${name}'`, apps: [model.app] } : { what: `'${name}'`, apps: [name] };
}

/** The apps of a pipeline's stages (its model stages' apps read through the catalog). */
async function stagesTarget(catalog: Catalog, name: string, stages: ReadonlyArray<{ model?: string | undefined; app?: string | undefined }>): Promise<Target> {
  const owners = new Map<string, string | undefined>();
  for (const s of stages) if (s.model !== undefined) owners.set(s.model, (await catalog.getModel(s.model))?.app);
  return { what: `pipeline '${name}'`, apps: pipelineApps(stages, (m) => owners.get(m)) };
}

const model: Resolve = (ctl, req) => nameTarget(ctl.catalog, param(req, "model"));
const app: Resolve = async (_ctl, req) => {
  const name = param(req, "app");
  return isValidName(name) ? { what: `app '${name}'`, apps: [name] } : undefined;
};
/** A registered pipeline; one not registered touches no app (only a key for every app gets past, to the handler's 404). */
const pipeline: Resolve = async (ctl, req) => {
  const name = param(req, "name");
  if (!pipelineNameSchema.safeParse(name).success) return undefined;
  const record = await ctl.store.getPipeline(name);
  return record ? stagesTarget(ctl.catalog, name, record.spec.stages) : { what: `pipeline '${name}'`, apps: [] };
};
/** A pipeline to register: the spec in the body, read as the registry will (a spec it refuses is the handler's 400). */
const pipelineSpec: Resolve = async (ctl, req) => {
  const name = param(req, "name");
  const body = req.body;
  if (!body || typeof body !== "object" || Array.isArray(body)) return undefined;
  const spec = pipelineSpecSchema.safeParse({ ...body, name });
  return spec.success ? stagesTarget(ctl.catalog, name, spec.data.stages) : undefined;
};

const open: Rule = { action: "open" };
const cluster: Rule = { action: "cluster" };

/** Every HTTP route's rule, by `METHOD url` (HEAD follows GET). */
export const httpRules: Readonly<Record<string, Rule>> = {
  "GET /v2/health/live": open,
  "GET /v2/health/ready": open,
  "GET /v2": open,
  "GET /metrics": open,
  "GET /": open,
  // The page and its scripts are static; its data (/v1/dashboard) is cluster-wide.
  "GET /dashboard": open,
  "GET /dashboard/vendor/:file": open,
  "GET /v1/dashboard": cluster,
  "GET /v1/status": cluster,
  "GET /v1/decisions": cluster,
  "GET /v1/cost": cluster,
  "POST /v1/keys": cluster,
  "GET /v1/keys": cluster,
  "DELETE /v1/keys/:id": cluster,
  // API keys' quotas: admin only, as the keys (a key does not read or lift its own limits).
  "GET /v1/keys/:id/quota": cluster,
  "PUT /v1/keys/:id/quota": cluster,
  "DELETE /v1/keys/:id/quota": cluster,
  "GET /v2/models/:model": { action: "read", target: model },
  "GET /v2/models/:model/versions/:version": { action: "read", target: model },
  "GET /v2/models/:model/ready": { action: "read", target: model },
  "GET /v2/models/:model/versions/:version/ready": { action: "read", target: model },
  "GET /v2/models/:model/config": { action: "read", target: model },
  "GET /v2/models/:model/versions/:version/config": { action: "read", target: model },
  // Statistics of every model: a listing, filtered to the key's apps.
  "GET /v2/models/stats": { action: "read" },
  "GET /v2/models/:model/stats": { action: "read", target: model },
  "GET /v2/models/:model/versions/:version/stats": { action: "read", target: model },
  "POST /v2/models/:model/infer": { action: "query", target: model },
  "POST /v2/models/:model/versions/:version/infer": { action: "query", target: model },
  "POST /v1/apps/:app/infer": { action: "query", target: app },
  "POST /v2/repository/index": { action: "read" },
  "POST /v1/apps/:app/models/:model": { action: "manage", target: app },
  "GET /v1/apps/:app/models": { action: "read", target: app },
  "GET /v1/apps/:app/quota": { action: "read", target: app },
  "PUT /v1/apps/:app/quota": { action: "quota", target: app },
  "DELETE /v1/apps/:app/quota": { action: "quota", target: app },
  "GET /v1/models/:model/profile": { action: "read", target: model },
  "DELETE /v1/models/:model": { action: "manage", target: model },
  "GET /v1/pipelines": { action: "read" },
  "POST /v1/pipelines/:name": { action: "manage", target: pipelineSpec, afterBody: true },
  "GET /v1/pipelines/:name": { action: "read", target: pipeline },
  "DELETE /v1/pipelines/:name": { action: "manage", target: pipeline },
  "POST /v1/pipelines/:name/infer": { action: "query", target: pipeline },
};

/** Every gRPC method's rule (inference.GRPCInferenceService); the name it touches from its request. */
export const grpcRules: Readonly<Record<string, { action: AccessAction | "open"; name?: (request: Record<string, unknown>) => unknown }>> = {
  ServerLive: { action: "open" },
  ServerReady: { action: "open" },
  ServerMetadata: { action: "open" },
  ModelReady: { action: "read", name: (r) => r.name },
  ModelMetadata: { action: "read", name: (r) => r.name },
  ModelConfig: { action: "read", name: (r) => r.name },
  // An empty name: every model's statistics, a listing filtered to the key's apps (as RepositoryIndex).
  ModelStatistics: { action: "read", name: (r) => r.name },
  RepositoryIndex: { action: "read" },
  ModelInfer: { action: "query", name: (r) => r.model_name },
};

/** Throws 403 `forbidden` unless `grant` may do `action` on what `target` finds (resolved only for a key limited to some apps). */
async function check(grant: ApiKeyGrant, action: AccessAction, target: (() => Promise<Target>) | undefined): Promise<void> {
  const scoped = grant.apps !== "*" && action !== "cluster" && accessByRole[grant.role].includes(action);
  let touched: Target = undefined;
  if (scoped && target) {
    touched = await target();
    if (touched === undefined) return; // the handler refuses it
  }
  const decision = authorize(grant, action, touched);
  if (!decision.allowed) throw new ServeError(ErrorCode.forbidden, decision.reason);
}

const ruleKey = (method: string, url: string): string => `${method === "HEAD" ? "GET" : method} ${url}`;

/**
 * Declares `req.apiKey`, refuses to register a route without a rule, and (with `ctl`: access control
 * on) checks every request against its route's rule. Call before any route is registered.
 */
export function registerAccessControl(server: App, ctl: AccessControl | undefined): void {
  server.decorateRequest("apiKey", null);
  server.addHook("onRoute", (route) => {
    for (const method of Array.isArray(route.method) ? route.method : [route.method]) {
      if (!httpRules[ruleKey(method, route.url)]) throw new Error(`route ${method} ${route.url} has no access rule: add one to services/frontend/src/access.ts`);
    }
  });
  if (!ctl) return;
  const ruleOf = (req: FastifyRequest): Rule | undefined => (req.routeOptions.url === undefined ? undefined : httpRules[ruleKey(req.method, req.routeOptions.url)]);
  const apply = async (req: FastifyRequest, rule: Rule): Promise<void> => {
    if (!req.apiKey || rule.action === "open") return;
    await check(req.apiKey, rule.action, rule.target ? () => (rule.target as Resolve)(ctl, req) : undefined);
  };
  server.addHook("onRequest", async (req) => {
    const rule = ruleOf(req);
    if (!rule || rule.action === "open") return; // no route (the not-found handler answers) or an open one
    req.apiKey = await ctl.auth.authenticate(tokenOf(req.headers.authorization, req.headers["x-api-key"]));
    if (!rule.afterBody) await apply(req, rule);
  });
  server.addHook("preHandler", async (req) => {
    const rule = ruleOf(req);
    if (rule?.afterBody) await apply(req, rule);
  });
}

/** Checks a gRPC call's key (metadata `authorization: Bearer <key>` or `x-api-key`) against its method's rule; throws 401/403 ServeErrors. Returns the key (undefined on an open method), for listings. */
export async function checkGrpcCall(ctl: AccessControl, method: string, metadata: grpc.Metadata, request: unknown): Promise<ApiKeyGrant | undefined> {
  const rule = grpcRules[method];
  if (!rule) throw new ServeError(ErrorCode.forbidden, `gRPC method ${method} has no access rule`);
  if (rule.action === "open") return undefined;
  const first = (k: string): unknown => metadata.get(k)[0];
  const grant = await ctl.auth.authenticate(tokenOf(first("authorization"), first("x-api-key")));
  const name = rule.name?.((request ?? {}) as Record<string, unknown>);
  await check(grant, rule.action, rule.name ? () => (typeof name === "string" ? nameTarget(ctl.catalog, name) : Promise.resolve(undefined)) : undefined);
  return grant;
}
