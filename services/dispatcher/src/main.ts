import { hostname } from "node:os";
import type { Msg, Subscription } from "@nats-io/transport-node";
import { DISPATCHER_QUEUE, subjects } from "@sloserve/contracts";
import { connectBus, readPresence, runService, startQuotaSync, systemClock, type DispatcherPresence } from "@sloserve/bus";
import { FairShareAdmission, QuotaAdmission } from "@sloserve/policy";
import { Catalog, MetadataStore, QuotaStore } from "@sloserve/store";
import { randomBytes } from "node:crypto";
import { ClusterView } from "./cluster.js";
import { SelectionView } from "./selection-view.js";
import { ArrivalCounter } from "./arrivals.js";
import { Dispatcher } from "./dispatch.js";
import { followEvents, syncModel } from "./events.js";
import { compileDispatcherOptions } from "./options.js";
import { createFunctionPath } from "./functions.js";
import { OverflowPath } from "./overflow.js";
import { BusStageBackend, PipelineRegistry, PipelineService } from "./pipelines.js";
import { PipelineStats } from "./pipeline-stats.js";
import { builtinSteps } from "./builtin-steps.js";
import { DispatcherMetrics } from "./metrics.js";
import { DispatcherQuotas } from "./quotas.js";
import { OnceByReply, SilentPeerTakeover } from "./takeover.js";
import { startServiceMetrics } from "@sloserve/metrics";

/**
 * dispatcher: takes queries on `infer.app.*`, `infer.model.*`, `infer.variant.*` and `infer.pipeline.*` (queue group, so several
 * dispatchers share the load), checks them against the model's signature, routes each to a variant's
 * JetStream queue, and asks for variants to be loaded when none runs. Its view of models, variants,
 * instances and workers is in memory, kept current by events. With OVERFLOW set, queries that would
 * miss their deadline go to function providers instead (serverless overflow, MArk §4.1).
 */
