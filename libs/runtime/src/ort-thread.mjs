// One onnxruntime session in a worker thread: onnxruntime-node runs inference synchronously on the
// calling thread, so the executor keeps each session here and its own event loop free for the bus
// (heartbeats, pulling the next batch, replies) while a batch runs.
import { setPriority } from "node:os";
import { parentPort, workerData } from "node:worker_threads";
import * as ort from "onnxruntime-node";

const ortTypes = {
  BOOL: "bool", UINT8: "uint8", UINT16: "uint16", UINT32: "uint32", UINT64: "uint64", INT8: "int8", INT16: "int16",
  INT32: "int32", INT64: "int64", FP16: "float16", FP32: "float32", FP64: "float64",
};

// The thread's scheduling priority (Linux: a nice value per thread), taken before the session so
// that onnxruntime's own threads start with it; a priority this process may not take (raising it needs
// CAP_SYS_NICE) leaves it as it was, and the reason goes back with "ready".
let priority;
if (typeof workerData.nice === "number") {
  try {
    setPriority(workerData.nice);
    priority = { nice: workerData.nice };
  } catch (err) {
    priority = { nice: 0, error: err instanceof Error ? err.message : String(err) };
  }
}

let session;
try {
  session = await ort.InferenceSession.create(workerData.bytes, workerData.options);
  parentPort.postMessage({ type: "ready", inputs: session.inputMetadata, outputs: session.outputMetadata, priority });
} catch (err) {
  parentPort.postMessage({ type: "error", message: err instanceof Error ? err.message : String(err) });
}

parentPort.on("message", async (msg) => {
  if (msg.type === "release") {
    await session?.release();
    parentPort.postMessage({ type: "released" });
    return;
  }
  try {
    const feeds = {};
    for (const t of msg.inputs) feeds[t.name] = new ort.Tensor(ortTypes[t.datatype], t.data, t.shape);
    const started = performance.now();
    const results = await session.run(feeds);
    const ms = performance.now() - started;
    const outputs = msg.outputNames.map((name) => {
      const r = results[name];
      return { name, shape: [...r.dims], data: r.data };
    });
    const transfer = [...new Set(outputs.map((o) => o.data.buffer))];
    try {
      parentPort.postMessage({ type: "result", id: msg.id, outputs, ms }, transfer);
    } catch {
      parentPort.postMessage({ type: "result", id: msg.id, outputs, ms });
    }
  } catch (err) {
    parentPort.postMessage({ type: "result", id: msg.id, error: err instanceof Error ? err.message : String(err) });
  }
});
