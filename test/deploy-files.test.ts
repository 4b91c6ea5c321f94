import { describe, expect, it } from "vitest";
import { spawnSync } from "node:child_process";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { join } from "node:path";
import { parse as parseYaml } from "yaml";
import { hardwareSchema, natsRoleOfService, natsRoles } from "@sloserve/contracts";
import { NOMAD_EXECUTORS_JOB, NOMAD_WORKER_ID_PREFIX, nomadExecutorGroup } from "@sloserve/providers";
import { REPO_ROOT, natsPasswordEnv } from "@sloserve/stack";

/**
 * The deployment files: docker-compose.yml checked by Debian's docker-compose (`config -q`, then its
 * resolved form read back), deploy/nats.conf by nats-server itself (`-t`), and every Nomad job file
 * under deploy/nomad parsed by HashiCorp's HCL parser (@cdktf/hcl2json: the hcl library built to
 * WebAssembly). Neither Docker nor Nomad runs here; these check what can be checked without them.
 */

// Loaded without its type declarations: they reference the DOM library, whose fetch types would then
// apply to every test file of this project.
const { parse: parseHcl } = createRequire(import.meta.url)("@cdktf/hcl2json") as { parse(filename: string, contents: string): Promise<Record<string, unknown>> };

/** The services that run as processes: services/<name>/src/main.ts runs in runService (the CLI does not). */
const services = readdirSync(join(REPO_ROOT, "services"))
  .filter((s) => {
    const main = join(REPO_ROOT, "services", s, "src", "main.ts");
    return existsSync(main) && readFileSync(main, "utf8").includes("runService(");
  })
  .sort();
const executors = hardwareSchema.options.map((kind) => `executor-${kind}`);

/** The NATS users' passwords that compose and deploy/nats.conf read from the environment (NATS_PASSWORD_<ROLE>, from .env). */
const natsPasswords = Object.fromEntries(natsRoles.map((role) => [natsPasswordEnv(role), `test-${role}`]));

/** The frontend's bootstrap admin key that compose reads from the environment (.env). */
const TEST_ADMIN_KEY = "test-admin-key-0123456789abcdef0123456789";

function run(command: string, args: string[], env: Record<string, string> = {}): { status: number | null; stdout: string; stderr: string } {
  const found = spawnSync("sh", ["-c", `command -v ${command}`]);
  if (found.status !== 0) throw new Error(`${command} is not installed: run scripts/ensure-deps.sh (it installs Debian's ${command === "docker-compose" ? "docker-compose" : "nats-server"})`);
  const result = spawnSync(command, args, { cwd: REPO_ROOT, encoding: "utf8", env: { ...process.env, ...natsPasswords, SLOSERVE_ADMIN_KEY: TEST_ADMIN_KEY, ...env } });
  return { status: result.status, stdout: result.stdout, stderr: result.stderr };
}

interface ComposeService {
  image?: string;
  command?: string[];
  environment?: Record<string, string>;
  /** "source:target:mode" */
  volumes?: string[];
  profiles?: string[];
  build?: { args?: Record<string, string> };
}

