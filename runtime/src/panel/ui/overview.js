// Overview: the update banner, live counters and charts, and every inbound instance with its
// URLs and the ways to drive it.

import { act, get } from "./api.js";
import { busy, copyable, errorBox, fill, h, micros, section, showError, table, time } from "./dom.js";
import { spark } from "./charts.js";

/** Totals of a metrics snapshot: requests, failed requests, latency sum (µs) and count. */
export function totals(m) {
  let requests = 0;
  let errors = 0;
  for (const r of m.requests || []) {
    requests += r.count;
    if (r.outcome !== "ok") errors += r.count;
  }
  let sumUs = 0;
  let timed = 0;
  for (const s of Object.values(m.latencyByMethod || {})) {
    sumUs += s.sumUs;
    timed += s.count;
  }
  return { requests, errors, sumUs, timed, at: performance.now() };
}

export function overview() {
  const banner = h("div", { class: "banner", hidden: true, role: "status" });
  const counters = h("div", { class: "counters" });
  const rate = spark("requests/s");
  const errors = spark("errors/s");
  const latency = spark("mean latency", (v) => micros(Math.round(v)));
  const list = h("div", {}, h("p", { class: "muted", text: "Loading…" }));
  const listError = errorBox();
  const el = h(
    "div",
    { class: "stack" },
    banner,
    section("Now", counters, h("div", { class: "charts" }, rate.el, errors.el, latency.el)),
    section("Inbound instances", h("p", {}, h("a", { class: "button", href: "#/instance/new", text: "New instance" })), listError, list),
  );
  let last = null;

  function counter(label, value, href) {
    const body = [h("span", { class: "value", text: String(value ?? "—") }), h("span", { class: "label", text: label })];
    return href ? h("a", { class: "counter", href }, body) : h("div", { class: "counter" }, body);
  }

  function drawCounters(s, m) {
    fill(
      counters,
      counter("instances", s ? s.inbounds.length : "—", "#/"),
      counter("active tasks", m.activeTasks, "#/tasks?state=TASK_STATE_WORKING"),
      counter("open streams", m.openStreams, "#/sessions"),
      counter("live sessions", m.liveSessions, "#/sessions"),
      counter("outbound", s ? s.outbounds.length : "—", "#/outbound"),
    );
  }

  let snapshot = null;
  async function load() {
    try {
      snapshot = await get("", { taskLimit: 1 });
      showError(listError, "");
      drawCounters(snapshot, snapshot.metrics);
      fill(list, instances(snapshot.inbounds, load));
    } catch (e) {
      showError(listError, `Cannot read the snapshot: ${e.message}`);
    }
  }

  async function checkUpdate() {
    try {
      const u = await get("/update");
      if (u.hasUpdate) {
        fill(banner, `a2a-edge ${u.latest} is available (this is ${u.current}). `, h("a", { href: u.repoUrl, rel: "noopener noreferrer", target: "_blank", text: "Release notes" }));
        banner.hidden = false;
      } else if (!u.ok && !u.disabled) {
        // Offline is common (air-gapped sites): one quiet line, the details on hover.
        fill(banner, h("span", { class: "muted quiet", title: u.error || "", text: `Update check unavailable (running ${u.current})` }));
        banner.classList.add("quiet");
        banner.hidden = false;
      }
    } catch {
      // the banner is optional
    }
  }

  load();
  checkUpdate();
  return {
    el,
    onChange: load,
    onMetrics(m) {
      drawCounters(snapshot, m);
      const t = totals(m);
      if (last) {
        const dt = (t.at - last.at) / 1000 || 1;
        rate.push(Math.max(t.requests - last.requests, 0) / dt);
        errors.push(Math.max(t.errors - last.errors, 0) / dt);
        const n = t.timed - last.timed;
        latency.push(n > 0 ? (t.sumUs - last.sumUs) / n : 0);
      }
      last = t;
    },
  };
}

/** The table of inbound instances. */
function instances(rows, reload) {
  return table(
    [
      ["Instance", (r) => h("div", {}, h("a", { href: `#/instance/${encodeURIComponent(r.id)}`, text: r.name }), h("div", { class: "muted small", text: r.id }))],
      ["State", (r) => h("span", { class: `badge ${r.served ? "ok" : r.enabled ? "warn" : "off"}`, text: r.served ? "serving" : r.enabled ? "not served" : "disabled" })],
      ["Endpoint", (r) => copyable(r.endpointUrl)],
      ["Card", (r) => copyable(r.cardUrl)],
      ["Preset", (r) => r.preset],
      ["Component", (r) => r.component],
      ["Auth", (r) => (r.schemes.length ? h("span", {}, r.schemes.map((s) => h("span", { class: "badge ok", text: s }))) : h("span", { class: "badge warn", text: "none" }))],
      ["Updated", (r) => time(r.updatedAt)],
      [
        "Actions",
        (r) => {
          const box = errorBox();
          const toggle = h("button", { type: "button", class: "small", text: r.enabled ? "Disable" : "Enable" });
          toggle.addEventListener("click", () => busy(toggle, box, async () => {
            await act(r.enabled ? "inbound.disable" : "inbound.enable", { id: r.id });
            await reload();
          }));
          return h("div", { class: "actions" }, h("a", { class: "button small", href: `#/console/${encodeURIComponent(r.id)}`, text: "Console" }), toggle, box);
        },
      ],
    ],
    rows,
    "No inbound instances yet: create one.",
  );
}
