import { headers as natsHeaders, type NatsConnection } from "@nats-io/transport-node";
import { contentTypes, decodeWireMeta, headers, subjects } from "@sloserve/contracts";
import type { OnnxRunner } from "@sloserve/runtime";
import { batchSizeOf, expectOk, type HttpClient } from "./http-client.js";
import type { BenchModel, Query } from "./inputs.js";
import type { Target } from "./load.js";

/** The serving benchmark's targets: one query to the system (HTTP, HTTP binary, NATS) or to a reference. */

/** How long a NATS request may take before the benchmark counts it failed, ms. */
export const REQUEST_TIMEOUT_MS = 60_000;

/** Closures that send one query to each target, recording batch sizes and server timings. */
export class Targets {
  batchSizes: number[] = [];
  /** path → variant → answers. */
  served: Record<string, Record<string, number>> = {};
  timings: Array<{ queue: number; inference: number; total: number }> = [];
  private readonly wireHeaders = natsHeaders();
  private readonly echoHeaders = natsHeaders();

  constructor(
    private readonly m: BenchModel,
    private readonly q: Query,
    private readonly system: HttpClient,
    private readonly direct: HttpClient,
    private readonly nc: NatsConnection,
    private readonly runner: OnnxRunner,
    private readonly echoBytes: Uint8Array,
    private readonly variant: string,
    replyBytes: number,
  ) {
    this.wireHeaders.set(headers.contentType, contentTypes.wire);
    this.echoHeaders.set("x-reply-bytes", String(replyBytes));
  }

  private get path(): string {
    return `/v2/models/${this.m.model.name}/infer`;
  }

  reset(): void {
    this.batchSizes = [];
    this.timings = [];
  }

  raw: Target = () => this.runner.runOne(this.q.tensors);

  private count(path: string, variant: string | undefined): void {
    const byVariant = (this.served[path] ??= {});
    const v = variant ?? "?";
    byVariant[v] = (byVariant[v] ?? 0) + 1;
  }

  http: Target = async () => {
    const a = expectOk(await this.system.post(this.path, this.q.json), "system HTTP");
    const b = batchSizeOf(a.body);
    if (b !== undefined) this.batchSizes.push(b);
    this.count("http", variantOf(a.body));
  };

  /**
   * HTTP in the binary tensor extension, binary outputs: the answer's JSON header is parsed and its
   * length checked against the outputs' sizes, the outputs' bytes counted, not kept (HttpClient.postBinary).
   */
  httpBinary: Target = async () => {
    const a = expectOk(await this.system.postBinary(this.path, this.q.binary.body, this.q.binary.headerLength), "system HTTP binary");
    const b = a.header?.served_by?.batch_size;
    if (b !== undefined) this.batchSizes.push(b);
    this.count("http-bin", a.header?.served_by?.variant);
  };

  direct_: Target = async () => {
    expectOk(await this.direct.post(this.path, this.q.json), "direct server");
  };

  /** The direct server in the binary tensor extension, binary outputs (the server scenario's direct-bin). */
  directBinary: Target = async () => {
    expectOk(await this.direct.postBinary(this.path, this.q.binary.body, this.q.binary.headerLength), "direct server, binary");
  };

  nats: Target = async () => {
    const reply = await this.nc.request(subjects.inferVariant(this.variant), this.q.wire, { timeout: REQUEST_TIMEOUT_MS, headers: this.wireHeaders });
    const code = reply.headers?.get(headers.error);
    if (code) throw new Error(`system NATS: ${code}: ${new TextDecoder().decode(reply.data).slice(0, 300)}`);
    const { meta } = decodeWireMeta<{ served_by?: { batch_size?: number; variant?: string }; timing_ms?: { queue: number; inference: number; total: number } }>(reply.data);
    if (meta.served_by?.batch_size !== undefined) this.batchSizes.push(meta.served_by.batch_size);
    this.count("nats", meta.served_by?.variant);
    if (meta.timing_ms) this.timings.push(meta.timing_ms);
  };

  echo: Target = () => this.nc.request("bench.echo", this.echoBytes, { timeout: REQUEST_TIMEOUT_MS, headers: this.echoHeaders });

  jsEcho: Target = () => this.nc.request("bench.relay", this.echoBytes, { timeout: REQUEST_TIMEOUT_MS, headers: this.echoHeaders });

  jsEchoNoTraces: Target = () => this.nc.request("bench.relay-nt", this.echoBytes, { timeout: REQUEST_TIMEOUT_MS, headers: this.echoHeaders });
}

function variantOf(body: Buffer): string | undefined {
  const m = /"variant":"([^"]+)"/.exec(body.subarray(0, 2048).toString("utf8"));
  return m?.[1];
}

export async function waitForFirstAnswer(http: HttpClient, m: BenchModel, q: Query, log: (s: string) => void): Promise<void> {
  const started = Date.now();
  for (;;) {
    const a = await http.post(`/v2/models/${m.model.name}/infer`, q.json);
    if (a.status === 200) return;
    if (Date.now() - started > 120_000) throw new Error(`${m.model.name}: no answer within 120 s: HTTP ${a.status} ${a.body.subarray(0, 300).toString()}`);
    log(`  ${m.model.name}: HTTP ${a.status} while loading, retrying`);
    await new Promise((r) => setTimeout(r, 500));
  }
}
