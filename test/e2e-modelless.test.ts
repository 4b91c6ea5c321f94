import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { connect, headers as natsHeaders, type NatsConnection, type Subscription } from "@nats-io/transport-node";
import { startStack, digitsModels, registerOverHttp, waitForProfiles, tempDir, type Stack, type BundledModel } from "@sloserve/stack";
import { contentTypes, decodeTensors, encodeTensors, headers, subjects } from "@sloserve/contracts";
import { heavyModel, postJson } from "./support.js";

/**
 * Model-less serving on the real stack (INFaaS §4): queries name the app and their requirements;
 * the dispatcher selects the variant; the model autoscaler reacts to a load step.
 */

let stack: Stack;
let nc: NatsConnection;
let digits: BundledModel[];
const decisions: Array<{ action: string; model?: string; variant?: string; reason: string; atMs: number }> = [];
let decisionSub: Subscription;

interface ListedVariant { name: string; accuracy: number | null; peak_qps: number | null; latency_ms: Record<string, number> | null; batch_size: number; profiled: boolean; hardware: string; threads: number }
interface Listed { models: Array<{ name: string; variants: ListedVariant[] }> }

beforeAll(async () => {
  digits = await digitsModels();
  stack = await startStack({
    cpuWorkers: 1,
    workerThreads: 2,
    env: { VARIANT_HARDWARE: "cpu", VARIANT_BATCH_SIZES: "1,8,32", VARIANT_CPU_THREADS: "1" },
  });
  nc = await connect({ servers: stack.nats.url });
  decisionSub = nc.subscribe(subjects.decisionsAll, { callback: (_e, m) => void decisions.push(m.json()) });
  const byAccuracy = [...digits].sort((a, b) => a.name.localeCompare(b.name));
  for (const m of [...byAccuracy, heavyModel(tempDir("heavy"))]) {
    const r = await registerOverHttp(stack.httpUrl, m);
    expect(r.status, JSON.stringify(r.body)).toBe(201);
  }
  for (const m of [...digits.map((d) => d.name), "heavy-mlp"]) await waitForProfiles(stack.httpUrl, m, "cpu", 180_000);
}, 400_000);

afterAll(async () => {
  decisionSub?.unsubscribe();
  await nc?.close();
  await stack?.stop();
});

const image = (i: number): number[] => Array.from({ length: 784 }, (_, k) => ((k * 7 + i * 13) % 29) / 29);
const ask = (slo: Record<string, number>, i = 0) => postJson(`${stack.httpUrl}/v1/apps/digits/infer`, { inputs: [{ name: "input", datatype: "FP32", shape: [1, 1, 28, 28], data: image(i) }], slo });

async function listing(app: string): Promise<Listed> {
  return (await (await fetch(`${stack.httpUrl}/v1/apps/${app}/models`)).json()) as Listed;
}

/** The variant INFaaS would call cheapest per query among those meeting the requirements. */
function cheapestQualifying(listed: Listed, minAccuracy: number, latencyMs: number): { model: string; variant: string } {
  let best: { model: string; variant: string; cost: number } | undefined;
  for (const m of listed.models) {
    for (const v of m.variants) {
      if (!v.profiled || v.peak_qps === null || v.latency_ms === null || (v.accuracy ?? 0) < minAccuracy) continue;
      if ((v.latency_ms[String(v.batch_size)] ?? Infinity) > latencyMs) continue;
      const cost = v.threads / v.peak_qps; // every variant here is a CPU variant: price ∝ threads
      if (!best || cost < best.cost) best = { model: m.name, variant: v.name, cost };
    }
  }
  if (!best) throw new Error("nothing qualifies");
  return best;
}

