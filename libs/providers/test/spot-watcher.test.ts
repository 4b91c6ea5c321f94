import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { ManualClock, spotNoticeSchema, streams, subjects, type SpotNotice } from "@sloserve/contracts";
import { connectBus, createLogger, type Bus } from "@sloserve/bus";
import { startNats, startScript, type ServerHandle } from "@sloserve/stack";
import { SpotWatcher, natsSpotNotices, type InstanceAction } from "@sloserve/providers";
import { startImds } from "./imds-emulator.js";
import { waitFor } from "@sloserve/testing";
import { memoryLogger } from "./support.js";

/**
 * The spot watcher against a real HTTP server that answers like EC2's instance metadata service
 * (IMDSv2), and the spot-watcher process publishing on a real nats-server.
 */

const T0 = 1_800_000_000_000;
const NOTICE = { action: "terminate", time: "2027-01-15T08:02:00Z" };

describe("spot watcher", () => {
  let imds: Awaited<ReturnType<typeof startImds>>;
  let watcher: SpotWatcher | undefined;

  beforeAll(async () => {
    imds = await startImds();
  });
  afterEach(() => {
    watcher?.stop();
    watcher = undefined;
    imds.setNotice(null);
    imds.requests.length = 0;
  });
  afterAll(async () => {
    await imds.close();
  });

  it("spot watcher - polls with one IMDSv2 token, sees the notice and calls back once", async () => {
    const clock = new ManualClock(T0);
    const notices: Array<InstanceAction & { atMs: number }> = [];
    const { log } = memoryLogger("spot-test");
    watcher = new SpotWatcher({ imdsUrl: imds.url, everyMs: 20, clock, log, onNotice: (n) => void notices.push(n) });
    watcher.start();
    // A few polls without a notice (404): nothing happens.
    await waitFor("three polls", () => imds.requests.filter((r) => r.url.endsWith("/instance-action")).length >= 3);
    expect(notices).toEqual([]);
    clock.set(T0 + 5_000);
    imds.setNotice(NOTICE);
    await waitFor("the notice", () => notices.length === 1);
    expect(notices[0]).toEqual({ action: "terminate", terminateAtMs: Date.parse("2027-01-15T08:02:00Z"), atMs: T0 + 5_000 });

    // Polling stops after the notice: it is given once. (A pause of ~7 polling periods: no event says
    // "no more polls".)
    const polls = imds.requests.length;
    await new Promise((r) => setTimeout(r, 150));
    expect(imds.requests.length).toBe(polls);
    expect(notices).toHaveLength(1);

    // One token (PUT with the TTL header), then GETs carrying it.
    const [first, ...rest] = imds.requests;
    expect(first).toMatchObject({ method: "PUT", url: "/latest/api/token" });
    expect(first?.headers["x-aws-ec2-metadata-token-ttl-seconds"]).toBe("21600");
    expect(rest.length).toBeGreaterThanOrEqual(4);
    for (const request of rest) {
      expect(request).toMatchObject({ method: "GET", url: "/latest/meta-data/spot/instance-action" });
      expect(request.headers["x-aws-ec2-metadata-token"]).toBe("token-1");
    }
  });

  it("spot watcher - renews a rejected token and goes on", async () => {
    const clock = new ManualClock(T0);
    const notices: InstanceAction[] = [];
    const { log } = memoryLogger("spot-test");
    watcher = new SpotWatcher({ imdsUrl: imds.url, everyMs: 20, clock, log, onNotice: (n) => void notices.push(n) });
    watcher.start();
    await waitFor("a poll", () => imds.requests.some((r) => r.method === "GET"));
    imds.expireTokens();
    await waitFor("a second token", () => imds.requests.filter((r) => r.method === "PUT").length === 2);
    imds.setNotice(NOTICE);
    await waitFor("the notice", () => notices.length === 1);
    // After the 401, the same GET again with the new token.
    const rejected = imds.requests.findIndex((r, i) => i > 0 && r.method === "PUT");
    expect(imds.requests[rejected - 1]?.headers["x-aws-ec2-metadata-token"]).not.toBe(imds.requests[rejected + 1]?.headers["x-aws-ec2-metadata-token"]);
    expect(imds.requests[rejected + 1]).toMatchObject({ method: "GET", url: "/latest/meta-data/spot/instance-action" });
    const renewed = imds.requests[rejected + 1]?.headers["x-aws-ec2-metadata-token"];
    for (const request of imds.requests.slice(rejected + 1)) expect(request.headers["x-aws-ec2-metadata-token"]).toBe(renewed);
  });

  it("spot watcher - a malformed instance action is logged and polling goes on", async () => {
    const notices: InstanceAction[] = [];
    const { log, lines } = memoryLogger("spot-test");
    watcher = new SpotWatcher({ imdsUrl: imds.url, everyMs: 20, clock: new ManualClock(T0), log, onNotice: (n) => void notices.push(n) });
    imds.setNotice('{"action":"explode","time":"soon"}');
    watcher.start();
    await waitFor("a warning", () => lines.find((l) => l.msg === "spot watcher: instance metadata poll failed; trying again"));
    const warning = lines.find((l) => l.msg === "spot watcher: instance metadata poll failed; trying again") as { err: { message: string } };
    expect(warning.err.message).toContain("GET /latest/meta-data/spot/instance-action: unexpected body");
    expect(notices).toEqual([]);
    imds.setNotice({ action: "stop", time: "2027-01-15T08:02:00Z" });
    await waitFor("the notice", () => notices.length === 1);
    expect(notices[0]?.action).toBe("stop");
  });

  it("spot watcher - reads the instance id", async () => {
    const { log } = memoryLogger("spot-test");
    watcher = new SpotWatcher({ imdsUrl: imds.url, clock: new ManualClock(T0), log, onNotice: () => undefined });
    await expect(watcher.instanceId()).resolves.toBe("i-0123456789abcdef0");
  });

  it("spot watcher - refuses bad options, naming each", () => {
    const { log } = memoryLogger("spot-test");
    expect(() => new SpotWatcher({ imdsUrl: "169.254.169.254", everyMs: 0, tokenTtlS: 30_000, clock: new ManualClock(T0), log, onNotice: () => undefined })).toThrow(
      'invalid spot watcher options: imdsUrl must be an http URL, got "169.254.169.254"; everyMs must be > 0, got 0; tokenTtlS must be an integer in 1..21600, got 30000',
    );
  });
});

