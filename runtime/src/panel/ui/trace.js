// A task's traces as waterfalls: each span a bar on its trace's time axis, indented under its
// parent, with its duration, what it did and why it failed; a remote agent's work on this
// server links to that task.

import { h, micros, shortId } from "./dom.js";

/** What a span did, in a few words, from its attributes. */
function detail(s) {
  const a = s.attributes || {};
  const words = [];
  if (a["a2a.instance.id"] && s.name !== "a2a") words.push(`instance ${a["a2a.instance.id"]}`);
  if (a["db.system.name"]) words.push(a["db.system.name"]);
  if (a["gen_ai.request.model"]) words.push(`model ${a["gen_ai.request.model"]}`);
  if (a["gen_ai.usage.input_tokens"] != null) words.push(`${a["gen_ai.usage.input_tokens"]} → ${a["gen_ai.usage.output_tokens"]} tokens`);
  if (a["a2a_edge.connection"]) words.push(`connection ${a["a2a_edge.connection"]}`);
  if (a["server.address"]) words.push(a["server.address"]);
  if (a["url.path"]) words.push(a["url.path"]);
  if (a["http.response.status_code"] != null) words.push(`HTTP ${a["http.response.status_code"]}`);
  return words.join(" · ");
}

/** The spans of one trace in tree order, each with its depth (a parent outside the trace: 0). */
function ordered(spans) {
  const ids = new Set(spans.map((s) => s.spanId));
  const children = new Map();
  for (const s of spans) {
    const parent = ids.has(s.parentId) ? s.parentId : null;
    if (!children.has(parent)) children.set(parent, []);
    children.get(parent).push(s);
  }
  const out = [];
  const walk = (parent, depth) => {
    for (const s of children.get(parent) || []) {
      out.push([s, depth]);
      walk(s.spanId, depth + 1);
    }
  };
  walk(null, 0);
  return out;
}

/** `el` with inline style set through the CSSOM (the panel's policy refuses style attributes). */
function styled(el, style) {
  Object.assign(el.style, style);
  return el;
}

/** One trace's waterfall. */
function waterfall(traceId, spans, taskId) {
  const start = Math.min(...spans.map((s) => s.startUs));
  const end = Math.max(...spans.map((s) => s.startUs + s.durationUs));
  const total = Math.max(end - start, 1);
  const rows = ordered(spans).map(([s, depth]) => {
    const a = s.attributes || {};
    const remote = a["a2a.task.id"] && a["a2a.task.id"] !== taskId && s.name !== "a2a" && a["a2a.method.name"];
    const left = ((s.startUs - start) / total) * 100;
    const width = Math.max((s.durationUs / total) * 100, 0.3);
    return h(
      "li",
      { class: s.error ? "span failed" : "span", "data-kind": s.kind },
      styled(h(
        "div",
        { class: "span-label" },
        h("strong", { text: s.name }),
        " ",
        h("span", { class: "muted", text: detail(s) }),
        remote ? h("span", {}, " · task ", h("a", { href: `#/task/${encodeURIComponent(a["a2a.task.id"])}`, title: a["a2a.task.id"], text: shortId(a["a2a.task.id"]) })) : null,
        s.error ? h("div", { class: "error", text: s.error }) : null,
        ...(s.events || []).map((e) => h("div", { class: "muted", text: e })),
      ), { paddingLeft: `${depth * 14}px` }),
      h("div", { class: "span-track", title: `${s.name}: ${micros(s.durationUs)}` }, styled(h("div", { class: "span-bar" }), { left: `${left}%`, width: `${width}%` })),
      h("div", { class: "span-time", text: micros(s.durationUs) }),
    );
  });
  return h(
    "figure",
    { class: "trace" },
    h("figcaption", {}, "Trace ", h("code", { text: traceId }), ` · ${micros(total)} · ${spans.length} spans`),
    h("ol", { class: "waterfall", "aria-label": `Trace ${traceId}` }, rows),
  );
}

/** The waterfalls of a task's kept traces, newest first. */
export function traces(trace, taskId) {
  const spans = trace?.spans || [];
  if (!spans.length) return h("p", { class: "muted", text: "No spans kept for this task: the runtime keeps the recent ones in memory, and this process has none of it (restarted, or the task is older)." });
  const ids = [...(trace.traceIds || [])].reverse();
  return h("div", { class: "stack" }, ids.filter((t) => spans.some((s) => s.traceId === t)).map((t) => waterfall(t, spans.filter((s) => s.traceId === t), taskId)));
}
