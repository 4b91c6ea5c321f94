import { Command, CommanderError, InvalidArgumentError, Option } from "commander";
import { Api, CliError, exitCodes } from "./client.js";
import { makeOut, type Out } from "./output.js";
import { registerModel } from "./register.js";
import { infer } from "./infer.js";
import { deletePipeline, inferPipeline, listPipelines, registerPipeline, showPipeline } from "./pipelines.js";
import { listApps, listDecisions, listModels, listVariants, listWorkers, showCost } from "./views.js";
import { simList, simRun } from "./sim.js";
import { deleteQuota, getQuota, quotaOwner, setQuota } from "./quotas.js";

/**
 * `sloserve`: the command line of the frontend's HTTP API (`--url`, default http://localhost:8080, or
 * SLOSERVE_URL). Tables for people by default, JSON with `--json`. Exit codes: 0 done; 1 the server
 * refused or failed the request (its message printed); 2 a usage mistake or an unreadable file;
 * 3 the frontend cannot be reached.
 */

function number(label: string, check: (n: number) => boolean, rule: string): (value: string) => number {
  return (value) => {
    const n = Number(value);
    if (value.trim() === "" || !Number.isFinite(n) || !check(n)) throw new InvalidArgumentError(`${label} must be ${rule}`);
    return n;
  };
}
const positiveInt = (label: string) => number(label, (n) => Number.isInteger(n) && n > 0, "a positive integer");
const positive = (label: string) => number(label, (n) => n > 0, "a positive number");
const fraction = (label: string) => number(label, (n) => n >= 0 && n <= 1, "a number from 0 to 1");
const collect = (value: string, previous: string[] = []): string[] => [...previous, value];

interface Globals {
  url: string;
  apiKey?: string;
  json?: boolean;
}

/** The API client and output of a command, from the program's options. */
function context(cmd: Command): { api: Api; out: Out } {
  const g = cmd.optsWithGlobals<Globals>();
  return { api: new Api(g.url, g.apiKey), out: makeOut(g.json === true) };
}

/**
 * An action with the command's API client and output: commander calls it with the command's arguments,
 * its options, then the command itself.
 */
function act<A extends unknown[]>(fn: (api: Api, out: Out, ...args: A) => Promise<void>): (...given: unknown[]) => Promise<void> {
  return async (...given) => {
    const { api, out } = context(given.at(-1) as Command);
    await fn(api, out, ...(given.slice(0, -1) as A));
  };
}

/** An action that needs the output only (no server). */
function offline<A extends unknown[]>(fn: (out: Out, ...args: A) => Promise<void>): (...given: unknown[]) => Promise<void> {
  return async (...given) => fn(makeOut((given.at(-1) as Command).optsWithGlobals<Globals>().json === true), ...(given.slice(0, -1) as A));
}

/** Options shared by `infer` and `pipelines infer`: where the query's input comes from. */
function inputOptions(cmd: Command): Command {
  return cmd
    .option("-i, --input <file>", "the query as Open Inference Protocol JSON ({\"inputs\": [...]}) or the list of inputs")
    .option("-g, --generate", "generate random inputs from the input signature")
    .option("--batch <rows>", "rows of a generated input", positiveInt("--batch"), 1)
    .option("--shape <name=dims>", "shape of a generated input with dynamic dimensions (repeatable), e.g. x=1,3,48,320", collect);
}

