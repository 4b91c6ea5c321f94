import { DISPATCHER_QUEUE, commonEnvSchema, compileOptions, subjects } from "@sloserve/contracts";
import { connectBus, runService, systemClock } from "@sloserve/bus";
import { Catalog, MetadataStore } from "@sloserve/store";
import { randomBytes } from "node:crypto";
import { ClusterView } from "./cluster.js";
import { SelectionView } from "./selection-view.js";
import { ArrivalCounter } from "./arrivals.js";
import { Dispatcher } from "./dispatch.js";
import { followEvents, syncModel } from "./events.js";

/**
 * dispatcher: takes queries on `infer.app.*`, `infer.model.*` and `infer.variant.*` (queue group, so several
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
  // The one place the dispatcher gets the wall clock; everything below takes time from it.
  const clock = systemClock;
  const arrivals = new ArrivalCounter(clock.now(), id);
  const dispatcher = new Dispatcher(bus, catalog, cluster, selection, arrivals, log, clock);
  const views = { catalog, cluster, selection };
  // Subscribe before reading the snapshot so nothing falls between the two.
  const subs = followEvents(bus, views, dispatcher, clock, log);
  await catalog.load();
  for (const model of catalog.models.keys()) syncModel(views, model);
  cluster.seed(await store.listInstances(), await store.listWorkers(), clock.now());
  selection.refreshRuntime(cluster);
  const ticker = setInterval(() => {
    const now = clock.now();
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
