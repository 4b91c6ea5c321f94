/**
 * The "what the services and the simulator share" section of reports/README.md: which libs/policy
 * modules each live service and each simulated system calls. Written by hand from the imports
 * (`grep -rn '@sloserve/policy' services libs/executor libs/sim/src`); keep it in step when a caller
 * changes (libs/sim/test/render.test.ts checks that every module has a row).
 */
import { markdownTable } from "./table.js";

interface Row {
  /** Paths under libs/policy/src/. */
  modules: string[];
  decides: string;
  service: string;
  simulator: string;
}

const ROWS: Row[] = [
  {
    modules: ["selection/selection.ts"],
    decides: "INFaaS Algorithm 1: the variant for a model-less query (`SelectionIndex`)",
    service: "dispatcher (selection-view.ts keeps the index; dispatch.ts queries it through `selectForApp`)",
    simulator: "systems/infaas.ts (through dispatch.ts); scenarios/combined.ts: the model of each query of the `combined` system; scenarios/infaas-e2e.ts: the variant each model starts with",
  },
  {
    modules: ["selection/dispatch.ts"],
    decides: "where a query goes: `selectForApp` (selection, the load it asks for, relief and fallback), model-query candidates",
    service: "dispatcher (dispatch.ts, overflow.ts)",
    simulator: "systems/infaas.ts router",
  },
  {
    modules: ["selection/routing.ts"],
    decides: "model-specific queries: `routeModelQuery`",
    service: "dispatcher (dispatch.ts)",
    simulator: "— (no model-specific queries in the scenarios)",
  },
  {
    modules: ["selection/variant-state.ts"],
    decides: "Active / Overloaded / Interfered / Loading / Inactive (`observeWindow`, `nextState`)",
    service: "executor-cpu, executor-gpu, executor-inferentia (libs/executor worker.ts)",
    simulator: "systems/infaas.ts monitor",
  },
  {
    modules: ["placement/placement.ts"],
    decides: "the worker for a load (`chooseWorker`): spread to the least utilised, or bin packing (`packBelow`: the busiest with room under 80%); worker staleness",
    service: "dispatcher (cluster.ts, dispatch.ts: on-demand loads, packing), model-autoscaler (controller.ts: placements elsewhere, packing; pipeline floors, spread)",
    simulator: "systems/infaas.ts with `packBelowUtilisation` (the dispatcher's loads; placements elsewhere through model-actions.ts): infaas-mechanisms, infaas-interference",
  },
  {
    modules: ["placement/accelerator-share.ts"],
    decides: "INFaaS §4.2.1, §6.2: accelerators shared by footprint (a GPU variant takes its memory and a slot, an Inferentia one its NeuronCores) and priced by its share of the instance",
    service: "executors (libs/executor worker.ts: held resources; instance.ts: per-query price), dispatcher (dispatch.ts), model-autoscaler (`workerFreeResources` through observation/worker-views.ts), vm-autoscaler (main.ts `instanceOffer`), frontend (dashboard-feed.ts)",
    simulator: "systems/infaas.ts through variant-profile.ts (`variantResources`, `footprintPricePerSecond`), and `workerFreeResources` of each machine's latest report (the dispatcher's loads; the model autoscaler's through observation/worker-views.ts); infaas-architectures.ts (`variantResources` of the 22 architectures' variants) and scenarios/infaas-e2e.ts (`instanceOffer` of its workers)",
  },
  {
    modules: ["scaling/model-actions.ts", "scaling/model-autoscaler.ts", "placement/interference.ts"],
    decides: "INFaaS's model autoscaler: replicate, upgrade/downgrade, remove, place elsewhere; moves of Interfered variants (`planMigrations`, §4.1); whether a worker admits a commanded load (`loadFitsMemory`)",
    service: "model-autoscaler (controller.ts); executors (libs/executor worker.ts: `loadFitsMemory`)",
    simulator: "systems/infaas.ts model autoscaler (moves of Interfered variants with `migrateInterfered`: infaas-mechanisms, infaas-interference; its commanded loads on CPU machines through `loadFitsMemory`)",
  },
  {
    modules: ["scaling/machine-plan.ts", "scaling/vm-autoscaler.ts"],
    decides: "the VM autoscaler's tick (`planMachines`): INFaaS's rules (add, replace, remove workers) with MArk's predictive plan, SLO monitor and spot standbys, and the termination guards",
    service: "vm-autoscaler (controller.ts, costs.ts, main.ts)",
    simulator: "systems/infaas.ts VM autoscaler; scenarios/replay.ts",
  },
  {
    modules: ["scaling/scaling-policy.ts"],
    decides: "which scaling rules run (`ScalingPolicy`: combined, infaas, mark, static; `scalingRulesOf`): INFaaS's adds and idle removal, MArk's plan, SLO monitor and overflow",
    service: "vm-autoscaler (main.ts, plan-config.ts: `SCALING_POLICY` into the machine plan's switches); scripts/launch.ts (the dispatcher's OVERFLOW default per policy)",
    simulator: "systems/infaas.ts (`scalingPolicy`: the same switches into `planMachines`, overflow off where the policy has none); scenarios/replay.ts (the replay's `policy`, both sides)",
  },
  {
    modules: ["scaling/host-room.ts"],
    decides: "one host's cores and memory shared by its workers and local function containers: how many more local workers fit (`hostRoom`), whether a query may overflow onto a core no worker offers (`localFunctionRoom`)",
    service: "vm-autoscaler (controller.ts: each kind's limit with PROVIDER=local and the native engines, from the workers reporting its host); dispatcher (overflow.ts: OVERFLOW=local with the onnx function engine)",
    simulator: "— (the simulator's machines and functions are a cloud's, each with cores of its own; the replays set HOST_CORES so that live does not limit them either)",
  },
  {
    modules: ["scaling/provisioning.ts", "scaling/slo-monitor.ts", "batching/batch-tuning.ts", "batching/batch-wait.ts", "baselines/baselines-sagemaker.ts"],
    decides: "MArk: Algorithm 1 provisioning, SLO monitor (`sloMonitorCycle`: a cycle every 10 s that acts only while queries still miss), batch tuning (`tunedBatching`: Nbatch, Wbatch and μ* of a profile under an SLO; `planBatchWaits`: the live Wbatch of each profiled variant, for its model's tightest SLO); SageMaker target tracking",
    service: "vm-autoscaler (provisioning, SLO monitor and `tunedBatching` for the capacity per worker, through machine-plan.ts); registrar (batching.ts: batch-wait.ts, stored on the variants; the executors apply it live)",
    simulator: "scenarios/mark-system.ts (mark-twitter, mark-mmpp, combined: Algorithm 1 over the paper's instance types, `sloMonitorCycle` with the machine plan's defaults, each type's batching and capacity by `tunedBatching`); scenarios/combined.ts (batch tuning of INFaaS's EC2 variants)",
  },
  {
    modules: ["scaling/mix-optimizer.ts"],
    decides: "INFaaS Table 3's cheapest mix of variants",
    service: "—",
    simulator: "scenarios/infaas-table3.ts",
  },
  {
    modules: ["batching/batching.ts"],
    decides: "when a batch leaves and how big (`planBatch`), shedding late queries (`cannotFinishInTime`), run-time estimate",
    service: "executors (libs/executor instance.ts)",
    simulator: "engine.ts (every queue of every scenario), entities.ts",
  },
  {
    modules: ["forecasting/forecast.ts", "forecasting/forecast-plan.ts", "forecasting/predictors.ts", "forecasting/forecast-backtest.ts"],
    decides: "MArk's predictor: per-minute max rates, seasonal-naive, Holt-Winters; the predictor registry (`auto` = `planForecast`'s choice, the built-in names, a user's module) and the backtest's scoring",
    service: "forecaster (forecaster.ts, main.ts: each app's predictor from the registry, `FORECASTER`, `FORECASTER_BY_APP`)",
    simulator: "scenarios/mark-system.ts (the run's predictor from the registry, `--predictor`, auto by default); scenarios/replay.ts; forecast-backtest.ts (`npm run forecast:backtest`)",
  },
  {
    modules: ["overflow/overflow.ts", "overflow/overflow-prewarm.ts"],
    decides: "MArk: serverless overflow per query (the estimate's input from what the caller sees, `overflowInputFor`; `decideOverflow`; the backlog estimate), pre-warming on a capacity loss or a forecast surge",
    service: "dispatcher (dispatch.ts, overflow.ts: per query, and pre-warming on a lost heartbeat, a spot notice, a forecast)",
    simulator: "systems/infaas.ts (`overflowInputFor` + `decideOverflow` per arrival, from the ready replicas; queue ahead as the live dispatcher reads it, `drainBacklog`); scenarios/mark-system.ts (the same decision and the same queue-ahead estimate)",
  },
  {
    modules: ["overflow/function-pool.ts"],
    decides: "which function container serves an invocation (warm, cold start, wait), keep-alive expiry, pre-warm plans",
    service: "dispatcher (overflow through libs/providers' `LocalFunctionPool`)",
    simulator: "engine.ts, entities.ts (every FunctionPool: `expiredContainers` then `chooseContainer` per invocation)",
  },
  {
    modules: ["costs/spot-prices.ts"],
    decides: "MArk §4.5, §5.2: spot prices over time (a series from a CSV or generated), each type's market at time t (`chooseMarket`: on-demand while spot costs more), billing along the series",
    service: "vm-autoscaler (main.ts: `SPOT_PRICES_FILE` through `parseSpotPriceCsv`; controller.ts; `chooseMarket` through machine-plan.ts every tick)",
    simulator: "scenarios/mark-system.ts (`chooseMarket` at every plan, `spotCostDollars`); scenarios/mark-models.ts (`generateSpotSeries`)",
  },
  {
    modules: ["pipelines/pipeline.ts", "pipelines/pipeline-spec.ts", "pipelines/pipeline-run.ts", "pipelines/estimator.ts", "pipelines/planner.ts", "pipelines/tuner.ts", "baselines/baselines-cg.ts", "baselines/baselines-autoscale.ts"],
    decides: "InferLine: routing of a pipeline query (`pipelineRoute`), specs checked and compiled into route graphs, a live query's route (`PipelineRun`: conditions, fan-out, join), Estimator, Planner, Tuner; CG and AutoScale baselines",
    service: "dispatcher (pipelines.ts, pipeline-run.ts, pipeline-steps.ts, ocr-steps.ts: `PipelineRun`, which routes with `pipelineRoute`), frontend (pipelines.ts: input signature, parameters), model-autoscaler (pipelines.ts: the Planner at registration and periodically, `tunerStep` every second)",
    simulator: "systems/inferline.ts (`pipelineRoute`, profiles), scenarios/inferline-*.ts (plans with the Estimator, judged on the engine)",
  },
  {
    modules: ["pipelines/pipeline-control.ts"],
    decides: "InferLine live: a spec and the catalog's variants as the Planner's inputs (model stages, measured scale factors, per-variant profiles), Algorithm 1's check at registration (`pipelineSloCheck`), a plan or the Tuner's replicas as variant floors",
    service: "model-autoscaler (pipelines.ts), dispatcher (pipelines.ts: `pipelineSloCheck` at registration)",
    simulator: "— (the scenarios build their profiles by hand and call planner.ts and tuner.ts directly)",
  },
  {
    modules: ["variants/engine-thread.ts"],
    decides: "where an executor runs a session: inline on its main thread while its batches are short (median full-batch time ≤ 2 ms over 20 runs, back to a thread past 4 ms), else on a worker thread (`EngineThreadChoice` over `engineThreadPlan`; `mayRunInline`)",
    service: "executor-cpu, executor-gpu (libs/executor onnx-backend.ts; executor-inferentia hands its batches to a server)",
    simulator: "— (the simulator models no thread hops: a batch takes its profiled time wherever it runs)",
  },
  {
    modules: ["variants/input-classes.ts"],
    decides: "INFaaS §5: latency per input size class for models with dynamic dimensions (`inputClasses`), the class of a query (`queryElements`, `classFor`) for selection",
    service: "executors (libs/executor profiler.ts), dispatcher (dispatch.ts: the query's elements), selection/selection.ts",
    simulator: "— (the scenarios' profiles have no size classes)",
  },
  {
    modules: ["variants/hardware-settings.ts"],
    decides: "INFaaS §3.2: per-hardware settings of a variant (TensorRT precision, NeuronCore count) and whether a worker can build them",
    service: "executor-gpu (main.ts: `tensorrtEnvironment`; libs/executor onnx-backend.ts `gpuSessionPlan`), executor-inferentia (neuron-backend.ts: `neuronModelFor`), registrar (through variant-generator.ts)",
    simulator: "— (no simulated hardware builds variants)",
  },
  {
    modules: ["variants/profiling.ts", "variants/variant-generator.ts", "variants/variant-profile.ts", "costs/variant-price.ts"],
    decides: "profiling runs, variants generated at registration, profile → VariantProfile, price of a variant",
    service: "executors (libs/executor profiler.ts, instance.ts), registrar (register.ts: variant-generator.ts), dispatcher (selection-view.ts, overflow.ts), model-autoscaler (controller.ts; variant prices through pipeline-control.ts), vm-autoscaler (controller.ts)",
    simulator: "systems/infaas.ts (`profiledLatencyAt`: the overflow estimate's batch time); otherwise the scenarios take their profiles from the papers (hardware.ts)",
  },
  {
    modules: ["costs/costs.ts", "common/rng.ts", "common/quantile.ts"],
    decides: "prices and billing; the seeded PRNG; quantiles",
    service: "executors (libs/executor worker.ts: prices; profiler.ts, stats.ts: quantiles), vm-autoscaler (main.ts: prices), libs/providers (instance prices and billing), dispatcher (pipeline-stats.ts: quantiles), model-autoscaler (pipelines.ts: the seeded PRNG)",
    simulator: "billing.ts, engine.ts, entities.ts, hardware.ts, stats.ts, trace.ts, the scenarios",
  },
  {
    modules: ["common/arrivals.ts"],
    decides: "arrival processes: rate schedules (constant, steps, ramps, spikes, a trace scaled to a peak) driven as Gamma arrivals of a given CV",
    service: "model-autoscaler (pipelines.ts: the sample trace the Planner's Estimator runs on)",
    simulator: "engine.ts, systems/inferline.ts, the scenarios (their workloads)",
  },
  {
    modules: ["observation/fleet.ts"],
    decides: "what the VM autoscaler reads of the fleet (`FleetObservation`): heartbeats, each worker's utilisation over the tick (the mean of its reports), SLO outcomes since the last tick, each app's tightest SLO, load per kind, which workers are booting, running, lost or have left, the machine views; fleet states for the cost summary (`fleetStateOf`)",
    service: "vm-autoscaler (controller.ts: fed the worker and arrivals reports it receives, its provider's instances and Redis's records)",
    simulator: "systems/infaas.ts VM autoscaler: fed its machines' worker reports (worker-report.ts `simulatedWorkerReport`) and its dispatcher's arrivals reports, every second; scenarios/mark-system.ts: each lane's instances' worker reports, every second, whose SLO outcomes are its SLO monitor's samples",
  },
  {
    modules: ["observation/worker-views.ts"],
    decides: "one worker's views from its report: the machine plan's (`machineView`), the SLO outcomes (`sloOutcomes`), the model autoscaler's (`workerRunsFromReport`)",
    service: "vm-autoscaler (through `FleetObservation`), model-autoscaler (controller.ts: `workerRunsFromReport`)",
    simulator: "systems/infaas.ts: the VM autoscaler (through `FleetObservation`), scenarios/mark-system.ts's SLO monitor (`sloOutcomes` through `FleetObservation`), the model autoscaler (`workerRunsFromReport` of each machine's latest report, its free resources included: the scenarios' machines name their resources as the live workers' reports do)",
  },
  {
    modules: ["observation/utilization.ts"],
    decides: "a worker's utilisation from its report (`reportUtilization`: threads-weighted busy share for CPU workers, busy share per accelerator otherwise)",
    service: "vm-autoscaler (through `FleetObservation`), model-autoscaler (packing, through `workerRunsFromReport`), dispatcher (cluster.ts: placement)",
    simulator: "systems/infaas.ts: the VM autoscaler (through `FleetObservation`), the dispatcher's loads and the model autoscaler's placements (each machine's latest report)",
  },
  {
    modules: ["observation/slo-window.ts"],
    decides: "the tightest latency SLO of the last minute, per app or model (`SloWindow`)",
    service: "registrar (batching.ts: batch tuning), model-autoscaler (controller.ts: candidate variants), vm-autoscaler (through `FleetObservation`)",
    simulator: "systems/infaas.ts VM autoscaler (through `FleetObservation`, from the arrivals reports)",
  },
  {
    modules: ["observation/holds.ts"],
    decides: "which hold decisions to publish (`HoldFilter`: when the reason changes, or again after a while)",
    service: "vm-autoscaler, model-autoscaler (decisions on `decision.*`)",
    simulator: "— (the simulator publishes nothing; its log keeps actions, not holds)",
  },
  {
    modules: ["common/merge.ts"],
    decides: "nothing: `merge`/`copy`, the spread's object built with `Object.assign` (Node 20 takes a slow path for a spread that gets more properties, 3-14 µs a call) for the controllers' per-tick code",
    service: "model-autoscaler, vm-autoscaler (through model-autoscaler.ts, model-actions.ts, machine-plan.ts, vm-autoscaler.ts)",
    simulator: "systems/infaas.ts (the same modules)",
  },
  {
    modules: ["access/access.ts"],
    decides: "access control: which key may call which route on which app (`authorize`, `canSee`)",
    service: "frontend (access.ts, app.ts, pipelines.ts, gRPC)",
    simulator: "— (not a serving decision)",
  },
  {
    modules: ["access/quota.ts"],
    decides: "per-app quotas: admission by a token bucket and a concurrency limit (`QuotaAdmission`); each process's share of an app's quota from the demand every process reports (`shareQuota`)",
    service: "frontend (quotas.ts: HTTP and gRPC queries), dispatcher (quotas.ts: NATS callers and pipeline stages), through libs/bus quota-sync.ts",
    simulator: "— (the scenarios run one tenant per app, within no quota)",
  },
  {
    modules: ["access/fair-share.ts"],
    decides: "weighted fair admission between apps on a congested worker pool: each app's weighted max-min share of the pool's worker time (`weightedFairShares`), a query over its app's share refused (`FairShareAdmission`)",
    service: "dispatcher (dispatch.ts: every query routed to a variant, costs and capacity from cluster.ts)",
    simulator: "— (the simulator's dispatch admits every query; not modelled yet)",
  },
];

const INTRO = "Every decision rule exists once, in `libs/policy` (pure, time passed in); the live services and the simulator's systems call the same functions. The simulator's INFaaS is `libs/sim/src/systems/infaas.ts`, MArk and the SageMaker baseline `libs/sim/src/scenarios/mark-system.ts`, an InferLine pipeline `libs/sim/src/systems/inferline.ts`; the engine (`libs/sim/src/engine.ts`) batches and sheds with the executors' rule. InferLine's Estimator is the engine's fast path for pipelines (the Planner's inner loop); `libs/sim/test/estimator-vs-engine.test.ts` checks that the two agree, and the InferLine scenarios report what the engine measures. Service files are under `services/<service>/src/`, the executors' shared code under `libs/executor/src/`, simulator files under `libs/sim/src/`.";

export function sharedModulesSection(): string[] {
  const link = (m: string): string => `[${m}](../libs/policy/src/${m})`;
  return [
    "## What the services and the simulator share",
    "",
    INTRO,
    "",
    markdownTable(ROWS.map((r) => ({ "libs/policy module": r.modules.map(link).join(", "), decides: r.decides, "live service (caller)": r.service, "simulator (caller)": r.simulator }))),
    "",
  ];
}
