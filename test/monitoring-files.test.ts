import { describe, expect, it } from "vitest";
import { readFileSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { parse } from "yaml";
import { REPO_ROOT } from "@sloserve/stack";

/**
 * The monitoring files against the code: deploy/prometheus.yml scrapes every service of
 * docker-compose.yml on the port compose gives its metrics; the Grafana dashboard and docs/METRICS.md
 * name only metrics the services define, and the docs list all of them.
 */

const read = (...p: string[]): string => readFileSync(join(REPO_ROOT, ...p), "utf8");

/** Every `sloserve_*` metric the code defines (`name: "sloserve_…"` in libs/*\/src and services/*\/src). */
function definedMetrics(): Set<string> {
  const names = new Set<string>();
  for (const top of ["libs", "services"]) {
    for (const pkg of readdirSync(join(REPO_ROOT, top))) {
      let files: string[];
      try {
        files = readdirSync(join(REPO_ROOT, top, pkg, "src"), { recursive: true }) as string[];
      } catch {
        continue;
      }
      for (const f of files.filter((x) => x.endsWith(".ts"))) for (const m of read(top, pkg, "src", f).matchAll(/name: "(sloserve_[a-z_]+)"/g)) names.add(m[1] as string);
    }
  }
  return names;
}

/** A histogram's series names are its own plus _bucket, _sum, _count. */
const family = (name: string, defined: Set<string>): string => (defined.has(name) ? name : name.replace(/_(bucket|sum|count)$/, ""));

interface ComposeService {
  environment?: Record<string, string>;
  profiles?: string[];
  image?: string;
}

describe("monitoring files", () => {
  const defined = definedMetrics();

  it("monitoring - prometheus.yml scrapes every compose service on its metrics port", () => {
    const compose = parse(read("docker-compose.yml"), { merge: true }) as { services: Record<string, ComposeService> };
    const prometheus = parse(read("deploy", "prometheus.yml")) as {
      scrape_configs: Array<{ job_name: string; static_configs?: Array<{ targets: string[] }>; dns_sd_configs?: Array<{ names: string[]; port: number }> }>;
    };
    // The project's services: those that run the project's image, picked by SERVICE.
    const ours = Object.entries(compose.services).filter(([, s]) => s.environment?.SERVICE !== undefined);
    expect(ours.length).toBeGreaterThanOrEqual(8);
    for (const [name, service] of ours) {
      const job = prometheus.scrape_configs.find((j) => j.job_name === name);
      expect(job, `no scrape job for ${name}`).toBeDefined();
      const port = name === "frontend" ? service.environment?.HTTP_PORT : service.environment?.METRICS_PORT;
      expect(port, `${name}: no metrics port in compose`).toMatch(/^\d+$/);
      const targets = [...(job?.static_configs ?? []).flatMap((c) => c.targets), ...(job?.dns_sd_configs ?? []).flatMap((c) => c.names.map((n) => `${n}:${c.port}`))];
      expect(targets, name).toEqual([`${name}:${port}`]);
    }
    expect(prometheus.scrape_configs.map((j) => j.job_name).sort()).toEqual(ours.map(([n]) => n).sort());
  });

  it("monitoring - the Grafana dashboard is importable and queries only metrics the services define", () => {
    const dashboard = JSON.parse(read("deploy", "grafana", "sloserve-dashboard.json")) as {
      __inputs: Array<{ name: string; type: string; pluginId: string }>;
      panels: Array<{ id: number; type: string; title: string; gridPos: { x: number; w: number }; datasource?: { uid: string }; targets?: Array<{ expr: string }> }>;
    };
    expect(dashboard.__inputs).toEqual([expect.objectContaining({ name: "DS_PROMETHEUS", type: "datasource", pluginId: "prometheus" })]);
    expect(new Set(dashboard.panels.map((p) => p.id)).size).toBe(dashboard.panels.length);
    const used = new Set<string>();
    for (const p of dashboard.panels) {
      expect(p.gridPos.x + p.gridPos.w, p.title).toBeLessThanOrEqual(24);
      if (p.type === "row") continue;
      expect(p.datasource?.uid, p.title).toBe("${DS_PROMETHEUS}");
      expect(p.targets?.length, p.title).toBeGreaterThan(0);
      for (const t of p.targets ?? []) for (const m of t.expr.matchAll(/sloserve_[a-z_]+/g)) used.add(family(m[0], defined));
    }
    for (const name of used) expect(defined, `${name} is on the dashboard but no service defines it`).toContain(name);
    // The figures the issue asks for are all there.
    for (const name of ["sloserve_dispatcher_queries_total", "sloserve_query_duration_seconds", "sloserve_slo_target_seconds", "sloserve_cost_dollars_per_hour", "sloserve_workers", "sloserve_cluster_variant_instances", "sloserve_overflow_queries_total", "sloserve_observed_queries_per_second", "sloserve_forecast_for_observed_queries_per_second"]) {
      expect(used, name).toContain(name);
    }
  });

  it("monitoring - docs/METRICS.md lists every metric the services define, and no other", () => {
    const documented = new Set<string>();
    for (const line of read("docs", "METRICS.md").split("\n").filter((l) => l.startsWith("| `sloserve_"))) {
      const first = line.split("|")[1] ?? "";
      for (const m of first.matchAll(/`(sloserve_[a-z_]+)`/g)) documented.add(m[1] as string);
    }
    expect([...documented].sort()).toEqual([...defined].sort());
  });
});
