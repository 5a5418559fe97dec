// Outbound connections: add one by its card URL (previewed first), switch, refresh, set its
// token, see its tools by their exact names, and call a tool.

import { act, get } from "./api.js";
import { tokenForm } from "./auth.js";
import { busy, errorBox, field, fill, h, section, showError, table, url as urlCode } from "./dom.js";

export function outbound() {
  const box = errorBox();
  const list = h("div", { class: "stack" }, h("p", { class: "muted", text: "Loading…" }));
  // Drawn connections by id, with the record they show: one that did not change is kept as it
  // is, so a prompt being typed or a call's result survives another connection's change.
  let drawn = new Map();

  async function load() {
    try {
      const s = await get("", { taskLimit: 1 });
      showError(box, "");
      const next = new Map();
      for (const c of s.outbounds) {
        const json = JSON.stringify(c);
        const old = drawn.get(c.id);
        next.set(c.id, old?.json === json ? old : { json, el: connection(c, load) });
      }
      drawn = next;
      fill(list, next.size ? [...next.values()].map((d) => d.el) : h("p", { class: "muted", text: "No outbound connections yet: add one above." }));
    } catch (e) {
      showError(box, `Cannot read connections: ${e.message}`);
    }
  }
  load();
  return { el: h("div", { class: "stack" }, adder(load), box, list), onChange: load };
}

/** Discover first, then create. */
function adder(reload) {
  const url = h("input", { name: "agentCardUrl", type: "url", required: true, placeholder: "https://agent.example/.well-known/agent-card.json" });
  const token = h("input", { name: "token", type: "password", autocomplete: "off", placeholder: "optional" });
  const discover = h("button", { type: "submit", text: "Discover" });
  const box = errorBox();
  const preview = h("div", {});
  const form = h("form", { class: "row", "aria-label": "Discover an agent" }, field("Agent card URL", url), field("Bearer token", token), discover);
  form.addEventListener("submit", (e) => {
    e.preventDefault();
    busy(discover, box, async () => {
      fill(preview);
      const d = await act("outbound.discover", { agentCardUrl: url.value.trim(), token: token.value || undefined });
      const p = d.preview;
      const name = h("input", { name: "name", required: true, value: p.name });
      const timeout = h("input", { name: "timeoutMs", type: "number", min: 100, value: 60000 });
      const create = h("button", { type: "submit", text: "Add connection" });
      const createBox = errorBox();
      const f = h("form", { class: "row", "aria-label": "Add the connection" }, field("Connection name", name, "Tools are named after it."), field("Timeout (ms)", timeout), create);
      f.addEventListener("submit", (ev) => {
        ev.preventDefault();
        busy(create, createBox, async () => {
          const a = await act("outbound.create", { name: name.value.trim(), agentCardUrl: url.value.trim(), timeoutMs: Number(timeout.value) });
          if (token.value) await act("outbound.setAuth", { id: a.id, token: token.value });
          token.value = "";
          fill(preview, h("p", { class: "ok", role: "status", text: a.message }));
          await reload();
        });
      });
      fill(
        preview,
        h("div", { class: "preview" },
          h("h3", { text: `${p.name} ${p.version}` }),
          h("p", { text: p.description }),
          h("p", {}, "Endpoint ", urlCode(p.endpoint), " · ", Object.entries(p.capabilities || {}).filter(([, v]) => v).map(([k]) => k).join(", ")),
          table([["Skill", (s) => s.name || s.id], ["Id", (s) => h("code", { text: s.id })], ["Description", (s) => s.description]], p.skills, "It announces no skills."),
          f,
          createBox,
        ),
      );
    });
  });
  return section("Add a connection", form, box, preview);
}

/** One connection. */
function connection(c, reload) {
  const box = errorBox();
  const act$ = (label, action, cls = "small") => {
    const b = h("button", { type: "button", class: cls, text: label });
    b.addEventListener("click", () => busy(b, box, async () => {
      if (action === "outbound.remove" && !confirm(`Remove ${c.name}? Its tools disappear from every session.`)) return;
      await act(action, { id: c.id });
      await reload();
    }));
    return b;
  };
  const auth = tokenForm("outbound.setAuth", c.id, c.bearerTokenEnv, { name: `Token of ${c.name}`, box, reload, small: true });
  return h(
    "section",
    { class: "card connection", "data-id": c.id },
    h("h2", {}, c.name, " ", h("span", { class: `badge ${c.state === "connected" ? "ok" : c.state === "failed" ? "bad" : "off"}`, text: c.state }), c.agentVersion ? h("span", { class: "muted small", text: ` remote version ${c.agentVersion}` }) : null),
    h("p", {}, urlCode(c.agentCardUrl)),
    c.lastError ? h("p", { class: "error", text: c.lastError }) : null,
    c.oauth ? h("p", { class: "muted small oauth" }, `OAuth client ${c.oauth.clientId} at `, urlCode(c.oauth.tokenUrl), ` (secret ${c.oauth.clientSecretEnv})`) : null,
    h("div", { class: "actions" }, act$(c.enabled ? "Disable" : "Enable", c.enabled ? "outbound.disable" : "outbound.enable"), act$("Refresh", "outbound.refresh"), act$("Remove", "outbound.remove", "small danger")),
    box,
    auth,
    h("h3", { text: `Tools (${c.toolCount})` }),
    table([["Tool name", (t) => h("code", { class: "tool", text: t.name })], ["Skill", (t) => t.skill], ["Description", (t) => t.description]], c.tools, "No tools: the connection is not connected, or every skill is disabled."),
    c.tools.length ? caller(c) : null,
  );
}

/** Calls a tool of the connection, as a session would. */
function caller(c) {
  const skill = h("select", { name: "skill" }, c.tools.map((t) => h("option", { value: t.skill, text: t.name })));
  const prompt = h("input", { name: "prompt", required: true, placeholder: "What to ask" });
  const call = h("button", { type: "submit", text: "Call" });
  const box = errorBox();
  const result = h("pre", { class: "raw result", "aria-live": "polite", hidden: true });
  const f = h("form", { class: "row", "aria-label": `Call a tool of ${c.name}` }, field("Tool", skill), field("Prompt", prompt), call);
  f.addEventListener("submit", (e) => {
    e.preventDefault();
    result.hidden = true;
    busy(call, box, async () => {
      const started = performance.now();
      const a = await act("outbound.call", { id: c.id, skill: skill.value, prompt: prompt.value });
      result.textContent = typeof a.result === "string" ? a.result : JSON.stringify(a.result, null, 2);
      result.dataset.ms = Math.round(performance.now() - started);
      result.hidden = false;
    });
  });
  return h("div", {}, f, box, result);
}
