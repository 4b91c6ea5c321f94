import { describe, expect, it } from "vitest";
import type { ApiKeyGrant } from "@sloserve/contracts";
import { authorize, canSee, pipelineApps, type AccessAction } from "../../src/access/access.js";

const grant = (role: ApiKeyGrant["role"], apps: ApiKeyGrant["apps"], name = ""): ApiKeyGrant => ({ id: "0123456789ab", name, role, apps });
const digitsUser = grant("user", ["digits"], "digits user");
const digitsAdmin = grant("app-admin", ["digits", "ocr-det"]);
const everyAppAdmin = grant("app-admin", "*");
const admin = grant("admin", "*");

describe("access - authorize", () => {
  // Table: key, action, apps touched (undefined: a listing or a cluster route), allowed.
  const cases: Array<[string, ApiKeyGrant, AccessAction, string[] | undefined, boolean]> = [
    ["user queries its app", digitsUser, "query", ["digits"], true],
    ["user reads its app", digitsUser, "read", ["digits"], true],
    ["user queries another app", digitsUser, "query", ["ocr-det"], false],
    ["user queries a pipeline spanning its app and another", digitsUser, "query", ["digits", "ocr-det"], false],
    ["user registers in its own app", digitsUser, "manage", ["digits"], false],
    ["user lists (filtered afterwards)", digitsUser, "read", undefined, true],
    ["user on a cluster route", digitsUser, "cluster", undefined, false],
    ["user on something touching no app", digitsUser, "query", [], false],
    ["app-admin registers in one of its apps", digitsAdmin, "manage", ["ocr-det"], true],
    ["app-admin registers a pipeline over both its apps", digitsAdmin, "manage", ["digits", "ocr-det"], true],
    ["app-admin registers into another app", digitsAdmin, "manage", ["ocr-rec"], false],
    ["app-admin on a cluster route", digitsAdmin, "cluster", undefined, false],
    ["app-admin of every app registers anywhere", everyAppAdmin, "manage", ["anything"], true],
    ["app-admin of every app uses a pipeline of steps only", everyAppAdmin, "query", [], true],
    ["app-admin of every app still no cluster route", everyAppAdmin, "cluster", undefined, false],
    ["admin on a cluster route", admin, "cluster", undefined, true],
    ["admin deletes anywhere", admin, "manage", ["ocr-rec"], true],
    ["app-admin sets its own app's quota", digitsAdmin, "quota", ["digits"], false],
    ["admin sets an app's quota", admin, "quota", ["digits"], true],
  ];
  it.each(cases)("access - %s", (_name, g, action, apps, allowed) => {
    const decision = authorize(g, action, apps === undefined ? undefined : { what: "model 'm'", apps });
    expect(decision.allowed).toBe(allowed);
    expect(decision.reason.length).toBeGreaterThan(0);
  });

  it("access - refusals say why, and never name the foreign app", () => {
    expect(authorize(digitsUser, "manage", { what: "app 'digits'", apps: ["digits"] }).reason).toBe(
      "key 0123456789ab (digits user) has role user, which may not register or delete models and pipelines: that needs role app-admin or admin",
    );
    expect(authorize(digitsAdmin, "cluster").reason).toBe(
      "key 0123456789ab has role app-admin, which may not use cluster-wide routes (status, workers, decisions, cost, dashboard, keys): that needs role admin",
    );
    const foreign = authorize(digitsUser, "query", { what: "model 'secret-model'", apps: ["secret-app"] });
    expect(foreign.reason).toBe("key 0123456789ab (digits user) is for app(s) digits: model 'secret-model' is not in them");
    expect(foreign.reason).not.toContain("secret-app");
    expect(authorize(digitsUser, "query", { what: "pipeline 'steps'", apps: [] }).reason).toBe(
      "key 0123456789ab (digits user) is for app(s) digits: pipeline 'steps' is not in them (only a key for every app may use it)",
    );
  });

  it("access - listings: everything without access control, the key's apps with it", () => {
    expect(canSee(undefined, ["ocr-det"])).toBe(true);
    expect(canSee(digitsUser, ["digits"])).toBe(true);
    expect(canSee(digitsUser, ["ocr-det"])).toBe(false);
    expect(canSee(digitsUser, ["digits", "ocr-det"])).toBe(false);
    expect(canSee(admin, ["ocr-det"])).toBe(true);
  });
});

describe("access - pipelineApps", () => {
  it("access - a pipeline's apps: its app stages and its model stages' apps; unknown models and steps touch none", () => {
    const owners: Record<string, string> = { "digits-mlp-s": "digits", "digits-cnn-m": "digits", "ocr-det": "ocr-det" };
    const stages = [{ model: "digits-mlp-s" }, { model: "digits-cnn-m" }, { app: "textdir" }, { model: "ocr-det" }, { model: "gone" }, {}];
    expect(pipelineApps(stages, (m) => owners[m])).toEqual(["digits", "ocr-det", "textdir"]);
    expect(pipelineApps([{}, { model: "gone" }], (m) => owners[m])).toEqual([]);
  });
});
