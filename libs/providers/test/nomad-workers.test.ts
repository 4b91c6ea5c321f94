import { afterEach, describe, expect, it } from "vitest";
import { ManualClock } from "@sloserve/contracts";
import { NomadWorkerProvider, type NomadWorkerOptions, type ProviderEvent } from "@sloserve/providers";
import { startFakeNomad, type FakeNomad } from "./fake-nomad.js";
import { memoryLogger } from "./support.js";
import type { RecordedRequest } from "./support.js";

/**
 * The Nomad provider against a small fake Nomad on loopback (fake-nomad.ts) that records every
 * request: the exact method, path, headers and JSON bodies it sends, how it maps allocations to
 * workers, and what it does when Nomad stops the wrong allocation, loses one, or cannot place one.
 */

const T0 = 1_800_000_000_000;
const JOB = "sloserve-executor";
const TOKEN = "3f4c2d1e-aaaa-bbbb-cccc-0123456789ab";
let nomad: FakeNomad | undefined;
let provider: NomadWorkerProvider | undefined;

afterEach(async () => {
  await provider?.close();
  await nomad?.close();
  provider = undefined;
  nomad = undefined;
});

async function setUp(extra: Partial<NomadWorkerOptions> = {}, initial = 1): Promise<{ nomad: FakeNomad; provider: NomadWorkerProvider; events: ProviderEvent[]; clock: ManualClock; lines: Array<Record<string, unknown>> }> {
  const clock = new ManualClock(T0);
  nomad = await startFakeNomad({ token: TOKEN, now: () => clock.now(), jobs: [{ id: JOB, namespace: "serving", groups: { cpu: initial, gpu: 0 } }] });
  const { log, lines } = memoryLogger("nomad-test");
  provider = new NomadWorkerProvider({
    address: nomad.url,
    token: TOKEN,
    namespace: "serving",
    groups: { cpu: { job: JOB, group: "cpu", instanceType: "c5.xlarge" } },
    pollEveryMs: 20,
    watchEveryMs: 0,
    clock,
    log,
    ...extra,
  });
  const events: ProviderEvent[] = [];
  provider.onEvent((e) => events.push(e));
  return { nomad, provider, events, clock, lines };
}

/** A recorded request as the test compares it: method, path and query, Nomad's headers, the JSON body. */
function shape(r: RecordedRequest): { method: string; url: string; token: unknown; contentType: unknown; body: unknown } {
  return { method: r.method, url: r.url, token: r.headers["x-nomad-token"], contentType: r.headers["content-type"], body: r.body === "" ? undefined : (JSON.parse(r.body) as unknown) };
}
const get = (url: string): ReturnType<typeof shape> => ({ method: "GET", url, token: TOKEN, contentType: undefined, body: undefined });
const post = (url: string, body?: unknown): ReturnType<typeof shape> => ({ method: "POST", url, token: TOKEN, contentType: body === undefined ? undefined : "application/json", body });

