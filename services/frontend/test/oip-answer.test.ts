import { describe, expect, it } from "vitest";
import Fastify from "fastify";
import type { Tensor } from "@sloserve/contracts";
import { sendOipAnswer } from "../src/oip-http.js";

/**
 * The answers of the Open Inference Protocol over HTTP as they leave the frontend (a real Fastify
 * instance, injected requests): JSON, a small binary answer (one buffer), and a large one (ocr-rec's
 * size: written in pieces, straight to the response) whose bytes, lengths and headers must be the
 * same as if it had been concatenated, with the onResponse hooks run.
 */

function floats(n: number, seed: number): Float32Array {
  const a = new Float32Array(n);
  for (let i = 0; i < n; i++) a[i] = Math.sin(seed + i);
  return a;
}

async function answer(outputs: Tensor[], binary: boolean): Promise<{ status: number; headers: Record<string, unknown>; body: Buffer; responded: number[] }> {
  const app = Fastify();
  // The frontend's request metrics come from an onResponse hook: it must run for every answer.
  const responded: number[] = [];
  app.addHook("onResponse", async (_req, reply) => {
    responded.push(reply.statusCode);
  });
  app.get("/", (_req, reply) => sendOipAnswer(reply.header("x-request-id", "r1"), { model_name: "m", id: "q1" }, outputs, () => binary));
  const res = await app.inject({ method: "GET", url: "/" });
  await app.close();
  return { status: res.statusCode, headers: res.headers, body: res.rawPayload, responded };
}

describe("oip answer", () => {
  for (const [what, n] of [["small", 10], ["large (1 MB, written in pieces)", 40 * 6625]] as const) {
    it(`oip answer - a ${what} binary answer: the JSON header, then each output's bytes, lengths in the headers`, async () => {
      const a = floats(n, 1);
      const b = floats(7, 2);
      const res = await answer([{ name: "a", datatype: "FP32", shape: [1, n], data: a }, { name: "b", datatype: "FP32", shape: [7], data: b }], true);
      expect(res.status).toBe(200);
      expect(res.responded).toEqual([200]);
      expect(res.headers["x-request-id"]).toBe("r1");
      expect(res.headers["content-type"]).toBe("application/octet-stream");
      const headerLength = Number(res.headers["inference-header-content-length"]);
      expect(Number(res.headers["content-length"])).toBe(res.body.length);
      const header = JSON.parse(res.body.subarray(0, headerLength).toString("utf8")) as { id: string; outputs: Array<{ name: string; parameters: { binary_data_size: number } }> };
      expect(header.id).toBe("q1");
      expect(header.outputs.map((o) => [o.name, o.parameters.binary_data_size])).toEqual([["a", n * 4], ["b", 28]]);
      expect(res.body.length).toBe(headerLength + n * 4 + 28);
      const bytesOf = (x: Float32Array): Buffer => Buffer.from(x.buffer, x.byteOffset, x.byteLength);
      expect(res.body.subarray(headerLength, headerLength + n * 4).equals(bytesOf(a))).toBe(true);
      expect(res.body.subarray(headerLength + n * 4).equals(bytesOf(b))).toBe(true);
    });
  }

  it("oip answer - JSON when no output goes back binary", async () => {
    const res = await answer([{ name: "b", datatype: "FP32", shape: [2], data: Float32Array.from([0.5, 2]) }], false);
    expect(res.headers["content-type"]).toMatch(/^application\/json/);
    expect(res.headers["inference-header-content-length"]).toBeUndefined();
    expect(JSON.parse(res.body.toString("utf8"))).toEqual({ model_name: "m", id: "q1", outputs: [{ name: "b", datatype: "FP32", shape: [2], data: [0.5, 2] }] });
  });
});
