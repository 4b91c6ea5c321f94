/**
 * The frontend's HTTP API as the CLI uses it. Every failure becomes a {@link CliError} with a message
 * a user can act on and the exit code the CLI ends with: never a stack trace.
 */

/** Exit codes: the server refused or failed the request; a usage mistake or an unreadable file; no server. */
export const exitCodes = { refused: 1, usage: 2, unreachable: 3 } as const;

export class CliError extends Error {
  constructor(
    message: string,
    readonly exitCode: number = exitCodes.refused,
  ) {
    super(message);
    this.name = "CliError";
  }
}

export interface RequestOptions {
  /** A JSON body (sets Content-Type: application/json). */
  json?: unknown;
  /** A raw body, with its own content type in `headers`. */
  body?: string | Uint8Array | ReadableStream<Uint8Array>;
  headers?: Record<string, string>;
  query?: Record<string, string | number | undefined>;
}

/** Why fetch failed, from its cause (ECONNREFUSED, ENOTFOUND, …). */
function networkReason(err: unknown): string {
  const cause = (err as { cause?: { code?: string; message?: string } }).cause;
  return cause?.code ?? cause?.message ?? (err as Error).message;
}

export class Api {
  readonly base: string;

  /** `apiKey`: sent as `Authorization: Bearer <key>` on every request (a frontend with access control on). */
  constructor(
    url: string,
    private readonly apiKey?: string,
  ) {
    let parsed: URL;
    try {
      parsed = new URL(url);
    } catch {
      throw new CliError(`--url ${JSON.stringify(url)} is not a URL (e.g. http://localhost:8080)`, exitCodes.usage);
    }
    if (parsed.protocol !== "http:" && parsed.protocol !== "https:") throw new CliError(`--url must be http:// or https://, got ${parsed.protocol}`, exitCodes.usage);
    this.base = parsed.href.replace(/\/+$/, "");
  }

  /** Sends one request; returns the response of a 2xx answer, throws a CliError for anything else. */
  async send(method: string, path: string, options: RequestOptions = {}): Promise<Response> {
    const query = Object.entries(options.query ?? {}).filter((e): e is [string, string | number] => e[1] !== undefined);
    const url = `${this.base}${path}${query.length ? `?${new URLSearchParams(query.map(([k, v]): [string, string] => [k, String(v)]))}` : ""}`;
    const headers: Record<string, string> = { ...options.headers, ...(this.apiKey ? { authorization: `Bearer ${this.apiKey}` } : {}) };
    let body = options.body;
    if (options.json !== undefined) {
      headers["content-type"] = "application/json";
      body = JSON.stringify(options.json);
    }
    let response: Response;
    try {
      response = await fetch(url, { method, headers, ...(body !== undefined ? { body, duplex: "half" } : {}) });
    } catch (err) {
      throw new CliError(`cannot reach the sloserve frontend at ${this.base} (${networkReason(err)}); start it with \`npm start\`, or point --url or SLOSERVE_URL at it`, exitCodes.unreachable);
    }
    if (response.ok) return response;
    if (response.status === 401 && !this.apiKey) {
      await response.body?.cancel();
      throw new CliError(`${method} ${path}: HTTP 401: the frontend at ${this.base} requires an API key: give --api-key or set SLOSERVE_API_KEY`);
    }
    const text = await response.text().catch(() => "");
    let detail = text.trim() || response.statusText;
    try {
      const parsed = JSON.parse(text) as { error?: unknown; code?: unknown };
      if (typeof parsed.error === "string") detail = typeof parsed.code === "string" ? `${parsed.error} [${parsed.code}]` : parsed.error;
    } catch {
      // not JSON: the text itself
    }
    throw new CliError(`${method} ${path}: HTTP ${response.status}: ${detail}`);
  }

  async json<T>(method: string, path: string, options: RequestOptions = {}): Promise<T> {
    const response = await this.send(method, path, options);
    try {
      return (await response.json()) as T;
    } catch {
      throw new CliError(`${method} ${path}: the server's answer is not JSON; is ${this.base} a sloserve frontend?`);
    }
  }

  get<T>(path: string, query?: RequestOptions["query"]): Promise<T> {
    return this.json<T>("GET", path, query ? { query } : {});
  }
}

/** A path segment from a user's name, escaped. */
export const seg = (name: string): string => encodeURIComponent(name);
