// Small SVG charts: the last 15 minutes of a metric with axes, and the bars of a latency
// histogram.

import { fill, h, micros, svg } from "./dom.js";

const W = 320;
const H = 130;
const PLOT = { left: 44, right: 312, top: 8, bottom: 104 };

/** A round maximum at or above `v` (1, 2 or 5 times a power of ten). */
function roundUp(v) {
  if (!(v > 0)) return 1;
  const p = 10 ** Math.floor(Math.log10(v));
  return [1, 2, 5, 10].map((m) => m * p).find((m) => m >= v);
}

/** An SVG text at (x, y). */
function label(x, y, text, anchor = "middle") {
  return svg("text", { x, y, "font-size": 9, fill: "currentColor", "text-anchor": anchor }, document.createTextNode(text));
}

/**
 * A chart of the runtime's last 15 minutes (`series` points of the metrics snapshot), with a
 * time axis and a value axis in `format`'s units: one line per `[name, value of a point]`.
 */
export function timeChart(title, lines, format) {
  const chart = svg("svg", { viewBox: `0 0 ${W} ${H}`, role: "img", "aria-label": title });
  const legend = h("span", { class: "legend" }, lines.map(([name], i) => h("span", { class: `line-${i}`, text: name })));
  const el = h("figure", { class: "series" }, h("figcaption", {}, h("strong", { text: title }), " ", legend), chart);
  return {
    el,
    draw(series) {
      const points = series?.points || [];
      const end = points.length ? points[points.length - 1].at : Date.now();
      const span = 15 * 60 * 1000;
      const x = (at) => PLOT.left + ((at - (end - span)) / span) * (PLOT.right - PLOT.left);
      const max = roundUp(Math.max(0, ...points.flatMap((p) => lines.map(([, v]) => v(p) ?? 0))));
      const y = (v) => PLOT.bottom - (v / max) * (PLOT.bottom - PLOT.top);
      const parts = [];
      for (const v of [0, max / 2, max]) {
        parts.push(svg("line", { x1: PLOT.left, x2: PLOT.right, y1: y(v), y2: y(v), stroke: "currentColor", "stroke-opacity": 0.15 }));
        parts.push(label(PLOT.left - 4, y(v) + 3, format(v), "end"));
      }
      for (const m of [15, 10, 5, 0]) {
        parts.push(label(x(end - m * 60000), H - 12, m ? `−${m} min` : "now", m ? "middle" : "end"));
      }
      parts.push(svg("line", { x1: PLOT.left, x2: PLOT.right, y1: PLOT.bottom, y2: PLOT.bottom, stroke: "currentColor", "stroke-opacity": 0.5 }));
      lines.forEach(([, v], i) => {
        const drawn = points.filter((p) => v(p) != null).map((p) => `${x(p.at).toFixed(1)},${y(v(p)).toFixed(1)}`);
        parts.push(svg("polyline", { class: `line-${i}`, fill: "none", stroke: "currentColor", "stroke-width": 1.5, points: drawn.join(" ") }));
        // The latest sample as a dot, so a line of one point still shows.
        const [cx, cy] = drawn.length ? drawn[drawn.length - 1].split(",") : [];
        if (cx) parts.push(svg("circle", { class: `line-${i}`, cx, cy, r: 2.5, fill: "currentColor" }));
      });
      fill(chart, ...parts);
      const latest = points[points.length - 1];
      chart.setAttribute("aria-label", latest ? `${title}, last 15 minutes; latest: ${lines.map(([n, v]) => `${n} ${format(v(latest) ?? 0)}`).join(", ")}` : `${title}: no samples yet`);
    },
  };
}

/** Bars of a histogram summary (`buckets` of [upper bound µs, count]). */
export function bars(summary) {
  const buckets = summary?.buckets || [];
  if (!buckets.length) return h("span", { class: "muted", text: "no requests" });
  const max = Math.max(...buckets.map(([, n]) => n));
  const width = 100 / buckets.length;
  const rects = buckets.map(([le, n], i) => {
    const height = Math.max((n / max) * 38, 1);
    const r = svg("rect", { x: i * width + 0.5, y: 40 - height, width: width - 1, height, fill: "currentColor" });
    r.append(svg("title", {}, document.createTextNode(`≤ ${micros(le)}: ${n}`)));
    return r;
  });
  const range = `${micros(buckets[0][0])} … ${micros(buckets[buckets.length - 1][0])}`;
  return h(
    "figure",
    { class: "bars" },
    svg("svg", { viewBox: "0 0 100 40", preserveAspectRatio: "none", role: "img", "aria-label": `latency histogram ${range}` }, ...rects),
    h("figcaption", { class: "muted", text: range }),
  );
}
