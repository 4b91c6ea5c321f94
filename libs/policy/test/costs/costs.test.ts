import { describe, expect, it } from "vitest";
import { DEFAULT_TYPE_FOR_KIND, acceleratorPerHour, ec2Cost, lambdaCost, pricePerSecond, vcpuPerHour } from "../../src/index.js";

describe("costs", () => {
  const ec2 = [
    // p3.2xlarge $3.06/h = $0.00085/s
    { name: "under a minute bills 60 s", price: 0.00085, ms: 30_000, want: 60 * 0.00085 },
    { name: "zero seconds bills 60 s", price: 0.00085, ms: 0, want: 60 * 0.00085 },
    { name: "per second above the minimum", price: 0.00085, ms: 90_000, want: 90 * 0.00085 },
    // 90.2 s rounds up to 91 whole seconds
    { name: "partial seconds round up", price: 0.00085, ms: 90_200, want: 91 * 0.00085 },
  ];
  for (const c of ec2) {
    it(`costs - EC2 ${c.name}`, () => {
      expect(ec2Cost(c.price, 1000, 1000 + c.ms)).toBeCloseTo(c.want, 12);
    });
  }

  it("costs - EC2 minimum is configurable", () => {
    expect(ec2Cost(1, 0, 10_000, { minimumS: 0 })).toBe(10);
  });

  it("costs - price table in $/s", () => {
    expect(pricePerSecond("p3.2xlarge")).toBeCloseTo(3.06 / 3600, 12);
    expect(pricePerSecond("c5.large", "spot")).toBeCloseTo(0.03 / 3600, 12);
    expect(DEFAULT_TYPE_FOR_KIND).toEqual({ cpu: "c5.xlarge", gpu: "p3.2xlarge", inferentia: "inf1.xlarge" });
    expect(() => pricePerSecond("x9.huge")).toThrow('unknown instance type "x9.huge"');
  });

  const perDevice = [
    // InferLine §6: (p2.8xlarge $7.20 − r4.8xlarge $2.128) / 8 K80s
    { name: "K80 from p2.8xlarge minus r4.8xlarge", got: () => acceleratorPerHour("p2.8xlarge", "r4.8xlarge"), want: 0.634 },
    { name: "one vCPU of r4.8xlarge", got: () => vcpuPerHour("r4.8xlarge"), want: 2.128 / 32 },
    { name: "one vCPU of c5.xlarge", got: () => vcpuPerHour("c5.xlarge"), want: 0.17 / 4 },
  ];
  for (const c of perDevice) {
    it(`costs - InferLine §6 price of ${c.name}`, () => {
      expect(c.got()).toBeCloseTo(c.want, 12);
    });
  }

  it("costs - InferLine §6 prices name the unknown or accelerator-less type", () => {
    expect(() => acceleratorPerHour("p9.huge", "r4.8xlarge")).toThrow('unknown instance type "p9.huge"');
    expect(() => acceleratorPerHour("p2.8xlarge", "r9.huge")).toThrow('unknown instance type "r9.huge"');
    expect(() => acceleratorPerHour("r4.8xlarge", "c5.xlarge")).toThrow('instance type "r4.8xlarge" has no accelerators');
    expect(() => vcpuPerHour("x9.huge")).toThrow('unknown instance type "x9.huge"');
  });

  it("costs - Lambda per request and per GB-second", () => {
    // 2e-7 + 3 GB × 0.380 s × 1.66667e-5 = 1.9200e-5 → $19.2 per million (MArk Table 2 prints 19.0)
    expect(lambdaCost(380, 3)).toBeCloseTo(0.0000192000, 9);
    // 100 ms rounding: 101 ms bills 200 ms → 2e-7 + 1 × 0.2 × 1.66667e-5
    expect(lambdaCost(101, 1, { perRequest: 2e-7, perGbSecond: 0.0000166667, roundingMs: 100 })).toBeCloseTo(2e-7 + 0.2 * 0.0000166667, 12);
  });
});
