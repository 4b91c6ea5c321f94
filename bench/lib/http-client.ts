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

/**
 * An answer of {@link HttpClient.postBinary}: `body` is the JSON header only (an error: the whole body),
 * `byteLength` the body's, `chunks` the whole body as the socket delivered it (not concatenated).
 */
export interface BinaryAnswer extends HttpAnswer {
  byteLength: number;
  chunks: Buffer[];
  header?: { served_by?: { batch_size?: number; variant?: string }; outputs?: Array<{ name: string; parameters?: { binary_data_size?: number } }> };
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

  /**
   * A request in the Open Inference Protocol's binary tensor extension whose answer is read as a real
   * client needs it, without concatenating the outputs' bytes (ocr-rec's answer is 1 MB, and a copy
   * of it per query into one buffer cost the load generator, which shares the cores with the system
   * under test): the status, the answer's JSON header (`Inference-Header-Content-Length`, parsed), the
   * body kept as the socket's chunks, and its byte count, checked against Content-Length and against
   * the header's `binary_data_size`s.
   * Any other answer (an error) is kept whole, as {@link post} does.
   */
  postBinary(path: string, body: Buffer, headerLength: number): Promise<BinaryAnswer> {
    return new Promise((resolve, reject) => {
      const req = request(
        { host: this.host, port: this.port, path, method: "POST", agent: this.agent, headers: { "content-type": "application/octet-stream", "content-length": body.length, "inference-header-content-length": headerLength } },
        (res) => {
          const status = res.statusCode ?? 0;
          const given = Number(res.headers["inference-header-content-length"]);
          // Errors and answers without a binary part: the whole body, as post() keeps it.
          const keep = status === 200 && Number.isInteger(given) && given > 0 ? given : Infinity;
          const chunks: Buffer[] = [];
          const all: Buffer[] = [];
          let kept = 0;
          let byteLength = 0;
          res.on("data", (c: Buffer) => {
            byteLength += c.length;
            all.push(c);
            if (kept < keep) {
              const part = keep === Infinity ? c : c.subarray(0, keep - kept);
              chunks.push(part);
              kept += part.length;
            }
          });
          res.on("end", () => {
            const head = chunks.length === 1 ? (chunks[0] as Buffer) : Buffer.concat(chunks);
            if (keep === Infinity) return resolve({ status, body: head, byteLength, chunks: all });
            const announced = Number(res.headers["content-length"]);
            if (byteLength !== announced) return reject(new Error(`binary answer: ${byteLength} bytes received, Content-Length ${announced}`));
            let header: BinaryAnswer["header"];
            try {
              header = JSON.parse(head.toString("utf8")) as BinaryAnswer["header"];
            } catch {
              return reject(new Error(`binary answer: the first ${keep} bytes (Inference-Header-Content-Length) are not JSON`));
            }
            const binary = (header?.outputs ?? []).reduce((n, o) => n + (o.parameters?.binary_data_size ?? 0), 0);
            if (keep + binary !== byteLength) return reject(new Error(`binary answer: ${byteLength} bytes, but the header (${keep}) and its outputs' binary_data_size (${binary}) add up to ${keep + binary}`));
            resolve({ status, body: head, byteLength, header, chunks: all });
          });
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
export function expectOk<A extends HttpAnswer>(answer: A, what: string): A {
  if (answer.status !== 200) throw new Error(`${what}: HTTP ${answer.status}: ${answer.body.subarray(0, 300).toString()}`);
  return answer;
}
