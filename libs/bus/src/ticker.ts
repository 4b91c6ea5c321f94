import type { Logger } from "./log.js";

/**
 * A controller's loop: calls `tick` every `periodMs`, never overlapping a slow tick with the next (that
 * period is skipped), logs a failure and goes on, and warns when a tick takes more than half its period.
 * Returns the timer, for clearInterval.
 */
export function runEvery(periodMs: number, tick: () => Promise<unknown>, log: Logger, name: string): NodeJS.Timeout {
  let running = false;
  return setInterval(() => {
    if (running) return;
    running = true;
    const started = performance.now();
    void tick()
      .catch((err: unknown) => log.error({ err }, `${name} failed`))
      .finally(() => {
        running = false;
        const ms = performance.now() - started;
        if (ms > periodMs / 2) log.warn({ ms }, `slow ${name}`);
      });
  }, periodMs);
}
