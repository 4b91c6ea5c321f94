import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { compileOptions } from "@sloserve/contracts";
import { DEFAULT_MACHINE_PLAN_CONFIG, DEFAULT_MODEL_AUTOSCALER_CONFIG, LIVE_READING_TICKS } from "@sloserve/policy";
import { SERVICE_SETTINGS, configurationMarkdown, dispatcherSettings, executorCpuSettings, executorGpuSettings, executorInferentiaSettings, settingRows, vmAutoscalerSettings, modelAutoscalerSettings } from "../src/index.js";

describe("settings", () => {
  it("settings - docs/CONFIGURATION.md is what the schemas generate (npm run docs:config)", () => {
    const file = readFileSync(new URL("../../../docs/CONFIGURATION.md", import.meta.url), "utf8");
    expect(file, "docs/CONFIGURATION.md is out of date: run npm run docs:config").toBe(configurationMarkdown());
  });

  it("settings - every variable of every service has a meaning", () => {
    for (const { service, schema } of SERVICE_SETTINGS) {
      for (const r of settingRows(schema)) {
        expect(r.description.length, `${service} ${r.name} has no description`).toBeGreaterThan(10);
        expect(r.description, `${service} ${r.name}`).not.toMatch(/TODO/);
      }
    }
  });

  it("settings - defaults are the policy's own (one default per setting)", () => {
    const vm = compileOptions(vmAutoscalerSettings, {});
    expect(vm.READING_TICKS).toBe(LIVE_READING_TICKS);
    expect(vm.COOLDOWN_MS).toBe(DEFAULT_MACHINE_PLAN_CONFIG.cooldownMs);
    expect(vm.SL_MIN).toBe(DEFAULT_MACHINE_PLAN_CONFIG.slMin);
    expect(vm.TARGET_UTILIZATION).toBe(DEFAULT_MACHINE_PLAN_CONFIG.targetUtilization);
    expect(compileOptions(modelAutoscalerSettings, {}).SLACK).toBe(DEFAULT_MODEL_AUTOSCALER_CONFIG.slack);
  });

  it("settings - a row shows the default as the environment writes it", () => {
    const rows = new Map(settingRows(vmAutoscalerSettings).map((r) => [r.name, r]));
    expect(rows.get("LAUNCH_KINDS")).toMatchObject({ default: "cpu", required: false });
    expect(rows.get("COOLDOWN_MS")).toMatchObject({ default: String(DEFAULT_MACHINE_PLAN_CONFIG.cooldownMs) });
    expect(rows.get("BOOT_TIME_MS")?.default).toMatch(/BOOT_DELAY_MS \+ 5 s/);
    expect(rows.get("EC2_IMAGE")).toMatchObject({ default: "", required: false });
  });

  it("settings - the executors' engine: their own by default, emulated on request, with its fallback latency", () => {
    expect(compileOptions(executorCpuSettings, {})).toMatchObject({ BACKEND: "onnx", EMULATED_LATENCY_MS: { batchMs: 5, itemMs: 1 } });
    expect(compileOptions(executorGpuSettings, {}).BACKEND).toBe("onnx");
    expect(compileOptions(executorInferentiaSettings, {}).BACKEND).toBe("neuron");
    expect(compileOptions(executorInferentiaSettings, { BACKEND: "emulated", EMULATED_LATENCY_MS: "8" })).toMatchObject({ BACKEND: "emulated", EMULATED_LATENCY_MS: { batchMs: 8, itemMs: 0 } });
    expect(compileOptions(executorGpuSettings, { EMULATED_LATENCY_MS: "2.5 + 0.5" }).EMULATED_LATENCY_MS).toEqual({ batchMs: 2.5, itemMs: 0.5 });
    expect(() => compileOptions(executorCpuSettings, { EMULATED_LATENCY_MS: "5ms" }, "executor-cpu")).toThrow(/EMULATED_LATENCY_MS/);
    expect(() => compileOptions(executorCpuSettings, { BACKEND: "neuron" }, "executor-cpu")).toThrow(/BACKEND/);
    expect(compileOptions(vmAutoscalerSettings, {}).LOCAL_WORKER_BACKEND).toBe("native");
  });

  it("settings - a bad value names the variable and the problem", () => {
    expect(() => compileOptions(dispatcherSettings, { OVERFLOW: "lambda" }, "dispatcher")).toThrow(/invalid configuration for dispatcher: .*LAMBDA_FUNCTION/);
    expect(() => compileOptions(vmAutoscalerSettings, { SL_MIN: "2" }, "vm-autoscaler")).toThrow(/SL_MIN/);
  });
});