await runService("dispatcher", process.env, async (log) => {
  const options = compileDispatcherOptions(process.env);
  const bus = await connectBus({ servers: options.NATS_URL, name: "dispatcher", log, replicas: options.JS_REPLICAS, resendOnReconnect: true });
  const store = MetadataStore.connect(options.REDIS_URL);
  const metrics = await startServiceMetrics(options, log);
  const catalog = new Catalog(store);
  const cluster = new ClusterView();
  const selection = new SelectionView();
  const id = `dispatcher-${randomBytes(3).toString("hex")}`;
  // The one place the dispatcher gets the wall clock; everything below takes time from it.
  const clock = systemClock;
  const arrivals = new ArrivalCounter(clock.now(), id);
  const dispatcherMetrics = new DispatcherMetrics(metrics.registry);
  const functions = createFunctionPath(options, clock, log, (breaker) => {
    dispatcherMetrics.breaker({ provider: breaker.name, state: breaker.state }, false);
    breaker.onStateChange((change) => dispatcherMetrics.breaker(change));
  });
  // The local pool alone, running the models: its containers share this host's cores with the workers on it.
  const sharesHost = options.OVERFLOW.length === 1 && options.OVERFLOW[0] === "local" && options.FUNCTION_BACKEND === "onnx";
  const overflow = functions ? new OverflowPath(functions, bus, cluster, catalog, arrivals, log, clock, undefined, sharesHost ? { name: hostname(), cores: options.HOST_CORES } : undefined) : undefined;
  // Apps' quotas for NATS callers: this dispatcher's share, kept current on the bus (quotas.ts).
  const quotas = new DispatcherQuotas(new QuotaAdmission(id, "dispatcher", clock.now()), bus.nc, dispatcherMetrics);
  // Weighted fair admission between apps on a congested worker pool (FAIR_SHARE; libs/policy access/fair-share.ts).
  const fair = options.FAIR_SHARE ? new FairShareAdmission() : undefined;
  const dispatcher = new Dispatcher(bus, catalog, cluster, selection, arrivals, log, clock, overflow, dispatcherMetrics, options.QUEUE_COALESCE, quotas, fair);
  const views = { catalog, cluster, selection };
  // Subscribe before reading the snapshot so nothing falls between the two.
  const subs = followEvents(bus, views, dispatcher, clock, log, overflow);
  await catalog.load();
  for (const model of catalog.models.keys()) syncModel(views, model);
  cluster.seed(await store.listInstances(), await store.listWorkers(), clock.now());
  selection.refreshRuntime(cluster);
  // Pipelines (infer.pipeline.*, registry.request.pipeline.*, metrics.pipeline.* every second).
  const pipelineRegistry = new PipelineRegistry(store, catalog, builtinSteps());
  const pipelines = new PipelineService(bus, store, pipelineRegistry, new PipelineStats(clock.now(), id), new BusStageBackend(bus, clock), log, clock);
  // Its queries come with the others below (taken over with them when a peer is silent).
  pipelines.start({ subscribeQueries: false });
  await pipelineRegistry.load();
  const quotaStore = new QuotaStore(store.redis);
  const quotaSync = await startQuotaSync(bus.nc, quotas.admission, { load: () => quotaStore.list(), clock, log });
  // Every second: arrivals, and the heartbeat whose silence makes callers send again what this held.
  const presence = (leaving: boolean): void => {
    const p: DispatcherPresence = { dispatcher: id, at_ms: clock.now(), every_ms: 1000, ...(leaving ? { leaving } : {}) };
    bus.nc.publish(subjects.dispatcherPresence(id), JSON.stringify(p));
  };
  // Every dispatcher's heartbeat. Its own heard back: a worker silent while this one heard nothing is
  // not lost (cluster.ts). A peer's silence: its queries taken over (takeover.ts).
  const takeover = new SilentPeerTakeover(id);
  const once = new OnceByReply();
  const echo = bus.nc.subscribe(subjects.dispatcherPresenceAll, {
    callback: (_err, msg) => {
      const p = readPresence(msg);
      if (!p) return;
      if (p.dispatcher === id) cluster.heard(clock.now());
      takeover.heard(p, clock.now());
    },
  });
  const ticker = setInterval(() => {
    for (const report of dispatcher.tick(clock.now())) bus.nc.publish(subjects.arrivals(report.app), JSON.stringify(report));
    presence(false);
  }, 1000);
  presence(false);

  // The query subjects (those of queries a frontend admitted under their app's quota, and pipelines'), as
  // a queue group; while a peer is silent, also outside it, each query handled once (takeover.ts).
  const querySubjects: Array<[string, (msg: Msg) => void]> = [
    ...["infer.app.*", "infer.model.*", "infer.variant.*", subjects.inferAppAdmittedAll, subjects.inferModelAdmittedAll].map((s): [string, (msg: Msg) => void] => [s, (msg) => dispatcher.handle(msg)]),
    [subjects.inferPipelineAll, (msg) => pipelines.handle(msg)],
  ];
  let takenOver: Subscription[] = [];
  const handledOnce = (handler: (msg: Msg) => void) => (_err: unknown, msg: Msg): void => {
    if (takenOver.length > 0 && !once.first(msg.reply, clock.now())) return;
    handler(msg);
  };
  const queries = querySubjects.map(([subject, handler]) => bus.nc.subscribe(subject, { queue: DISPATCHER_QUEUE, callback: handledOnce(handler) }));
  const takeoverTicker = setInterval(() => {
    const now = clock.now();
    const take = takeover.shouldTakeOver(now);
    if (take && takenOver.length === 0) {
      log.warn({ silent: takeover.silent(now) }, "dispatchers silent: taking their queries over");
      takenOver = querySubjects.map(([subject, handler]) => bus.nc.subscribe(subject, { callback: handledOnce(handler) }));
    } else if (!take && takenOver.length > 0) {
      log.info("no dispatcher silent: queries back to the queue group alone");
      for (const s of takenOver) s.unsubscribe();
      takenOver = [];
    }
    if (takenOver.length === 0) once.clear();
    else once.sweep(now);
  }, 500);
  return {
    info: { dispatcher: id, models: catalog.models.size, workers: cluster.workers.size, overflow: functions?.name ?? "off", metricsPort: metrics.port },
    async stop() {
      clearInterval(ticker);
      clearInterval(takeoverTicker);
      quotaSync.stop();
      pipelines.stop();
      for (const s of [...queries, ...takenOver, ...subs, echo]) s.unsubscribe();
      presence(true);
      if (overflow) log.info({ ...overflow.totals, provider: functions?.stats() }, "overflow totals");
      await functions?.close();
      await metrics.close();
      await bus.close();
      await store.close();
    },
  };
});
