import { DISPATCHER_QUEUE, commonEnvSchema, compileOptions, stateEventSchema, subjects, workerReportSchema } from "@sloserve/contracts";
import { connectBus, runService } from "@sloserve/bus";
import { Catalog, MetadataStore } from "@sloserve/store";
import { ClusterView } from "./cluster.js";
import { Dispatcher } from "./dispatch.js";

/**
 * dispatcher: takes queries on `infer.model.*` and `infer.variant.*` (queue group, so several
 * dispatchers share the load), checks them against the model's signature, routes each to a variant's
 * JetStream queue, and asks for variants to be loaded when none runs. Its view of models, variants,
 * instances and workers is in memory, kept current by events.
 */
await runService("dispatcher", process.env, async (log) => {
  const options = compileOptions(commonEnvSchema, process.env, "dispatcher");
  const bus = await connectBus({ servers: options.NATS_URL, name: "dispatcher", log });
  const store = MetadataStore.connect(options.REDIS_URL);
  const catalog = new Catalog(store);
  const cluster = new ClusterView();
  const dispatcher = new Dispatcher(bus, catalog, cluster, log);

  // Subscribe before reading the snapshot so nothing falls between the two.
  const subs = [
    bus.nc.subscribe(subjects.registryEvents, {
      callback: (_err, msg) => {
        try {
          catalog.applyEvent(msg.subject, msg.json());
        } catch (err) {
          log.warn({ err, subject: msg.subject }, "ignoring malformed registry event");
        }
      },
    }),
    bus.nc.subscribe(subjects.stateAll, {
      callback: (_err, msg) => {
        const parsed = stateEventSchema.safeParse(msg.json());
        if (!parsed.success) return;
        cluster.applyState(parsed.data);
        if (parsed.data.state !== "loading") dispatcher.settled(parsed.data.variant);
      },
    }),
    bus.nc.subscribe(subjects.workerMetricsAll, {
      callback: (_err, msg) => {
        const parsed = workerReportSchema.safeParse(msg.json());
        if (parsed.success) cluster.applyReport(parsed.data, Date.now());
      },
    }),
  ];
  await catalog.load();
  cluster.seed(await store.listInstances(), await store.listWorkers(), Date.now());
  const pruner = setInterval(() => {
    for (const worker of cluster.prune(Date.now())) log.warn({ worker }, "worker heartbeat lost");
  }, 1000);

  const queries = [
    bus.nc.subscribe("infer.model.*", { queue: DISPATCHER_QUEUE, callback: (_err, msg) => dispatcher.handle(msg) }),
    bus.nc.subscribe("infer.variant.*", { queue: DISPATCHER_QUEUE, callback: (_err, msg) => dispatcher.handle(msg) }),
  ];
  return {
    info: { models: catalog.models.size, workers: cluster.workers.size },
    async stop() {
      clearInterval(pruner);
      for (const s of [...queries, ...subs]) s.unsubscribe();
      await bus.close();
      await store.close();
    },
  };
});