describe("docker-compose.yml", () => {
  let resolved: Record<string, ComposeService> | undefined;
  /** The file as docker-compose resolves it (anchors merged, every profile), read once. */
  const config = (): Record<string, ComposeService> => {
    if (resolved) return resolved;
    const out = run("docker-compose", ["--profile", "gpu", "--profile", "inferentia", "config"]);
    expect(out.status, out.stderr).toBe(0);
    resolved = (parseYaml(out.stdout) as { services: Record<string, ComposeService> }).services;
    return resolved;
  };

  it("deploy - docker-compose config -q accepts it", () => {
    const checked = run("docker-compose", ["config", "-q"]);
    expect(checked.status, checked.stderr).toBe(0);
  });

  it("deploy - a three-node NATS JetStream cluster, each node with its own store", () => {
    const all = config();
    const nodes = ["nats-1", "nats-2", "nats-3"];
    const stores = new Set<string>();
    for (const name of nodes) {
      const node = all[name];
      expect(node, name).toBeDefined();
      expect(node?.environment?.NATS_SERVER_NAME).toBe(name);
      const data = node?.volumes?.find((v) => v.split(":")[1] === "/data");
      expect(data, `${name} keeps its JetStream store in a volume`).toBeDefined();
      stores.add(data?.split(":")[0] ?? "");
    }
    expect(stores.size).toBe(3);
    // The routes of deploy/nats.conf name the same three services.
    const conf = readFileSync(join(REPO_ROOT, "deploy", "nats.conf"), "utf8");
    for (const name of nodes) expect(conf).toContain(`nats-route://${name}:6222`);
  });

  it("deploy - Redis keeps an append-only file in a volume", () => {
    const redis = config().redis;
    expect(redis?.command?.join(" ")).toMatch(/--appendonly yes/);
    expect(redis?.volumes?.some((v) => v.split(":")[1] === "/data")).toBe(true);
  });

  it("deploy - every service runs, connected to all three NATS nodes, with three stream replicas", () => {
    const all = config();
    for (const name of services) {
      const service = all[name];
      expect(service, `services/${name} has a compose service`).toBeDefined();
      expect(service?.environment?.SERVICE, name).toBe(name);
      expect(service?.image, `${name} runs the project's one image`).toBe("sloserve:latest");
      expect(service?.environment?.NATS_URL?.split(","), name).toEqual(["nats://nats-1:4222", "nats://nats-2:4222", "nats://nats-3:4222"]);
      expect(service?.environment?.REDIS_URL, name).toBe("redis://redis:6379");
      expect(service?.environment?.JS_REPLICAS, name).toBe("3");
    }
    // One frontend process unless .env says FRONTEND_PROCESSES (Node's cluster, services/frontend processes.ts).
    expect(all.frontend?.environment).toMatchObject({ HTTP_PORT: "8080", GRPC_PORT: "8081", FRONTEND_PROCESSES: "1" });
    // Access control on HTTP and gRPC by default, the admin key from the environment (docs/SECURITY.md).
    expect(all.frontend?.environment).toMatchObject({ AUTH: "true", SLOSERVE_ADMIN_KEY: TEST_ADMIN_KEY });
  });

  it("deploy - NATS users on: each service connects as its own user, the NATS nodes know every password", () => {
    const all = config();
    for (const name of services) {
      const role = natsRoleOfService(name) ?? "";
      expect(all[name]?.environment, name).toMatchObject({ NATS_USER: role, NATS_PASSWORD: `test-${role}` });
    }
    expect(all["vm-autoscaler"]?.environment).toMatchObject({ EXECUTOR_NATS_USER: "executor", EXECUTOR_NATS_PASSWORD: "test-executor" });
    for (const node of ["nats-1", "nats-2", "nats-3"]) {
      expect(all[node]?.environment, node).toMatchObject(natsPasswords);
      expect(all[node]?.volumes?.some((v) => v.split(":")[1] === "/etc/nats/nats-auth.conf"), node).toBe(true);
    }
  });
});

describe("deploy/nats.conf", () => {
  it("deploy - nats-server accepts it as a node of the cluster", () => {
    const checked = run("nats-server", ["-c", "deploy/nats.conf", "-t"], { NATS_SERVER_NAME: "nats-1" });
    expect(checked.status, checked.stderr + checked.stdout).toBe(0);
  });
});

/** hcl2json's shape: blocks are arrays of bodies, labelled blocks are maps of label → array. */
type Body = Record<string, unknown>;
interface Task { name: string; env: Record<string, string>; body: Body }
interface Group { name: string; count: number; body: Body; tasks: Task[] }
interface Job { name: string; file: string; groups: Group[]; locals: Record<string, string> }

const nomadDir = join(REPO_ROOT, "deploy", "nomad");
const nomadFiles = readdirSync(nomadDir).filter((f) => f.endsWith(".nomad.hcl")).sort();

