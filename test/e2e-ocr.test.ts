import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { connect, headers as natsHeaders, type NatsConnection } from "@nats-io/transport-node";
import { startStack, ocrModels, ocrPipelineSpec, registerOverHttp, registerPipelineOverHttp, type Stack } from "@sloserve/stack";
import { contentTypes, decodeTensors, encodeTensors, headers, subjects } from "@sloserve/contracts";
import { characterAccuracy, editDistance, loadOcrRunners, runOcrLocally } from "@sloserve/ocr";
import { renderTextImage, syntheticSet, type TextImage } from "@sloserve/ocr/synthetic";
import { quantile } from "@sloserve/policy";

/**
 * The bundled `ocr` pipeline end to end: nats-server, redis-server and every service as its own process;
 * the three PaddleOCR models and the pipeline registered over HTTP as `npm start` registers them; images
 * rendered here (libs/ocr synthetic, a seed no other test uses) sent as themselves
 * (`Content-Type: image/png` / `image/jpeg`) to `POST /v1/pipelines/ocr/infer`, as base64 BYTES in JSON,
 * and as a UINT8 tensor over NATS. Each answer's text is checked against `runOcrLocally` (the same models
 * and processing in this process) and against the text drawn; bad bodies get their 4xx.
 */

const SEED = 5150;
let stack: Stack;
let nc: NatsConnection;
let runners: Awaited<ReturnType<typeof loadOcrRunners>>;
let set: TextImage[];

interface OcrAnswer {
  text: string;
  lines: Array<{ text: string; box: number[][]; score: number }>;
  pipeline: string;
  visited: string[];
  visits: Record<string, number>;
  served_by: Record<string, unknown>;
  timing_ms: { total: number; stages: Record<string, number | Array<number | null>> };
  cost_dollars: number;
  slo_ms: number;
  missed_slo: boolean;
  outputs: unknown[];
}

beforeAll(async () => {
  [set, runners] = await Promise.all([syntheticSet(SEED, 24, { rotatedShare: 0.2 }), loadOcrRunners()]);
  // CPU variants of max batch 8 only: the recogniser's queue may batch whichever variant the router
  // prefers once profiles arrive (with a batch-1 variant too, it may pick that one: no batches to see).
  stack = await startStack({ cpuWorkers: 1, workerThreads: 2, env: { VARIANT_HARDWARE: "cpu", VARIANT_BATCH_SIZES: "8", VARIANT_CPU_THREADS: "1" } });
  nc = await connect({ servers: stack.nats.url });
  for (const m of ocrModels()) {
    const r = await registerOverHttp(stack.httpUrl, m);
    expect(r.status, JSON.stringify(r.body)).toBe(201);
  }
}, 180_000);

afterAll(async () => {
  await nc?.close();
  await stack?.stop();
  await runners?.release();
});

async function post(body: Uint8Array | string, contentType: string, path = "/v1/pipelines/ocr/infer"): Promise<{ status: number; body: Record<string, unknown> }> {
  const r = await fetch(`${stack.httpUrl}${path}`, { method: "POST", headers: { "content-type": contentType }, body });
  return { status: r.status, body: (await r.json()) as Record<string, unknown> };
}

const describeImage = (i: TextImage): string => `"${i.expected}" (${i.spec.format}, ${i.spec.font} ${i.spec.sizePx} px, ${i.spec.background}${i.spec.rotate180 ? ", turned" : ""})`;

