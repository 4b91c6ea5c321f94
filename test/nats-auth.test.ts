import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { spawnSync } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { jetstreamManager } from "@nats-io/jetstream";
import type { NatsConnection } from "@nats-io/transport-node";
import { natsPermissions, natsRoleOfService, natsRoles, streams, subjects, type NatsRole } from "@sloserve/contracts";
import { connectBus, createLogger, natsChildEnv, natsConnectOptions, type Bus } from "@sloserve/bus";
import { waitFor } from "@sloserve/testing";
import {
  REPO_ROOT,
  composeNatsAuthFile,
  generateNatsPasswords,
  literalNatsPasswords,
  natsAuthorizationConf,
  natsTlsConf,
  startNats,
  tempDir,
  withNomadNatsAuth,
  type ServerHandle,
} from "@sloserve/stack";

/**
 * NATS access control (docs/SECURITY.md) on a real nats-server: the configuration generated from
 * libs/contracts' permissions, each forbidden path tried by the user it is forbidden to (the server
 * refuses it and nothing else happens), wrong credentials refused, TLS with a certificate made here by
 * openssl, and the checked-in deployment files equal to the generator's output.
 */

const log = createLogger("nats-auth-test", "silent");
const passwords = generateNatsPasswords();
let nats: ServerHandle;
const buses: Bus[] = [];

/** A bus connected as `role` through the services' own helper (NATS_USER / NATS_PASSWORD). */
async function as(role: NatsRole, password = passwords[role]): Promise<Bus> {
  const bus = await connectBus({ servers: nats.url, name: `test ${role}`, log, ensure: role !== "function" && role !== "client", env: { NATS_USER: role, NATS_PASSWORD: password } });
  buses.push(bus);
  return bus;
}

/** The permission violations the server reported to a connection, as "publish scale.vm". */
function violations(nc: NatsConnection): string[] {
  const seen: string[] = [];
  void (async () => {
    for await (const s of nc.status()) {
      if (s.type === "error" && s.error.name === "PermissionViolationError") {
        const e = s.error as Error & { operation?: string; subject?: string };
        seen.push(`${e.operation} ${e.subject}`);
      }
    }
  })();
  return seen;
}

/** Waits until the server has reported `what` (it answers in order: the violation comes before the flush's PONG, the status event just after). */
async function refused(nc: NatsConnection, seen: string[], what: string): Promise<void> {
  await nc.flush();
  await waitFor(`the server to refuse ${what}`, () => seen.includes(what), { timeoutMs: 5_000, intervalMs: 50, detail: () => `refused so far: ${JSON.stringify(seen)}` });
  expect(seen).toContain(what);
}

beforeAll(async () => {
  nats = await startNats({ authorization: natsAuthorizationConf(literalNatsPasswords(passwords)) });
});

afterAll(async () => {
  for (const b of buses) await b.close();
  await nats?.stop();
});

