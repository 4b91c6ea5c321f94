import { basename } from "node:path";
import cliProgress from "cli-progress";
import { CliError, exitCodes, seg, type Api } from "./client.js";
import { readLocalFile, textTable, type Out } from "./output.js";
import { fetchModel, variantRows, type ModelView, type Status } from "./views.js";

/**
 * `sloserve register`: uploads a model (and its validation set) as multipart, as the frontend takes it
 * (`POST /v1/apps/{app}/models/{model}`), then follows its profiling (`GET /v1/models/{model}/profile`,
 * fed by the profilers' `registry.event.profile.*` progress) until every variant on hardware that has
 * workers is profiled. Three bars on a terminal: upload (bytes), variant generation (the registrar's
 * answer) and profiling (variants profiled); one line per phase otherwise.
 */

export interface RegisterArgs {
  app: string;
  model: string;
  file: string;
  validation?: string;
  task?: string;
  dataset?: string;
  profileShape?: string;
  /** Follow profiling to the end. */
  wait: boolean;
  timeoutS: number;
}

interface ProfileStatus {
  variants: number;
  profiled: number;
  by_hardware: Record<string, { variants: number; profiled: number; workers: number }>;
  jobs: Array<{ job: string; hardware: string; phase: string; step: number; steps: number; message: string; worker: string }>;
}

/** Bytes sent per chunk of the upload (the upload bar moves per chunk). */
const CHUNK = 256 * 1024;

/** The bars, or phase lines where stderr is not a terminal; nothing with --json. */
class Progress {
  private readonly multi: cliProgress.MultiBar | undefined;
  private readonly bars = new Map<string, cliProgress.SingleBar>();

  constructor(private readonly quiet: boolean) {
    this.multi =
      !quiet && process.stderr.isTTY
        ? new cliProgress.MultiBar({ format: "{phase} |{bar}| {percentage}% {detail}", hideCursor: true, clearOnComplete: false, stream: process.stderr }, cliProgress.Presets.shades_classic)
        : undefined;
  }

  update(phase: string, value: number, total: number, detail: string): void {
    if (!this.multi) return;
    const payload = { phase: phase.padEnd(9), detail };
    const bar = this.bars.get(phase);
    if (!bar) this.bars.set(phase, this.multi.create(total, value, payload));
    else {
      bar.setTotal(total);
      bar.update(value, payload);
    }
  }

  /** A phase's end: its bar full, or its line where there are no bars. */
  done(phase: string, detail: string): void {
    if (this.multi) this.update(phase, 1, 1, detail);
    else if (!this.quiet) process.stderr.write(`${phase}: ${detail}\n`);
  }

  stop(): void {
    this.multi?.stop();
  }
}

const mb = (bytes: number): string => `${(bytes / 1048576).toFixed(1)} MB`;

export async function registerModel(api: Api, out: Out, args: RegisterArgs, sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))): Promise<void> {
  const form = new FormData();
  if (args.task) form.set("task", args.task);
  if (args.dataset) form.set("dataset", args.dataset);
  if (args.profileShape) {
    try {
      JSON.parse(args.profileShape);
    } catch {
      throw new CliError(`--profile-shape must be JSON, e.g. '{"x": [3, 48, 320]}'; got ${args.profileShape}`, exitCodes.usage);
    }
    form.set("profile_shape", args.profileShape);
  }
  form.set("model", new Blob([readLocalFile(args.file, "model file")]), basename(args.file));
  if (args.validation) form.set("validation", new Blob([readLocalFile(args.validation, "validation set")]), basename(args.validation));

  // The multipart body, sent in chunks so that the upload bar follows it.
  const encoded = new Response(form);
  const contentType = encoded.headers.get("content-type") ?? "multipart/form-data";
  const bytes = new Uint8Array(await encoded.arrayBuffer());
  const progress = new Progress(out.json);
  try {
    let sent = 0;
    const body = new ReadableStream<Uint8Array>({
      pull(controller) {
        if (sent >= bytes.length) {
          controller.close();
          return;
        }
        const chunk = bytes.subarray(sent, sent + CHUNK);
        sent += chunk.length;
        controller.enqueue(chunk);
        progress.update("upload", sent, bytes.length, `${mb(sent)} / ${mb(bytes.length)}`);
        if (sent >= bytes.length) progress.update("variants", 0, 1, "the registrar checks the model and generates its variants");
      },
    });
    const registered = await api.json<ModelView & { profile_jobs: number }>("POST", `/v1/apps/${seg(args.app)}/models/${seg(args.model)}`, { body, headers: { "content-type": contentType } });
    progress.done("upload", `${mb(bytes.length)} sent`);
    progress.done("variants", `${registered.variants.length} variants, ${registered.profile_jobs} profiling jobs${registered.validation_set_size ? `, validation set of ${registered.validation_set_size}` : ""}`);

    if (args.wait) await followProfiling(api, args, progress, sleep);
  } finally {
    progress.stop();
  }

  const [model, status] = await Promise.all([fetchModel(api, args.model), api.get<Status>("/v1/status")]);
  const instances = status.instances.filter((i) => i.model === args.model);
  out.emit(model, () => `registered ${model.name} in app ${model.app}\n${textTable(variantRows(model.variants, instances))}`);
}

/** Polls the model's profiling status until the variants on hardware with workers are profiled. */
async function followProfiling(api: Api, args: RegisterArgs, progress: Progress, sleep: (ms: number) => Promise<unknown>): Promise<void> {
  const deadline = Date.now() + args.timeoutS * 1000;
  for (;;) {
    const s = await api.get<ProfileStatus>(`/v1/models/${seg(args.model)}/profile`);
    const served = Object.entries(s.by_hardware).filter(([, h]) => h.workers > 0);
    const total = served.reduce((n, [, h]) => n + h.variants, 0);
    const profiled = served.reduce((n, [, h]) => n + h.profiled, 0);
    const waiting = Object.entries(s.by_hardware)
      .filter(([, h]) => h.workers === 0)
      .map(([hw]) => hw);
    const running = s.jobs.filter((j) => j.phase === "started" || j.phase === "step");
    const failed = s.jobs.filter((j) => j.phase === "failed");
    const detail = running[0] ? `${profiled}/${total} variants; ${running[0].worker}: ${running[0].message}` : `${profiled}/${total} variants`;
    progress.update("profiling", profiled, Math.max(total, 1), detail);
    if (profiled >= total) {
      const rest = waiting.length ? `; ${waiting.join(", ")} variants wait for a worker of their kind` : "";
      progress.done("profiling", `${profiled}/${total} variants profiled on ${served.map(([hw]) => hw).join(", ") || "no hardware (no workers)"}${rest}`);
      return;
    }
    if (failed.length > 0 && running.length === 0) {
      throw new CliError(`profiling of ${args.model} failed: ${failed.map((j) => `${j.hardware} on ${j.worker}: ${j.message}`).join("; ")}`);
    }
    if (Date.now() > deadline) {
      throw new CliError(`profiling of ${args.model} did not finish within ${args.timeoutS} s (${profiled}/${total} variants); it goes on: see \`sloserve variants ${args.model}\``);
    }
    await sleep(500);
  }
}
