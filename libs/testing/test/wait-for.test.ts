import { describe, expect, it } from "vitest";
import { waitFor } from "../src/index.js";

describe("waitFor", () => {
  it("waitFor - resolves with the first truthy value, tried at once and then every interval", async () => {
    let calls = 0;
    const got = await waitFor("the third call", () => (++calls >= 3 ? { calls } : undefined), { intervalMs: 1 });
    expect(got).toEqual({ calls: 3 });
    expect(await waitFor("a value at once", () => "ready")).toBe("ready");
    // Falsy values are "not yet": false, 0, "", null, undefined.
    const falsy: unknown[] = [false, 0, "", null, undefined];
    expect(await waitFor("past the falsy values", () => falsy.shift() ?? 7, { intervalMs: 1 })).toBe(7);
  });

  it("waitFor - an async condition is awaited", async () => {
    let calls = 0;
    const got = await waitFor("an async value", async () => {
      await new Promise((r) => setTimeout(r, 1));
      return ++calls === 2 ? "done" : false;
    }, { intervalMs: 1 });
    expect(got).toBe("done");
  });

  it("waitFor - on timeout it throws naming what it waited for, the timeout and the last value", async () => {
    let tries = 0;
    const queue = { queued: 3 };
    const started = Date.now();
    const err = await waitFor("the queue to drain", () => (tries++, queue.queued === 0), { timeoutMs: 60, intervalMs: 10 }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(Error);
    expect((err as Error).message).toMatch(/^timed out after 60 ms \(\d+ tries\) waiting for the queue to drain; the last try returned false$/);
    expect(Date.now() - started).toBeGreaterThanOrEqual(55);
    expect(tries).toBeGreaterThan(1);

    // Whichever falsy value it was.
    const zero = await waitFor("a free slot", () => 0, { timeoutMs: 20 }).catch((e: Error) => e.message);
    expect(zero).toMatch(/waiting for a free slot; the last try returned 0$/);
  });

  it("waitFor - a throwing condition is tried again until the timeout; the error says what it last threw", async () => {
    let calls = 0;
    const got = await waitFor("the condition to stop throwing", () => {
      if (++calls < 3) throw new Error(`not yet (${calls})`);
      return calls;
    }, { intervalMs: 1 });
    expect(got).toBe(3);

    const err = (await waitFor("a healthy server", async () => {
      throw new TypeError("fetch failed");
    }, { timeoutMs: 40, intervalMs: 5 }).catch((e: unknown) => e)) as Error;
    expect(err.message).toMatch(/^timed out after 40 ms \(\d+ tries\) waiting for a healthy server; the last try threw TypeError: fetch failed$/);
    expect(err.cause).toBeInstanceOf(TypeError);

    // An expect() inside the condition works the same way: retried, then reported.
    const failed = await waitFor("two items", () => expect([1]).toHaveLength(2), { timeoutMs: 20, intervalMs: 5 }).catch((e: Error) => e.message);
    expect(failed).toMatch(/waiting for two items; the last try threw AssertionError: expected \[ 1 \] to have a length of 2/);
  });

  it("waitFor - a try that never finishes fails at the timeout, with the detail asked for", async () => {
    const started = Date.now();
    const err = await waitFor("a hung request", () => new Promise<boolean>(() => undefined), { timeoutMs: 50, detail: () => ({ sent: 4, answered: 1 }) }).catch((e: Error) => e.message);
    expect(Date.now() - started).toBeLessThan(2_000);
    expect(err).toBe("timed out after 50 ms (1 try) waiting for a hung request; the last try had not finished; { sent: 4, answered: 1 }");
  });

  it("waitFor - a long error or detail is cut short in the message", async () => {
    const err = await waitFor("a short error", () => {
      throw { body: "x".repeat(5_000) };
    }, { timeoutMs: 10, detail: () => ({ log: "y".repeat(5_000) }) }).catch((e: Error) => e.message);
    expect(err.length).toBeLessThan(1_500);
    expect(err).toMatch(/the last try threw \{ body: 'x+…; \{ log: 'y+…$/);
  });
});
