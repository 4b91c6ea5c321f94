import type { NatsConnection, MsgHdrs } from "@nats-io/transport-node";
import { ErrorCode, ServeError, headers, contentTypes, isErrorCode, encodeTensorParts, encodeTensorPartsWithFields, tensorDataToJson, type Tensor } from "@sloserve/contracts";
import { makeHeaders } from "./connection.js";
import { ALIGN_FROM_BYTES, alignPayload, publishParts } from "./outbound.js";

const encoder = new TextEncoder();
const decoder = new TextDecoder();

/** Normalises anything thrown into a ServeError (unknown errors become `internal`). */
export function toServeError(err: unknown): ServeError {
  if (err instanceof ServeError) return err;
  return new ServeError(ErrorCode.internal, err instanceof Error ? err.message : String(err));
}

/** Sends an error reply: code in the `x-error-code` header, `{error, code}` as JSON body. */
export function replyError(nc: NatsConnection, subject: string | undefined, err: unknown, requestId?: string): void {
  if (!subject) return;
  const e = toServeError(err);
  nc.publish(subject, encoder.encode(JSON.stringify(e.toJSON())), {
    headers: makeHeaders({ [headers.error]: e.code, [headers.contentType]: contentTypes.json, [headers.requestId]: requestId }),
  });
}

/**
 * Sends an inference answer to the caller's inbox in the encoding it asked for: Open Inference Protocol
 * JSON (`json`: `extra`'s fields and `outputs` with their data as JSON arrays) or the binary tensor
 * encoding (`extra` in its metadata). The executor answers its queries with it and the dispatcher its
 * overflowed ones, so both look the same to the caller. `extra` may come serialised already (the JSON
 * of an object of its fields: the executor builds most of it once per batch, libs/executor answer-meta.ts).
 */
export function replyInference(nc: NatsConnection, subject: string, outputs: readonly Tensor[], extra: Record<string, unknown> | string, options: { json: boolean; requestId: string | undefined }): void {
  const hdrs = makeHeaders({ [headers.requestId]: options.requestId, [headers.contentType]: options.json ? contentTypes.json : contentTypes.wire });
  if (options.json) {
    const fields = typeof extra === "string" ? (JSON.parse(extra) as Record<string, unknown>) : extra;
    nc.publish(subject, encoder.encode(JSON.stringify({ ...fields, outputs: outputs.map((t) => ({ name: t.name, datatype: t.datatype, shape: t.shape, data: tensorDataToJson(t) })) })), { headers: hdrs });
    return;
  }
  // The outputs are not copied into a message: the header, then views of the outputs; and the caller
  // reads them in place (outbound.ts).
  const { parts, byteLength } = typeof extra === "string" ? encodeTensorPartsWithFields(outputs, extra) : encodeTensorParts(outputs, extra);
  publishParts(nc, subject, parts, byteLength, { headers: byteLength >= ALIGN_FROM_BYTES ? alignPayload(hdrs) : hdrs });
}

/** If a reply is an error reply, returns it as a ServeError. */
export function errorFromReply(hdrs: MsgHdrs | undefined, data: Uint8Array): ServeError | undefined {
  const code = hdrs?.get(headers.error);
  if (!code) return undefined;
  let message = "error";
  let details: Record<string, unknown> | undefined;
  try {
    const body = JSON.parse(decoder.decode(data)) as { error?: string; details?: Record<string, unknown> };
    message = body.error ?? message;
    details = body.details;
  } catch {
    message = decoder.decode(data);
  }
  return new ServeError(isErrorCode(code) ? code : ErrorCode.internal, message, details);
}