const labelled = (value: unknown): Array<[string, Body]> => Object.entries((value ?? {}) as Record<string, Body[]>).map(([label, bodies]) => [label, bodies[0] as Body]);
const blocks = (value: unknown): Body[] => (value ?? []) as Body[];

let parsedJobs: Promise<Job[]> | undefined;
/** Every job of deploy/nomad, parsed once. */
const readJobs = (): Promise<Job[]> => (parsedJobs ??= parseJobs());

async function parseJobs(): Promise<Job[]> {
  const jobs: Job[] = [];
  for (const file of nomadFiles) {
    const parsed = await parseHcl(file, readFileSync(join(nomadDir, file), "utf8"));
    const locals = Object.assign({}, ...blocks(parsed.locals)) as Record<string, string>;
    for (const [name, job] of labelled(parsed.job)) {
      const groups = labelled(job.group).map(([groupName, group]): Group => ({
        name: groupName,
        count: group.count as number,
        body: group,
        tasks: labelled(group.task).map(([taskName, task]) => ({ name: taskName, env: Object.assign({}, ...blocks(task.env)) as Record<string, string>, body: task })),
      }));
      jobs.push({ name, file, groups, locals });
    }
  }
  return jobs;
}

/** A task's environment: its env block and the templates rendered into it (their text, resolved from locals). */
function environmentOf(job: Job, task: Task): { env: Record<string, string>; templates: string } {
  const templates = blocks(task.body.template)
    .filter((t) => t.env === true)
    .map((t) => String(t.data).replace(/^\$\{local\.([\w-]+)\}$/, (_, name: string) => job.locals[name] ?? ""))
    .join("\n");
  return { env: task.env, templates };
}