describe("spot watcher process", () => {
  let nats: ServerHandle;
  let bus: Bus;
  let imds: Awaited<ReturnType<typeof startImds>>;

  beforeAll(async () => {
    nats = await startNats();
    bus = await connectBus({ servers: nats.url, name: "spot-test", log: createLogger("spot-test", "warn") });
    imds = await startImds("i-0fedcba9876543210");
  });
  afterAll(async () => {
    await bus?.close();
    await imds?.close();
    await nats?.stop();
  });

  it("spot watcher process - publishes the notice on events.spot.<worker>, kept in the EVENTS stream", async () => {
    const received: SpotNotice[] = [];
    const { log } = memoryLogger("spot-test");
    const subscription = natsSpotNotices(bus, log)((notice) => received.push(notice));
    const watcher = await startScript("spot-watcher", "libs/providers/src/spot-watcher-main.ts", {
      NATS_URL: nats.url,
      WORKER_ID: "cpu-ec2-0a1b2c3d",
      IMDS_URL: imds.url,
      SPOT_POLL_MS: "50",
      LOG_LEVEL: "info",
    });
    try {
      expect(watcher.info).toMatchObject({ worker: "cpu-ec2-0a1b2c3d", instanceId: "i-0fedcba9876543210", everyMs: 50 });
      await waitFor("a poll", () => imds.requests.some((r) => r.url.endsWith("/instance-action")));
      expect(received).toEqual([]);
      imds.setNotice(NOTICE);
      await waitFor("the notice on the bus", () => received.length === 1);
      expect(received[0]).toMatchObject({ worker: "cpu-ec2-0a1b2c3d", instanceId: "i-0fedcba9876543210", action: "terminate", terminateAtMs: Date.parse(NOTICE.time) });
      const stored = await bus.jsm.streams.getMessage(streams.events.name, { last_by_subj: subjects.spotNotice("cpu-ec2-0a1b2c3d") });
      expect(spotNoticeSchema.parse(stored?.json())).toEqual(received[0]);
    } finally {
      await watcher.stop();
      await subscription.close();
    }
    expect(watcher.process.exitCode).toBe(0);
  });

  it("spot watcher process - refuses to start where no metadata service answers", async () => {
    const closed = await startImds();
    const url = closed.url;
    await closed.close();
    await expect(startScript("spot-watcher", "libs/providers/src/spot-watcher-main.ts", { NATS_URL: nats.url, WORKER_ID: "cpu-ec2-0a1b2c3d", IMDS_URL: url, LOG_LEVEL: "info" })).rejects.toThrow(
      `no instance metadata service at ${url} (is this an EC2 instance?)`,
    );
  });
});
