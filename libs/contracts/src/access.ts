import { z } from "zod";
import { isValidName } from "./names.js";

/**
 * API keys of the frontend's access control (docs/SECURITY.md). A key has a role and the apps it may
 * use: `user` queries and lists its apps' models, variants and pipelines; `app-admin` also registers
 * and deletes models and pipelines in its apps; `admin` does everything, the cluster-wide routes
 * (workers, decisions, cost, dashboard, key management) included, and is always for every app.
 * Redis keeps each key's record with the SHA-256 of its secret, never the secret itself.
 */

export const apiKeyRoles = ["user", "app-admin", "admin"] as const;
export const apiKeyRoleSchema = z.enum(apiKeyRoles);
export type ApiKeyRole = z.infer<typeof apiKeyRoleSchema>;

const appNameSchema = z.string().refine(isValidName, { message: "an app name is 1-64 letters, digits, '_' or '-', starting with a letter or digit" });

/** The apps a key may use: every app ("*"), or a list of names. */
export const apiKeyAppsSchema = z.union([z.literal("*"), z.array(appNameSchema).min(1).max(256)]);
export type ApiKeyApps = z.infer<typeof apiKeyAppsSchema>;

/** The part of a key that access decisions need: its role and apps (and an id to name it by). */
export interface ApiKeyGrant {
  id: string;
  name: string;
  role: ApiKeyRole;
  apps: ApiKeyApps;
}

/** A stored key: its grant, when it was made, and the SHA-256 (hex) of the whole secret key. */
export const apiKeyRecordSchema = z.object({
  id: z.string().regex(/^[0-9a-f]{12}$/),
  name: z.string().max(128),
  role: apiKeyRoleSchema,
  apps: apiKeyAppsSchema,
  sha256: z.string().regex(/^[0-9a-f]{64}$/),
  createdAtMs: z.number(),
});
export type ApiKeyRecord = z.infer<typeof apiKeyRecordSchema>;

/** `POST /v1/keys`: a new key's role, apps (an admin key is always for every app) and a name to know it by. */
export const apiKeyRequestSchema = z
  .object({
    role: apiKeyRoleSchema,
    apps: apiKeyAppsSchema.optional(),
    name: z.string().max(128).default(""),
  })
  .strict()
  .superRefine((r, ctx) => {
    if (r.role !== "admin" && r.apps === undefined) ctx.addIssue({ code: "custom", path: ["apps"], message: `a ${r.role} key needs "apps": a list of app names, or "*" for every app` });
    if (r.role === "admin" && r.apps !== undefined && r.apps !== "*") ctx.addIssue({ code: "custom", path: ["apps"], message: 'an admin key is for every app: leave "apps" out or give "*"' });
  });
export type ApiKeyRequest = z.infer<typeof apiKeyRequestSchema>;
