import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { spawnSync } from "node:child_process";
import { chmodSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { mockClient } from "aws-sdk-client-mock";
import { DescribeInstancesCommand, EC2Client, RunInstancesCommand, TerminateInstancesCommand, type DescribeInstancesCommandInput, type Instance, type Reservation } from "@aws-sdk/client-ec2";
import { ManualClock } from "@sloserve/contracts";
import { connectBus, createLogger, type Bus } from "@sloserve/bus";
import { startNats, tempDir, type ServerHandle } from "@sloserve/stack";
import { Ec2WorkerProvider, natsSpotNotices, publishSpotNotice, type Ec2WorkerOptions, type ProviderEvent } from "@sloserve/providers";
import { waitFor } from "@sloserve/testing";
import { memoryLogger } from "./support.js";

/**
 * The EC2 provider through the SDK's mock (AWS cannot be reached from here): the exact requests it
 * sends (RunInstances, TerminateInstances, DescribeInstances), how it reads the answers (states,
 * pages, lost instances), the user data it writes (run for real by bash, with a `docker` on PATH that
 * records its arguments), and a spot interruption: the notice comes over a real nats-server as the
 * spot watcher publishes it.
 */

const T0 = 1_800_000_000_000;
const IMAGE = "registry.example.com/sloserve:1.4";
const client = new EC2Client({ region: "us-east-1", credentials: { accessKeyId: "test", secretAccessKey: "test" } });
const ec2 = mockClient(client);

function provider(extra: Partial<Ec2WorkerOptions> = {}): { provider: Ec2WorkerProvider; events: ProviderEvent[]; clock: ManualClock; lines: Array<Record<string, unknown>> } {
  const clock = new ManualClock(T0);
  const { log, lines } = memoryLogger("ec2-test");
  const p = new Ec2WorkerProvider({
    client,
    launchTemplate: { name: "sloserve-worker" },
    cluster: "prod",
    image: IMAGE,
    natsUrl: "nats://nats.internal:4222",
    redisUrl: "redis://redis.internal:6379",
    kindEnv: { cpu: { WORKER_THREADS: "4" } },
    watchEveryMs: 0,
    clock,
    log,
    ...extra,
  });
  const events: ProviderEvent[] = [];
  p.onEvent((e) => events.push(e));
  return { provider: p, events, clock, lines };
}

const decode = (userData: string | undefined): string => Buffer.from(userData ?? "", "base64").toString("utf8");

/** What DescribeInstances answers: the test's instances, two to a page. */
let described: Instance[] = [];
function answerDescribe(): void {
  ec2.on(DescribeInstancesCommand).callsFake((input: DescribeInstancesCommandInput) => {
    const start = input.NextToken ? Number(input.NextToken.replace("page-", "")) : 0;
    const page = described.slice(start, start + 2);
    const reservations: Reservation[] = page.map((instance) => ({ ReservationId: `r-${instance.InstanceId}`, Instances: [instance] }));
    return { Reservations: reservations, NextToken: start + 2 < described.length ? `page-${start + 2}` : undefined };
  });
}

beforeEach(() => {
  ec2.reset();
  described = [];
  answerDescribe();
});

describe("ec2 worker provider", () => {
  it("ec2 - launch on-demand: RunInstances with the launch template, type, user data and tags", async () => {
    ec2.on(RunInstancesCommand).resolves({ Instances: [{ InstanceId: "i-0aaaaaaaaaaaaaaa1", State: { Name: "pending" } }] });
    const { provider: p } = provider();
    const instance = await p.launch({ kind: "cpu", instanceType: "c5.xlarge", reason: "utilisation 92% > 80% on all cpu workers", env: { NOTE: `it's $HOME "x"` } });

    expect(instance).toEqual({
      id: "i-0aaaaaaaaaaaaaaa1",
      provider: "ec2",
      workerId: expect.stringMatching(/^cpu-ec2-[0-9a-f]{8}$/) as string,
      kind: "cpu",
      instanceType: "c5.xlarge",
      market: "on-demand",
      pricePerHour: 0.17,
      launchedAtMs: T0,
      state: "booting",
      endedAtMs: null,
    });
    const calls = ec2.commandCalls(RunInstancesCommand);
    expect(calls).toHaveLength(1);
    const input = calls[0]!.args[0].input;
    const w = instance.workerId;
    expect(input).toEqual({
      LaunchTemplate: { LaunchTemplateName: "sloserve-worker", Version: "$Latest" },
      InstanceType: "c5.xlarge",
      MinCount: 1,
      MaxCount: 1,
      ClientToken: w,
      UserData: expect.any(String) as string,
      TagSpecifications: [
        {
          ResourceType: "instance",
          Tags: [
            { Key: "Name", Value: `sloserve-prod-${w}` },
            { Key: "sloserve:worker-id", Value: w },
            { Key: "sloserve:kind", Value: "cpu" },
            { Key: "sloserve:reason", Value: "utilisation 92% > 80% on all cpu workers" },
            { Key: "sloserve:cluster", Value: "prod" },
          ],
        },
      ],
    });
    expect(input.InstanceMarketOptions).toBeUndefined();
    expect(decode(input.UserData)).toBe(
      [
        "#!/bin/bash",
        `# sloserve worker ${w}: cpu c5.xlarge on-demand, cluster prod.`,
        "# Written by libs/providers (ec2-user-data.ts): starts the executor, which joins NATS and Redis.",
        "set -euo pipefail",
        `IMAGE='${IMAGE}'`,
        `COMMON=(--network host --restart on-failure -e 'NATS_URL=nats://nats.internal:4222' -e 'REDIS_URL=redis://redis.internal:6379' -e 'WORKER_ID=${w}' -e 'LOG_LEVEL=info')`,
        "docker info >/dev/null 2>&1 || systemctl start docker",
        'docker pull "$IMAGE"',
        `docker run -d --name sloserve-executor "\${COMMON[@]}" -e 'SERVICE=executor-cpu' -e 'WORKER_THREADS=4' -e 'NOTE=it'\\''s $HOME "x"' "$IMAGE"`,
        "",
      ].join("\n"),
    );
  });

  it("ec2 - launch spot: one-time spot market options, the spot watcher in the user data, a template by id", async () => {
    ec2.on(RunInstancesCommand).resolves({ Instances: [{ InstanceId: "i-0aaaaaaaaaaaaaaa2", State: { Name: "pending" } }] });
    const { provider: p } = provider({ launchTemplate: { id: "lt-0123456789abcdef0", version: "7" } });
    const instance = await p.launch({ kind: "cpu", instanceType: "c5.2xlarge", market: "spot", reason: "forecast 140 qps in 5 min" });
    expect(instance).toMatchObject({ market: "spot", pricePerHour: 0.12 });
    const input = ec2.commandCalls(RunInstancesCommand)[0]!.args[0].input;
    expect(input.LaunchTemplate).toEqual({ LaunchTemplateId: "lt-0123456789abcdef0", Version: "7" });
    expect(input.InstanceType).toBe("c5.2xlarge");
    expect(input.InstanceMarketOptions).toEqual({ MarketType: "spot", SpotOptions: { SpotInstanceType: "one-time", InstanceInterruptionBehavior: "terminate" } });
    const script = decode(input.UserData);
    expect(script.split("\n").slice(-3)).toEqual([
      `docker run -d --name sloserve-executor "\${COMMON[@]}" -e 'SERVICE=executor-cpu' -e 'WORKER_THREADS=4' "$IMAGE"`,
      'docker run -d --name sloserve-spot-watcher "${COMMON[@]}" "$IMAGE" node --import tsx libs/providers/src/spot-watcher-main.ts',
      "",
    ]);
  });

  it("ec2 - the user data runs: docker gets the executor's and the spot watcher's exact arguments", async () => {
    ec2.on(RunInstancesCommand).resolves({ Instances: [{ InstanceId: "i-0aaaaaaaaaaaaaaa3", State: { Name: "pending" } }] });
    const { provider: p } = provider();
    const instance = await p.launch({ kind: "cpu", instanceType: "c5.xlarge", market: "spot", reason: "test", env: { NOTE: `it's $HOME "x"` } });
    const dir = tempDir("ec2-user-data");
    // A `docker` that writes each call's arguments, one per line in brackets, and succeeds.
    writeFileSync(join(dir, "docker"), `#!/bin/sh\nfor a in "$@"; do printf '[%s]' "$a" >> "$DOCKER_LOG"; done\necho >> "$DOCKER_LOG"\n`);
    chmodSync(join(dir, "docker"), 0o755);
    writeFileSync(join(dir, "user-data.sh"), decode(ec2.commandCalls(RunInstancesCommand)[0]!.args[0].input.UserData));
    const run = spawnSync("bash", [join(dir, "user-data.sh")], { env: { PATH: `${dir}:${process.env.PATH}`, HOME: "/home/test", DOCKER_LOG: join(dir, "docker.log") }, encoding: "utf8" });
    expect(run.stderr).toBe("");
    expect(run.status).toBe(0);
    const w = instance.workerId;
    const common = `[--network][host][--restart][on-failure][-e][NATS_URL=nats://nats.internal:4222][-e][REDIS_URL=redis://redis.internal:6379][-e][WORKER_ID=${w}][-e][LOG_LEVEL=info]`;
    expect(readFileSync(join(dir, "docker.log"), "utf8").split("\n")).toEqual([
      "[info]",
      `[pull][${IMAGE}]`,
      `[run][-d][--name][sloserve-executor]${common}[-e][SERVICE=executor-cpu][-e][WORKER_THREADS=4][-e][NOTE=it's $HOME "x"][${IMAGE}]`,
      `[run][-d][--name][sloserve-spot-watcher]${common}[${IMAGE}][node][--import][tsx][libs/providers/src/spot-watcher-main.ts]`,
      "",
    ]);
  });

  it("ec2 - NATS users on: the user data reads the password and the CA from SSM at boot, and never holds them", async () => {
    ec2.on(RunInstancesCommand).resolves({ Instances: [{ InstanceId: "i-0aaaaaaaaaaaaaaa4", State: { Name: "pending" } }] });
    const { provider: p } = provider({ nats: { user: "executor", passwordParameter: "/sloserve/prod/nats/executor", tlsCaParameter: "/sloserve/prod/nats/ca" } });
    const instance = await p.launch({ kind: "cpu", instanceType: "c5.xlarge", market: "spot", reason: "test" });
    const script = decode(ec2.commandCalls(RunInstancesCommand)[0]!.args[0].input.UserData);
    const dir = tempDir("ec2-user-data-nats");
    // `aws` answers the two parameters as SSM would (the password only with decryption); `docker` logs
    // its arguments and the NATS_PASSWORD it was given in its environment.
    writeFileSync(
      join(dir, "aws"),
      `#!/bin/sh
case "$*" in
  *"--name /sloserve/prod/nats/executor --with-decryption "*) echo 's3cret pass';;
  *"--name /sloserve/prod/nats/ca "*) echo '-----BEGIN CERTIFICATE-----';;
  *) echo "unexpected: $*" >&2; exit 1;;
esac
`,
    );
    writeFileSync(join(dir, "docker"), `#!/bin/sh
for a in "$@"; do printf '[%s]' "$a" >> "$DOCKER_LOG"; done
printf ' password=%s' "$NATS_PASSWORD" >> "$DOCKER_LOG"
echo >> "$DOCKER_LOG"
`);
    chmodSync(join(dir, "aws"), 0o755);
    chmodSync(join(dir, "docker"), 0o755);
    writeFileSync(join(dir, "user-data.sh"), script);
    const etc = join(dir, "etc");
    const run = spawnSync("bash", [join(dir, "user-data.sh")], { env: { PATH: `${dir}:${process.env.PATH}`, DOCKER_LOG: join(dir, "docker.log"), SLOSERVE_ETC: etc }, encoding: "utf8" });
    expect(run.stderr).toBe("");
    expect(run.status).toBe(0);
    expect(script).not.toContain("s3cret");
    expect(readFileSync(join(etc, "nats-ca.pem"), "utf8")).toBe("-----BEGIN CERTIFICATE-----\n");
    const w = instance.workerId;
    const common = `[--network][host][--restart][on-failure][-e][NATS_URL=nats://nats.internal:4222][-e][REDIS_URL=redis://redis.internal:6379][-e][WORKER_ID=${w}][-e][LOG_LEVEL=info][-e][NATS_USER=executor][-e][NATS_PASSWORD][-v][${etc}/nats-ca.pem:/etc/sloserve/nats-ca.pem:ro][-e][NATS_TLS_CA=/etc/sloserve/nats-ca.pem]`;
    expect(readFileSync(join(dir, "docker.log"), "utf8").split("\n")).toEqual([
      "[info] password=s3cret pass",
      `[pull][${IMAGE}] password=s3cret pass`,
      `[run][-d][--name][sloserve-executor]${common}[-e][SERVICE=executor-cpu][-e][WORKER_THREADS=4][${IMAGE}] password=s3cret pass`,
      `[run][-d][--name][sloserve-spot-watcher]${common}[${IMAGE}][node][--import][tsx][libs/providers/src/spot-watcher-main.ts] password=s3cret pass`,
      "",
    ]);
  });

  it("ec2 - refuses a bad spec before sending anything, naming each problem", async () => {
    const { provider: p } = provider();
    await expect(p.launch({ kind: "cpu", instanceType: "c9.mega", reason: "" })).rejects.toThrow(
      /^invalid worker spec: unknown instance type "c9.mega" \(known: .*\); a reason is required \(it is logged and tagged\)$/,
    );
    await expect(p.launch({ kind: "gpu", instanceType: "c5.xlarge", reason: "r", env: { WORKER_ID: "x", "BAD-NAME": "y" } })).rejects.toThrow(
      'invalid worker spec: instance type c5.xlarge is cpu hardware, not gpu; environment variable WORKER_ID is set by the provider; environment variable name "BAD-NAME": use letters, digits and \'_\', not starting with a digit',
    );
    // A kind whose executor the repository (and so the image) lacks.
    const { provider: bare } = provider({ root: tempDir("no-executors") });
    await expect(bare.launch({ kind: "inferentia", instanceType: "inf1.xlarge", reason: "r" })).rejects.toThrow(
      "no executor for inferentia workers: services/executor-inferentia/src/main.ts does not exist in this repository",
    );
    expect(ec2.commandCalls(RunInstancesCommand)).toHaveLength(0);
  });

  it("ec2 - refuses bad options, naming each", () => {
    expect(() => provider({ cluster: "has space", launchTemplate: {} as { name: string }, image: "" })).toThrow(
      "invalid EC2 worker provider options: cluster \"has space\": use 1-64 letters, digits, '_', '.' or '-'; launchTemplate needs a name or an id (one of them); image is required (the project's container image)",
    );
  });

  it("ec2 - terminate sends TerminateInstances; billing ends; an asked termination is no loss", async () => {
    ec2.on(RunInstancesCommand).resolves({ Instances: [{ InstanceId: "i-0bbbbbbbbbbbbbbb1", State: { Name: "pending" } }] });
    ec2.on(TerminateInstancesCommand).resolves({ TerminatingInstances: [{ InstanceId: "i-0bbbbbbbbbbbbbbb1", CurrentState: { Name: "shutting-down" }, PreviousState: { Name: "running" } }] });
    const { provider: p, events, clock } = provider();
    const instance = await p.launch({ kind: "cpu", instanceType: "c5.xlarge", reason: "r" });
    clock.advance(95_000);
    await p.terminate(instance.id, "idle for 5 min");
    expect(ec2.commandCalls(TerminateInstancesCommand).map((c) => c.args[0].input)).toEqual([{ InstanceIds: ["i-0bbbbbbbbbbbbbbb1"] }]);

    clock.advance(30_000);
    described = [{ InstanceId: instance.id, InstanceType: "c5.xlarge", State: { Name: "terminated" }, StateReason: { Code: "Client.UserInitiatedShutdown", Message: "Client.UserInitiatedShutdown: User initiated shutdown" } }];
    const listed = await p.list();
    expect(listed).toEqual([{ ...instance, state: "terminated", endedAtMs: T0 + 95_000 }]);
    expect(events).toEqual([]);
    // Terminating it again asks nothing more.
    await p.terminate(instance.id, "again");
    expect(ec2.commandCalls(TerminateInstancesCommand)).toHaveLength(1);
  });

  it("ec2 - terminate refuses an instance that is not a worker of the cluster", async () => {
    const { provider: p } = provider();
    await expect(p.terminate("i-0ccccccccccccccc9", "r")).rejects.toThrow('ec2: instance "i-0ccccccccccccccc9" is not a worker of cluster prod');
    // It looked first (a worker launched before a restart would be found by its tags).
    expect(ec2.commandCalls(DescribeInstancesCommand)).toHaveLength(1);
    expect(ec2.commandCalls(TerminateInstancesCommand)).toHaveLength(0);
  });

  it("ec2 - list: DescribeInstances by cluster tag, every page; states mapped; workers launched before found by their tags", async () => {
    const launchTime = new Date(T0 - 600_000);
    const tags = (worker: string, kind: string): Instance["Tags"] => [
      { Key: "sloserve:worker-id", Value: worker },
      { Key: "sloserve:kind", Value: kind },
      { Key: "sloserve:cluster", Value: "prod" },
    ];
    described = [
      { InstanceId: "i-01", InstanceType: "c5.xlarge", LaunchTime: launchTime, State: { Name: "pending" }, Tags: tags("cpu-ec2-00000001", "cpu") },
      { InstanceId: "i-02", InstanceType: "c5.xlarge", LaunchTime: launchTime, State: { Name: "running" }, InstanceLifecycle: "spot", Tags: tags("cpu-ec2-00000002", "cpu") },
      { InstanceId: "i-03", InstanceType: "p3.2xlarge", LaunchTime: launchTime, State: { Name: "running" }, Tags: tags("gpu-ec2-00000003", "gpu") },
      { InstanceId: "i-04", InstanceType: "c5.xlarge", LaunchTime: launchTime, State: { Name: "stopping" }, Tags: tags("cpu-ec2-00000004", "cpu") },
      { InstanceId: "i-05", InstanceType: "c5.xlarge", LaunchTime: launchTime, State: { Name: "terminated" }, Tags: tags("cpu-ec2-00000005", "cpu") },
      { InstanceId: "i-06", InstanceType: "t2.micro", LaunchTime: launchTime, State: { Name: "running" }, Tags: [{ Key: "sloserve:cluster", Value: "prod" }] },
    ];
    const { provider: p, events, lines } = provider();
    const listed = await p.list();
    const inputs = ec2.commandCalls(DescribeInstancesCommand).map((c) => c.args[0].input);
    expect(inputs).toEqual([
      { Filters: [{ Name: "tag:sloserve:cluster", Values: ["prod"] }], MaxResults: 100 },
      { Filters: [{ Name: "tag:sloserve:cluster", Values: ["prod"] }], MaxResults: 100, NextToken: "page-2" },
      { Filters: [{ Name: "tag:sloserve:cluster", Values: ["prod"] }], MaxResults: 100, NextToken: "page-4" },
    ]);
    const common = { provider: "ec2", launchedAtMs: T0 - 600_000 };
    expect(listed).toEqual([
      { ...common, id: "i-01", workerId: "cpu-ec2-00000001", kind: "cpu", instanceType: "c5.xlarge", market: "on-demand", pricePerHour: 0.17, state: "booting", endedAtMs: null },
      { ...common, id: "i-02", workerId: "cpu-ec2-00000002", kind: "cpu", instanceType: "c5.xlarge", market: "spot", pricePerHour: 0.06, state: "running", endedAtMs: null },
      { ...common, id: "i-03", workerId: "gpu-ec2-00000003", kind: "gpu", instanceType: "p3.2xlarge", market: "on-demand", pricePerHour: 3.06, state: "running", endedAtMs: null },
      { ...common, id: "i-04", workerId: "cpu-ec2-00000004", kind: "cpu", instanceType: "c5.xlarge", market: "on-demand", pricePerHour: 0.17, state: "draining", endedAtMs: T0 },
      { ...common, id: "i-05", workerId: "cpu-ec2-00000005", kind: "cpu", instanceType: "c5.xlarge", market: "on-demand", pricePerHour: 0.17, state: "terminated", endedAtMs: T0 },
    ]);
    // The untagged one is not a worker, and says so.
    expect(lines.some((l) => l.msg === "instance of the cluster without a valid sloserve:kind tag: not a worker" && l.id === "i-06")).toBe(true);
    // Going away unasked is a loss, seen the first time it is listed so.
    expect(events.map((e) => [e.type, e.id])).toEqual([
      ["lost", "i-04"],
      ["lost", "i-05"],
    ]);
  });

  it("ec2 - lost: terminated without being asked, or gone from DescribeInstances; once each", async () => {
    ec2.on(RunInstancesCommand).resolvesOnce({ Instances: [{ InstanceId: "i-0d1", State: { Name: "pending" } }] }).resolvesOnce({ Instances: [{ InstanceId: "i-0d2", State: { Name: "pending" } }] });
    const { provider: p, events, clock } = provider();
    const a = await p.launch({ kind: "cpu", instanceType: "c5.xlarge", reason: "r" });
    const b = await p.launch({ kind: "cpu", instanceType: "c5.xlarge", reason: "r" });
    // Not listed yet (DescribeInstances is eventually consistent): not lost.
    expect(await p.list()).toMatchObject([{ id: "i-0d1", state: "booting" }, { id: "i-0d2", state: "booting" }]);
    described = [
      { InstanceId: "i-0d1", State: { Name: "running" } },
      { InstanceId: "i-0d2", State: { Name: "running" } },
    ];
    expect(await p.list()).toMatchObject([{ id: "i-0d1", state: "running" }, { id: "i-0d2", state: "running" }]);
    expect(events).toEqual([]);
    clock.advance(60_000);
    described = [{ InstanceId: "i-0d1", State: { Name: "shutting-down" }, StateReason: { Code: "Server.InternalError", Message: "Server.InternalError: Internal error on launch" } }];
    const listed = await p.list();
    expect(listed).toMatchObject([
      { id: a.id, state: "draining", endedAtMs: T0 + 60_000 },
      { id: b.id, state: "terminated", endedAtMs: T0 + 60_000 },
    ]);
    expect(events).toEqual([
      { type: "lost", id: "i-0d1", atMs: T0 + 60_000, reason: "instance shutting-down (Server.InternalError: Server.InternalError: Internal error on launch)" },
      { type: "lost", id: "i-0d2", atMs: T0 + 60_000, reason: "no longer listed by DescribeInstances" },
    ]);
    described = [{ InstanceId: "i-0d1", State: { Name: "terminated" } }];
    await p.list();
    expect(events).toHaveLength(2);
    // Remembered for an hour after the end, then forgotten.
    clock.advance(3_600_001);
    described = [];
    expect(await p.list()).toEqual([]);
  });
});

describe("ec2 spot interruption", () => {
  let nats: ServerHandle;
  let bus: Bus;

  beforeAll(async () => {
    nats = await startNats();
    bus = await connectBus({ servers: nats.url, name: "ec2-test", log: createLogger("ec2-test", "warn") });
  });
  afterAll(async () => {
    await bus?.close();
    await nats?.stop();
  });
  let close: (() => Promise<void>) | undefined;
  afterEach(async () => {
    await close?.();
  });

  it("ec2 - a spot notice on the bus: interruption-notice, draining; then EC2 takes it: lost, for the spot interruption", async () => {
    ec2.on(RunInstancesCommand).resolves({ Instances: [{ InstanceId: "i-0e1", State: { Name: "pending" } }] });
    const { log } = memoryLogger("ec2-test");
    const { provider: p, events, clock } = provider({ spotNotices: natsSpotNotices(bus, log) });
    close = () => p.close();
    const instance = await p.launch({ kind: "cpu", instanceType: "c5.xlarge", market: "spot", reason: "cheap capacity" });
    described = [{ InstanceId: "i-0e1", InstanceType: "c5.xlarge", InstanceLifecycle: "spot", State: { Name: "running" } }];
    expect(await p.list()).toMatchObject([{ id: "i-0e1", state: "running" }]);

    // What the spot watcher on the instance publishes; a notice for another cluster's worker is ignored.
    const notice = { worker: instance.workerId, instanceId: "i-0e1", action: "terminate" as const, terminateAtMs: T0 + 130_000, atMs: T0 + 10_000 };
    await publishSpotNotice(bus, { ...notice, worker: "cpu-ec2-elsewhere", instanceId: "i-0ffff" }, log);
    await publishSpotNotice(bus, notice, log);
    await publishSpotNotice(bus, notice, log);
    await waitFor("the interruption notice", () => events.length > 0);
    await bus.nc.flush();
    expect(events).toEqual([{ type: "interruption-notice", id: "i-0e1", atMs: T0 + 10_000, terminateAtMs: T0 + 130_000 }]);
    expect(await p.list()).toMatchObject([{ id: "i-0e1", state: "draining", endedAtMs: null }]);

    clock.advance(130_000);
    described = [{ InstanceId: "i-0e1", InstanceType: "c5.xlarge", InstanceLifecycle: "spot", State: { Name: "terminated" }, StateReason: { Code: "Server.SpotInstanceTermination", Message: "Server.SpotInstanceTermination: Spot instance termination" } }];
    expect(await p.list()).toMatchObject([{ id: "i-0e1", state: "terminated", endedAtMs: T0 + 130_000 }]);
    expect(events[1]).toEqual({
      type: "lost",
      id: "i-0e1",
      atMs: T0 + 130_000,
      reason: "spot interruption: instance terminated (Server.SpotInstanceTermination: Server.SpotInstanceTermination: Spot instance termination)",
    });
    expect(events).toHaveLength(2);
  });

  it("ec2 - a malformed notice on the bus is logged and dropped", async () => {
    const { log, lines } = memoryLogger("ec2-test");
    const { provider: p, events } = provider({ spotNotices: natsSpotNotices(bus, log) });
    close = () => p.close();
    bus.nc.publish("events.spot.cpu-ec2-x", new TextEncoder().encode('{"worker":"cpu-ec2-x"}'));
    await waitFor("the warning", () => lines.find((l) => l.msg === "ignoring a malformed spot notice"));
    expect(events).toEqual([]);
  });
});
