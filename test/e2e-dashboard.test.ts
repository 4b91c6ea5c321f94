import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { existsSync, mkdirSync, statSync } from "node:fs";
import { join } from "node:path";
import { chromium, type BrowserContext, type Page } from "playwright-core";
import { startStack, digitsModels, registerOverHttp, waitForProfiles, tempDir, REPO_ROOT, type Stack, type BundledModel } from "@sloserve/stack";
import { servingStates, type VariantState } from "@sloserve/contracts";
import { waitFor } from "@sloserve/testing";
import { postJson } from "./support.js";

/**
 * The built-in dashboard in a real browser: Debian's chromium driven by playwright-core loads
 * /dashboard on a real stack after traffic, and finds the charts drawn (Vega-Lite from the bundles
 * the frontend serves) and the figures shown: workers, variants with their states, cost, the
 * decisions with their reasons, forecast against actual (the forecaster with 3 s units, so that it
 * forecasts within the test). Its screenshot is kept in test/artifacts/dashboard.png.
 */

const CHROMIUM = "/usr/bin/chromium";
const SCREENSHOT = join(REPO_ROOT, "test", "artifacts", "dashboard.png");

let stack: Stack;
let context: BrowserContext;
let model: BundledModel;
const pageErrors: string[] = [];

interface Snapshot {
  throughput: Array<{ app: string }>;
  latency: Array<{ model: string }>;
  slo: unknown[];
  forecast: Array<{ app: string; series: string }>;
  decisions: Array<{ action: string; reason: string }>;
  cost: { instances_per_hour: number; series: Array<{ kind: string }>; machines_per_hour: number | null };
  variants: Array<{ variant: string; state: string }>;
  totals: { workers: number };
}

/** Whether some series (by `key`) has at least two points: what a drawn line needs. */
function twoPointsOfOne<T>(points: T[], key: (p: T) => string): boolean {
  const counts = new Map<string, number>();
  for (const p of points) counts.set(key(p), (counts.get(key(p)) ?? 0) + 1);
  return [...counts.values()].some((n) => n >= 2);
}

const image = (i: number): number[] => Array.from({ length: 784 }, (_, k) => ((k * 5 + i * 11) % 31) / 31);

beforeAll(async () => {
  if (!existsSync(CHROMIUM)) {
    throw new Error(`the dashboard's browser test needs Debian's chromium at ${CHROMIUM}, which is not installed: run 'bash scripts/ensure-deps.sh' (it runs 'apt-get install -y chromium')`);
  }
  const digits = await digitsModels();
  model = digits.find((m) => m.name === "digits-mlp-s") as BundledModel;
  stack = await startStack({
    cpuWorkers: 1,
    workerThreads: 1,
    env: { VARIANT_HARDWARE: "cpu", VARIANT_BATCH_SIZES: "1,8", VARIANT_CPU_THREADS: "1", UNIT_S: "3", SAMPLE_S: "1", HORIZON: "5", SEASON: "3" },
    vmAutoscalerEnv: { COST_EVERY_MS: "1000" },
  });
  const r = await registerOverHttp(stack.httpUrl, model);
  expect(r.status, JSON.stringify(r.body)).toBe(201);
  await waitForProfiles(stack.httpUrl, model.name, "cpu", 120_000);
  for (let i = 0; i < 15; i++) {
    const byModel = await postJson(`${stack.httpUrl}/v2/models/${model.name}/infer`, { inputs: [{ name: "input", datatype: "FP32", shape: [1, 1, 28, 28], data: image(i) }] });
    expect(byModel.status, JSON.stringify(byModel.body)).toBe(200);
    const modelLess = await postJson(`${stack.httpUrl}/v1/apps/digits/infer`, { inputs: [{ name: "input", datatype: "FP32", shape: [1, 1, 28, 28], data: image(i) }], slo: { latency_ms: 2000 } });
    expect(modelLess.status, JSON.stringify(modelLess.body)).toBe(200);
    // Spread over several seconds: a chart's line needs two per-second points (on a fast machine the
    // 30 queries fit in one second, and a one-point line is drawn as a bare move).
    await new Promise((r) => setTimeout(r, 250));
  }
  // Until the frontend has heard every kind of figure: arrivals, worker reports with latencies, a
  // decision (the load the first query asked for), a cost summary and the forecaster's first units.
  let d: Snapshot | undefined;
  await waitFor("the frontend to hear every kind of figure", async () => {
    d = (await (await fetch(`${stack.httpUrl}/v1/dashboard`)).json()) as Snapshot;
    return (
      twoPointsOfOne(d.throughput, (p) => p.app) &&
      twoPointsOfOne(d.latency, (p) => p.model) &&
      d.decisions.length > 0 &&
      twoPointsOfOne(d.cost.series, (p) => p.kind) &&
      twoPointsOfOne(d.forecast, (p) => `${p.app} ${p.series}`) &&
      d.forecast.some((f) => f.series === "observed") &&
      d.forecast.some((f) => f.series === "forecast")
    );
  }, { timeoutMs: 30_000, intervalMs: 500, detail: () => `the last snapshot: ${JSON.stringify(d).slice(0, 2000)}` });
  context = await chromium.launchPersistentContext(tempDir("chromium"), {
    executablePath: CHROMIUM,
    headless: true,
    args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync"],
    viewport: { width: 1400, height: 1200 },
  });
}, 300_000);

