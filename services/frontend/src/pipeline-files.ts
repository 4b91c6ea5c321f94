import type { FastifyInstance } from "fastify";
import { ErrorCode, ServeError, type PipelineInputSpec, type Tensor } from "@sloserve/contracts";

/**
 * Pipeline queries whose body is a file (the OCR pipeline's image): `POST /v1/pipelines/{name}/infer`
 * with `Content-Type: image/png` and the PNG as the body. A pipeline takes such bodies when its one input
 * takes a file (UINT8 [-1]) and lists the media types it accepts (`content_types` in the spec); the body
 * becomes that input's UINT8 [n] tensor, as a NATS caller would send it. Whether the bytes are a good
 * image is the pipeline's first step's to say (the OCR decoder answers 400 with its reason).
 */

/** The media type of a Content-Type header, lower case, without parameters; "" when there is none. */
export function mediaTypeOf(header: string | undefined): string {
  return (header ?? "").split(";")[0]!.trim().toLowerCase();
}

export function isJsonType(type: string): boolean {
  return type === "application/json" || type.endsWith("+json");
}

/**
 * The query's input from a body that is not JSON, or a ServeError: 415 naming what the pipeline takes
 * when the media type is not one of its input's, 400 for an empty body.
 */
export function fileInput(pipeline: string, type: string, body: unknown, inputs: readonly PipelineInputSpec[] | undefined): Tensor {
  const file = inputs?.length === 1 && inputs[0]!.content_types ? inputs[0]! : undefined;
  const got = type === "" ? "a body without a Content-Type" : `Content-Type ${type}`;
  if (!file) throw new ServeError(ErrorCode.unsupportedMediaType, `pipeline ${pipeline} takes Open Inference Protocol JSON (Content-Type: application/json), not ${got}`);
  const accepted = file.content_types!;
  if (!accepted.includes(type)) {
    throw new ServeError(ErrorCode.unsupportedMediaType, `pipeline ${pipeline} takes its input '${file.name}' as the body in ${accepted.join(" or ")}, or Open Inference Protocol JSON (Content-Type: application/json); got ${got}`);
  }
  if (!Buffer.isBuffer(body) || body.length === 0) throw new ServeError(ErrorCode.invalidData, `the ${type} body is empty: send the file as the body`);
  return { name: file.name, datatype: "UINT8", shape: [body.length], data: new Uint8Array(body.buffer, body.byteOffset, body.length) };
}

/**
 * Body parsers for pipeline queries, in the scope of the query route only: any body that is not JSON
 * is read as bytes (the route decides, with {@link fileInput}), within the frontend's request limit.
 */
export function acceptFileBodies(scope: FastifyInstance): void {
  scope.removeContentTypeParser(["application/octet-stream", "text/plain"]);
  scope.addContentTypeParser("*", { parseAs: "buffer" }, (_req, body, done) => done(null, body));
}
