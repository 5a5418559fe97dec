// Components: what is loaded (kind, hash, size, source, users; for agents their imports and what
// their presets grant), reload one from its source, and swap the server component of an
// instance; a refusal is shown where it was asked for. Instances are shown by name and id, each
// linking to its page, so two of one name are told apart.

import { act, get } from "./api.js";
import { busy, bytes, errorBox, fill, h, instanceRef, micros, section, select, showError, table, time } from "./dom.js";

/** An agent's imports and, per preset, what it is granted. */
export function grantsText(g) {
  const parts = [];
  if (g.keyValue) parts.push("keyValue");
  if (g.llm) parts.push(`llm ${g.llm.model ?? "(default model)"}`);
  if (g.agents?.length) parts.push(`agents ${g.agents.join(", ")}`);
  if (g.allowedHosts?.length) parts.push(`hosts ${g.allowedHosts.join(", ")}${g.allowPrivate ? " (private allowed)" : ""}`);
  return parts.join(" · ") || "nothing";
}

function agentDetail(x) {
  const imports = (x.imports ?? []).filter((i) => i.startsWith("a2a:agent/") || i.startsWith("wasi:keyvalue") || i.startsWith("wasi:http"));
  return h(
    "div",
    {},
    h("div", { class: "muted", title: (x.imports ?? []).join("\n"), text: x.imports ? `${x.imports.length} imports: ${imports.join(", ")}` : "imports: not loaded" }),
    ...x.presets.map((p) => h("div", { text: `${p.id}: ${grantsText(p.grants)}` })),
  );
}

export function components() {
  const box = errorBox();
  const list = h("div", {}, h("p", { class: "muted", text: "Loading…" }));
  const swap = h("div", {});
  const stats = h("p", { class: "muted" });
  const done = h("p", { class: "ok", role: "status" });

  async function load() {
    try {
      const [c, s] = await Promise.all([get("/components"), get("", { taskLimit: 1 })]);
      showError(box, "");
      const names = new Map(s.inbounds.map((r) => [r.id, r.name]));
      fill(stats, `${c.compilations} compiled since start · ${c.instantiations} instantiations · p50 ${micros(c.instantiateP50Us)} · p99 ${micros(c.instantiateP99Us)}`);
      fill(list, table(
        [
          ["Name", (x) => h("strong", { text: x.name })],
          ["Kind", (x) => x.kind],
          ["SHA-256", (x) => x.sha256 ? h("code", { title: x.sha256, text: x.sha256.slice(0, 16) }) : "—"],
          ["Size", (x) => x.size ? bytes(x.size) : "—"],
          ["Source", (x) => x.source ? h("code", { text: x.source }) : "—"],
          ["Loaded", (x) => x.error ? h("span", { class: "error", text: x.error }) : x.loadedAt ? time(x.loadedAt) : x.kind === "agent" ? "not yet" : "—"],
          ["Instances", (x) => (x.instances.length ? h("ul", { class: "plain" }, x.instances.map((id) => h("li", {}, instanceRef(id, names.get(id))))) : "—")],
          ["Imports and grants", (x) => x.kind === "agent" ? agentDetail(x) : "—"],
          ["Reload", (x) => {
            if (x.kind === "client") return "built in";
            const err = errorBox();
            const b = h("button", { type: "button", class: "small", text: "Reload", "aria-label": `Reload ${x.name}` });
            b.addEventListener("click", () => busy(b, err, async () => {
              const a = await act("component.reload", { name: x.name });
              done.textContent = a.message;
            }));
            return h("div", { class: "actions" }, b, err);
          }],
        ],
        c.components,
      ));
      const servers = c.components.filter((x) => x.kind === "server").map((x) => x.name);
      fill(swap, table(
        [
          ["Instance", (r) => instanceRef(r.id, r.name)],
          ["Component", (r) => {
            const err = errorBox();
            const sel = select(servers, r.component, { "aria-label": `Component of ${r.name} (${r.id})` });
            const b = h("button", { type: "button", class: "small", text: "Swap" });
            b.addEventListener("click", () => busy(b, err, async () => {
              await act("inbound.update", { id: r.id, component: sel.value });
              await load();
            }));
            return h("div", { class: "actions" }, sel, b, err);
          }],
        ],
        s.inbounds,
        "No instances.",
      ));
    } catch (e) {
      showError(box, `Cannot read components: ${e.message}`);
    }
  }
  load();
  return {
    el: h("div", { class: "stack" }, box, section("Components", stats, h("p", { class: "muted" }, "Reload re-reads a component from its source (", h("code", { text: "<data-dir>/components/<name>.wasm" }), "), validates it and swaps it in; an invalid one is refused and the loaded one keeps serving."), done, list), section("Component per instance", swap)),
    onChange: load,
  };
}
