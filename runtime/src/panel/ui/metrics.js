// Metrics: requests by instance, method, A2A version and outcome; latency by method with its histogram;
// gate rejections, store and component counters; the Prometheus endpoint.

import { fill, h, micros, bytes, section, table } from "./dom.js";
import { get } from "./api.js";
import { bars } from "./charts.js";

export function metricsView() {
  const body = h("div", { class: "stack" }, h("p", { class: "muted", text: "Loading…" }));
  function draw(m) {
    const methods = Object.entries(m.latencyByMethod || {});
    fill(
      body,
      section(
        "Latency by method",
        h("p", {}, h("a", { href: "/a2a/api/metrics?format=prometheus", target: "_blank", text: "Prometheus endpoint" }), " · ", h("a", { href: "/a2a/api/metrics", target: "_blank", text: "JSON" })),
        h("p", { class: "muted", text: "Quantiles are estimates from the histogram: exact to 1 µs below 256 µs, within 6.25 % above (a bucket's upper bound)." }),
        table([["Method", ([k]) => h("code", { text: k })], ["Count", ([, s]) => s.count], ["≈ p50", ([, s]) => micros(s.p50Us)], ["≈ p90", ([, s]) => micros(s.p90Us)], ["≈ p99", ([, s]) => micros(s.p99Us)], ["Histogram", ([, s]) => bars(s)]], methods, "No requests yet."),
      ),
      section("Requests", table([["Instance", (r) => r.instance], ["Method", (r) => h("code", { text: r.method })], ["A2A", (r) => r.version], ["Outcome", (r) => h("span", { class: `badge ${r.outcome === "ok" ? "ok" : "warn"}`, text: r.outcome })], ["Count", (r) => r.count]], m.requests || [], "No requests yet.")),
      section(
        "Counters",
        h("dl", { class: "pairs" },
          h("dt", { text: "Tasks by state" }), h("dd", { text: Object.entries(m.tasksByState || {}).map(([k, v]) => `${k.replace("TASK_STATE_", "").toLowerCase()} ${v}`).join(", ") || "—" }),
          h("dt", { text: "Active tasks" }), h("dd", { text: m.activeTasks }),
          h("dt", { text: "Open streams" }), h("dd", { text: m.openStreams }),
          h("dt", { text: "Live sessions" }), h("dd", { text: m.liveSessions }),
          h("dt", { text: "Gate rejections" }), h("dd", { text: Object.entries(m.gateRejections || {}).map(([k, v]) => `${k} ${v}`).join(", ") || "none" }),
          h("dt", { text: "Components" }), h("dd", { text: `${m.components.instantiations} instantiations, ${m.components.traps} traps, ${m.components.hostCalls} host calls` }),
          h("dt", { text: "Store" }), h("dd", { text: `${bytes(m.store.bytes)} database, ${bytes(m.store.attachmentBytes)} attachments, ${m.store.statements} statements` })),
      ),
    );
  }
  get("/metrics").then(draw, (e) => fill(body, h("p", { class: "error", role: "alert", text: `Cannot read metrics: ${e.message}` })));
  return { el: body, onMetrics: draw };
}
