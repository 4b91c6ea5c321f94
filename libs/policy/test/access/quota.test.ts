import { describe, expect, it } from "vitest";
import { keyQuotaSubject, type AppQuota } from "@sloserve/contracts";
import { QUOTA_DEFAULTS, QuotaAdmission, TokenBucket, shareQuota, type Admission } from "../../src/access/quota.js";

const quota = (rate_qps: number, burst: number, max_concurrency: number): AppQuota => ({ rate_qps, burst, max_concurrency });
const T0 = 1_700_000_000_000;

describe("quota - token bucket", () => {
  it("quota - starts full, refills at the rate up to its capacity, tells the wait", () => {
    const b = new TokenBucket(2, 3, T0);
    expect([b.tryTake(T0), b.tryTake(T0), b.tryTake(T0), b.tryTake(T0)]).toEqual([true, true, true, false]);
    // Empty at 2 tokens/s: the next one in 500 ms.
    expect(b.waitMs(T0)).toBe(500);
    expect(b.tryTake(T0 + 499)).toBe(false);
    expect(b.tryTake(T0 + 500)).toBe(true);
    // 10 s idle earns 20 tokens, but it holds 3.
    expect(b.available(T0 + 10_500)).toBe(3);
    // Time going back earns nothing.
    expect(b.available(T0)).toBe(3);
  });

  it("quota - new limits keep what was earned, up to the new capacity; a rate of 0 never refills", () => {
    const b = new TokenBucket(10, 10, T0);
    for (let i = 0; i < 10; i++) b.tryTake(T0);
    // 300 ms at 10/s = 3 tokens, then the rate drops to 1/s and the capacity to 2: 2 kept.
    b.setLimits(1, 2, T0 + 300);
    expect(b.available(T0 + 300)).toBe(2);
    b.setLimits(0, 1, T0 + 300);
    expect(b.tryTake(T0 + 300)).toBe(true);
    expect(b.waitMs(T0 + 60_000)).toBe(Infinity);
  });
});

describe("quota - shareQuota", () => {
  // Table: quota, demands (q/s) by process, expected rate / burst / concurrency shares.
  const cases: Array<[string, AppQuota, Record<string, number>, Record<string, [number, number, number]>]> = [
    // Alone: the whole quota, whatever the demand.
    ["one process, idle", quota(10, 20, 4), { f: 0 }, { f: [10, 20, 4] }],
    ["one process, flooding", quota(10, 20, 4), { f: 500 }, { f: [10, 20, 4] }],
    // Demand fits (4 + 0 ≤ 10): the frontend gets 4 + 6/2 = 7, the dispatcher 0 + 3 = 3; burst 20 × 0.7 = 14, 20 × 0.3 = 6;
    // concurrency 4 × 0.7 = 2.8 and 1.2: floors 2 + 1, the spare unit to the larger remainder (0.8): 3 and 1.
    ["demand fits: demand plus an equal part of the rest", quota(10, 20, 4), { f: 4, d: 0 }, { f: [7, 14, 3], d: [3, 6, 1] }],
    // Over (100 + 2 > 10): water-filling, the dispatcher's 2 ≤ 10/2 in full, the frontend the other 8.
    ["over: max-min fair", quota(10, 10, 10), { d: 2, f: 100 }, { f: [8, 8, 8], d: [2, 2, 2] }],
    // Over and both above an equal part: 5 each.
    ["over, both flooding: equal parts", quota(10, 10, 10), { d: 50, f: 100 }, { f: [5, 5, 5], d: [5, 5, 5] }],
    // Over with an idle process: it gets nothing but keeps one token and one slot (the floors).
    ["over, an idle process keeps the floors", quota(10, 10, 3), { d: 0, f: 40 }, { f: [10, 10, 3], d: [0, 1, 1] }],
    // Three equal processes, C = 4: 4/3 each, the spare unit to the first by id (ties).
    ["equal remainders: the spare unit by process id", quota(30, 3, 4), { a: 10, b: 10, c: 10 }, { a: [10, 1, 2], b: [10, 1, 1], c: [10, 1, 1] }],
  ];
  it.each(cases)("quota - %s", (_name, q, demands, expected) => {
    const shares = shareQuota(q, Object.entries(demands).map(([process, demandQps]) => ({ process, demandQps })));
    const got = Object.fromEntries([...shares].map(([p, s]) => [p, [s.rateQps, s.burst, s.maxConcurrency]]));
    expect(got).toEqual(expected);
    // The rates always add up to the quota's.
    expect([...shares.values()].reduce((s, x) => s + x.rateQps, 0)).toBeCloseTo(q.rate_qps, 9);
  });
});

