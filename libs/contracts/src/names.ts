import { ErrorCode, ServeError } from "./errors.js";

/**
 * Names of apps, models, variants and workers become NATS subject tokens, Redis keys and object
 * names, so they are restricted to letters, digits, '_' and '-', starting with a letter or digit,
 * at most 64 characters. No dots (subject separators), slashes or other path characters.
 */
const NAME_RE = /^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$/;
/** Variant and worker names carry a model or host name plus a suffix, so they may be longer. */
const LONG_NAME_RE = /^[A-Za-z0-9][A-Za-z0-9_-]{0,127}$/;

export function isValidName(name: string): boolean {
  return NAME_RE.test(name);
}

export function checkName(kind: "app" | "model" | "variant" | "worker", name: unknown): string {
  const long = kind === "variant" || kind === "worker";
  if (typeof name !== "string" || !(long ? LONG_NAME_RE : NAME_RE).test(name)) {
    throw new ServeError(
      ErrorCode.invalidName,
      `invalid ${kind} name ${JSON.stringify(name)}: use 1-${long ? 128 : 64} letters, digits, '_' or '-', starting with a letter or digit`,
    );
  }
  return name;
}