describe("deploy/nomad", () => {
  it("deploy - every job file parses with HashiCorp's HCL parser", async () => {
    expect(nomadFiles).toEqual(["executors.nomad.hcl", "nats.nomad.hcl", "redis.nomad.hcl", "sloserve.nomad.hcl"]);
    await expect(parseHcl("broken.nomad.hcl", 'job "x" { group {')).rejects.toThrow(/broken\.nomad\.hcl/);
    const jobs = await readJobs();
    expect(jobs.map((j) => j.name).sort()).toEqual([NOMAD_EXECUTORS_JOB, "sloserve", "sloserve-nats", "sloserve-redis"].sort());
  });

  it("deploy - NATS: three JetStream nodes on distinct hosts, routes from service discovery", async () => {
    const nats = (await readJobs()).find((j) => j.name === "sloserve-nats")!;
    const group = nats.groups.find((g) => g.name === "nats")!;
    expect(group.count).toBe(3);
    expect(blocks(group.body.constraint)).toContainEqual({ operator: "distinct_hosts", value: "true" });
    const conf = String(blocks(group.tasks[0]?.body.template)[0]?.data);
    expect(conf).toMatch(/server_name: "nats-\{\{ env "NOMAD_ALLOC_INDEX" \}\}"/);
    expect(conf).toMatch(/cluster \{[\s\S]*routes: \[[\s\S]*nomadService "sloserve-nats-cluster"/);
    expect(conf).toMatch(/jetstream \{[\s\S]*store_dir/);
    expect(conf).toContain("max_payload: 8388608");
  });

  it("deploy - Redis with its append-only file", async () => {
    const redis = (await readJobs()).find((j) => j.name === "sloserve-redis")!;
    const args = (blocks(redis.groups[0]?.tasks[0]?.body.config)[0]?.args as string[]).join(" ");
    expect(args).toMatch(/--appendonly yes/);
    expect(blocks(redis.groups[0]?.body.ephemeral_disk)[0]).toMatchObject({ sticky: true });
  });

  it("deploy - every service runs with the connection settings it needs", async () => {
    const jobs = await readJobs();
    const seen = new Set<string>();
    for (const job of jobs.filter((j) => j.name === "sloserve" || j.name === NOMAD_EXECUTORS_JOB)) {
      for (const group of job.groups) {
        for (const task of group.tasks) {
          const { env, templates } = environmentOf(job, task);
          const service = env.SERVICE ?? "";
          seen.add(service);
          expect(existsSync(join(REPO_ROOT, "services", service, "src", "main.ts")), `${job.file} ${group.name}: SERVICE=${service}`).toBe(true);
          expect(templates, `${job.file} ${group.name}`).toMatch(/^NATS_URL=\{\{ range .* nomadService "sloserve-nats" \}\}/m);
          expect(templates, `${job.file} ${group.name}`).toMatch(/^REDIS_URL=\{\{ range nomadService "sloserve-redis" \}\}/m);
          expect(templates, `${job.file} ${group.name}`).toMatch(/^JS_REPLICAS=3$/m);
          // Its own NATS user, the password from a Nomad variable (docs/SECURITY.md).
          expect(templates, `${job.file} ${group.name}`).toContain(`NATS_USER=${natsRoleOfService(service) ?? ""}\n`);
          expect(templates, `${job.file} ${group.name}`).toMatch(/^NATS_PASSWORD=\{\{ with nomadVar "nomad\/jobs\/sloserve[\w-]*" \}\}\{\{ \.\w+ \}\}\{\{ end \}\}$/m);
        }
      }
    }
    expect([...seen].sort()).toEqual(services);
    const frontend = jobs.find((j) => j.name === "sloserve")!.groups.find((g) => g.name === "frontend")!;
    expect(frontend.tasks[0]?.env).toMatchObject({ HTTP_PORT: "8080", GRPC_PORT: "8081", AUTH: "true" });
    expect(environmentOf(jobs.find((j) => j.name === "sloserve")!, frontend.tasks[0]!).templates).toMatch(/^SLOSERVE_ADMIN_KEY=\{\{ with nomadVar "nomad\/jobs\/sloserve" \}\}\{\{ \.admin_key \}\}\{\{ end \}\}$/m);
  });

  it("deploy - executors: one scalable group per hardware kind, named as the vm-autoscaler's Nomad provider scales them", async () => {
    const jobs = await readJobs();
    const executorJob = jobs.find((j) => j.name === NOMAD_EXECUTORS_JOB)!;
    expect(executorJob.groups.map((g) => g.name).sort()).toEqual(hardwareSchema.options.map((k) => nomadExecutorGroup(k)).sort());
    for (const kind of hardwareSchema.options) {
      const group = executorJob.groups.find((g) => g.name === nomadExecutorGroup(kind))!;
      expect(group.tasks).toHaveLength(1);
      expect(group.tasks[0]?.env.SERVICE).toBe(`executor-${kind}`);
      expect(executors).toContain(group.tasks[0]?.env.SERVICE);
      // The provider finds its workers by this id: prefix + allocation id.
      expect(group.tasks[0]?.env.WORKER_ID).toBe(`${NOMAD_WORKER_ID_PREFIX}\${NOMAD_ALLOC_ID}`);
      const scaling = blocks(group.body.scaling)[0];
      expect(scaling, group.name).toMatchObject({ enabled: true, min: 0 });
      expect(group.count).toBeLessThanOrEqual(scaling?.max as number);
    }
    // The vm-autoscaler scales that job through Nomad's API.
    const vm = jobs.find((j) => j.name === "sloserve")!.groups.find((g) => g.name === "vm-autoscaler")!;
    expect(vm.tasks[0]?.env).toMatchObject({ PROVIDER: "nomad", NOMAD_JOB: NOMAD_EXECUTORS_JOB });
    expect(Number(vm.tasks[0]?.env.MAX_WORKERS)).toBeLessThanOrEqual(blocks(executorJob.groups.find((g) => g.name === nomadExecutorGroup("cpu"))?.body.scaling)[0]?.max as number);
  });
});
