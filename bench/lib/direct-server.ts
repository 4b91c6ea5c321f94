/**
 * Reference point "direct server": what a user could write instead of the system. One process,
 * Fastify + onnxruntime-node, no bus: the same Open Inference Protocol JSON request and answer (and
 * the binary tensor extension, one FP32 input, outputs in binary: the server scenario's direct-bin),
 * the same batching as a new variant (Nbatch = MAX_BATCH, Wbatch = 0: an idle engine runs what is
 * queued at once, batches form while it is busy) and the same engine settings (THREADS intra-op
 * threads, default 1, as the `<model>--cpu-b8` variant).
 *
 * Run as a child of the benchmark: env MODEL_PATH, MODEL_NAME, MAX_BATCH, THREADS; prints
 * {"event":"ready","port":N} on stdout.
 */
import { readFileSync } from "node:fs";
import Fastify, { type FastifyReply } from "fastify";
import { OnnxRunner } from "@sloserve/runtime";
import type { Tensor } from "@sloserve/contracts";

const path = process.env.MODEL_PATH;
const name = process.env.MODEL_NAME ?? "model";
const maxBatch = Number(process.env.MAX_BATCH ?? 8);
const threads = Number(process.env.THREADS ?? 1);
if (!path) throw new Error("MODEL_PATH is required");

const runner = await OnnxRunner.load(readFileSync(path), { intraOpThreads: threads });
const spec = runner.signature.inputs[0];
if (!spec) throw new Error("the model has no input");
const inputName = spec.name;

interface Pending {
  inputs: Tensor[];
  resolve: (out: { outputs: Tensor[]; batch: number }) => void;
  reject: (err: Error) => void;
}
const queue: Pending[] = [];
let busy = false;

function pump(): void {
  if (busy || queue.length === 0) return;
  busy = true;
  const batch = queue.splice(0, maxBatch);
  runner
    .runBatch(batch.map((p) => p.inputs))
    .then(
      (outs) => batch.forEach((p, i) => p.resolve({ outputs: outs[i] as Tensor[], batch: batch.length })),
      (err: Error) => batch.forEach((p) => p.reject(err)),
    )
    .finally(() => {
      busy = false;
      pump();
    });
}

interface InferBody {
  id?: string;
  inputs?: Array<{ name?: string; datatype?: string; shape?: number[]; data?: number[] }>;
}

function run(tensor: Tensor): Promise<{ outputs: Tensor[]; batch: number }> {
  return new Promise((resolve, reject) => {
    queue.push({ inputs: [tensor], resolve, reject });
    pump();
  });
}

/** A request in the binary tensor extension: the JSON header (`Inference-Header-Content-Length` bytes), then the input's bytes; answered in kind. */
async function inferBinary(body: Buffer, headerLength: number, reply: FastifyReply): Promise<FastifyReply> {
  let header: { id?: string; inputs?: Array<{ name?: string; datatype?: string; shape?: number[]; parameters?: { binary_data_size?: number } }> };
  try {
    header = JSON.parse(body.subarray(0, headerLength).toString("utf8")) as typeof header;
  } catch {
    return reply.code(400).send({ error: "the inference header is not JSON" });
  }
  const input = header.inputs?.[0];
  const count = Array.isArray(input?.shape) ? input.shape.reduce((a, b) => a * b, 1) : -1;
  if (!input || input.name !== inputName || input.datatype !== "FP32" || body.length - headerLength !== count * 4) {
    return reply.code(400).send({ error: `expected one FP32 input named ${inputName} of ${count * 4} bytes after the header` });
  }
  // A copy: the tensor's bytes must be aligned for a Float32Array.
  const data = new Float32Array(count);
  new Uint8Array(data.buffer).set(body.subarray(headerLength));
  const { outputs, batch } = await run({ name: inputName, datatype: "FP32", shape: input.shape as number[], data });
  const bytes = outputs.map((t) => Buffer.from((t.data as Float32Array).buffer, (t.data as Float32Array).byteOffset, (t.data as Float32Array).byteLength));
  const head = Buffer.from(
    JSON.stringify({ model_name: name, id: header.id, served_by: { batch_size: batch }, outputs: outputs.map((t, i) => ({ name: t.name, datatype: t.datatype, shape: t.shape, parameters: { binary_data_size: bytes[i]!.length } })) }),
  );
  return reply.header("inference-header-content-length", head.length).type("application/octet-stream").send(Buffer.concat([head, ...bytes]));
}

const app = Fastify({ bodyLimit: 8 * 1024 * 1024 });
app.addContentTypeParser("application/octet-stream", { parseAs: "buffer" }, (_req, body, done) => done(null, body));
app.post<{ Params: { model: string }; Body: InferBody | Buffer }>("/v2/models/:model/infer", async (req, reply) => {
  if (Buffer.isBuffer(req.body)) return inferBinary(req.body, Number(req.headers["inference-header-content-length"]), reply);
  const input = req.body.inputs?.[0];
  if (!input || input.name !== spec.name || input.datatype !== "FP32" || !Array.isArray(input.shape) || !Array.isArray(input.data)) {
    return reply.code(400).send({ error: `expected one FP32 input named ${spec.name}` });
  }
  const count = input.shape.reduce((a, b) => a * b, 1);
  if (input.data.length !== count) return reply.code(400).send({ error: `input has ${input.data.length} elements, shape needs ${count}` });
  const { outputs, batch } = await run({ name: spec.name, datatype: "FP32", shape: input.shape, data: Float32Array.from(input.data) });
  return {
    model_name: name,
    id: (req.body as InferBody).id,
    served_by: { batch_size: batch },
    outputs: outputs.map((t) => ({ name: t.name, datatype: t.datatype, shape: t.shape, data: Array.from(t.data as Float32Array) })),
  };
});

await app.listen({ host: "127.0.0.1", port: 0 });
const address = app.server.address();
const port = typeof address === "object" && address ? address.port : 0;
console.log(JSON.stringify({ event: "ready", port, model: name, maxBatch, threads }));
process.on("SIGTERM", () => {
  void app.close().then(() => process.exit(0));
});