export function buildProgram(): Command {
  const program = new Command("sloserve")
    .description("Command line of sloserve, the SLO-driven model-less inference server: register models, query, and watch it scale.")
    .addOption(new Option("--url <url>", "the frontend's base URL").env("SLOSERVE_URL").default("http://localhost:8080"))
    .addOption(new Option("--api-key <key>", "API key, sent as 'Authorization: Bearer <key>' (a frontend with access control on: npm start -- --auth)").env("SLOSERVE_API_KEY"))
    .option("--json", "print JSON for programs instead of tables")
    .exitOverride()
    .showHelpAfterError("(add --help for usage)")
    .addHelpText("after", "\nExit codes: 0 done, 1 the server refused or failed the request, 2 a usage mistake or an unreadable file, 3 the frontend cannot be reached.");

  program
    .command("register")
    .description("register a model (ONNX) with its validation set, then follow its variant generation and profiling")
    .argument("<app>", "the app the model serves (models of an app take the same inputs)")
    .argument("<model>", "the model's name")
    .argument("<file>", "the ONNX file")
    .option("-v, --validation <file>", "validation set: binary tensors (inputs with N rows + labels) or JSON {\"inputs\": [...], \"labels\": [...]}")
    .option("--task <task>", "what the model does, e.g. image-classification")
    .option("--dataset <name>", "what it was trained on")
    .option("--profile-shape <json>", "sizes of dynamic non-batch dimensions for profiling, e.g. '{\"x\": [3, 48, 320]}'")
    .option("--no-wait", "return once the variants exist, without following their profiling")
    .option("--timeout-s <seconds>", "longest wait for profiling", positive("--timeout-s"), 600)
    .action(act(async (api, out, app: string, model: string, file: string, o: { validation?: string; task?: string; dataset?: string; profileShape?: string; wait: boolean; timeoutS: number }) => registerModel(api, out, { app, model, file, ...o })));

  program
    .command("apps")
    .description("list apps with their models, variants and active instances")
    .action(act(async (api, out) => listApps(api, out)));

  program
    .command("models")
    .description("list models (of one app, or all)")
    .argument("[app]", "only this app's models")
    .action(act(async (api, out, app: string | undefined) => listModels(api, out, app)));

  program
    .command("variants")
    .description("list a model's variants with their profiles (latency, peak throughput, accuracy, memory) and where they are loaded, in which state")
    .argument("<model>")
    .action(act(async (api, out, model: string) => listVariants(api, out, model)));

  inputOptions(
    program
      .command("infer")
      .description("query a model, or an app model-less (INFaaS) with --slo-ms and optionally --min-accuracy / --max-cost")
      .argument("<name>", "a model, or an app with --slo-ms"),
  )
    .option("--slo-ms <ms>", "latency SLO of a model-less query to the app <name>", positive("--slo-ms"))
    .option("--min-accuracy <fraction>", "lowest accuracy the variant may have (model-less)", fraction("--min-accuracy"))
    .option("--max-cost <dollars>", "highest cost per query (model-less)", positive("--max-cost"))
    .option("--timeout-ms <ms>", "how long the server may take", positiveInt("--timeout-ms"))
    .action(act(async (api, out, name: string, o: Parameters<typeof infer>[3]) => infer(api, out, name, o)));

  const pipelines = program.command("pipelines").description("InferLine pipelines: list (the default), show, register, delete, infer");
  pipelines
    .command("list", { isDefault: true })
    .description("list pipelines")
    .action(act(async (api, out) => listPipelines(api, out)));
  pipelines
    .command("show")
    .description("a pipeline's spec and its controller's plan")
    .argument("<name>")
    .action(act(async (api, out, name: string) => showPipeline(api, out, name)));
  pipelines
    .command("register")
    .description("register a pipeline from its JSON spec")
    .argument("<file>", "the spec (docs/PIPELINES.md)")
    .option("--name <name>", "the pipeline's name, if not the spec's")
    .action(act(async (api, out, file: string, o: { name?: string }) => registerPipeline(api, out, file, o.name)));
  pipelines
    .command("delete")
    .description("delete a pipeline")
    .argument("<name>")
    .action(act(async (api, out, name: string) => deletePipeline(api, out, name)));
  inputOptions(pipelines.command("infer").description("query a pipeline").argument("<name>"))
    .option("-f, --file <file>", "send this file as the body (e.g. a PNG for the ocr pipeline)")
    .option("--content-type <type>", "the file's media type (default: from its extension)")
    .option("-p, --param <name=value>", "a pipeline parameter (repeatable), e.g. threshold=0.95", collect)
    .action(act(async (api, out, name: string, o: Parameters<typeof inferPipeline>[3]) => inferPipeline(api, out, name, o)));

  const quota = program.command("quota").description("an app's quota, or an API key's (--key): rate, burst and queries in flight; over it queries are refused at once (HTTP 429)");
  const keyOption = (): Option => new Option("--key <key_id>", "an API key's quota instead of an app's (its id, from POST /v1/keys; access control on)");
  quota
    .command("set")
    .description("set (or replace) an app's or an API key's quota (an admin key with access control on)")
    .argument("[app]")
    .addOption(keyOption())
    .requiredOption("--rate <qps>", "queries per second the app (or key) may send", positive("--rate"))
    .requiredOption("--burst <n>", "queries admitted at once above the rate", positiveInt("--burst"))
    .requiredOption("--concurrency <n>", "the app's (or key's) queries in flight at once", positiveInt("--concurrency"))
    .action(act(async (api, out, app: string | undefined, o: { key?: string; rate: number; burst: number; concurrency: number }) => setQuota(api, out, quotaOwner(app, o.key), o)));
  quota
    .command("get")
    .description("an app's or an API key's quota")
    .argument("[app]")
    .addOption(keyOption())
    .action(act(async (api, out, app: string | undefined, o: { key?: string }) => getQuota(api, out, quotaOwner(app, o.key))));
  quota
    .command("delete")
    .description("remove an app's or an API key's quota (an admin key with access control on)")
    .argument("[app]")
    .addOption(keyOption())
    .action(act(async (api, out, app: string | undefined, o: { key?: string }) => deleteQuota(api, out, quotaOwner(app, o.key))));

  program
    .command("workers")
    .description("list workers, their resources, and the variants loaded on them with their per-second figures")
    .action(act(async (api, out) => listWorkers(api, out)));

  program
    .command("decisions")
    .description("recent scaling decisions (model and VM autoscalers, dispatcher loads, pipeline controller) with their reasons")
    .option("-n, --limit <n>", "how many, newest last", positiveInt("--limit"), 50)
    .option("--since-s <seconds>", "how far back", positiveInt("--since-s"), 3600)
    .option("--source <source>", "only those of one source: model, vm, dispatcher or pipeline")
    .action(act(async (api, out, o: { limit: number; sinceS: number; source?: string }) => listDecisions(api, out, o)));

  program
    .command("cost")
    .description("what the fleet costs: dollars so far and per hour, by market, per instance")
    .action(act(async (api, out) => showCost(api, out)));

  const sim = program.command("sim").description("the simulator's paper scenarios (libs/sim: `npm run sim`)");
  sim
    .command("list")
    .description("list the scenarios")
    .action(offline((out) => simList(out)));
  sim
    .command("run")
    .description("run a scenario (or all): prints its table and writes reports/<scenario>.json and its charts")
    .argument("<scenario>")
    .argument("[options...]", "the simulator's options: --seed N, --peak-qps N, --duration-s N, --trace FILE, --out DIR, --predictor NAME")
    .allowUnknownOption()
    .allowExcessArguments()
    .action(offline((out, scenario: string, passed: string[]) => simRun(out, scenario, passed)));

  return program;
}

/** Runs the CLI; returns the exit code. Errors are one line on stderr (a stack only with SLOSERVE_DEBUG=1). */
export async function main(argv: readonly string[]): Promise<number> {
  const program = buildProgram();
  try {
    await program.parseAsync([...argv], { from: "user" });
    return 0;
  } catch (err) {
    if (err instanceof CommanderError) {
      // Commander printed its message (or the help) already.
      return err.exitCode === 0 ? 0 : exitCodes.usage;
    }
    if (err instanceof CliError) {
      process.stderr.write(`sloserve: ${err.message}\n`);
      return err.exitCode;
    }
    process.stderr.write(`sloserve: unexpected error: ${(err as Error).message ?? String(err)}\n`);
    if (process.env.SLOSERVE_DEBUG) process.stderr.write(`${(err as Error).stack ?? ""}\n`);
    return exitCodes.refused;
  }
}
