import { pino, type Logger } from "pino";

export type { Logger };

/**
 * Fields that may carry a secret (API keys in request headers, the bootstrap admin key, credentials),
 * censored in every log line wherever a logged object has them at the top or one or two levels down
 * (e.g. `{ req: { headers: { authorization } } }`).
 */
const SECRET_FIELDS = ["authorization", '["x-api-key"]', "apiKey", "adminKey", "SLOSERVE_ADMIN_KEY", "password", "pass", "token", "secret"];
export const redactedLogPaths: readonly string[] = SECRET_FIELDS.flatMap((f) => {
  const sep = f.startsWith("[") ? "" : ".";
  return [f, `*${sep}${f}`, `*.*${sep}${f}`];
});

/** One JSON line per event, with the service name on every line; secrets censored (`redactedLogPaths`). */
export function createLogger(service: string, level = "info", destination?: pino.DestinationStream): Logger {
  return pino({ base: { service, pid: process.pid }, level, timestamp: pino.stdTimeFunctions.isoTime, redact: { paths: [...redactedLogPaths], censor: "[redacted]" } }, destination);
}
