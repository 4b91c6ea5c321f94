import { z } from "zod";
import {
  REGISTRAR_QUEUE,
  arrivalsReportSchema,
  compileOptions,
  describeZodError,
  registerRequestSchema,
  subjects,
  ErrorCode,
  ServeError,
} from "@sloserve/contracts";
import { connectBus, replyError, runService, systemClock } from "@sloserve/bus";
import { MetadataStore } from "@sloserve/store";
import { registrarSettings } from "@sloserve/settings";
import { registerModel, unregisterModel } from "./register.js";
import { BatchTuner } from "./batching.js";
import { RegistrarMetrics } from "./metrics.js";
import { startServiceMetrics } from "@sloserve/metrics";
import { quantizeWeightsInt8 } from "@sloserve/onnx";

const envSchema = registrarSettings;

await runService("registrar", process.env, async (log) => {
  const options = compileOptions(envSchema, process.env, "registrar");
  const registrarOptions = {
    hardware: options.VARIANT_HARDWARE,
    batchSizes: options.VARIANT_BATCH_SIZES,
    cpuThreads: options.VARIANT_CPU_THREADS,
    tensorrtPrecisions: options.VARIANT_TENSORRT_PRECISIONS,
    neuronCores: options.VARIANT_NEURON_CORES,
    sizeClassScales: options.PROFILE_SIZE_CLASSES,
    profile: options.PROFILE_ON_REGISTER,
    log,
    // Weight-only int8 rewrite of Gemm/MatMul weights (libs/onnx); models without such weights get no int8 variant.
    quantize: async (bytes: Uint8Array) => {
      const result = quantizeWeightsInt8(bytes);
      return result.weights.length > 0 ? result.model : undefined;
    },
  };
  const bus = await connectBus({ servers: options.NATS_URL, name: "registrar", log, replicas: options.JS_REPLICAS });
  const store = MetadataStore.connect(options.REDIS_URL);
  const metrics = await startServiceMetrics(options, log);
  const registrarMetrics = new RegistrarMetrics(metrics.registry);
  const encode = (v: unknown): string => JSON.stringify(v);

  /** The tuner's inputs: every dispatcher's arrival reports (SLOs) and profiling results. */
  const followBatchTuning = (tuner: BatchTuner) => [
    bus.nc.subscribe(subjects.arrivalsAll, {
      callback: (err, msg) => {
        if (err) return log.error({ err }, "arrivals subscription error");
        try {
          const parsed = arrivalsReportSchema.safeParse(msg.json());
          if (!parsed.success) return log.warn({ subject: msg.subject, error: describeZodError(parsed.error) }, "ignoring a malformed arrivals report");
          registrarMetrics.arrivals.observe(parsed.data);
          void tuner.applyArrivals(parsed.data);
        } catch (e) {
          log.warn({ err: e, subject: msg.subject }, "ignoring an arrivals report that is not JSON");
        }
      },
    }),
    bus.nc.subscribe(subjects.modelProfiled("*"), {
      callback: (err, msg) => {
        if (err) return log.error({ err }, "profiled-event subscription error");
        void tuner.applyProfiled(msg.subject.split(".")[3] ?? "");
      },
    }),
  ];

  const register = bus.nc.subscribe(subjects.registerModel, {
    queue: REGISTRAR_QUEUE,
    callback: (err, msg) => {
      if (err) return log.error({ err }, "subscription error");
      void (async () => {
        const requestId = msg.headers?.get("x-request-id") || undefined;
        try {
          let body: unknown;
          try {
            body = msg.json();
          } catch {
            throw new ServeError(ErrorCode.malformedJson, "the register request is not valid JSON");
          }
          const parsed = registerRequestSchema.safeParse(body);
          if (!parsed.success) throw new ServeError(ErrorCode.badRequest, describeZodError(parsed.error));
          const result = await registerModel(bus, store, parsed.data, systemClock.now(), registrarOptions);
          log.info({ requestId, model: result.model.name, app: result.model.app, variants: result.variants.length, profileJobs: result.profileJobs }, "model registered");
          registrarMetrics.registered(result.variants, result.profileJobs);
          msg.respond(encode(result));
        } catch (e) {
          log.warn({ requestId, err: e }, "registration refused");
          registrarMetrics.refused("registration", e);
          replyError(bus.nc, msg.reply, e, requestId);
        }
      })();
    },
  });

  const unregister = bus.nc.subscribe(subjects.unregisterModel, {
    queue: REGISTRAR_QUEUE,
    callback: (err, msg) => {
      if (err) return log.error({ err }, "subscription error");
      void (async () => {
        try {
          let json: unknown;
          try {
            json = msg.json();
          } catch {
            throw new ServeError(ErrorCode.malformedJson, "the unregister request is not valid JSON: send {\"model\": \"<name>\"}");
          }
          const body = z.object({ model: z.string() }).parse(json);
          const model = await unregisterModel(bus, store, body.model, log);
          log.info({ model: model.name }, "model unregistered");
          registrarMetrics.unregistered();
          msg.respond(encode({ model }));
        } catch (e) {
          registrarMetrics.refused("unregistration", e instanceof z.ZodError ? new ServeError(ErrorCode.badRequest, describeZodError(e)) : e);
          replyError(bus.nc, msg.reply, e instanceof z.ZodError ? new ServeError(ErrorCode.badRequest, describeZodError(e)) : e);
        }
      })();
    },
  });

  const tuning = options.BATCH_TUNING ? followBatchTuning(new BatchTuner(bus, store, systemClock, log, { sloMemoryMs: options.SLO_MEMORY_MS })) : [];

  return {
    info: { batchTuning: options.BATCH_TUNING, metricsPort: metrics.port },
    async stop() {
      for (const sub of tuning) sub.unsubscribe();
      register.unsubscribe();
      unregister.unsubscribe();
      await metrics.close();
      await bus.close();
      await store.close();
    },
  };
});