describe("quota - admission in one process", () => {
  const refusal = (a: Admission) => (a.admitted ? undefined : a.refusal);

  it("quota - apps without a quota pass; a burst, then the rate; the refusal names the app, the limit and when to retry", () => {
    const q = new QuotaAdmission("frontend-1", "frontend", T0);
    expect(q.admit("free", T0).admitted).toBe(true);
    q.setQuota("b", quota(2, 3, 100), T0);
    const first = [0, 1, 2, 3].map(() => q.admit("b", T0));
    expect(first.map((a) => a.admitted)).toEqual([true, true, true, false]);
    const r = refusal(first[3]!)!;
    // Empty at 2/s: a token in 500 ms, rounded up to a whole second.
    expect(r).toMatchObject({ app: "b", limit: "rate_qps", retryAfterS: 1 });
    expect(r.error.code).toBe("quota_exceeded");
    expect(r.error.message).toBe("app 'b' is over its quota's rate_qps of 2 queries/s (quota: 2 queries/s with bursts of 3, 100 in flight): retry after 1 s");
    expect(r.error.details).toEqual({ app: "b", limit: "rate_qps", retry_after_s: 1, rate_qps: 2, burst: 3, max_concurrency: 100 });
    // A slow rate: 0.1/s, a token 10 s away.
    q.setQuota("slow", quota(0.1, 1, 1), T0);
    (q.admit("slow", T0) as { ticket: { release(): void } }).ticket.release();
    expect(refusal(q.admit("slow", T0))?.retryAfterS).toBe(10);
  });

  it("quota - concurrency: a slot per admitted query, given back once by its ticket on any outcome", () => {
    const q = new QuotaAdmission("frontend-1", "frontend", T0);
    q.setQuota("b", quota(1000, 1000, 2), T0);
    const a1 = q.admit("b", T0);
    const a2 = q.admit("b", T0);
    const third = refusal(q.admit("b", T0));
    expect(third).toMatchObject({ limit: "max_concurrency", retryAfterS: 1 });
    expect(third?.error.message).toMatch(/app 'b' has 2 queries in flight, its quota's max_concurrency/);
    if (!a1.admitted || !a2.admitted) throw new Error("admitted");
    a1.ticket.release();
    a1.ticket.release(); // a second release changes nothing
    expect(q.shareNow("b", T0)?.inFlight).toBe(1);
    expect(q.admit("b", T0).admitted).toBe(true);
    expect(q.admit("b", T0).admitted).toBe(false);
  });

  it("quota - a changed quota keeps the queries in flight; a removed one frees the app; an old snapshot does not undo a newer change", () => {
    const q = new QuotaAdmission("frontend-1", "frontend", T0);
    q.setQuota("b", quota(10, 10, 1), T0);
    const held = q.admit("b", T0);
    q.setQuota("b", quota(10, 10, 2), T0 + 1);
    expect(q.shareNow("b", T0 + 1)?.inFlight).toBe(1);
    expect(q.admit("b", T0 + 1).admitted).toBe(true);
    q.setQuota("b", undefined, T0 + 2);
    expect(q.quotaOf("b")).toBeUndefined();
    if (held.admitted) held.ticket.release(); // released on a gate that is gone: nothing happens
    // A snapshot read before the removal (at T0 + 1) does not bring the quota back; one read after does.
    q.replaceQuotas(new Map([["b", quota(10, 10, 1)], ["c", quota(5, 5, 5)]]), T0 + 1, T0 + 3);
    expect(q.quotaOf("b")).toBeUndefined();
    expect(q.quotaOf("c")).toEqual(quota(5, 5, 5));
    q.replaceQuotas(new Map([["b", quota(10, 10, 1)]]), T0 + 4, T0 + 5);
    expect(q.quotaOf("b")).toEqual(quota(10, 10, 1));
    expect(q.quotaOf("c")).toBeUndefined();
  });
});

describe("quota - shared among processes", () => {
  const every = QUOTA_DEFAULTS.reportEveryMs;

  /** Processes that exchange their reports every period (a fake clock, reports delivered at once). */
  function fleet(ids: string[], q: AppQuota) {
    const procs = ids.map((id) => new QuotaAdmission(id, id.startsWith("f") ? "frontend" : "dispatcher", T0));
    const exchange = (nowMs: number): void => {
      const reports = procs.map((p) => p.report(nowMs));
      for (const p of procs) for (const r of reports) p.observe(r, nowMs);
    };
    // Running before the quota is set: they have heard each other's (empty) reports.
    exchange(T0 - every);
    for (const p of procs) p.setQuota("b", q, T0);
    return { procs, exchange };
  }

  it("quota - a flood at one process of two: the app gets its rate, not twice it, within the bound", () => {
    // R = 10, B = 5; the frontend offered 100 q/s (one every 10 ms) for 10 s, the dispatcher nothing.
    const q = quota(10, 5, 1000);
    const { procs, exchange } = fleet(["frontend-1", "dispatcher-1"], q);
    const [front] = procs as [QuotaAdmission, QuotaAdmission];
    let admitted = 0;
    for (let t = 0; t < 10_000; t += 10) {
      const now = T0 + t;
      if (t > 0 && t % every === 0) exchange(now);
      const a = front.admit("b", now);
      if (a.admitted) {
        admitted++;
        a.ticket.release();
      }
    }
    // Bound (header): R·T + B + N = 10 × 10 + 5 + 2 = 107, plus R × one period at the first shift, 5: 112.
    // Before the first report the frontend has half: 5 q/s and 2.5 tokens, 2 + 2.5 = 4 admitted in 500 ms;
    // after it, all of it (the dispatcher asks for nothing): 10 × 9.5 = 95 more, 99 (and a token of the refill).
    expect(admitted).toBeLessThanOrEqual(112);
    expect(admitted).toBeGreaterThanOrEqual(99);
    expect(front.shareNow("b", T0 + 10_000)).toMatchObject({ rateQps: 10, burst: 5 });
  });

  it("quota - floods at both: together at most the quota; a silent process is forgotten and its share returns", () => {
    const q = quota(20, 10, 1000);
    const { procs, exchange } = fleet(["frontend-1", "dispatcher-1", "dispatcher-2"], q);
    let admitted = 0;
    for (let t = 0; t < 5_000; t += 5) {
      const now = T0 + t;
      if (t > 0 && t % every === 0) exchange(now);
      for (const p of procs) {
        const a = p.admit("b", now);
        if (a.admitted) {
          admitted++;
          a.ticket.release();
        }
      }
    }
    // R·T + B + N = 20 × 5 + 10 + 3 = 113 (all three start with a third each and flood alike: no shift):
    // 3 × ⌊10/3⌋ = 9 of the buckets, then 20 × 5 = 100 (the first token of each bucket a little later).
    expect(admitted).toBeLessThanOrEqual(113);
    expect(admitted).toBeGreaterThanOrEqual(105);
    // dispatcher-2 stops reporting: after peerTimeoutMs the other two share the quota.
    const [front, d1] = procs as [QuotaAdmission, QuotaAdmission, QuotaAdmission];
    let now = T0 + 5_000;
    for (let k = 0; k * every <= QUOTA_DEFAULTS.peerTimeoutMs; k++) {
      now += every;
      for (let i = 0; i < 50; i++) {
        front.admit("b", now);
        d1.admit("b", now);
      }
      const r1 = front.report(now);
      const r2 = d1.report(now);
      front.observe(r2, now);
      d1.observe(r1, now);
    }
    expect(front.processes()).toBe(2);
    expect(front.shareNow("b", now)?.rateQps).toBeCloseTo(10, 9);
    // A process that says it leaves is dropped at once.
    front.observe({ ...d1.report(now), leaving: true }, now);
    expect(front.processes()).toBe(1);
    // 50 offered in 500 ms: a demand of 100 q/s; alone, it has the whole quota.
    for (let i = 0; i < 50; i++) front.admit("b", now + every);
    expect(front.report(now + every).apps).toEqual({ b: 100 });
    expect(front.shareNow("b", now + every)?.rateQps).toBe(20);
  });

  it("quota - an app within its quota loses nothing while another app floods", () => {
    const { procs, exchange } = fleet(["frontend-1", "dispatcher-1"], quota(5, 5, 1000));
    for (const p of procs) p.setQuota("a", quota(50, 20, 1000), T0);
    const front = procs[0] as QuotaAdmission;
    let refusedA = 0;
    for (let t = 0; t < 10_000; t += 10) {
      const now = T0 + t;
      if (t > 0 && t % every === 0) exchange(now);
      // b: 100 q/s; a: 20 q/s (every 50 ms), well under its 50.
      front.admit("b", now);
      if (t % 50 === 0 && !front.admit("a", now).admitted) refusedA++;
    }
    expect(refusedA).toBe(0);
  });
});

describe("quota - API keys' quotas", () => {
  const K1 = "0123456789ab";
  const K2 = "ba9876543210";
  const refusal = (a: Admission) => (a.admitted ? undefined : a.refusal);

  it("quota - a key over its own quota is refused naming the key, before its app's quota is charged; another key of the app passes", () => {
    const q = new QuotaAdmission("frontend-1", "frontend", T0);
    q.setQuota(keyQuotaSubject(K1), quota(1, 2, 100), T0);
    q.setQuota("a", quota(1, 4, 100), T0);
    const k1 = [0, 1, 2].map(() => q.admitQuery("a", K1, T0));
    expect(k1.map((x) => x.admitted)).toEqual([true, true, false]);
    const r = refusal(k1[2]!)!;
    expect(r).toMatchObject({ app: "a", key: K1, limit: "rate_qps", retryAfterS: 1 });
    expect(r.error.message).toBe(`API key '${K1}' is over its quota's rate_qps of 1 queries/s (quota: 1 queries/s with bursts of 2, 100 in flight): retry after 1 s`);
    expect(r.error.details).toEqual({ key: K1, app: "a", limit: "rate_qps", retry_after_s: 1, rate_qps: 1, burst: 2, max_concurrency: 100 });
    // K1's refusals took nothing from the app: 2 of its 4 tokens are left, for K2 (no quota of its own) and queries without a key.
    expect(q.shareNow("a", T0)?.tokens).toBeCloseTo(2, 9);
    expect(q.admitQuery("a", K2, T0).admitted).toBe(true);
    expect(q.admit("a", T0).admitted).toBe(true);
    // Now the app's quota is empty: K2 refused by the app's, the refusal naming the app and no key.
    const byApp = refusal(q.admitQuery("a", K2, T0))!;
    expect(byApp).toMatchObject({ app: "a", limit: "rate_qps" });
    expect(byApp.key).toBeUndefined();
    expect(byApp.error.message).toMatch(/^app 'a' is over its quota's rate_qps/);
  });

  it("quota - both quotas must admit; a refusal by the app's takes nothing from the key's; the ticket gives both slots back once", () => {
    const q = new QuotaAdmission("frontend-1", "frontend", T0);
    q.setQuota(keyQuotaSubject(K1), quota(1000, 1000, 2), T0);
    q.setQuota("a", quota(1000, 1000, 1), T0);
    const first = q.admitQuery("a", K1, T0);
    if (!first.admitted) throw new Error("admitted");
    expect([q.shareNow(keyQuotaSubject(K1), T0)?.inFlight, q.shareNow("a", T0)?.inFlight]).toEqual([1, 1]);
    // The app is full: refused by it, and the key holds no second slot for it.
    const second = refusal(q.admitQuery("a", K1, T0))!;
    expect(second).toMatchObject({ limit: "max_concurrency" });
    expect(second.key).toBeUndefined();
    expect(second.error.message).toMatch(/^app 'a' has 1 queries in flight/);
    expect(q.shareNow(keyQuotaSubject(K1), T0)).toMatchObject({ inFlight: 1, tokens: 999 });
    first.ticket.release();
    first.ticket.release();
    expect([q.shareNow(keyQuotaSubject(K1), T0)?.inFlight, q.shareNow("a", T0)?.inFlight]).toEqual([0, 0]);
    // The key's own concurrency limit, with the app's lifted.
    q.setQuota("a", undefined, T0);
    const held = [q.admitQuery("a", K1, T0), q.admitQuery("a", K1, T0)];
    expect(held.every((x) => x.admitted)).toBe(true);
    const third = refusal(q.admitQuery("a", K1, T0))!;
    expect(third).toMatchObject({ key: K1, limit: "max_concurrency", retryAfterS: 1 });
    expect(third.error.message).toMatch(new RegExp(`^API key '${K1}' has 2 queries in flight, its quota's max_concurrency`));
    // A key without a quota, and no key, pass freely.
    expect(q.admitQuery("a", K2, T0).admitted).toBe(true);
    expect(q.admitQuery("a", undefined, T0).admitted).toBe(true);
  });

  it("quota - a key's quota is shared among the frontends only: a dispatcher's reports take no part of it", () => {
    const f1 = new QuotaAdmission("frontend-1", "frontend", T0);
    const f2 = new QuotaAdmission("frontend-2", "frontend", T0);
    const d1 = new QuotaAdmission("dispatcher-1", "dispatcher", T0);
    const all = [f1, f2, d1];
    const exchange = (nowMs: number): void => {
      const reports = all.map((p) => p.report(nowMs));
      for (const p of all) for (const r of reports) p.observe(r, nowMs);
    };
    exchange(T0);
    for (const p of [f1, f2]) {
      p.setQuota(keyQuotaSubject(K1), quota(12, 6, 4), T0);
      p.setQuota("a", quota(12, 6, 4), T0);
    }
    d1.setQuota("a", quota(12, 6, 4), T0);
    // Idle: the app's quota in thirds, the key's in halves between the two frontends.
    expect(f1.shareNow("a", T0)).toMatchObject({ rateQps: 4, burst: 2 });
    expect(f1.shareNow(keyQuotaSubject(K1), T0)).toMatchObject({ rateQps: 6, burst: 3, maxConcurrency: 2 });
    // The key's demand goes in the frontends' reports under key:<id>; the dispatcher never holds it.
    for (let i = 0; i < 5; i++) f1.admitQuery("a", K1, T0 + 100);
    const report = f1.report(T0 + 500);
    expect(report.apps).toEqual({ [keyQuotaSubject(K1)]: 10, a: 10 });
    f2.observe(report, T0 + 500);
    d1.observe(report, T0 + 500);
    expect(d1.quotaOf(keyQuotaSubject(K1))).toBeUndefined();
    // f1 asks 10 of the key's 12 q/s: 10 + 2/2 for it, 0 + 2/2 for f2 (with the dispatcher counted it would be 2/3).
    expect(f2.shareNow(keyQuotaSubject(K1), T0 + 500)?.rateQps).toBeCloseTo(1, 9);
    // The app's quota is shared with the dispatcher as before: 2/3 of the rest for f2.
    expect(f2.shareNow("a", T0 + 500)?.rateQps).toBeCloseTo(2 / 3, 9);
  });
});
