import { Writable } from "node:stream";
import { describe, expect, it, vi } from "vitest";
import Fastify from "fastify";
import { createLogger } from "@sloserve/bus";
import { childOnFirstUse } from "../src/app.js";

/**
 * The frontend's per-request logger (app.ts childOnFirstUse): pino's child is made only when the
 * request logs, and then logs as the child Fastify would have made (its bindings, the redaction of
 * secrets, the level); a request that logs nothing makes none.
 */

function capture(): { lines: Array<Record<string, unknown>>; stream: Writable } {
  const lines: Array<Record<string, unknown>> = [];
  const stream = new Writable({
    write(chunk: Buffer, _enc, done) {
      for (const line of chunk.toString("utf8").split("\n")) if (line) lines.push(JSON.parse(line) as Record<string, unknown>);
      done();
    },
  });
  return { lines, stream };
}

describe("child logger", () => {
  it("child logger - made on first use, with the bindings and the parent's redaction and level", async () => {
    const { lines, stream } = capture();
    const parent = createLogger("frontend", "info", stream);
    const child = vi.spyOn(parent, "child");
    const log = childOnFirstUse(parent, { reqId: "r1" }, {});
    expect(typeof log.info).toBe("function"); // what Fastify checks of a logger: no child made for it
    expect(child).not.toHaveBeenCalled();
    expect("info" in log).toBe(true); // as the parent answers, still without a child
    expect(Object.getPrototypeOf(log)).toBe(Object.getPrototypeOf(parent));
    const info = childOnFirstUse(parent, { reqId: "r0" }, {}).info;
    expect(childOnFirstUse(parent, { reqId: "r9" }, {}).info).toBe(info); // one method for every request's logger
    expect(child).not.toHaveBeenCalled();
    expect(log.level).toBe("info"); // a field: read from the child, made now
    expect(child).toHaveBeenCalledTimes(1);
    log.debug("not shown");
    log.info({ authorization: "Bearer secret" }, "shown");
    expect(child).toHaveBeenCalledTimes(1);
    log.child({ more: 1 }).warn("nested"); // the child's own child (pino's, inherited: the spy counts it)
    expect(child).toHaveBeenCalledTimes(2);
    await new Promise((r) => setImmediate(r));
    expect(lines.map((l) => [l.msg, l.reqId, l.service])).toEqual([["shown", "r1", "frontend"], ["nested", "r1", "frontend"]]);
    expect(lines[0]?.authorization).toBe("[redacted]");
    expect(lines[1]?.more).toBe(1);
  });

  it("child logger - in Fastify: a request that logs nothing makes no child; one that logs has its reqId", async () => {
    const { lines, stream } = capture();
    const parent = createLogger("frontend", "info", stream);
    const child = vi.spyOn(parent, "child");
    const app = Fastify({ loggerInstance: parent, disableRequestLogging: true, childLoggerFactory: childOnFirstUse, genReqId: () => "q7" });
    app.get("/quiet", async () => ({ ok: true }));
    app.get("/loud", async (req) => {
      req.log.info("hello");
      return { ok: true };
    });
    await app.ready();
    child.mockClear(); // Fastify's own, once at start
    expect((await app.inject({ method: "GET", url: "/quiet" })).statusCode).toBe(200);
    expect(child).not.toHaveBeenCalled();
    expect((await app.inject({ method: "GET", url: "/loud" })).statusCode).toBe(200);
    expect(child).toHaveBeenCalledTimes(1);
    await app.close();
    await new Promise((r) => setImmediate(r));
    expect(lines.filter((l) => l.msg === "hello").map((l) => l.reqId)).toEqual(["q7"]);
  });
});
