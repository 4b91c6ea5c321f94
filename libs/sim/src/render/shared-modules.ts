/**
 * The "what the services and the simulator share" section of reports/README.md: which libs/policy
 * modules each live service and each simulated system calls. Written by hand from the imports
 * (`grep -rn '@sloserve/policy' services libs/executor libs/sim/src`); keep it in step when a caller
 * changes.
 */
import { markdownTable } from "./table.js";

interface Row {
  module: string;
  decides: string;
  service: string;
  simulator: string;
}

const ROWS: Row[] = [
  {
    module: "selection.ts",
    decides: "INFaaS Algorithm 1: the variant for a model-less query (`SelectionIndex`)",
    service: "dispatcher (selection-view.ts keeps the index; dispatch.ts queries it through selectForApp)",
    simulator: "systems/infaas.ts (through dispatch.ts); scenarios/combined.ts: the model of each query of the `combined` system; scenarios/infaas-e2e.ts: the variant each model starts with",
  },
  {
    module: "dispatch.ts",
    decides: "where a query goes: `selectForApp` (selection, the load it asks for, relief and fallback), model-query candidates",
    service: "dispatcher (dispatch.ts)",
    simulator: "systems/infaas.ts router",
  },
  { module: "routing.ts", decides: "model-specific queries: `routeModelQuery`", service: "dispatcher", simulator: "— (no model-specific queries in the scenarios)" },
  {
    module: "placement.ts",
    decides: "the worker for a load (`chooseWorker`): spread to the least utilised, or bin packing (`packBelow`: the busiest with room under 80%); worker staleness",
    service: "dispatcher (on-demand loads, packing), model-autoscaler (placements elsewhere, packing; pipeline floors, spread)",
    simulator: "systems/infaas.ts with `packBelowUtilisation` (the dispatcher's loads; placements elsewhere through model-actions.ts), infaas-mechanisms, infaas-interference",
  },
  {
    module: "batching.ts",
    decides: "when a batch leaves and how big (`planBatch`), shedding late queries (`cannotFinishInTime`), run-time estimate",
    service: "executor-cpu, executor-gpu (libs/executor instance.ts)",
    simulator: "engine.ts (every queue of every scenario), entities.ts",
  },
  {
    module: "engine-thread.ts",
    decides: "where an executor runs a session: inline on its main thread while its batches are short (median full-batch time ≤ 2 ms over 20 runs, back to a thread past 4 ms), else on a worker thread (`EngineThreadChoice` over `engineThreadPlan`; `mayRunInline`)",
    service: "executor-cpu, executor-gpu, executor-inferentia (libs/executor onnx-backend.ts)",
    simulator: "— (the simulator models no thread hops: a batch takes its profiled time wherever it runs)",
  },
  {
    module: "merge.ts",
    decides: "nothing: `merge`/`copy`, the spread's object built with `Object.assign` (Node 20 takes a slow path for a spread that gets more properties, 3-14 µs a call) for the controllers' per-tick code",
    service: "model-autoscaler, vm-autoscaler (through model-autoscaler.ts, model-actions.ts, machine-plan.ts, vm-autoscaler.ts)",
    simulator: "systems/infaas.ts (the same modules)",
  },
  {
    module: "variant-state.ts",
    decides: "Active / Overloaded / Interfered / Loading / Inactive (`observeWindow`, `nextState`)",
    service: "executor-cpu, executor-gpu (libs/executor worker.ts)",
    simulator: "systems/infaas.ts monitor",
  },
  {
    module: "model-actions.ts, model-autoscaler.ts, interference.ts",
    decides: "INFaaS's model autoscaler: replicate, upgrade/downgrade, remove, place elsewhere; moves of Interfered variants (`planMigrations`, §4.1); whether a worker admits a commanded load (`loadFitsMemory`)",
    service: "model-autoscaler (controller.ts); executors (libs/executor worker.ts: `loadFitsMemory`)",
    simulator: "systems/infaas.ts model autoscaler (moves of Interfered variants with `migrateInterfered`: infaas-mechanisms, infaas-interference; its commanded loads on CPU machines through `loadFitsMemory`)",
  },
  {
    module: "machine-plan.ts, vm-autoscaler.ts",
    decides: "the VM autoscaler's tick (`planMachines`): INFaaS's rules (add, replace, remove workers) with MArk's predictive plan, SLO monitor and spot standbys, and the termination guards",
    service: "vm-autoscaler (controller.ts)",
    simulator: "systems/infaas.ts VM autoscaler",
  },
  {
    module: "forecast.ts, forecast-plan.ts, predictors.ts, forecast-backtest.ts",
    decides: "MArk's predictor: per-minute max rates, seasonal-naive, Holt-Winters; the predictor registry (`auto` = `planForecast`'s choice, the built-in names, a user's module) and the backtest's scoring",
    service: "forecaster (each app's predictor from the registry: `FORECASTER`, `FORECASTER_BY_APP`)",
    simulator: "scenarios/mark-system.ts (the run's predictor from the registry, `--predictor`, auto by default); forecast-backtest.ts (`npm run forecast:backtest`)",
  },
  {
    module: "overflow.ts, overflow-prewarm.ts",
    decides: "MArk: serverless overflow per query (the estimate's input from what the caller sees, `overflowInputFor`; `decideOverflow`; the backlog estimate), pre-warming on a capacity loss or a forecast surge",
    service: "dispatcher (overflow.ts: per query, and pre-warming on a lost heartbeat, a spot notice, a forecast)",
    simulator: "scenarios/mark-system.ts (`overflowInputFor` + `decideOverflow` per arrival, from the ready replicas)",
  },
  {
    module: "provisioning.ts, slo-monitor.ts, batch-tuning.ts, batch-wait.ts, baselines-sagemaker.ts",
    decides: "MArk: Algorithm 1 provisioning, SLO monitor, batch tuning (`tunedBatching`: Nbatch, Wbatch and μ* of a profile under an SLO; `planBatchWaits`: the live Wbatch of each profiled variant, for its model's tightest SLO); SageMaker target tracking",
    service: "vm-autoscaler (provisioning.ts, slo-monitor.ts, and tunedBatching for the capacity per worker, through machine-plan.ts); registrar (batching.ts: batch-wait.ts, stored on the variants; the executors apply it live)",
    simulator: "scenarios/mark-system.ts (mark-twitter, mark-mmpp, combined: each type's batching and capacity by `tunedBatching`); combined.ts (batch tuning of INFaaS's EC2 variants)",
  },
  {
    module: "spot-prices.ts",
    decides: "MArk §4.5, §5.2: spot prices over time (a series from a CSV or generated), each type's market at time t (`chooseMarket`: on-demand while spot costs more), billing along the series",
    service: "vm-autoscaler (SPOT_PRICES_FILE: `parseSpotPriceCsv`; `chooseMarket` through machine-plan.ts `kindsAtPrices` every tick)",
    simulator: "scenarios/mark-system.ts (`spotPrices`: `chooseMarket` at every plan, `spotCostDollars`); mark-models.ts (`generateSpotSeries`)",
  },
  {
    module: "pipeline.ts, pipeline-spec.ts, pipeline-run.ts, estimator.ts, planner.ts, tuner.ts, baselines-cg.ts, baselines-autoscale.ts",
    decides: "InferLine: routing of a pipeline query (`pipelineRoute`), specs checked and compiled into route graphs, a live query's route (`PipelineRun`: conditions, fan-out, join), Estimator, Planner, Tuner; CG and AutoScale baselines",
    service: "dispatcher (pipelines.ts, pipeline-run.ts: `PipelineRun`, which routes with `pipelineRoute`), frontend (input signature, parameters), model-autoscaler (pipelines.ts: the Planner at registration and periodically, `tunerStep` every second)",
    simulator: "systems/inferline.ts (pipelineRoute, profiles), scenarios/inferline-*.ts (plans with the Estimator, judged on the engine)",
  },
  {
    module: "pipeline-control.ts",
    decides: "InferLine live: a spec and the catalog's variants as the Planner's inputs (model stages, measured scale factors, per-variant profiles), Algorithm 1's check at registration (`pipelineSloCheck`), a plan or the Tuner's replicas as variant floors",
    service: "model-autoscaler (pipelines.ts), dispatcher (registration: `pipelineSloCheck`)",
    simulator: "— (the scenarios build their profiles by hand and call planner.ts and tuner.ts directly)",
  },
  {
    module: "function-pool.ts",
    decides: "which function container serves an invocation (warm, cold start, wait), keep-alive expiry, pre-warm plans",
    service: "dispatcher (overflow through libs/providers' LocalFunctionPool)",
    simulator: "engine.ts (every FunctionPool: `expiredContainers` then `chooseContainer` per invocation)",
  },
  {
    module: "accelerator-share.ts",
    decides: "INFaaS §4.2.1, §6.2: accelerators shared by footprint (a GPU variant takes its memory and a slot, an Inferentia one its NeuronCores) and priced by its share of the instance",
    service: "executors (worker.ts: held resources; instance.ts: per-query price), model-autoscaler (controller.ts `workerFreeResources`), vm-autoscaler (`instanceOffer`), frontend (dashboard)",
    simulator: "systems/infaas.ts through variant-profile.ts (`variantResources`, `footprintPricePerSecond` of each VariantProfile); infaas-architectures.ts (`variantResources` of the 22 architectures' variants) and scenarios/infaas-e2e.ts (`instanceOffer` of its workers)",
  },
  {
    module: "input-classes.ts",
    decides: "INFaaS §5: latency per input size class for models with dynamic dimensions (`inputClasses`), the class of a query (`queryElements`, `classFor`) for selection",
    service: "executors (profiler.ts), dispatcher (dispatch.ts: the query's elements), selection.ts",
    simulator: "— (the scenarios' profiles have no size classes)",
  },
  {
    module: "hardware-settings.ts",
    decides: "INFaaS §3.2: per-hardware settings of a variant (TensorRT precision, NeuronCore count) and whether a worker can build them",
    service: "executor-gpu (`tensorrtEnvironment`; libs/executor onnx-backend.ts `gpuSessionPlan`), executor-inferentia (`neuronModelFor`), registrar (variant-generator.ts)",
    simulator: "— (no simulated hardware builds variants)",
  },
  {
    module: "access.ts",
    decides: "access control: which key may call which route on which app (`authorize`, `canSee`)",
    service: "frontend (access.ts, app.ts, pipelines.ts, gRPC)",
    simulator: "— (not a serving decision)",
  },
  { module: "mix-optimizer.ts", decides: "INFaaS Table 3's cheapest mix of variants", service: "—", simulator: "scenarios/infaas-table3.ts" },
  {
    module: "profiling.ts, variant-generator.ts, variant-profile.ts, variant-price.ts",
    decides: "profiling runs, variants generated at registration, profile → VariantProfile, price of a variant",
    service: "executors (profiler, per-query cost), registrar, dispatcher, model-autoscaler",
    simulator: "— (scenarios take their profiles from the papers, hardware.ts)",
  },
  {
    module: "costs.ts, rng.ts, quantile.ts, arrivals.ts",
    decides: "prices and billing; the seeded PRNG; quantiles; arrival processes (rate schedules, Gamma inter-arrivals, trace replay)",
    service: "dispatcher (costs via dispatch.ts), executors (quantile), model-autoscaler (arrivals: the pipeline planner's sample traces)",
    simulator: "billing.ts, engine.ts, stats.ts, the scenarios (their workloads)",
  },
];

export function sharedModulesSection(): string[] {
  return [
    "## What the services and the simulator share",
    "",
    "Every decision rule exists once, in `libs/policy` (pure, time passed in); the live services and the simulator's systems call the same functions. " +
      "The simulator's INFaaS is `libs/sim/src/systems/infaas.ts`, MArk and the SageMaker baseline `libs/sim/src/scenarios/mark-system.ts`, an InferLine pipeline " +
      "`libs/sim/src/systems/inferline.ts`; the engine (`libs/sim/src/engine.ts`) batches and sheds with the executors' rule. InferLine's Estimator is the engine's fast " +
      "path for pipelines (the Planner's inner loop); `libs/sim/test/estimator-vs-engine.test.ts` checks that the two agree, and the InferLine scenarios report what the engine measures.",
    "",
    markdownTable(ROWS.map((r) => ({ "libs/policy module": r.module, decides: r.decides, "live service (caller)": r.service, "simulator (caller)": r.simulator }))),
    "",
  ];
}