describe("e2e model-less", () => {
  it("model-less - every variant of the app is listed with its measured profile", async () => {
    const listed = await listing("digits");
    expect(listed.models.map((m) => m.name).sort()).toEqual(digits.map((d) => d.name).sort());
    for (const m of listed.models) {
      expect(m.variants.length).toBeGreaterThanOrEqual(3);
      for (const v of m.variants) {
        expect(v).toMatchObject({ profiled: true, hardware: "cpu" });
        expect(v.accuracy).toBeGreaterThan(0.5);
        expect(v.peak_qps).toBeGreaterThan(0);
      }
    }
  });

  it("model-less - a loose SLO and a low accuracy need go to the cheapest model; a higher need moves them", async () => {
    const listed = await listing("digits");
    const loose = cheapestQualifying(listed, 0.5, 1000);
    const answers = [];
    for (let i = 0; i < 12; i++) answers.push(await ask({ latency_ms: 1000, min_accuracy: 0.5 }, i));
    for (const a of answers) expect(a.status, JSON.stringify(a.body)).toBe(200);
    const last = answers.slice(-6).map((a) => a.body.served_by as { model: string; accuracy: number });
    for (const s of last) expect(s.model).toBe(loose.model);
    const first = answers[0]!.body as { timing_ms: Record<string, number>; cost_dollars: number; outputs: Array<{ shape: number[] }> };
    expect(Object.keys(first.timing_ms).sort()).toEqual(["batch_wait", "inference", "queue", "total"]);
    expect(first.cost_dollars).toBeGreaterThan(0);
    expect(first.outputs[0]!.shape).toEqual([1, 10]);

    const best = Math.max(...listed.models.flatMap((m) => m.variants.map((v) => v.accuracy ?? 0)));
    const strict = cheapestQualifying(listed, best, 1000);
    expect(strict.model).not.toBe(loose.model);
    const moved = [];
    for (let i = 0; i < 6; i++) moved.push(await ask({ latency_ms: 1000, min_accuracy: best }, i));
    for (const a of moved) {
      expect(a.status).toBe(200);
      const s = a.body.served_by as { model: string; accuracy: number };
      expect(s.model).toBe(strict.model);
      expect(s.accuracy).toBeGreaterThanOrEqual(best);
    }
  });

  it("model-less - requirements nothing can meet get a 422 naming the closest variant", async () => {
    const r = await ask({ latency_ms: 1000, min_accuracy: 0.99999 });
    expect(r.status).toBe(422);
    expect(r.body.code).toBe("infeasible");
    expect(r.body.error).toMatch(/the closest is digits-/);
    expect((r.body.details as { closest: { variant: string } }).closest.variant).toMatch(/^digits-/);
    const noSlo = await postJson(`${stack.httpUrl}/v1/apps/digits/infer`, { inputs: [{ name: "input", datatype: "FP32", shape: [1, 1, 28, 28], data: image(0) }] });
    expect(noSlo.status).toBe(400);
    const unknown = await postJson(`${stack.httpUrl}/v1/apps/nope/infer`, { inputs: [{ name: "input", datatype: "FP32", shape: [1, 1, 28, 28], data: image(0) }], slo: { latency_ms: 100 } });
    expect(unknown.status).toBe(404);
  });

  it("model-less - a load step makes the system scale, the SLO is met after it, and instances go after the load drops", async () => {
    const sloMs = 150;
    const payload = encodeTensors([{ name: "input", datatype: "FP32", shape: [1, 1, 28, 28], data: Float32Array.from(image(1)) }]);
    const h = natsHeaders();
    h.set(headers.contentType, contentTypes.wire);
    h.set(headers.sloLatencyMs, String(sloMs));
    const results: Array<{ sentMs: number; latencyMs: number; ok: boolean; error?: string; variant?: string }> = [];
    /** Open-loop load at `qps` for `seconds`, over NATS with the binary encoding. */
    const drive = async (qps: number, seconds: number): Promise<void> => {
      const start = Date.now();
      const inflight: Promise<void>[] = [];
      for (let i = 0; i < qps * seconds; i++) {
        const due = start + (i * 1000) / qps;
        const wait = due - Date.now();
        if (wait > 0) await new Promise((r) => setTimeout(r, wait));
        const sent = Date.now();
        inflight.push(
          nc.request(subjects.inferApp("heavy"), payload, { timeout: 10_000, headers: h }).then(
            (m) => {
              const error = m.headers?.get(headers.error) ? new TextDecoder().decode(m.data) : undefined;
              const decoded = error ? undefined : decodeTensors<{ served_by: { variant: string } }>(m.data);
              const ok = decoded?.tensors.length === 1;
              results.push({ sentMs: sent, latencyMs: Date.now() - sent, ok, ...(error ? { error } : {}), ...(decoded ? { variant: decoded.meta.served_by.variant } : {}) });
            },
            (err: Error) => void results.push({ sentMs: sent, latencyMs: Infinity, ok: false, error: err.message }),
          ),
        );
      }
      await Promise.all(inflight);
    };
    const instances: Array<{ atMs: number; count: number }> = [];
    const reports = nc.subscribe(subjects.workerMetricsAll, {
      callback: (_e, m) => {
        const r = m.json<{ atMs: number; variants: Array<{ variant: string; instances: number; state: string }> }>();
        const count = r.variants.filter((v) => v.variant.startsWith("heavy-mlp--") && v.state !== "loading").reduce((s, v) => s + v.instances, 0);
        instances.push({ atMs: r.atMs, count });
      },
    });
    // The low load starts on the heavy model's variant of least throughput, loaded by a variant query
    // (model-less queries then find it Active, INFaaS Algorithm 1 step 1): which variant a model-less
    // query would load first depends on profiles that tie at batch 1 (the same engine, another max
    // batch), and a step past a large-batch variant's peak is more than two cores carry.
    const smallest = (await listing("heavy")).models.flatMap((m) => m.variants).filter((v) => v.peak_qps !== null).sort((a, b) => a.peak_qps! - b.peak_qps!)[0]!;
    const hw = natsHeaders();
    hw.set(headers.contentType, contentTypes.wire);
    const warm = await nc.request(subjects.inferVariant(smallest.name), payload, { timeout: 60_000, headers: hw });
    expect(warm.headers?.get(headers.error) ?? "", new TextDecoder().decode(warm.data)).toBe("");
    await drive(5, 4);
    // The step: well past the profiled peak of the variant that served the low load (profiles are
    // measured on this machine, so the step saturates it on a fast machine as on a slow one), and at
    // least 100 queries/s.
    const servedLow = results.filter((r) => r.variant).at(-1)?.variant;
    const heavyListing = await listing("heavy");
    const peakLow = heavyListing.models.flatMap((m) => m.variants).find((v) => v.name === servedLow)?.peak_qps;
    expect(peakLow, `profiled peak of ${servedLow}`).toBeGreaterThan(0);
    const stepQps = Math.max(100, Math.ceil(1.3 * peakLow!));
    const stepAt = Date.now();
    await drive(stepQps, 20);
    const scaled = decisions.filter((d) => d.atMs >= stepAt && d.model === "heavy-mlp" && ["replicate", "upgrade", "load", "place-elsewhere"].includes(d.action));
    expect(scaled.length, `step to ${stepQps} queries/s (${servedLow} peaks at ${peakLow}): ${JSON.stringify(decisions.slice(-10))}`).toBeGreaterThan(0);
    // After the system adapted (the last 8 s of the step), ≥ 99% of queries met the 150 ms SLO.
    const late = results.filter((r) => r.sentMs >= stepAt + 12_000 && r.sentMs < stepAt + 20_000);
    const met = late.filter((r) => r.ok && r.latencyMs <= sloMs).length / late.length;
    const sorted = late.map((r) => r.latencyMs).sort((a, b) => a - b);
    const summary = `${late.length} queries, ${late.filter((r) => r.ok).length} ok, p50 ${sorted[Math.floor(sorted.length / 2)]} ms, p99 ${sorted[Math.floor(sorted.length * 0.99)]} ms; errors: ${JSON.stringify([...new Set(late.filter((r) => r.error).map((r) => r.error))].slice(0, 3))}; served by ${JSON.stringify(Object.entries(late.reduce<Record<string, number>>((a, r) => ({ ...a, [r.variant ?? "-"]: (a[r.variant ?? "-"] ?? 0) + 1 }), {})))}; decisions: ${JSON.stringify(decisions.filter((d) => d.atMs >= stepAt).slice(0, 8))}`;
    expect(late.length, summary).toBeGreaterThan(stepQps * 7);
    expect(met, summary).toBeGreaterThanOrEqual(0.99);

    const dropAt = Date.now();
    await drive(5, 10);
    reports.unsubscribe();
    // Scaling added capacity (two instances at once at some point), and the surplus went: an upgrade
    // unloads the instances it replaces once the new ones are ready (libs/policy model-actions); any
    // other surplus goes after its delay, by a remove/downgrade decision with its reason. One instance
    // is left at the end.
    const peak = Math.max(...instances.filter((i) => i.atMs >= stepAt).map((i) => i.count));
    expect(peak).toBeGreaterThanOrEqual(2);
    const down = decisions.filter((d) => d.atMs >= stepAt && d.model === "heavy-mlp" && ["remove", "downgrade"].includes(d.action));
    if (!scaled.some((d) => d.action === "upgrade")) expect(down.length, JSON.stringify(decisions.slice(-10))).toBeGreaterThan(0);
    if (down[0]) expect(down[0].reason).toMatch(/T_v/);
    const final = instances.filter((i) => i.atMs >= dropAt + 6_000);
    expect(final.at(-1)?.count).toBe(1);
  }, 120_000);
});
