// Overview: the update banner, live counters and charts, and every inbound instance with its
// URLs and the ways to drive it.

import { act, get } from "./api.js";
import { busy, copyable, errorBox, fill, h, section, showError, table, time } from "./dom.js";
import { timeChart } from "./charts.js";

export function overview() {
  const banner = h("div", { class: "banner", hidden: true, role: "status" });
  const counters = h("div", { class: "counters" });
  const perSecond = (v) => `${v < 10 ? +v.toPrecision(2) : Math.round(v)}/s`;
  const ms = (us) => `${+(us / 1000).toPrecision(2)} ms`;
  const rate = timeChart("requests/s", [["requests", (p) => p.requestsPerS]], perSecond);
  const errors = timeChart("errors/s", [["errors", (p) => p.errorsPerS]], perSecond);
  const latency = timeChart("latency (≈)", [["p50", (p) => p.p50Us], ["p99", (p) => p.p99Us]], ms);
  const list = h("div", {}, h("p", { class: "muted", text: "Loading…" }));
  const listError = errorBox();
  const el = h(
    "div",
    { class: "stack" },
    banner,
    section("Now", counters, h("div", { class: "charts" }, rate.el, errors.el, latency.el)),
    section("Inbound instances", h("p", {}, h("a", { class: "button", href: "#/instance/new", text: "New instance" })), listError, list),
  );
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

  function drawCharts(m) {
    for (const c of [rate, errors, latency]) c.draw(m.series);
  }

  let snapshot = null;
  async function load() {
    try {
      snapshot = await get("", { taskLimit: 1 });
      showError(listError, "");
      drawCounters(snapshot, snapshot.metrics);
      drawCharts(snapshot.metrics);
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
      drawCharts(m);
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
