import { DISPATCHER_QUEUE, commonEnvSchema, compileOptions, stateEventSchema, subjects, workerReportSchema } from "@sloserve/contracts";
import { connectBus, runService } from "@sloserve/bus";
import { Catalog, MetadataStore } from "@sloserve/store";
import { randomBytes } from "node:crypto";
import { ClusterView } from "./cluster.js";
import { SelectionView } from "./selection-view.js";
import { ArrivalCounter } from "./arrivals.js";
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
  const selection = new SelectionView();
  const id = `dispatcher-${randomBytes(3).toString("hex")}`;
  const arrivals = new ArrivalCounter(Date.now(), id);
  const dispatcher = new Dispatcher(bus, catalog, cluster, selection, arrivals, log);
  const syncModel = (model: string): void => {
    for (const v of catalog.variantsByModel.get(model) ?? []) selection.upsert(v);
  };

  // Subscribe before reading the snapshot so nothing falls between the two.
  const subs = [
    bus.nc.subscribe(subjects.registryEvents, {
      callback: (_err, msg) => {
        try {
          const [, , kind, model] = msg.subject.split(".");
          const before = new Set((catalog.variantsByModel.get(model ?? "") ?? []).map((v) => v.name));
          if (catalog.applyEvent(msg.subject, msg.json())) {
            const after = new Set((catalog.variantsByModel.get(model ?? "") ?? []).map((v) => v.name));
            for (const name of before) if (!after.has(name)) selection.remove(name);
            if (kind !== "unregistered") syncModel(model ?? "");
            selection.refreshRuntime(cluster);
          }
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
        selection.refreshRuntime(cluster);
        if (parsed.data.state === "inactive" && !(cluster.instances.get(parsed.data.variant)?.size ?? 0)) void dispatcher.rescue(parsed.data.variant, Date.now());
      },
    }),
    bus.nc.subscribe(subjects.workerMetricsAll, {
      callback: (_err, msg) => {
        const parsed = workerReportSchema.safeParse(msg.json());
        if (!parsed.success) return;
        cluster.applyReport(parsed.data, Date.now());
        selection.refreshRuntime(cluster);
      },
    }),
  ];
  await catalog.load();
  for (const model of catalog.models.keys()) syncModel(model);
  cluster.seed(await store.listInstances(), await store.listWorkers(), Date.now());
  selection.refreshRuntime(cluster);
  const ticker = setInterval(() => {
    const now = Date.now();
    for (const worker of cluster.prune(now)) log.warn({ worker }, "worker heartbeat lost");
    for (const report of arrivals.take(now)) bus.nc.publish(subjects.arrivals(report.app), JSON.stringify(report));
  }, 1000);

  const queries = [
    bus.nc.subscribe("infer.app.*", { queue: DISPATCHER_QUEUE, callback: (_err, msg) => dispatcher.handle(msg) }),
    bus.nc.subscribe("infer.model.*", { queue: DISPATCHER_QUEUE, callback: (_err, msg) => dispatcher.handle(msg) }),
    bus.nc.subscribe("infer.variant.*", { queue: DISPATCHER_QUEUE, callback: (_err, msg) => dispatcher.handle(msg) }),
  ];
  return {
    info: { dispatcher: id, models: catalog.models.size, workers: cluster.workers.size },
    async stop() {
      clearInterval(ticker);
      for (const s of [...queries, ...subs]) s.unsubscribe();
      await bus.close();
      await store.close();
    },
  };
});
