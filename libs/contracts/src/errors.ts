/**
 * Error codes shared by every service. A NATS error reply carries the code in the `x-error-code`
 * header and `{ error, code }` as its JSON body; the HTTP frontend maps the code to a status.
 */

export const ErrorCode = {
  badRequest: "bad_request",
  malformedJson: "malformed_json",
  payloadTooLarge: "payload_too_large",
  unknownModel: "unknown_model",
  unknownVariant: "unknown_variant",
  unknownApp: "unknown_app",
  invalidName: "invalid_name",
  invalidModel: "invalid_model",
  modelExists: "model_exists",
  invalidValidationSet: "invalid_validation_set",
  unknownInput: "unknown_input",
  missingInput: "missing_input",
  invalidShape: "invalid_shape",
  invalidDatatype: "invalid_datatype",
  invalidDataLength: "invalid_data_length",
  invalidData: "invalid_data",
  noCapacity: "no_capacity",
  infeasible: "infeasible",
  deadlineExceeded: "deadline_exceeded",
  unavailable: "unavailable",
  /** The serverless overflow path (function providers) is down: every circuit breaker open or every provider failed. */
  overflowUnavailable: "overflow_unavailable",
  unknownPipeline: "unknown_pipeline",
  invalidPipeline: "invalid_pipeline",
  pipelineExists: "pipeline_exists",
  /** A body in a media type the endpoint does not take (e.g. text/plain for an image pipeline). */
  unsupportedMediaType: "unsupported_media_type",
  /** No API key, or one the frontend does not know (revoked, mistyped), while access control is on. */
  unauthenticated: "unauthenticated",
  /** A known API key whose role or apps do not allow the request. */
  forbidden: "forbidden",
  /** An API key id that names no key (key management). */
  unknownKey: "unknown_key",
  /**
   * The app is over its quota (libs/policy access/quota.ts): its rate (`details.limit` "rate_qps") or its
   * queries in flight ("max_concurrency"); `details.retry_after_s` says when to try again (HTTP `Retry-After`).
   */
  quotaExceeded: "quota_exceeded",
  /**
   * Its app is over its weighted fair share of a congested worker pool while another app queries it too
   * (libs/policy access/fair-share.ts); `details.retry_after_s` says when to try again (HTTP `Retry-After`).
   */
  fairShareExceeded: "fair_share_exceeded",
  /** An app without a quota (`GET /v1/apps/{app}/quota`). */
  unknownQuota: "unknown_quota",
  internal: "internal",
} as const;
export type ErrorCode = (typeof ErrorCode)[keyof typeof ErrorCode];

const httpStatusByCode: Record<ErrorCode, number> = {
  bad_request: 400,
  malformed_json: 400,
  payload_too_large: 413,
  unknown_model: 404,
  unknown_variant: 404,
  unknown_app: 404,
  invalid_name: 400,
  invalid_model: 400,
  model_exists: 409,
  invalid_validation_set: 400,
  unknown_input: 400,
  missing_input: 400,
  invalid_shape: 400,
  invalid_datatype: 400,
  invalid_data_length: 400,
  invalid_data: 400,
  no_capacity: 503,
  infeasible: 422,
  deadline_exceeded: 504,
  unavailable: 503,
  overflow_unavailable: 503,
  unknown_pipeline: 404,
  invalid_pipeline: 400,
  pipeline_exists: 409,
  unsupported_media_type: 415,
  unauthenticated: 401,
  forbidden: 403,
  unknown_key: 404,
  quota_exceeded: 429,
  fair_share_exceeded: 429,
  unknown_quota: 404,
  internal: 500,
};

export function httpStatusOf(code: ErrorCode): number {
  return httpStatusByCode[code];
}

export function isErrorCode(value: unknown): value is ErrorCode {
  return typeof value === "string" && value in httpStatusByCode;
}

/** An error meant for the caller: a code and a message that names the problem. */
export class ServeError extends Error {
  constructor(
    readonly code: ErrorCode,
    message: string,
    readonly details?: Record<string, unknown>,
  ) {
    super(message);
    this.name = "ServeError";
  }

  toJSON(): { error: string; code: ErrorCode; details?: Record<string, unknown> } {
    return this.details ? { error: this.message, code: this.code, details: this.details } : { error: this.message, code: this.code };
  }
}