describe("nats auth", () => {
  it("nats auth - the checked-in deployment files are the generator's output", () => {
    expect(readFileSync(join(REPO_ROOT, "deploy", "nats-auth.conf"), "utf8")).toBe(composeNatsAuthFile());
    const nomad = readFileSync(join(REPO_ROOT, "deploy", "nomad", "nats.nomad.hcl"), "utf8");
    expect(withNomadNatsAuth(nomad)).toBe(nomad);
  });

  it("nats auth - every service has a role; executors share one; a child gets only its own credentials", () => {
    for (const service of ["frontend", "dispatcher", "registrar", "model-autoscaler", "vm-autoscaler", "forecaster"]) expect(natsRoleOfService(service)).toBe(service);
    for (const kind of ["cpu", "gpu", "inferentia"]) expect(natsRoleOfService(`executor-${kind}`)).toBe("executor");
    expect(natsRoleOfService("nobody")).toBeUndefined();
    expect(natsChildEnv({ NATS_USER: "vm-autoscaler", NATS_PASSWORD: "p", EXECUTOR_NATS_USER: "executor", EXECUTOR_NATS_PASSWORD: "q" }, "EXECUTOR")).toEqual({ NATS_USER: "executor", NATS_PASSWORD: "q" });
    expect(natsChildEnv({ NATS_USER: "dispatcher", NATS_PASSWORD: "p" }, "FUNCTION")).toEqual({});
    // Least privilege in the table itself: only admin may do everything; nobody but the registrar purges the model bucket.
    for (const role of natsRoles.filter((r) => r !== "admin")) expect(natsPermissions(role).publish, role).not.toContain(">");
    expect(natsRoles.filter((r) => natsPermissions(r).publish.includes("$JS.API.STREAM.PURGE.OBJ_models"))).toEqual(["registrar"]);
    expect(natsRoles.filter((r) => natsPermissions(r).publish.some((s) => s.startsWith("$JS.API.STREAM.DELETE")))).toEqual([]);
  });

  it("nats auth - connection settings from the environment, every mistake named, no password in a message", () => {
    expect(natsConnectOptions({})).toEqual({});
    expect(natsConnectOptions({ NATS_USER: "frontend", NATS_PASSWORD: "s3cret" })).toEqual({ user: "frontend", pass: "s3cret" });
    expect(natsConnectOptions({ NATS_TLS_CA: "/ca.pem", NATS_TLS_CERT: "/c.pem", NATS_TLS_KEY: "/k.pem" })).toEqual({ tls: { caFile: "/ca.pem", certFile: "/c.pem", keyFile: "/k.pem" } });
    expect(() => natsConnectOptions({ NATS_PASSWORD: "s3cret", NATS_TLS_CERT: "/c.pem" })).toThrow(
      "invalid NATS connection settings: NATS_PASSWORD is set without NATS_USER; NATS_TLS_CERT and NATS_TLS_KEY go together (a client certificate and its key); NATS_TLS_CERT/NATS_TLS_KEY need NATS_TLS_CA (TLS is on only with a CA to check the server against)",
    );
    expect(() => natsConnectOptions({ NATS_USER: "frontend" })).toThrow("invalid NATS connection settings: NATS_USER is set without NATS_PASSWORD");
  });

  it("nats auth - an unknown user, a wrong password and no credentials are refused", async () => {
    const wrong = "not-the-password";
    const attempt = (env: Record<string, string>) => connectBus({ servers: nats.url, name: "intruder", log, ensure: false, env });
    const attempts: Array<Record<string, string>> = [{ NATS_USER: "frontend", NATS_PASSWORD: wrong }, { NATS_USER: "mallory", NATS_PASSWORD: wrong }, {}];
    for (const env of attempts) {
      const error = await attempt(env).then(
        async (b) => {
          await b.close();
          return new Error("connected");
        },
        (err: unknown) => err as Error,
      );
      expect(error.message).toMatch(/authorization violation/i);
      expect(error.message).not.toContain(wrong);
    }
  });

  it("nats auth - the frontend cannot ask for machines, scale workers, delete a stream or purge the models", async () => {
    const frontend = await as("frontend");
    const admin = await as("admin");
    const seen = violations(frontend.nc);
    const heard: string[] = [];
    const tap = admin.nc.subscribe("scale.>", { callback: (_err, m) => void heard.push(m.subject) });
    await admin.nc.flush();
    frontend.nc.publish(subjects.scaleVm, JSON.stringify({ kind: "cpu", reason: "intruder" }));
    await refused(frontend.nc, seen, `publish ${subjects.scaleVm}`);
    frontend.nc.publish(subjects.scaleModel("w1"), "{}");
    await refused(frontend.nc, seen, `publish ${subjects.scaleModel("w1")}`);
    const jsm = await jetstreamManager(frontend.nc, { timeout: 2000 });
    await expect(jsm.streams.delete(streams.queries.name)).rejects.toThrow();
    await refused(frontend.nc, seen, `publish $JS.API.STREAM.DELETE.${streams.queries.name}`);
    await expect(jsm.streams.purge("OBJ_models")).rejects.toThrow();
    await refused(frontend.nc, seen, "publish $JS.API.STREAM.PURGE.OBJ_models");
    // It may not listen to the workers' commands either.
    frontend.nc.subscribe("scale.>", { callback: () => undefined });
    await refused(frontend.nc, seen, "subscription scale.>");
    // Nothing of it happened: the streams are all there, no command was published.
    await admin.nc.flush();
    tap.unsubscribe();
    expect(heard).toEqual([]);
    expect((await admin.jsm.streams.info(streams.queries.name)).config.name).toBe(streams.queries.name);
    expect((await admin.jsm.streams.info(streams.scale.name)).state.messages).toBe(0);
    // And what it needs still works after the refusals: the connection stays open.
    expect((await frontend.jsm.streams.info(streams.events.name)).config.name).toBe(streams.events.name);
  });

  it("nats auth - an executor cannot register models, write the model bucket or publish decisions or registry events", async () => {
    const executor = await as("executor");
    const admin = await as("admin");
    const seen = violations(executor.nc);
    const heard: string[] = [];
    const tap = admin.nc.subscribe(">", { callback: (_err, m) => void heard.push(m.subject) });
    await admin.nc.flush();
    for (const subject of [subjects.decision("model", "w1"), subjects.modelRegistered("intruder"), subjects.modelUnregistered("digits-mlp-s"), subjects.registerModel, subjects.scaleVm, subjects.forecast("digits")]) {
      executor.nc.publish(subject, "{}");
      await refused(executor.nc, seen, `publish ${subject}`);
    }
    await expect(executor.models.putBlob({ name: "intruder.onnx" }, new Uint8Array([1, 2, 3]))).rejects.toThrow();
    expect(seen.some((v) => v.startsWith("publish $O.models."))).toBe(true);
    await admin.nc.flush();
    tap.unsubscribe();
    expect(heard.filter((s) => s.startsWith("decision.") || s.startsWith("registry.") || s.startsWith("$O.") || s === subjects.scaleVm || s.startsWith("forecast."))).toEqual([]);
    expect(await admin.models.info("intruder.onnx")).toBeNull();
    // What it does need: its metrics and state on the bus.
    await executor.js.publish(subjects.workerMetrics("w1"), "{}");
  });

  it("nats auth - the client (your own services) queries and registers, but does not command, decide, read the queues or skip its app's quota", async () => {
    const client = await as("client");
    const seen = violations(client.nc);
    // The admitted subjects are the frontends' (a query a frontend charged to its app's quota); quota changes and demand reports the frontends' and dispatchers'.
    for (const subject of [subjects.queue("digits-mlp-s"), subjects.scaleVm, subjects.decision("vm", "x"), subjects.state("v", "w"), subjects.admitted(subjects.inferApp("digits")), subjects.quotaChanged("digits"), subjects.quotaDemand("p")]) {
      client.nc.publish(subject, "{}");
      await refused(client.nc, seen, `publish ${subject}`);
    }
    // Allowed: a query goes out (nobody answers here: no responders, not a refusal).
    await expect(client.nc.request(subjects.inferApp("digits"), "{}", { timeout: 2000 })).rejects.toThrow(/no responders|503|timeout/i);
    expect(seen.filter((v) => v.includes("infer.") && !v.includes(".admitted"))).toEqual([]);
  });

  it("nats auth - the server accepts the Nomad users' template once rendered", () => {
    const nomad = readFileSync(join(REPO_ROOT, "deploy", "nomad", "nats.nomad.hcl"), "utf8");
    const template = /template \{\n\s+destination\s+= "local\/nats-auth\.conf"[\s\S]*?<<-EOF\n([\s\S]*?)\n\s+EOF/.exec(nomad)?.[1];
    expect(template).toBeDefined();
    const rendered = (template ?? "").replace(/\{\{ with nomadVar "[^"]+" \}\}\{\{ \.(\w+) \}\}\{\{ end \}\}/g, "test-$1");
    expect(rendered).not.toContain("{{");
    const dir = tempDir("nomad-auth");
    writeFileSync(join(dir, "nats-auth.conf"), rendered);
    writeFileSync(join(dir, "nats.conf"), `listen: "127.0.0.1:4222"\ninclude "nats-auth.conf"\n`);
    const checked = spawnSync("nats-server", ["-c", join(dir, "nats.conf"), "-t"], { encoding: "utf8" });
    expect(checked.status, checked.stderr + checked.stdout).toBe(0);
  });
});

const hasOpenssl = spawnSync("sh", ["-c", "command -v openssl"]).status === 0;

describe("nats auth - TLS", () => {
  it("nats auth - openssl is installed (scripts/ensure-deps.sh installs it)", () => {
    expect(hasOpenssl, "openssl is missing: run bash scripts/ensure-deps.sh").toBe(true);
  });

  let dir: string;
  let server: ServerHandle;

  /** A CA, a server certificate for 127.0.0.1 and a client certificate, made with openssl. */
  function makeCertificates(): void {
    const run = (args: string[]): void => {
      const r = spawnSync("openssl", args, { cwd: dir, encoding: "utf8" });
      if (r.status !== 0) throw new Error(`openssl ${args.join(" ")}: ${r.stderr}`);
    };
    run(["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca-key.pem", "-out", "ca.pem", "-days", "1", "-subj", "/CN=sloserve test CA"]);
    writeFileSync(join(dir, "server.ext"), "subjectAltName=IP:127.0.0.1,DNS:localhost\n");
    for (const who of ["server", "client"]) {
      run(["req", "-newkey", "rsa:2048", "-nodes", "-keyout", `${who}-key.pem`, "-out", `${who}.csr`, "-subj", `/CN=${who}`]);
      run(["x509", "-req", "-in", `${who}.csr`, "-CA", "ca.pem", "-CAkey", "ca-key.pem", "-CAcreateserial", "-out", `${who}.pem`, "-days", "1", ...(who === "server" ? ["-extfile", "server.ext"] : [])]);
    }
  }

  beforeAll(async () => {
    dir = tempDir("nats-tls");
    makeCertificates();
    server = await startNats({
      authorization: natsAuthorizationConf(literalNatsPasswords(passwords)),
      tls: { certFile: join(dir, "server.pem"), keyFile: join(dir, "server-key.pem"), caFile: join(dir, "ca.pem"), verify: true },
    });
  });

  afterAll(async () => {
    await server?.stop();
  });

  it("nats auth - TLS - a service connects with the CA and its client certificate, and not without them", async () => {
    expect(natsTlsConf({ certFile: "/s.pem", keyFile: "/k.pem" })).toBe('tls {\n  cert_file: "/s.pem"\n  key_file: "/k.pem"\n}\n');
    const user = { NATS_USER: "executor", NATS_PASSWORD: passwords.executor };
    const tls = { NATS_TLS_CA: join(dir, "ca.pem"), NATS_TLS_CERT: join(dir, "client.pem"), NATS_TLS_KEY: join(dir, "client-key.pem") };
    const bus = await connectBus({ servers: server.url, name: "tls executor", log, env: { ...user, ...tls } });
    try {
      expect(bus.nc.info?.tls_required).toBe(true);
      const ack = await bus.js.publish(subjects.workerMetrics("tls-worker"), "{}");
      expect(ack.stream).toBe(streams.metrics.name);
    } finally {
      await bus.close();
    }
    const fails = async (env: Record<string, string>): Promise<void> => {
      const result = await connectBus({ servers: server.url, name: "tls refused", log, ensure: false, env }).then(
        async (b) => {
          await b.close();
          return "connected";
        },
        () => "refused",
      );
      expect(result, JSON.stringify(Object.keys(env))).toBe("refused");
    };
    await fails(user); // no CA: the server's certificate is not trusted (and no client certificate)
    await fails({ ...user, NATS_TLS_CA: tls.NATS_TLS_CA }); // the server asks for a client certificate
    await fails({ ...tls, NATS_USER: "executor", NATS_PASSWORD: "wrong" }); // TLS does not replace the password
  });
});
