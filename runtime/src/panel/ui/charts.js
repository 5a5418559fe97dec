// Small SVG charts: a live line of the latest values, and the bars of a latency histogram.

import { h, micros, svg } from "./dom.js";

/** A live line chart of up to `points` values, labelled `label`, values shown by `format`. */
export function spark(label, format = (v) => v.toFixed(1), points = 60) {
  const values = [];
  const line = svg("polyline", { fill: "none", stroke: "currentColor", "stroke-width": 1.5 });
  const chart = svg("svg", { viewBox: `0 0 ${points} 30`, preserveAspectRatio: "none", role: "img", "aria-label": label }, line);
  const now = h("strong", { text: "—" });
  const el = h("figure", { class: "spark" }, h("figcaption", {}, label, " ", now), chart);
  return {
    el,
    push(v) {
      values.push(v);
      if (values.length > points) values.shift();
      const max = Math.max(...values, 1e-9);
      const off = points - values.length;
      line.setAttribute("points", values.map((x, i) => `${off + i},${(30 - (x / max) * 28 - 1).toFixed(2)}`).join(" "));
      now.textContent = format(v);
      chart.setAttribute("aria-label", `${label}: ${format(v)}`);
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
