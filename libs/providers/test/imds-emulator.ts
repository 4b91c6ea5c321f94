import { recordingServer, type RecordedRequest } from "./support.js";

/**
 * The part of EC2's instance metadata service (IMDSv2) the spot watcher uses, on loopback:
 * `PUT /latest/api/token` (TTL header 1..21600 required, else 400) gives a session token; GETs need a
 * current token (`X-aws-ec2-metadata-token`, else 401); `/latest/meta-data/instance-id`; and
 * `/latest/meta-data/spot/instance-action`: 404 until a notice is set, then its JSON.
 */
export async function startImds(instanceId = "i-0123456789abcdef0"): Promise<{
  url: string;
  requests: RecordedRequest[];
  /** Sets the instance action that `/spot/instance-action` answers (a raw body, to test bad ones). */
  setNotice(body: { action: string; time: string } | string | null): void;
  /** Forgets every token issued (as if they had expired). */
  expireTokens(): void;
  close(): Promise<void>;
}> {
  let notice: string | null = null;
  const tokens = new Set<string>();
  let issued = 0;
  const server = await recordingServer((req, res) => {
    if (req.method === "PUT" && req.url === "/latest/api/token") {
      const ttl = Number(req.headers["x-aws-ec2-metadata-token-ttl-seconds"]);
      if (!Number.isInteger(ttl) || ttl < 1 || ttl > 21_600) return void res.writeHead(400).end();
      const token = `token-${++issued}`;
      tokens.add(token);
      return void res.writeHead(200, { "content-type": "text/plain", "x-aws-ec2-metadata-token-ttl-seconds": String(ttl) }).end(token);
    }
    if (req.method !== "GET") return void res.writeHead(405).end();
    const token = req.headers["x-aws-ec2-metadata-token"];
    if (typeof token !== "string" || !tokens.has(token)) return void res.writeHead(401).end();
    if (req.url === "/latest/meta-data/instance-id") return void res.writeHead(200, { "content-type": "text/plain" }).end(instanceId);
    if (req.url === "/latest/meta-data/spot/instance-action") {
      if (notice === null) return void res.writeHead(404, { "content-type": "text/html" }).end("<html>404 - Not Found</html>");
      return void res.writeHead(200, { "content-type": "text/plain" }).end(notice);
    }
    res.writeHead(404).end();
  });
  return {
    url: server.url,
    requests: server.requests,
    setNotice: (body) => {
      notice = body === null ? null : typeof body === "string" ? body : JSON.stringify(body);
    },
    expireTokens: () => tokens.clear(),
    close: () => server.close(),
  };
}
