import { describe, expect, it } from "vitest";
import { compileDispatcherOptions } from "../src/options.js";

describe("dispatcher options", () => {
  it("dispatcher options - overflow is off unless configured; defaults", () => {
    expect(compileDispatcherOptions({})).toMatchObject({
      OVERFLOW: [],
      FUNCTION_MEMORY_MB: 2048,
      FUNCTION_POOL_SIZE: 4,
      FUNCTION_KEEP_ALIVE_MS: 600_000,
      BREAKER_CAP_MS: 30_000,
      BREAKER_ERROR_PERCENT: 50,
      BREAKER_VOLUME: 5,
      BREAKER_RESET_MS: 10_000,
      BREAKER_WINDOW_MS: 10_000,
    });
    expect(compileDispatcherOptions({ OVERFLOW: "off" }).OVERFLOW).toEqual([]);
  });

  it("dispatcher options - providers in order: the first behind its breaker, the next its fallback", () => {
    expect(compileDispatcherOptions({ OVERFLOW: "local" }).OVERFLOW).toEqual(["local"]);
    expect(compileDispatcherOptions({ OVERFLOW: "lambda, local", LAMBDA_FUNCTION: "sloserve-fn" })).toMatchObject({ OVERFLOW: ["lambda", "local"], LAMBDA_FUNCTION: "sloserve-fn" });
    expect(compileDispatcherOptions({ OVERFLOW: "local", FUNCTION_POOL_SIZE: "8", FUNCTION_MEMORY_MB: "3008" })).toMatchObject({ FUNCTION_POOL_SIZE: 8, FUNCTION_MEMORY_MB: 3008 });
  });

  const errors: Array<{ env: Record<string, string>; message: string }> = [
    { env: { OVERFLOW: "bogus" }, message: "invalid configuration for dispatcher: OVERFLOW: 'bogus' is not a function provider: use off, local, lambda, or two of them in order (e.g. lambda,local)" },
    { env: { OVERFLOW: "local,local" }, message: "invalid configuration for dispatcher: OVERFLOW: 'local,local' names a provider twice" },
    { env: { OVERFLOW: "lambda" }, message: "invalid configuration for dispatcher: LAMBDA_FUNCTION: OVERFLOW names lambda: set LAMBDA_FUNCTION to the function's name or ARN" },
    {
      env: { OVERFLOW: "local", FUNCTION_MEMORY_MB: "64", BREAKER_ERROR_PERCENT: "0" },
      message: "invalid configuration for dispatcher: FUNCTION_MEMORY_MB: Too small: expected number to be >=128; BREAKER_ERROR_PERCENT: Too small: expected number to be >=1",
    },
  ];
  for (const c of errors) {
    it(`dispatcher options - refuses ${JSON.stringify(c.env)}`, () => {
      expect(() => compileDispatcherOptions(c.env)).toThrow(c.message);
    });
  }
});
