import { compileOptions } from "@sloserve/contracts";
import { dispatcherSettings, type DispatcherSettings } from "@sloserve/settings";

// The dispatcher's settings live in libs/settings (dispatcher.ts), with every other service's.
export { OVERFLOW_PROVIDERS, type OverflowProviderName } from "@sloserve/settings";
export type DispatcherOptions = DispatcherSettings;

/** The dispatcher's options, from the environment (every error reported at once). */
export function compileDispatcherOptions(env: Record<string, string | undefined>): DispatcherOptions {
  return compileOptions(dispatcherSettings, env, "dispatcher");
}
