import { describe, expect, it } from "vitest";
import { hostRoom, localFunctionRoom } from "../../src/scaling/host-room.js";

const GIB = 2 ** 30;

describe("host room (one host's cores and memory shared by its workers and local functions)", () => {
  it("hostRoom - counts the cores and memory the workers there offer, and says which binds", () => {
    // npm start on two cores: the stack's worker offers both; another would oversubscribe them.
    expect(hostRoom({ cores: 2, memoryBytes: 19 * GIB, workers: [{ threads: 2, memoryBytes: 19 * GIB }], next: { threads: 2, memoryBytes: 19 * GIB } })).toEqual({
      room: 0,
      reason: "the host's 2 cores: 2 offered by 1 worker(s), a new one offers 2",
    });
    // One thread of two offered: one more one-thread worker fits, not two.
    expect(hostRoom({ cores: 2, memoryBytes: 16 * GIB, workers: [{ threads: 1, memoryBytes: 8 * GIB }], next: { threads: 1, memoryBytes: 8 * GIB } }).room).toBe(1);
    // Eight cores, memory binds first.
    const byMemory = hostRoom({ cores: 8, memoryBytes: 16 * GIB, workers: [{ threads: 1, memoryBytes: 10 * GIB }], next: { threads: 1, memoryBytes: 4 * GIB } });
    expect(byMemory).toEqual({ room: 1, reason: "the host's 16.0 GiB for workers: 10.0 GiB offered by 1 worker(s), a new one offers 4.0 GiB" });
    // Nothing there yet; a worker offering no memory is bound by cores alone; never negative.
    expect(hostRoom({ cores: 4, memoryBytes: 16 * GIB, workers: [], next: { threads: 2, memoryBytes: 0 } }).room).toBe(2);
    expect(hostRoom({ cores: 2, memoryBytes: GIB, workers: [{ threads: 4, memoryBytes: 2 * GIB }], next: { threads: 1, memoryBytes: GIB } }).room).toBe(0);
  });

  it("localFunctionRoom - a function runs only on a core no worker offers and no other invocation holds", () => {
    expect(localFunctionRoom({ cores: 2, workerThreads: [2], inFlight: 0 })).toEqual({ allowed: false, spareCores: 0, reason: "the host's 2 cores: 2 offered by its 1 worker(s), 0 running local functions" });
    expect(localFunctionRoom({ cores: 2, workerThreads: [1], inFlight: 0 })).toEqual({ allowed: true, spareCores: 1, reason: "1 of the host's 2 cores free for local functions" });
    expect(localFunctionRoom({ cores: 2, workerThreads: [1], inFlight: 1 }).allowed).toBe(false);
    expect(localFunctionRoom({ cores: 8, workerThreads: [2, 2], inFlight: 3 })).toMatchObject({ allowed: true, spareCores: 4 });
    // Workers offering more than the host has: no spare core.
    expect(localFunctionRoom({ cores: 2, workerThreads: [2, 2], inFlight: 0 })).toMatchObject({ allowed: false, spareCores: 0 });
  });
});
