import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { createLogger, type Logger } from "@sloserve/bus";

/** A logger whose lines the test can read (parsed JSON), and print when it fails. */
export function memoryLogger(service: string, level = "debug"): { log: Logger; lines: Array<Record<string, unknown>> } {
  const lines: Array<Record<string, unknown>> = [];
  const log = createLogger(service, level, { write: (line: string) => void lines.push(JSON.parse(line) as Record<string, unknown>) });
  return { log, lines };
}

export interface RecordedRequest {
  method: string;
  /** Path with the query string. */
  url: string;
  headers: IncomingMessage["headers"];
  body: string;
}

/** An HTTP server on 127.0.0.1 (a free port) that records every request and answers with `handle`. */
export async function recordingServer(handle: (req: RecordedRequest, res: ServerResponse) => void): Promise<{ url: string; requests: RecordedRequest[]; server: Server; close(): Promise<void> }> {
  const requests: RecordedRequest[] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const recorded: RecordedRequest = { method: req.method ?? "", url: req.url ?? "", headers: req.headers, body: Buffer.concat(chunks).toString("utf8") };
      requests.push(recorded);
      try {
        handle(recorded, res);
      } catch (err) {
        res.writeHead(500, { "content-type": "text/plain" }).end(`test server error: ${(err as Error).message}`);
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    requests,
    server,
    close: () =>
      new Promise<void>((resolve, reject) => {
        server.closeAllConnections();
        server.close((err) => (err ? reject(err) : resolve()));
      }),
  };
}
