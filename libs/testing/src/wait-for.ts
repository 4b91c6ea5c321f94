import { inspect } from "node:util";

export interface WaitForOptions {
  /** Give up after this long, ms (default 10 000). */
  timeoutMs?: number;
  /** Pause between two tries, ms (default 20). */
  intervalMs?: number;
  /** Called once on timeout; what it returns is added to the error (e.g. the events seen so far). */
  detail?: () => unknown;
}

/** What `waitFor` resolves with: the condition's value, less the falsy ones it kept waiting through. */
export type Truthy<T> = Exclude<T, false | 0 | 0n | "" | null | undefined>;

/**
 * Tries `condition` at once, then every `intervalMs`, until it returns (or resolves with) a truthy
 * value, and resolves with that value. A try that throws (or rejects) counts as "not yet": an
 * `expect(...)` inside the condition is retried. After `timeoutMs` it throws an Error naming `what`,
 * the timeout and the last value or exception seen (as its `cause` too), so that a wait that never
 * ends fails as itself, not as an unrelated assertion later. A try still running at the timeout is
 * not waited for.
 */
export async function waitFor<T>(what: string, condition: () => T | Promise<T>, options: WaitForOptions = {}): Promise<Truthy<T>> {
  const timeoutMs = options.timeoutMs ?? 10_000;
  const intervalMs = options.intervalMs ?? 20;
  const deadline = Date.now() + timeoutMs;
  let tries = 0;
  let last: { value: unknown } | { error: unknown } | undefined;
  for (;;) {
    tries++;
    const attempt = (async () => condition())();
    const outcome = await settleBefore(attempt, deadline);
    if (outcome === undefined) {
      // Abandoned: a late rejection is the last try's, already past its deadline; it is kept off the
      // process's unhandled rejections, and the timeout below says the try had not finished.
      attempt.then(
        () => {},
        () => {},
      );
      throw timeoutError(what, timeoutMs, tries, `the last try had not finished${last ? `; the one before ${describe(last)}` : ""}`, last, options.detail);
    }
    if ("value" in outcome && outcome.value) return outcome.value as Truthy<T>;
    last = outcome;
    const left = deadline - Date.now();
    if (left <= 0) throw timeoutError(what, timeoutMs, tries, `the last try ${describe(last)}`, last, options.detail);
    await new Promise((r) => setTimeout(r, Math.min(intervalMs, left)));
  }
}

/** The attempt's value or error, or undefined if it has not settled by `deadline`. */
async function settleBefore<T>(attempt: Promise<T>, deadline: number): Promise<{ value: T } | { error: unknown } | undefined> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<undefined>((resolve) => (timer = setTimeout(() => resolve(undefined), Math.max(0, deadline - Date.now()))));
  try {
    return await Promise.race([attempt.then((value) => ({ value }), (error: unknown) => ({ error })), late]);
  } finally {
    clearTimeout(timer);
  }
}

function timeoutError(what: string, timeoutMs: number, tries: number, lastSeen: string, last: { value: unknown } | { error: unknown } | undefined, detail: (() => unknown) | undefined): Error {
  let message = `timed out after ${timeoutMs} ms (${tries} ${tries === 1 ? "try" : "tries"}) waiting for ${what}; ${lastSeen}`;
  if (detail) {
    let extra: unknown;
    try {
      extra = detail();
    } catch (err) {
      extra = `(detail threw: ${errorText(err)})`;
    }
    message += `; ${typeof extra === "string" ? extra : show(extra)}`;
  }
  return new Error(message, last && "error" in last ? { cause: last.error } : undefined);
}

function describe(last: { value: unknown } | { error: unknown }): string {
  return "error" in last ? `threw ${errorText(last.error)}` : `returned ${show(last.value)}`;
}

function errorText(err: unknown): string {
  return err instanceof Error ? `${err.name}: ${err.message}` : show(err);
}

const MAX_SHOWN = 600;

function show(value: unknown): string {
  const text = inspect(value, { depth: 4, breakLength: Infinity, maxArrayLength: 20, maxStringLength: MAX_SHOWN });
  return text.length > MAX_SHOWN ? `${text.slice(0, MAX_SHOWN)}…` : text;
}
