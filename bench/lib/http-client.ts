import { Agent, request } from "node:http";

/**
 * A lean HTTP/1.1 client for the load generators (node:http with keep-alive): cheaper per request
 * than fetch, so that the client steals less CPU from the system under test on a small machine.
 * Traffic goes to 127.0.0.1 only.
 */

export interface HttpAnswer {
  status: number;
  body: Buffer;
}

export class HttpClient {
  private readonly agent: Agent;
  private readonly host: string;
  private readonly port: number;

  constructor(baseUrl: string, maxSockets = 256) {
    const url = new URL(baseUrl);
    if (url.hostname !== "127.0.0.1" && url.hostname !== "localhost") throw new Error(`benchmarks only send traffic to 127.0.0.1, not ${url.hostname}`);
    this.host = "127.0.0.1";
    this.port = Number(url.port);
    this.agent = new Agent({ keepAlive: true, maxSockets, maxFreeSockets: maxSockets });
  }

  post(path: string, body: Buffer, contentType = "application/json", extraHeaders: Record<string, string | number> = {}): Promise<HttpAnswer> {
    return new Promise((resolve, reject) => {
      const req = request(
        { host: this.host, port: this.port, path, method: "POST", agent: this.agent, headers: { "content-type": contentType, "content-length": body.length, ...extraHeaders } },
        (res) => {
          const chunks: Buffer[] = [];
          res.on("data", (c: Buffer) => chunks.push(c));
          res.on("end", () => resolve({ status: res.statusCode ?? 0, body: chunks.length === 1 ? (chunks[0] as Buffer) : Buffer.concat(chunks) }));
          res.on("error", reject);
        },
      );
      req.on("error", reject);
      req.end(body);
    });
  }

  close(): void {
    this.agent.destroy();
  }
}

/**
 * Reads `served_by.batch_size` from the head of an Open Inference Protocol JSON answer without
 * parsing the whole body (an OCR recognition answer is ~3 MB of JSON).
 */
export function batchSizeOf(body: Buffer): number | undefined {
  const head = body.subarray(0, 2048).toString("utf8");
  const m = /"batch_size":(\d+)/.exec(head);
  return m ? Number(m[1]) : undefined;
}

/** Throws with the start of the body unless the status is 200. */
export function expectOk(answer: HttpAnswer, what: string): HttpAnswer {
  if (answer.status !== 200) throw new Error(`${what}: HTTP ${answer.status}: ${answer.body.subarray(0, 300).toString()}`);
  return answer;
}
