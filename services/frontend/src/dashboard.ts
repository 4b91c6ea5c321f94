/** A one-page dashboard: models, variants, workers and their per-second figures, from /v1/status. */
export const dashboardHtml = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>sloserve</title>
<style>
body{font:14px system-ui,sans-serif;margin:24px;color:#222}h1{font-size:20px}h2{font-size:16px;margin-top:24px}
table{border-collapse:collapse;min-width:480px}td,th{border-bottom:1px solid #ddd;padding:4px 10px;text-align:left}
th{background:#f4f4f4}.active{color:#127a12}.loading{color:#a66d00}.overloaded,.interfered,.failed{color:#b00}small{color:#777}
</style></head><body>
<h1>sloserve <small id="at"></small></h1>
<h2>Workers</h2><table id="workers"></table>
<h2>Variant instances</h2><table id="instances"></table>
<h2>Models</h2><table id="models"></table>
<script>
const esc = (s) => String(s).replace(/[&<>"]/g, (c) => ({"&":"&amp;","<":"&lt;",">":"&gt;",'"':"&quot;"}[c]));
function table(id, head, rows) {
  document.getElementById(id).innerHTML = "<tr>" + head.map((h) => "<th>" + esc(h) + "</th>").join("") + "</tr>" +
    (rows.length ? rows.map((r) => "<tr>" + r.map((c) => "<td>" + c + "</td>").join("") + "</tr>").join("") : "<tr><td colspan=" + head.length + "><small>none</small></td></tr>");
}
async function refresh() {
  try {
    const s = await (await fetch("/v1/status")).json();
    document.getElementById("at").textContent = new Date(s.atMs).toLocaleTimeString();
    table("workers", ["worker", "hardware", "threads used", "memory reserved MB", "RSS MB", "variants"], s.workers.map((w) =>
      [esc(w.worker), esc(w.hardware), w.threadsUsed + " / " + w.threads, (w.memoryUsedBytes / 1048576).toFixed(0) + " / " + (w.memoryBytes / 1048576).toFixed(0), (w.rssBytes / 1048576).toFixed(0), w.variants.length]));
    const rows = [];
    for (const w of s.workers) for (const v of w.variants) rows.push([esc(v.variant), esc(w.worker), '<span class="' + esc(v.state) + '">' + esc(v.state) + "</span>",
      v.arrivals, v.served, v.errors, v.queueLength, v.latencyP50Ms.toFixed(1), v.latencyP99Ms.toFixed(1), (v.utilisation * 100).toFixed(0) + "%"]);
    table("instances", ["variant", "worker", "state", "arrivals/s", "served/s", "errors/s", "queue", "p50 ms", "p99 ms", "busy"], rows);
    table("models", ["model", "app", "task", "inputs", "variants"], s.models.map((m) => [esc(m.name), esc(m.app), esc(m.task),
      esc(m.inputs.map((i) => i.name + " " + i.datatype + "[" + i.shape.join(",") + "]").join(", ")),
      esc(s.variants.filter((v) => v.model === m.name).map((v) => v.name).join(", "))]));
  } catch (e) { document.getElementById("at").textContent = "(status unavailable)"; }
}
refresh(); setInterval(refresh, 2000);
</script></body></html>`;