describe("e2e ocr", () => {
  it("ocr - the bundled pipeline registers over HTTP; its input is an image sent as itself", async () => {
    const r = await registerPipelineOverHttp(stack.httpUrl, ocrPipelineSpec());
    expect(r.status, JSON.stringify(r.body)).toBe(201);
    expect(r.body).toMatchObject({ name: "ocr", inputs: [{ name: "image", datatype: "UINT8", shape: [-1], content_types: ["image/png", "image/jpeg"] }] });
  });

  it("ocr - 24 generated images (PNG and JPEG, sizes 16-72 px, some turned by 180°) as HTTP bodies: text equals runOcrLocally's, character accuracy ≥ 0.9", async () => {
    expect(new Set(set.map((s) => s.spec.format))).toEqual(new Set(["png", "jpeg"]));
    expect(new Set(set.map((s) => s.spec.sizePx)).size).toBeGreaterThanOrEqual(4);
    expect(set.filter((s) => s.spec.rotate180).length).toBeGreaterThanOrEqual(2);
    const pairs: Array<{ expected: string; actual: string }> = [];
    const latencies: number[] = [];
    let boxes = 0;
    let turned = 0;
    for (const image of set) {
      const r = await post(image.bytes, image.contentType);
      expect(r.status, `${describeImage(image)}: ${JSON.stringify(r.body).slice(0, 300)}`).toBe(200);
      const a = r.body as unknown as OcrAnswer;
      const reference = await runOcrLocally(image.bytes, runners);
      expect(a.text, describeImage(image)).toBe(reference.text);
      expect(a.lines.map((l) => l.text)).toEqual(reference.lines.map((l) => l.text));
      expect(a.lines.map((l) => l.box)).toEqual(reference.lines.map((l) => l.box));
      for (const l of a.lines) expect(l.score).toBeGreaterThanOrEqual(0.5); // drop_score
      expect(a.pipeline).toBe("ocr");
      expect(a.outputs).toEqual([]);
      expect(a.visited).toEqual(expect.arrayContaining(["decode", "det", "boxes", "assemble"]));
      expect((a.served_by["det"] as { model: string }).model).toBe("ocr-det");
      // Per box one classifier and one recogniser query, each served by its model.
      const items = a.visits["cls"] ?? 0;
      expect(a.visits["rec"] ?? 0).toBe(items);
      if (items > 0) expect((a.served_by["rec"] as Array<{ model: string } | null>).every((s) => s?.model === "ocr-rec")).toBe(true);
      expect(a.cost_dollars).toBeGreaterThan(0);
      expect(a.timing_ms.total).toBeGreaterThan(0);
      expect(typeof a.missed_slo).toBe("boolean");
      boxes += items;
      turned += a.visits["rotate"] ?? 0;
      if (image.spec.rotate180) expect(a.visits["rotate"] ?? 0, describeImage(image)).toBeGreaterThan(0);
      latencies.push(a.timing_ms.total);
      pairs.push({ expected: image.expected, actual: a.text });
    }
    const accuracy = characterAccuracy(pairs);
    const wrong = pairs.filter((p) => p.expected !== p.actual);
    console.info(
      `ocr live: character accuracy ${accuracy.toFixed(3)} over ${pairs.length} images (${pairs.length - wrong.length} exact; ${JSON.stringify(wrong)}); ` +
        `${boxes} boxes, ${turned} turned; latency ms p50 ${quantile(latencies, 0.5).toFixed(0)}, max ${Math.max(...latencies).toFixed(0)}`,
    );
    expect(accuracy, JSON.stringify(wrong)).toBeGreaterThanOrEqual(0.9);
  });

  it("ocr - the same image as a base64 BYTES tensor in JSON, and as a UINT8 tensor over NATS: the same text", async () => {
    const image = await renderTextImage({ lines: ["Receipt 2031", "Total 18.40"], font: "DejaVu Serif", sizePx: 28, background: "noisy", format: "jpeg", noiseSeed: 9 });
    const raw = (await post(image.bytes, "image/jpeg")).body as unknown as OcrAnswer;
    expect(raw.text).toBe((await runOcrLocally(image.bytes, runners)).text);
    expect(editDistance(raw.text, image.expected)).toBeLessThanOrEqual(1);
    const json = await post(JSON.stringify({ id: "b64", inputs: [{ name: "image", datatype: "BYTES", shape: [1], data: [Buffer.from(image.bytes).toString("base64")] }] }), "application/json");
    expect(json.status, JSON.stringify(json.body).slice(0, 300)).toBe(200);
    expect(json.body).toMatchObject({ id: "b64", text: raw.text, lines: raw.lines });
    const h = natsHeaders();
    h.set(headers.contentType, contentTypes.wire);
    const reply = await nc.request(subjects.inferPipeline("ocr"), encodeTensors([{ name: "image", datatype: "UINT8", shape: [image.bytes.length], data: image.bytes }]), { timeout: 30_000, headers: h });
    expect(reply.headers?.get(headers.error) || undefined).toBeUndefined();
    const { meta, tensors } = decodeTensors<{ text: string; lines: unknown[] }>(reply.data);
    expect(tensors).toEqual([]);
    expect(meta.text).toBe(raw.text);
    expect(meta.lines).toEqual(raw.lines);
  });

  it("ocr - the boxes of one image are separate queries that the executors batch: six short lines, recognised in batches", async () => {
    const image = await renderTextImage({ lines: ["Oslo", "Paris", "Tokyo", "Lisbon", "Dublin", "Vienna"], font: "DejaVu Sans", sizePx: 32, background: "white", format: "png" });
    const batches: number[] = [];
    for (let i = 0; i < 2; i++) {
      const a = (await post(image.bytes, "image/png")).body as unknown as OcrAnswer;
      expect(a.text).toBe("Oslo Paris Tokyo Lisbon Dublin Vienna");
      expect(a.visits["rec"]).toBe(6);
      batches.push(...(a.served_by["rec"] as Array<{ batch_size: number }>).map((s) => s.batch_size));
    }
    // Six recognition queries sent at once, one strip each, all 320 wide: the recogniser's queue joins them.
    expect(Math.max(...batches), JSON.stringify(batches)).toBeGreaterThan(1);
  });

  it("ocr - a page turned upside down reads upright; the classifier's threshold is a parameter (x-pipeline-params)", async () => {
    const image = await renderTextImage({ lines: ["Vienna Museum", "October 2027"], font: "DejaVu Sans", sizePx: 36, background: "white", format: "png", rotate180: true });
    const a = (await post(image.bytes, "image/png")).body as unknown as OcrAnswer;
    expect(a.text).toBe("Vienna Museum October 2027");
    expect(a.visits["rotate"]).toBe(a.visits["cls"]);
    // Above every score: no strip is turned, and the upside-down strips do not read as the text.
    const r = await fetch(`${stack.httpUrl}/v1/pipelines/ocr/infer`, { method: "POST", headers: { "content-type": "image/png", "x-pipeline-params": JSON.stringify({ cls_threshold: 1 }) }, body: image.bytes });
    const b = (await r.json()) as OcrAnswer;
    expect(r.status).toBe(200);
    expect(b.visits["rotate"]).toBeUndefined();
    expect(b.text).not.toBe(a.text);
  });

  it("ocr - a corrupt image is a 400 with the decoder's reason; another media type is a 415 naming what the pipeline takes", async () => {
    const png = set.find((s) => s.spec.format === "png")!;
    const truncated = await post(png.bytes.slice(0, Math.floor(png.bytes.length / 2)), "image/png");
    expect(truncated.status).toBe(400);
    expect(truncated.body).toMatchObject({ code: "invalid_data" });
    expect(String(truncated.body.error)).toMatch(/^stage decode \(step ocr-decode-det\): the PNG image cannot be decoded: \S/);
    expect(await post(new TextEncoder().encode("not an image at all"), "image/jpeg")).toEqual({
      status: 400,
      body: { code: "invalid_data", error: "stage decode (step ocr-decode-det): the data is not a PNG or JPEG image (unrecognised signature)" },
    });
    expect(await post(png.bytes, "text/plain")).toEqual({
      status: 415,
      body: { code: "unsupported_media_type", error: "pipeline ocr takes its input 'image' as the body in image/png or image/jpeg, or Open Inference Protocol JSON (Content-Type: application/json); got Content-Type text/plain" },
    });
    expect((await post(png.bytes, "image/gif")).status).toBe(415);
    // A pipeline of tensors takes JSON only.
    const tensors = await registerPipelineOverHttp(stack.httpUrl, { name: "direction", slo: { p99_ms: 1000 }, stages: [{ name: "cls", model: "ocr-cls" }] });
    expect(tensors.status, JSON.stringify(tensors.body)).toBe(201);
    expect(await post(png.bytes, "image/png", "/v1/pipelines/direction/infer")).toEqual({
      status: 415,
      body: { code: "unsupported_media_type", error: "pipeline direction takes Open Inference Protocol JSON (Content-Type: application/json), not Content-Type image/png" },
    });
    expect(await post(JSON.stringify({ inputs: [{ name: "image", datatype: "BYTES", shape: [1], data: ["%%%"] }] }), "application/json")).toEqual({
      status: 400,
      body: { code: "invalid_data", error: "input 'image' (BYTES) is not valid base64" },
    });
  });
});