afterAll(async () => {
  await context?.close();
  await stack?.stop();
});

async function openDashboard(): Promise<Page> {
  const page = await context.newPage();
  page.on("pageerror", (err) => pageErrors.push(err.message));
  page.on("console", (msg) => {
    if (msg.type() === "error") pageErrors.push(msg.text());
  });
  const response = await page.goto(`${stack.httpUrl}/dashboard`);
  expect(response?.status()).toBe(200);
  // Two refreshes drawn: the page polls every 2 s.
  await page.waitForFunction("Number(document.body.dataset.updates ?? 0) >= 2", undefined, { timeout: 30_000 });
  return page;
}

describe("e2e dashboard", () => {
  it("dashboard - in chromium after traffic: charts drawn, figures shown, a screenshot kept", async () => {
    const page = await openDashboard();
    expect(await page.getAttribute("body", "data-error")).toBeNull();
    const d = (await (await fetch(`${stack.httpUrl}/v1/dashboard`)).json()) as Snapshot;

    // Every chart is an SVG with its line drawn; latency has its SLO rule; forecast its points.
    for (const id of ["chart-throughput", "chart-latency", "chart-cost", "chart-forecast"]) {
      const paths = await page.locator(`#${id} svg .mark-line path`).evaluateAll((els) => els.map((e) => e.getAttribute("d") ?? ""));
      expect(paths.length, id).toBeGreaterThan(0);
      expect(paths.some((p) => p.length > 10), `${id}: ${paths.join(" | ")}`).toBe(true);
    }
    expect(await page.locator("#chart-latency svg .mark-rule line").count()).toBeGreaterThan(0);
    expect(await page.locator("#chart-forecast svg .mark-symbol path").count()).toBeGreaterThan(1);

    // The figures: one worker, the instance's cost, an SLO attainment, the variant active, the load decision.
    expect(await page.textContent("#kpi-workers")).toBe(String(d.totals.workers));
    expect(d.totals.workers).toBe(1);
    const cost = (await page.textContent("#kpi-cost")) ?? "";
    expect(cost).toMatch(/^\$\d+\.\d{3}$/);
    expect(Number(cost.slice(1))).toBeGreaterThan(0);
    expect(await page.textContent("#kpi-slo")).toMatch(/^\d+(\.\d)?%$/);
    expect(await page.textContent("#kpi-p99")).toMatch(/^\d+\.\d$/);
    // Serving variants: Active, or Overloaded / Interfered (they still take queries; a shared machine can
    // slow a batch past its profile).
    const serving = d.variants.filter((v) => servingStates.has(v.state as VariantState)).map((v) => v.variant);
    expect(serving.length, JSON.stringify(d.variants)).toBeGreaterThan(0);
    const variantsTable = (await page.textContent("#variants")) ?? "";
    for (const v of serving) expect(variantsTable).toContain(v);
    expect(await page.locator("#variants .state.active, #variants .state.overloaded, #variants .state.interfered").count()).toBeGreaterThan(0);
    const load = d.decisions.find((x) => x.action === "load");
    expect(load?.reason).toBeTruthy();
    expect((await page.textContent("#decisions")) ?? "").toContain(load!.reason.slice(0, 40));

    mkdirSync(join(REPO_ROOT, "test", "artifacts"), { recursive: true });
    await page.screenshot({ path: SCREENSHOT, fullPage: true });
    expect(statSync(SCREENSHOT).size).toBeGreaterThan(20_000);
    expect(pageErrors).toEqual([]);
    await page.close();
  });

  it("dashboard - the vendor bundles come from the frontend, an unknown one is a 400 naming those there are", async () => {
    for (const file of ["vega.min.js", "vega-lite.min.js"]) {
      const r = await fetch(`${stack.httpUrl}/dashboard/vendor/${file}`);
      expect(r.status, file).toBe(200);
      expect(r.headers.get("content-type")).toMatch(/javascript/);
      expect((await r.text()).length).toBeGreaterThan(100_000);
    }
    const missing = await fetch(`${stack.httpUrl}/dashboard/vendor/d3.js`);
    expect(missing.status).toBe(400);
    expect(await missing.json()).toEqual({ code: "bad_request", error: "no vendor file 'd3.js' (there are vega.min.js, vega-lite.min.js)" });
  });
});
