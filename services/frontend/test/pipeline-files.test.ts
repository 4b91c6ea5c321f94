import { describe, expect, it } from "vitest";
import Fastify from "fastify";
import { ServeError, type PipelineInputSpec } from "@sloserve/contracts";
import { acceptFileBodies, fileInput, isJsonType, mediaTypeOf } from "../src/pipeline-files.js";

/**
 * Files as pipeline query bodies (the ocr pipeline's image): which media types a pipeline takes, the 415
 * that names them, and the body parsers of the query route's scope (a real Fastify instance, injected
 * requests).
 */

const image: PipelineInputSpec[] = [{ name: "image", datatype: "UINT8", shape: [-1], content_types: ["image/png", "image/jpeg"] }];
const digits: PipelineInputSpec[] = [{ name: "input", datatype: "FP32", shape: [-1, 1, 28, 28] }];
const png = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 1, 2, 3]);

function codeOf(fn: () => unknown): [string, string] {
  try {
    fn();
  } catch (err) {
    if (err instanceof ServeError) return [err.code, err.message];
    throw err;
  }
  throw new Error("did not throw");
}

describe("pipeline files", () => {
  it("pipeline files - the media type of a header, without parameters, lower case; JSON types", () => {
    expect(mediaTypeOf("Image/PNG; charset=binary")).toBe("image/png");
    expect(mediaTypeOf(undefined)).toBe("");
    expect(isJsonType("application/json")).toBe(true);
    expect(isJsonType("application/vnd.api+json")).toBe(true);
    expect(isJsonType("image/png")).toBe(false);
  });

  it("pipeline files - a body in one of the input's media types is its UINT8 tensor", () => {
    const t = fileInput("ocr", "image/png", png, image);
    expect(t).toMatchObject({ name: "image", datatype: "UINT8", shape: [png.length] });
    expect(Array.from(t.data as Uint8Array)).toEqual(Array.from(png));
  });

  it.each([
    ["another media type", "text/plain", png, image, "unsupported_media_type",
      "pipeline ocr takes its input 'image' as the body in image/png or image/jpeg, or Open Inference Protocol JSON (Content-Type: application/json); got Content-Type text/plain"],
    ["no media type", "", png, image, "unsupported_media_type",
      "pipeline ocr takes its input 'image' as the body in image/png or image/jpeg, or Open Inference Protocol JSON (Content-Type: application/json); got a body without a Content-Type"],
    ["an image for a pipeline that takes tensors", "image/png", png, digits, "unsupported_media_type",
      "pipeline ocr takes Open Inference Protocol JSON (Content-Type: application/json), not Content-Type image/png"],
    ["an empty body", "image/jpeg", Buffer.alloc(0), image, "invalid_data", "the image/jpeg body is empty: send the file as the body"],
  ])("pipeline files - refuses %s", (_case, type, body, inputs, code, message) => {
    expect(codeOf(() => fileInput("ocr", type, body, inputs))).toEqual([code, message]);
  });

  it("pipeline files - in the query route's scope any non-JSON body arrives as bytes; JSON still parses; other routes keep their parsers", async () => {
    const app = Fastify({ bodyLimit: 1024 });
    app.addContentTypeParser("application/octet-stream", { parseAs: "buffer", bodyLimit: 1 << 20 }, (_req, body, done) => done(null, body));
    const describeBody = (body: unknown) => ({ kind: Buffer.isBuffer(body) ? "bytes" : typeof body, length: Buffer.isBuffer(body) ? body.length : undefined });
    await app.register(async (scope) => {
      acceptFileBodies(scope);
      scope.post("/query", async (req) => describeBody(req.body));
    });
    app.post("/other", async (req) => describeBody(req.body));
    const post = async (url: string, type: string, payload: string | Buffer) => {
      const r = await app.inject({ method: "POST", url, headers: { "content-type": type }, payload });
      return { status: r.statusCode, body: r.json<Record<string, unknown>>() };
    };
    expect(await post("/query", "image/png", png)).toEqual({ status: 200, body: { kind: "bytes", length: png.length } });
    expect(await post("/query", "text/plain", "hello")).toEqual({ status: 200, body: { kind: "bytes", length: 5 } });
    expect(await post("/query", "application/octet-stream", png)).toEqual({ status: 200, body: { kind: "bytes", length: png.length } });
    expect(await post("/query", "application/json", '{"a": 1}')).toEqual({ status: 200, body: { kind: "object" } });
    // The request limit holds for file bodies in the scope (the model-upload limit of octet-stream does not).
    expect((await post("/query", "application/octet-stream", Buffer.alloc(2048))).status).toBe(413);
    // Outside the scope: text is text, octet-stream has its own limit, unknown types are refused.
    expect(await post("/other", "text/plain", "hello")).toEqual({ status: 200, body: { kind: "string" } });
    expect(await post("/other", "application/octet-stream", Buffer.alloc(2048))).toEqual({ status: 200, body: { kind: "bytes", length: 2048 } });
    expect((await post("/other", "image/png", png)).status).toBe(415);
    await app.close();
  });
});
