import { describe, expect, it } from "vitest";
import { headers as natsHeaders, type MsgHdrs } from "@nats-io/transport-node";
import { makeHeaders } from "@sloserve/bus";

/**
 * libs/bus makeHeaders: the same headers as nats.js's `append` of each value (the same bytes on the
 * wire, the same look-ups, the same errors), whether a value takes its short way (a name seen before,
 * a plain value) or goes through `append` (a new name, a value with spaces around it, CR or LF).
 */

const encode = (h: MsgHdrs): string => new TextDecoder().decode((h as MsgHdrs & { encode(): Uint8Array }).encode());

function byAppend(values: Record<string, string | number | undefined>): MsgHdrs {
  const h = natsHeaders();
  for (const [k, v] of Object.entries(values)) if (v !== undefined) h.append(k, String(v));
  return h;
}

describe("makeHeaders", () => {
  it("make headers - the bytes and values append gives, for names new and seen and values plain or not", () => {
    const records: Array<Record<string, string | number | undefined>> = [
      { "x-request-id": "r-1", "content-type": "application/x-sloserve-tensors", "x-deadline-ms": 1795861555293, "x-skip": undefined },
      { "x-request-id": "r-2", "content-type": "application/x-sloserve-tensors", "x-deadline-ms": 12.5, "x-slo-latency-ms": 0 },
      { "x-request-id": "  padded  ", "content-type": "", "x-one": "a", "x-inner": "a b\tc", "x-tab": "\tb", "x-unicode": "é ü" },
      { "x-request-id": " ", "Mixed-Case": "v", "x-neg": -1 },
    ];
    for (let round = 0; round < 2; round++) {
      for (const r of records) {
        const made = makeHeaders(r);
        const expected = byAppend(r);
        expect(encode(made)).toBe(encode(expected));
        for (const k of Object.keys(r)) expect(made.get(k)).toBe(expected.get(k));
        expect(made.keys()).toEqual(expected.keys());
      }
    }
  });

  it("make headers - a value with CR or LF and an invalid name throw as append does, seen before or not", () => {
    makeHeaders({ "x-request-id": "ok" });
    for (const bad of ["a\r\nx-evil: 1", "a\nb", "a\rb"]) {
      expect(() => makeHeaders({ "x-request-id": bad })).toThrow(/\\r or \\n/);
      expect(() => makeHeaders({ "x-never-seen": bad })).toThrow(/\\r or \\n/);
    }
    expect(() => makeHeaders({ "bad:name": "v" })).toThrow(/not a valid character/);
    expect(() => makeHeaders({ "bad:name": "v" })).toThrow(/not a valid character/);
  });
});
