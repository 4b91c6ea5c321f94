import { pino, type Logger } from "pino";

export type { Logger };

/** One JSON line per event, with the service name on every line. */
export function createLogger(service: string, level = "info", destination?: pino.DestinationStream): Logger {
  return pino({ base: { service, pid: process.pid }, level, timestamp: pino.stdTimeFunctions.isoTime }, destination);
}
