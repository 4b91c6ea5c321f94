import { describe, expect, it } from "vitest";
import type * as grpc from "@grpc/grpc-js";
import { repositoryIndex, tritonModelConfig, tritonModelStatistics, type ApiKeyGrant, type ModelRecord } from "@sloserve/contracts";
import { Catalog, type MetadataStore } from "@sloserve/store";
import { InferenceStatistics, NO_COUNTS } from "../src/statistics.js";
import { loadInferenceService } from "../src/grpc.js";
import { modelStatistics } from "../src/query.js";

/**
 * The frontend's query counts (statistics.ts) and Triton's extensions as the gRPC service encodes
 * them: each answer goes through the .proto's own serializer and back, as a client decodes it.
 */

describe("frontend statistics", () => {
  it("statistics - successes and failures add up per name, in nanoseconds", () => {
    const stats = new InferenceStatistics();
    const m = stats.of("m");
    expect(stats.of("m")).toBe(m); // one object per name, kept
    // total, input, queue (+ batch wait), infer, output ms; rows; answered at
    m.success(10, 0.25, 3, 5, 0.125, 2, 1_000);
    m.success(20.5, 0.5, 4, 12, 0.25, 1, 2_000);
    m.failure(1.5);
    expect({ ...stats.get("m") }).toEqual({
      successCount: 2,
      successNs: 30_500_000, // (10 + 20.5) ms
      failCount: 1,
      failNs: 1_500_000,
      queueNs: 7_000_000, // 3 + 4
      computeInputNs: 750_000, // 0.25 + 0.5
      computeInferNs: 17_000_000, // 5 + 12
      computeOutputNs: 375_000, // 0.125 + 0.25
      inferenceCount: 3, // 2 rows + 1
      lastInferenceMs: 2_000,
    });
    expect(stats.get("other")).toBeUndefined();
    expect(stats.names()).toEqual(["m"]);
    expect({ ...NO_COUNTS }).toMatchObject({ successCount: 0, failCount: 0, lastInferenceMs: 0 });
  });

  it("statistics - Triton's messages survive the .proto's serializer (field names, enums, 64-bit counts)", () => {
    const service = loadInferenceService();
    const roundTrip = (method: string, response: unknown): unknown => {
      const def = service[method] as grpc.MethodDefinition<unknown, unknown>;
      expect(def, `the .proto has no method ${method}`).toBeDefined();
      return def.responseDeserialize(def.responseSerialize(response));
    };

    const config = tritonModelConfig("ocr-cls", { platform: "onnxruntime_onnx", inputs: [{ name: "x", datatype: "FP32", shape: [-1, 3, -1, -1] }], outputs: [{ name: "y", datatype: "INT64", shape: [-1, 2] }] }, [4]);
    expect(roundTrip("ModelConfig", { config })).toEqual({
      config: {
        name: "ocr-cls",
        platform: "onnxruntime_onnx",
        backend: "onnxruntime",
        max_batch_size: 4,
        input: [{ name: "x", data_type: "TYPE_FP32", format: "FORMAT_NONE", dims: [3, -1, -1] }],
        output: [{ name: "y", data_type: "TYPE_INT64", dims: [2] }],
      },
    });

    const stats = new InferenceStatistics();
    stats.of("m").success(12.5, 0.5, 1, 10, 0.5, 3, 1_764_400_000_123);
    const answer = { model_stats: [tritonModelStatistics("m", "1", stats.get("m")!)] };
    expect(roundTrip("ModelStatistics", answer)).toEqual({
      model_stats: [
        {
          name: "m",
          version: "1",
          last_inference: 1_764_400_000_123, // past 2^32: a 64-bit field
          inference_count: 3,
          execution_count: 1,
          inference_stats: {
            success: { count: 1, ns: 12_500_000 },
            fail: { count: 0, ns: 0 },
            queue: { count: 1, ns: 1_000_000 },
            compute_input: { count: 1, ns: 500_000 },
            compute_infer: { count: 1, ns: 10_000_000 },
            compute_output: { count: 1, ns: 500_000 },
          },
          // batch_stats: empty, not sent
        },
      ],
    });

    const models = repositoryIndex([{ name: "a" }, { name: "b" }], [{ model: "a", state: "active" }], "1");
    expect(roundTrip("RepositoryIndex", { models })).toEqual({
      models: [
        { name: "a", version: "1", state: "READY", reason: "" },
        { name: "b", version: "1", state: "UNAVAILABLE", reason: "no instance loaded (loads on the first query)" },
      ],
    });
  });

  it("statistics - every model's, and what a key limited to some apps sees", async () => {
    // The listing reads the catalog in memory only: no store is called.
    const catalog = new Catalog(undefined as unknown as MetadataStore);
    const record = (name: string, app: string): ModelRecord => ({ name, app, task: "t", dataset: "d", platform: "onnxruntime_onnx", inputs: [], outputs: [], object: name, sizeBytes: 1, sha256: "", registeredAtMs: 0, validationObject: null, validationCount: 0, profileShape: {} });
    catalog.applyRegistered(record("b-model", "beta"), []);
    catalog.applyRegistered(record("a-model", "alpha"), []);
    const stats = new InferenceStatistics();
    stats.of("alpha").success(1, 0, 0, 1, 0, 1, 5); // a model-less query names its app
    stats.of("gone").failure(1); // a model unregistered since: not listed
    const names = async (grant?: ApiKeyGrant) => (await modelStatistics({ catalog, stats }, "", "", grant)).model_stats.map((m) => [m.name, m.execution_count]);
    expect(await names()).toEqual([["a-model", 0], ["alpha", 1], ["b-model", 0]]);
    expect(await names({ id: "k", name: "k", role: "user", apps: ["alpha"] })).toEqual([["a-model", 0], ["alpha", 1]]);
  });
});
