/**
 * The dashboard's page: figures from `GET /v1/dashboard` every 2 s, charts drawn by Vega-Lite (compiled
 * to Vega in the browser, rendered as SVG) from the bundles the frontend serves under /dashboard/vendor/.
 * `body[data-updates]` counts the refreshes drawn, `body[data-error]` holds the last failure: the
 * browser test waits on them. With access control on, its data needs an admin key: open the page as
 * `/dashboard#key=<key>` (a fragment is never sent to the server); the page keeps the key for the tab
 * (sessionStorage), takes it off the address bar and sends it as `Authorization: Bearer`.
 */
export const dashboardHtml = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>sloserve dashboard</title><link rel="icon" href="data:,">
<script src="/dashboard/vendor/vega.min.js"></script>
<script src="/dashboard/vendor/vega-lite.min.js"></script>
<style>
body{font:14px system-ui,sans-serif;margin:20px;color:#222;background:#fafafa}h1{font-size:20px;margin:0 0 12px}h2{font-size:15px;margin:0 0 6px}
small{color:#777}.kpis{display:flex;gap:12px;flex-wrap:wrap;margin-bottom:16px}.kpi{background:#fff;border:1px solid #ddd;border-radius:6px;padding:8px 14px;min-width:120px}
.kpi b{display:block;font-size:22px}.grid{display:grid;grid-template-columns:repeat(auto-fit,minmax(600px,1fr));gap:16px}
.card{background:#fff;border:1px solid #ddd;border-radius:6px;padding:10px 12px;overflow:auto}
table{border-collapse:collapse;width:100%}td,th{border-bottom:1px solid #eee;padding:3px 8px;text-align:left;font-size:13px}th{background:#f4f4f4}
.state{padding:1px 6px;border-radius:8px;font-size:12px}.active,.running{background:#dff3df;color:#126112}.loading{background:#fff1cc;color:#7a5300}
.overloaded,.interfered,.failed,.lost{background:#fbdada;color:#9b0000}.unloading,.draining,.booting{background:#e6e6f7;color:#333}
</style></head><body>
<h1>sloserve <small id="at">connecting…</small></h1>
<div class="kpis">
  <div class="kpi"><small>arrivals</small><b id="kpi-qps">–</b><small>queries/s</small></div>
  <div class="kpi"><small>served</small><b id="kpi-served">–</b><small>queries/s</small></div>
  <div class="kpi"><small>p99 latency</small><b id="kpi-p99">–</b><small>ms, slowest model, last minute</small></div>
  <div class="kpi"><small>SLO attainment</small><b id="kpi-slo">–</b><small>last 10 min</small></div>
  <div class="kpi"><small>cost</small><b id="kpi-cost">–</b><small>$/h, instances</small></div>
  <div class="kpi"><small>machines</small><b id="kpi-machines">–</b><small>$/h, launched</small></div>
  <div class="kpi"><small>workers</small><b id="kpi-workers">–</b><small id="kpi-variants"></small></div>
</div>
<div class="grid">
  <div class="card"><h2>Throughput <small>queries/s by app (dashed: to functions)</small></h2><div id="chart-throughput" class="chart"></div></div>
  <div class="card"><h2>Latency against the SLO <small>p50 and p99 by model; rule: tightest SLO</small></h2><div id="chart-latency" class="chart"></div></div>
  <div class="card"><h2>Cost per hour <small>instances (their share of the hardware) and machines launched</small></h2><div id="chart-cost" class="chart"></div></div>
  <div class="card"><h2>Forecast against actual <small>max rate per unit, queries/s</small></h2><div id="chart-forecast" class="chart"></div></div>
  <div class="card"><h2>Workers</h2><table id="workers"></table><h2 style="margin-top:12px">Machines by state <small>VM autoscaler</small></h2><table id="machines"></table></div>
  <div class="card"><h2>Variants</h2><table id="variants"></table></div>
  <div class="card" style="grid-column:1/-1"><h2>Last decisions</h2><table id="decisions"></table></div>
</div>
<script>
const apiKey = (() => {
  const given = new URLSearchParams(location.hash.slice(1)).get("key");
  if (given) { sessionStorage.setItem("sloserve-key", given); history.replaceState(null, "", location.pathname + location.search); }
  return sessionStorage.getItem("sloserve-key");
})();
const esc = (s) => String(s).replace(/[&<>"]/g, (c) => ({"&":"&amp;","<":"&lt;",">":"&gt;",'"':"&quot;"}[c]));
const fmt = (x, d) => (x === null || x === undefined ? "–" : Number(x).toFixed(d));
const time = (t) => new Date(t).toLocaleTimeString();
const state = (s) => '<span class="state ' + esc(s) + '">' + esc(s) + "</span>";
function table(id, head, rows) {
  document.getElementById(id).innerHTML = "<tr>" + head.map((h) => "<th>" + esc(h) + "</th>").join("") + "</tr>" +
    (rows.length ? rows.map((r) => "<tr>" + r.map((c) => "<td>" + c + "</td>").join("") + "</tr>").join("") : "<tr><td colspan=" + head.length + "><small>none yet</small></td></tr>");
}
const views = {};
async function chart(id, spec) {
  const full = Object.assign({ $schema: "https://vega.github.io/schema/vega-lite/v6.json", width: 520, height: 200, config: { legend: { orient: "bottom" } } }, spec);
  const view = new vega.View(vega.parse(vegaLite.compile(full).spec), { renderer: "svg", container: "#" + id, hover: false });
  await view.runAsync();
  if (views[id]) views[id].finalize();
  views[id] = view;
}
const x = { field: "t", type: "temporal", title: null, axis: { format: "%H:%M:%S", labelOverlap: true } };
function draw(d) {
  const throughput = d.throughput.map((p) => ({ t: p.t, app: p.app, qps: p.qps, route: "arrivals" }))
    .concat(d.overflow.map((p) => ({ t: p.t, app: p.app, qps: p.qps, route: "to functions" })));
  const latency = [];
  for (const p of d.latency) { latency.push({ t: p.t, model: p.model, percentile: "p50", ms: p.p50_ms }); latency.push({ t: p.t, model: p.model, percentile: "p99", ms: p.p99_ms }); }
  const models = new Set(latency.map((p) => p.model));
  const slo = d.slo.filter((s) => models.has(s.model) || latency.length === 0);
  return Promise.all([
    chart("chart-throughput", { data: { values: throughput }, mark: { type: "line", interpolate: "step-after" },
      encoding: { x, y: { field: "qps", type: "quantitative", title: "queries/s" }, color: { field: "app", type: "nominal" }, strokeDash: { field: "route", type: "nominal", title: null } } }),
    chart("chart-latency", { layer: [
      { data: { values: latency }, mark: { type: "line" }, encoding: { x, y: { field: "ms", type: "quantitative", title: "ms" }, color: { field: "model", type: "nominal" }, strokeDash: { field: "percentile", type: "nominal" } } },
      { data: { values: slo }, mark: { type: "rule", strokeDash: [6, 3], strokeWidth: 2 }, encoding: { y: { field: "slo_ms", type: "quantitative" }, color: { field: "model", type: "nominal" }, tooltip: [{ field: "model" }, { field: "slo_ms", title: "SLO ms" }] } },
    ] }),
    chart("chart-cost", { data: { values: d.cost.series }, mark: { type: "line", interpolate: "step-after" },
      encoding: { x, y: { field: "dollars_per_hour", type: "quantitative", title: "$/h" }, color: { field: "kind", type: "nominal", title: null } } }),
    chart("chart-forecast", { data: { values: d.forecast }, mark: { type: "line", point: true },
      encoding: { x, y: { field: "qps", type: "quantitative", title: "queries/s" }, color: { field: "app", type: "nominal" }, strokeDash: { field: "series", type: "nominal", title: null } } }),
  ]);
}
let updates = 0;
let busy = false;
async function refresh() {
  if (busy) return; // the last refresh is still drawing (a slow machine)
  busy = true;
  try {
    const response = await fetch("/v1/dashboard", apiKey ? { headers: { authorization: "Bearer " + apiKey } } : {});
    const d = await response.json();
    if (!response.ok) throw new Error(d.error || response.statusText);
    document.getElementById("at").textContent = time(d.atMs);
    const t = d.totals;
    document.getElementById("kpi-qps").textContent = fmt(t.qps, 1);
    document.getElementById("kpi-served").textContent = fmt(t.served_qps, 1);
    document.getElementById("kpi-p99").textContent = fmt(t.p99_ms, 1);
    document.getElementById("kpi-slo").textContent = t.slo_attainment === null ? "–" : (t.slo_attainment * 100).toFixed(1) + "%";
    document.getElementById("kpi-cost").textContent = "$" + fmt(d.cost.instances_per_hour, 3);
    document.getElementById("kpi-machines").textContent = d.cost.machines_per_hour === null ? "–" : "$" + fmt(d.cost.machines_per_hour, 3);
    document.getElementById("kpi-workers").textContent = String(t.workers);
    document.getElementById("kpi-variants").textContent = t.active_variants + " active variant(s)";
    table("workers", ["worker", "hardware", "threads used", "memory reserved MB", "RSS MB", "variants"], d.workers.map((w) =>
      [esc(w.worker), esc(w.hardware), w.threads_used + " / " + w.threads, fmt(w.memory_used_bytes / 1048576, 0) + " / " + fmt(w.memory_bytes / 1048576, 0), fmt(w.rss_bytes / 1048576, 0), w.variants]));
    table("machines", ["kind", "state", "count"], d.cost.workers_by_state.map((m) => [esc(m.kind), state(m.state), m.count]));
    table("variants", ["variant", "model", "worker", "state", "instances", "queue", "served/s", "p50 ms", "p99 ms", "busy"], d.variants.map((v) =>
      [esc(v.variant), esc(v.model), esc(v.worker), state(v.state), v.instances, v.queue_length, v.served_qps, fmt(v.p50_ms, 1), fmt(v.p99_ms, 1), fmt(v.utilisation * 100, 0) + "%"]));
    table("decisions", ["time", "source", "action", "on", "reason"], d.decisions.slice(0, 20).map((x) => [time(x.t), esc(x.source), esc(x.action), esc(x.target), esc(x.reason)]));
    await draw(d);
    document.body.dataset.updates = String(++updates);
    delete document.body.dataset.error;
  } catch (e) {
    document.body.dataset.error = String(e && e.message || e);
    document.getElementById("at").textContent = "(dashboard data unavailable: " + document.body.dataset.error + ")";
  } finally {
    busy = false;
  }
}
refresh(); setInterval(refresh, 2000);
</script></body></html>`;