describe("nomad worker provider", () => {
  it("nomad - launch scales the group up by one and takes the allocation its evaluation placed", async () => {
    const { nomad, provider, clock } = await setUp();
    const [existing] = nomad.allocations;
    clock.advance(5_000);
    const instance = await provider.launch({ kind: "cpu", instanceType: "c5.xlarge", reason: "utilisation 91% on all cpu workers" });

    expect(nomad.requests.map(shape)).toEqual([
      get(`/v1/job/${JOB}?namespace=serving`),
      post(`/v1/job/${JOB}/scale?namespace=serving`, {
        Count: 2,
        Target: { Group: "cpu" },
        Message: "sloserve: launch a cpu worker: utilisation 91% on all cpu workers",
        Meta: { "sloserve.action": "launch", "sloserve.kind": "cpu", "sloserve.reason": "utilisation 91% on all cpu workers" },
      }),
      get(`/v1/job/${JOB}/allocations?namespace=serving`),
    ]);
    const placed = nomad.allocations.find((a) => a.ID === instance.id)!;
    expect(placed.Name).toBe(`${JOB}.cpu[1]`);
    expect(instance).toEqual({
      id: placed.ID,
      provider: "nomad",
      workerId: `nomad-${placed.ID}`,
      kind: "cpu",
      instanceType: "c5.xlarge",
      market: "on-demand",
      pricePerHour: 0.17,
      launchedAtMs: T0 + 5_000,
      state: "booting",
      endedAtMs: null,
    });
    expect(nomad.count(JOB, "cpu", "serving")).toBe(2);

    // The client starts it; the allocation that was there before is a worker too (found, not launched here).
    nomad.setClientStatus(instance.id, "running");
    expect(await provider.list()).toEqual([
      { ...instance, id: existing!.ID, workerId: `nomad-${existing!.ID}`, launchedAtMs: T0, state: "running" },
      { ...instance, state: "running" },
    ]);
    expect(nomad.requests.at(-1)).toMatchObject({ method: "GET", url: `/v1/job/${JOB}/allocations?namespace=serving` });
  });

  it("nomad - launches one at a time: each reads the count the previous one wrote", async () => {
    const { nomad, provider } = await setUp();
    const [a, b] = await Promise.all([
      provider.launch({ kind: "cpu", instanceType: "c5.xlarge", reason: "one" }),
      provider.launch({ kind: "cpu", instanceType: "c5.xlarge", reason: "two" }),
    ]);
    expect(a!.id).not.toBe(b!.id);
    expect(nomad.scalingEvents(JOB, "serving").map((e) => e.count)).toEqual([2, 3]);
    expect(nomad.count(JOB, "cpu", "serving")).toBe(3);
  });

  it("nomad - terminate scales down by one; when Nomad's scale-down stopped that allocation, nothing more", async () => {
    const { nomad, provider, events, clock } = await setUp();
    const instance = await provider.launch({ kind: "cpu", instanceType: "c5.xlarge", reason: "r" });
    nomad.setClientStatus(instance.id, "running");
    nomad.requests.length = 0;
    clock.advance(120_000);
    await provider.terminate(instance.id, "idle for 5 min");
    expect(nomad.requests.map(shape)).toEqual([
      get(`/v1/job/${JOB}?namespace=serving`),
      post(`/v1/job/${JOB}/scale?namespace=serving`, {
        Count: 1,
        Target: { Group: "cpu" },
        Message: `sloserve: terminate worker nomad-${instance.id}: idle for 5 min`,
        Meta: { "sloserve.action": "terminate", "sloserve.allocation": instance.id, "sloserve.reason": "idle for 5 min" },
      }),
      get(`/v1/job/${JOB}/allocations?namespace=serving`),
    ]);
    expect(nomad.allocations.find((a) => a.ID === instance.id)).toMatchObject({ DesiredStatus: "stop", ClientStatus: "complete" });
    expect((await provider.list()).find((i) => i.id === instance.id)).toMatchObject({ state: "terminated", endedAtMs: T0 + 120_000 });
    expect(events).toEqual([]);
  });

  it("nomad - terminate stops the allocation when the scale-down stopped another; Nomad's churn is no loss", async () => {
    const { nomad, provider, events, lines } = await setUp({}, 1);
    const a = await provider.launch({ kind: "cpu", instanceType: "c5.xlarge", reason: "r" });
    const b = await provider.launch({ kind: "cpu", instanceType: "c5.xlarge", reason: "r" });
    for (const x of nomad.allocations) nomad.setClientStatus(x.ID, "running");
    nomad.requests.length = 0;
    // `a` is cpu[1], `b` cpu[2]: a scale-down stops cpu[2] first.
    await provider.terminate(a.id, "idle");
    expect(nomad.requests.map(shape)).toEqual([
      get(`/v1/job/${JOB}?namespace=serving`),
      post(`/v1/job/${JOB}/scale?namespace=serving`, {
        Count: 2,
        Target: { Group: "cpu" },
        Message: `sloserve: terminate worker nomad-${a.id}: idle`,
        Meta: { "sloserve.action": "terminate", "sloserve.allocation": a.id, "sloserve.reason": "idle" },
      }),
      get(`/v1/job/${JOB}/allocations?namespace=serving`),
      post(`/v1/allocation/${a.id}/stop?namespace=serving`),
    ]);
    // Nomad stopped b (scale-down) and a (our stop), and put a replacement of a in its place: the count is right.
    expect(nomad.count(JOB, "cpu", "serving")).toBe(2);
    const replacement = nomad.allocations.find((x) => x.Name === `${JOB}.cpu[1]` && x.DesiredStatus === "run")!;
    expect(replacement.ID).not.toBe(a.id);
    const listed = await provider.list();
    // (Listed by launch time, then id: all four started at T0 here.)
    expect(listed.map((i) => [i.id, i.state])).toEqual(
      [
        [nomad.allocations[0]!.ID, "running"],
        [a.id, "terminated"],
        [b.id, "terminated"],
        [replacement.ID, "booting"],
      ].sort((p, q) => p[0]!.localeCompare(q[0]!)),
    );
    // b was stopped by Nomad on purpose: logged, not a loss (the count is what was asked).
    expect(events).toEqual([]);
    expect(lines.some((l) => l.msg === "allocation stopped by Nomad" && l.id === b.id)).toBe(true);
  });

  it("nomad - lost: an allocation that fails, is lost, or disappears; once each", async () => {
    const { nomad, provider, events, clock } = await setUp({}, 3);
    const [x, y, z] = nomad.allocations;
    await provider.list();
    clock.advance(10_000);
    nomad.setClientStatus(x!.ID, "failed", "Failed tasks");
    nomad.setClientStatus(y!.ID, "lost", "alloc is lost since its node is down");
    nomad.collect(z!.ID);
    const listed = await provider.list();
    expect(listed.map((i) => [i.id, i.state, i.endedAtMs])).toEqual(
      [
        [x!.ID, "terminated", T0 + 10_000],
        [y!.ID, "terminated", T0 + 10_000],
        [z!.ID, "terminated", T0 + 10_000],
      ].sort((p, q) => String(p[0]).localeCompare(String(q[0]))),
    );
    expect(events).toEqual([
      { type: "lost", id: x!.ID, atMs: T0 + 10_000, reason: "allocation failed (Failed tasks)" },
      { type: "lost", id: y!.ID, atMs: T0 + 10_000, reason: "allocation lost (alloc is lost since its node is down)" },
      { type: "lost", id: z!.ID, atMs: T0 + 10_000, reason: "allocation no longer listed by Nomad" },
    ]);
    await provider.list();
    expect(events).toHaveLength(3);
    // Remembered an hour after the end, then forgotten.
    clock.advance(3_600_001);
    expect((await provider.list()).map((i) => i.id)).toEqual([x!.ID, y!.ID].sort());
    nomad.collect(x!.ID);
    nomad.collect(y!.ID);
    expect(await provider.list()).toEqual([]);
  });

  it("nomad - no room: no allocation placed in time, the count goes back and the launch fails", async () => {
    const { nomad, provider } = await setUp({ placementTimeoutMs: 100 });
    nomad.blockPlacements = true;
    await expect(provider.launch({ kind: "cpu", instanceType: "c5.xlarge", reason: "r" })).rejects.toThrow(
      `nomad: ${JOB}/cpu placed no allocation within 100 ms (no room in the cluster?); count set back to 1`,
    );
    const scales = nomad.requests.filter((r) => r.url.includes("/scale")).map(shape);
    expect(scales).toHaveLength(2);
    expect(scales[1]).toEqual(
      post(`/v1/job/${JOB}/scale?namespace=serving`, {
        Count: 1,
        Target: { Group: "cpu" },
        Message: expect.stringMatching(/^sloserve: launch abandoned: evaluation [0-9a-f-]{36} placed no allocation within 100 ms$/) as string,
        Meta: { "sloserve.action": "launch-abandoned", "sloserve.kind": "cpu" },
      }),
    );
    expect(nomad.count(JOB, "cpu", "serving")).toBe(1);
  });

  it("nomad - clear errors: a rejected token, a missing group, a kind or type it does not run, bad options", async () => {
    const { nomad, provider, clock } = await setUp();
    const { log } = memoryLogger("nomad-test");
    const wrongToken = new NomadWorkerProvider({ address: nomad.url, token: "nope", namespace: "serving", groups: { cpu: { job: JOB, group: "cpu", instanceType: "c5.xlarge" } }, watchEveryMs: 0, clock, log });
    await expect(wrongToken.list()).rejects.toThrow(`nomad: GET /v1/job/${JOB}/allocations: HTTP 403 Permission denied`);
    await wrongToken.close();
    const noGroup = new NomadWorkerProvider({ address: nomad.url, token: TOKEN, namespace: "serving", groups: { cpu: { job: JOB, group: "cpu-big", instanceType: "c5.xlarge" } }, watchEveryMs: 0, clock, log });
    await expect(noGroup.launch({ kind: "cpu", instanceType: "c5.xlarge", reason: "r" })).rejects.toThrow(`nomad: job ${JOB} has no group cpu-big (groups: cpu, gpu)`);
    await noGroup.close();
    await expect(provider.launch({ kind: "gpu", instanceType: "p3.2xlarge", reason: "r" })).rejects.toThrow("nomad: no job group runs gpu workers (configured: cpu)");
    await expect(provider.launch({ kind: "cpu", instanceType: "c5.2xlarge", market: "spot", reason: "r" })).rejects.toThrow(
      `nomad: group ${JOB}/cpu runs c5.xlarge on-demand slots, not c5.2xlarge spot`,
    );
    await expect(provider.terminate("no-such-alloc", "r")).rejects.toThrow('nomad: allocation "no-such-alloc" is not a worker of the configured groups');
    expect(nomad.requests.filter((r) => r.method === "POST")).toEqual([]);
    expect(() => new NomadWorkerProvider({ address: "nomad:4646", groups: { cpu: { job: JOB, group: "cpu", instanceType: "c9.mega" } }, pollEveryMs: 0, clock, log })).toThrow(
      'invalid Nomad worker provider options: address must be Nomad\'s http(s)://host:port, got "nomad:4646"; groups.cpu: unknown instance type "c9.mega"; pollEveryMs must be > 0, got 0',
    );
  });
});
