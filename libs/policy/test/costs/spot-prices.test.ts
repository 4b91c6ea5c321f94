import { describe, expect, it } from "vitest";
import {
  chooseMarket,
  emptyMachinePlanState,
  generateSpotSeries,
  INSTANCE_PRICES,
  kindsAtPrices,
  parseSpotPriceCsv,
  planMachines,
  spotCostDollars,
  spotPriceAt,
  type MachineKind,
  type MachineView,
  type MarketOffer,
  type SpotPriceSeries,
} from "../../src/index.js";

const H = 3_600_000;
// c5.large: on-demand $0.085/h, static spot $0.03/h (costs.ts INSTANCE_PRICES).
const series: SpotPriceSeries = { "c5.large": [{ atMs: 0, perHour: 0.04 }, { atMs: H, perHour: 0.1 }, { atMs: 2 * H, perHour: 0.02 }] };

describe("spot-prices", () => {
  const at: Array<{ t: number; want: number | undefined; type?: string }> = [
    { t: -5, want: 0.04 }, // before the first point: the first price
    { t: 0, want: 0.04 },
    { t: H - 1, want: 0.04 },
    { t: H, want: 0.1 },
    { t: 1e12, want: 0.02 },
    { t: 0, want: undefined, type: "p2.xlarge" },
  ];
  for (const c of at) {
    it(`spot-prices - the price in effect at ${c.t} ms${c.type ? ` (${c.type})` : ""}`, () => {
      expect(spotPriceAt(series, c.type ?? "c5.large", c.t)).toBe(c.want);
    });
  }

  const markets: Array<{ name: string; offer: MarketOffer; s?: SpotPriceSeries; t?: number; market: "spot" | "on-demand"; price: number; reason: string }> = [
    { name: "spot not allowed", offer: { type: "c5.large", spot: false }, s: series, market: "on-demand", price: 0.085, reason: "c5.large: spot not allowed" },
    { name: "no series: the static spot price", offer: { type: "c5.large", spot: true }, market: "spot", price: 0.03, reason: "c5.large: static spot price $0.0300/h ≤ max $0.0850/h" },
    { name: "the series' price at t", offer: { type: "c5.large", spot: true }, s: series, t: 10, market: "spot", price: 0.04, reason: "c5.large: spot price at t $0.0400/h ≤ max $0.0850/h" },
    // 0.1 > 0.085: spot saves nothing.
    { name: "spot above on-demand: on-demand", offer: { type: "c5.large", spot: true }, s: series, t: H + 10, market: "on-demand", price: 0.085, reason: "c5.large: spot price at t $0.1000/h above the max $0.0850/h: on-demand at $0.0850/h" },
    { name: "a lower max price", offer: { type: "c5.large", spot: true, maxSpotPerHour: 0.035 }, s: series, t: 10, market: "on-demand", price: 0.085, reason: "c5.large: spot price at t $0.0400/h above the max $0.0350/h: on-demand at $0.0850/h" },
    { name: "a type the series lacks: its static spot price", offer: { type: "p2.xlarge", spot: true }, s: series, market: "spot", price: 0.27, reason: "p2.xlarge: static spot price $0.2700/h ≤ max $0.9000/h" },
    { name: "an unknown type with its on-demand price", offer: { type: "x1.custom", spot: false, onDemandPerHour: 1.5 }, market: "on-demand", price: 1.5, reason: "x1.custom: spot not allowed" },
    { name: "an unknown type without any spot price", offer: { type: "x1.custom", spot: true, onDemandPerHour: 1.5 }, s: series, market: "on-demand", price: 1.5, reason: "x1.custom: no spot price known" },
  ];
  for (const c of markets) {
    it(`spot-prices - chooseMarket: ${c.name}`, () => {
      expect(chooseMarket(c.offer, c.s, c.t ?? 0)).toEqual({ market: c.market, pricePerHour: c.price, reason: c.reason });
    });
  }

  it("spot-prices - chooseMarket throws on a type with no price", () => {
    expect(() => chooseMarket({ type: "x1.custom", spot: true }, series, 0)).toThrow('unknown instance type "x1.custom"');
  });

  const bills: Array<{ name: string; from: number; to: number; type?: string; want: number }> = [
    // $0.036/h = $0.00001/s until 3600 s, then $0.072/h = $0.00002/s: 600 · 0.00001 + 600 · 0.00002 = $0.018.
    { name: "across a price change", from: 3000_000, to: 4200_000, want: 0.018 },
    // 10 s billed as the 60 s minimum at $0.00001/s.
    { name: "the 60 s minimum", from: 0, to: 10_000, want: 0.0006 },
    // 10.2 s → 11 s, but the minimum still wins; 100.2 s → 101 s · 0.00001.
    { name: "whole seconds rounded up", from: 0, to: 100_200, want: 0.00101 },
    // Not in the series: ec2Cost at the fallback $0.36/h = $0.0001/s for 120 s.
    { name: "a type the series lacks bills at the fallback price", from: 0, to: 120_000, type: "p2.xlarge", want: 0.012 },
  ];
  const billSeries: SpotPriceSeries = { "c5.large": [{ atMs: 0, perHour: 0.036 }, { atMs: H, perHour: 0.072 }] };
  for (const c of bills) {
    it(`spot-prices - spotCostDollars: ${c.name}`, () => {
      expect(spotCostDollars(billSeries, c.type ?? "c5.large", 0.36, c.from, c.to)).toBeCloseTo(c.want, 12);
    });
  }

  it("spot-prices - the generated series: hourly, seeded, within its bounds, around the price table's ratio", () => {
    const o = { types: ["c5.large", "p2.xlarge"], durationMs: 1000 * H, seed: 7, crunchPerStep: 0 };
    const a = generateSpotSeries(o);
    expect(generateSpotSeries(o)).toEqual(a);
    expect(generateSpotSeries({ ...o, seed: 8 })).not.toEqual(a);
    for (const type of o.types) {
      const od = INSTANCE_PRICES[type]!.onDemandPerHour;
      const pts = a[type]!;
      expect(pts).toHaveLength(1000);
      expect(pts.map((p) => p.atMs)).toEqual(Array.from({ length: 1000 }, (_, k) => k * H));
      for (const p of pts) {
        expect(p.perHour).toBeGreaterThanOrEqual(0.1 * od - 1e-12);
        expect(p.perHour).toBeLessThanOrEqual(od + 1e-12);
      }
      // Stationary mean of e^x: e^(μ + v/2), v = σ² / (1 − (1 − θ)²) = 0.01 / 0.36 → ×1.014 the table's ratio.
      const mean = pts.reduce((s, p) => s + p.perHour, 0) / pts.length;
      const ratio = INSTANCE_PRICES[type]!.spotPerHour;
      expect(mean / ratio).toBeGreaterThan(0.95);
      expect(mean / ratio).toBeLessThan(1.08);
    }
    // Without volatility the price sits at the table's ratio.
    const flat = generateSpotSeries({ ...o, volatility: 0, durationMs: 3 * H })["c5.large"]!;
    for (const p of flat) expect(p.perHour).toBeCloseTo(0.03, 12);
  });

  it("spot-prices - capacity crunches hold the price at 1.2 × on-demand for their steps", () => {
    const always = generateSpotSeries({ types: ["c5.large"], durationMs: 5 * H, seed: 1, crunchPerStep: 1 })["c5.large"]!;
    for (const p of always) expect(p.perHour).toBeCloseTo(1.2 * 0.085, 12);
    const some = generateSpotSeries({ types: ["c5.large"], durationMs: 500 * H, seed: 1 })["c5.large"]!;
    const crunched = some.filter((p) => Math.abs(p.perHour - 0.102) < 1e-12).length;
    // About 500 / (24 + 2) crunches of 2 steps each: ~38 steps; loosely bounded.
    expect(crunched).toBeGreaterThan(10);
    expect(crunched).toBeLessThan(90);
  });

  it("spot-prices - a CSV in describe-spot-price-history's fields: the cheapest zone per time, sorted", () => {
    const csv = [
      "timestamp,instance_type,spot_price,availability_zone",
      "1546304400,c5.large,0.04,us-east-1a",
      "2019-01-01T00:00:00Z,c5.large,0.034,us-east-1a",
      "2019-01-01T00:00:00Z,c5.large,0.031,us-east-1b",
      "# a comment",
      "2019-01-01T00:00:00Z,p2.xlarge,0.3,us-east-1a",
    ].join("\n");
    expect(parseSpotPriceCsv(csv)).toEqual({
      "c5.large": [{ atMs: 1546300800000, perHour: 0.031 }, { atMs: 1546304400000, perHour: 0.04 }],
      "p2.xlarge": [{ atMs: 1546300800000, perHour: 0.3 }],
    });
  });

  it("spot-prices - a bad CSV: every problem in one error", () => {
    expect(() => parseSpotPriceCsv("time,instance_type,price\n")).toThrow("spot price CSV: the header lacks timestamp, spot_price");
    expect(() => parseSpotPriceCsv("timestamp,instance_type,spot_price\nyesterday,c5.large,0.1\n1546304400,,-1\n")).toThrow(
      'spot price CSV: line 2: timestamp "yesterday"; line 3: no instance type, price "-1"',
    );
  });

  // The live machine plan (machine-plan.ts) takes the same choice at each tick.
  const CPU: MachineKind = { instanceType: "c5.xlarge", pricePerHour: 0.06, spot: true, bootMs: 2000, resources: { threads: 2, memoryBytes: 1e9 } };
  const GPU: MachineKind = { instanceType: "p3.2xlarge", pricePerHour: 3.06, bootMs: 30_000, resources: { accelerators: 1 } };
  // c5.xlarge on-demand $0.17/h: spot $0.05 in the first hour, $0.25 (above on-demand) in the second.
  const live: SpotPriceSeries = { "c5.xlarge": [{ atMs: 0, perHour: 0.05 }, { atMs: H, perHour: 0.25 }] };

  it("spot-prices - kindsAtPrices: a spot kind at the price of now, a kind kept on-demand at its own price", () => {
    expect(kindsAtPrices({ cpu: CPU, gpu: GPU }, live, 0)).toEqual({ cpu: { ...CPU, pricePerHour: 0.05, spot: true }, gpu: { ...GPU, spot: false } });
    expect(kindsAtPrices({ cpu: CPU, gpu: GPU }, live, H)).toEqual({ cpu: { ...CPU, pricePerHour: 0.17, spot: false }, gpu: { ...GPU, spot: false } });
  });

  it("spot-prices - the machine plan launches spot, then on-demand while spot costs more", () => {
    const worker: MachineView = { name: "c1", kind: "cpu", booting: false, utilization: 0.9, interfered: false, overloaded: false, serving: true, capacityQps: 20, lastHeartbeatMs: 0, variants: [], managed: true, launchedAtMs: 0 };
    const launch = (nowMs: number, spotPrices?: SpotPriceSeries) =>
      planMachines({ nowMs, workers: [{ ...worker, lastHeartbeatMs: nowMs }], kinds: { cpu: CPU }, state: emptyMachinePlanState(), ...(spotPrices ? { spotPrices } : {}) })
        .decisions.flatMap((d) => (d.action === "launch" ? [d.market] : []));
    expect(launch(0, live)).toEqual(["spot"]);
    expect(launch(H, live)).toEqual(["on-demand"]);
    // Without a series the kind is taken as configured.
    expect(launch(H)).toEqual(["spot"]);
  });
});
