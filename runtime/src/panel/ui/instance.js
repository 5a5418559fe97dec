// One inbound instance: create or edit it (every setting the control API takes: card fields,
// endpoint, preset, component, token secret, every limit and the switches), switch it, set or
// clear its token (never shown back), and its card rendered, raw and checked.

import { act, get } from "./api.js";
import { grantsText } from "./components.js";
import { keysSection, schemesSection, tokenForm } from "./auth.js";
import { busy, checkField, copyable, errorBox, field, fill, h, pretty, section, select, showError, table, url } from "./dom.js";

/** The limits (docs/serving.md "Configuration", `[limits]`): key, label, the bounds the runtime checks. */
const LIMITS = [
  ["executionTimeoutMs", "Execution timeout (ms)", { min: 1 }],
  ["maxConcurrentTasks", "Concurrent tasks", { min: 1 }],
  ["maxConcurrentTasksPerPrincipal", "Concurrent tasks per caller (0: only the instance's cap)", { min: 0 }],
  ["ratePerSecond", "Requests per second (0: no limit)", { min: 0, step: "any" }],
  ["rateBurst", "Rate burst", { min: 0 }],
  ["keepAliveMs", "Stream keep-alive (ms)", { min: 100 }],
  ["maxParts", "Parts per message", { min: 1, max: 100000 }],
  ["maxStreams", "Open streams", { min: 0 }],
];

/** The switches: key, label, what turning it changes, its value on a new instance. */
const SWITCHES = [
  ["pushNotifications", "Serve push notifications", "Off: the push methods answer -32003 and the card says so.", true],
  ["compat03", "Serve A2A 0.3 callers too", "Off: a clean 1.0 card; 0.3 method names answer -32601.", true],
  ["reuseInstances", "Reuse component instances", "Keep a third-party component's instances between requests (the built-in one's always are).", false],
];

export function instance(id) {
  const el = h("div", { class: "stack" }, h("p", { class: "muted", text: "Loading…" }));
  const view = { el, dispose() {} };
  let record = null;

  async function load() {
    const box = errorBox();
    try {
      // The card is read once: drawn below, and where the snapshot does not carry a switch, the
      // built-in component's card tells it (capabilities.pushNotifications; the 0.3 fields).
      const cardRead = id ? get("/card", { id }) : null;
      const [snapshot, presets, comps, c] = await Promise.all([get("", { taskLimit: 1 }), get("/presets"), get("/components"), cardRead?.catch(() => null)]);
      record = id ? snapshot.inbounds.find((r) => r.id === id) : null;
      if (id && !record) {
        fill(el, section("Not found", h("p", {}, `There is no inbound instance ${id}. `, h("a", { href: "#/", text: "Back" }))));
        return;
      }
      fill(el, form(record, presets, comps.components, c), record ? agent(record, presets) : null, record ? manage(record, load) : null, record ? keysSection(record, load) : null, record ? schemesSection(record, load) : null, record ? card(record, cardRead) : null);
    } catch (e) {
      fill(el, box);
      showError(box, `Cannot read the instance: ${e.message}`);
    }
  }
  view.onChange = (c) => {
    if (c.id === id || c.action === "lagged") load();
  };
  load();
  return view;
}

/** What switch `k` of record `r` is: the snapshot's value, else what the card `c` of the
 * built-in component says, else `undefined` (not known). */
function switchValue(k, r, c, builtIn) {
  if (typeof r[k] === "boolean") return r[k];
  if (!c || !builtIn) return undefined;
  if (k === "pushNotifications") return c.capabilities?.pushNotifications === true;
  if (k === "compat03") return c.protocolVersion !== undefined;
  return undefined;
}

/** The create/edit form. */
function form(r, presets, comps, c) {
  const input = (name, value, attrs = {}) => h("input", { name, value: value ?? "", ...attrs });
  const name = input("name", r?.name, { required: true, autocomplete: "off" });
  const newId = r ? null : input("id", "", { autocomplete: "off", placeholder: "<name>-<8 hex> (default)", pattern: "[A-Za-z0-9_\\-]+", maxlength: 64 });
  const description = h("textarea", { name: "description", rows: 2, required: true, value: r?.description ?? "" });
  const version = input("version", r?.version ?? "0.1.0", { required: true });
  const endpoint = input("endpointPath", r?.endpointPath, { placeholder: "/a2a/<id> (default)" });
  const preset = select(presets.map((p) => [p.id, p.name ? `${p.name} (${p.id})` : p.id]), r?.preset ?? presets.find((p) => p.isDefault)?.id, { name: "preset" });
  const servers = comps.filter((x) => x.kind === "server");
  const component = select(servers.map((x) => x.name), r?.component ?? "a2a-server", { name: "component" });
  const secret = input("authTokenEnv", r?.authTokenEnv, { autocomplete: "off", placeholder: "none", pattern: "[A-Za-z_][A-Za-z0-9_]*", maxlength: 128 });
  const maxBody = input("maxBodyBytes", r?.maxBodyBytes ?? 1048576, { type: "number", min: 1024, max: 67108864 });
  const limits = LIMITS.map(([k, label, bounds]) => [k, label, input(k, r?.limits?.[k], { type: "number", ...bounds })]);
  // A switch whose value is not known shows as neither (indeterminate) and is sent only once
  // the operator sets it.
  const builtIn = servers.find((x) => x.name === r?.component)?.source === "embedded";
  const switches = SWITCHES.map(([k, label, hint, fresh]) => {
    const known = r ? switchValue(k, r, c, builtIn) : fresh;
    const tick = h("input", { type: "checkbox", name: k, checked: known === true });
    if (known === undefined) {
      tick.indeterminate = true;
      tick.addEventListener("change", () => (tick.dataset.set = "1"), { once: true });
    }
    return [k, known, tick, checkField(label, tick, known === undefined ? `${hint} Its current value is not shown here: set it to change it.` : hint)];
  });
  const enabled = h("input", { type: "checkbox", name: "enabled", checked: true });
  const duplicate = h("input", { type: "checkbox", name: "allowDuplicateName" });
  const box = errorBox();
  const save = h("button", { type: "submit", text: r ? "Save changes" : "Create instance" });
  const f = h(
    "form",
    { class: "grid", "aria-label": r ? `Edit ${r.name}` : "New inbound instance" },
    field("Name", name),
    newId ? field("Id", newId, "Letters, digits, - or _; empty: made from the name.") : null,
    field("Version", version),
    h("div", { class: "wide" }, field("Description", description)),
    field("Endpoint path", endpoint, "Must start with /; not under /a2a/api or /a2a/ui."),
    field("Preset", preset, "The agent session behind the instance."),
    field("Component", component, "The server component that answers A2A for it."),
    field("Token secret", secret, r ? "The secret holding its bearer token; or set the token itself under Serving." : "A secret holding its bearer token (e.g. DOCS_BOT_TOKEN); or set the token itself once it is created."),
    field("Largest body (bytes)", maxBody, "1024 to 67108864."),
    limits.map(([, label, el]) => field(label, el)),
    h("fieldset", { class: "wide switches" }, h("legend", { text: "Switches" }), switches.map(([, , , el]) => el)),
    r ? null : h("div", { class: "wide row" },
      checkField("Serve at once", enabled),
      checkField("Allow a name another instance has", duplicate, "Else a taken name is refused; the id tells the two apart.")),
    h("div", { class: "wide" }, save, box),
  );
  f.addEventListener("submit", (e) => {
    e.preventDefault();
    busy(save, box, async () => {
      const values = { name: name.value.trim(), description: description.value.trim(), version: version.value.trim(), endpointPath: endpoint.value.trim(), preset: preset.value, component: component.value, maxBodyBytes: Number(maxBody.value) };
      const lim = {};
      for (const [k, , el] of limits) if (el.value !== "" && Number(el.value) !== r?.limits?.[k]) lim[k] = Number(el.value);
      const flags = {};
      for (const [k, known, el] of switches) if (known === undefined ? el.dataset.set : el.checked !== known) flags[k] = el.checked;
      const tokenSecret = secret.value.trim();
      if (r) {
        const changed = { id: r.id };
        for (const [k, v] of Object.entries(values)) if (v !== (r[k] ?? "") && !(k === "endpointPath" && v === "")) changed[k] = v;
        // An emptied secret is not sent: "Clear token" under Serving removes it.
        if (tokenSecret && tokenSecret !== r.authTokenEnv) changed.authTokenEnv = tokenSecret;
        if (Object.keys(lim).length) changed.limits = lim;
        Object.assign(changed, flags);
        const a = await act("inbound.update", changed);
        showError(box, "");
        f.querySelector(".saved")?.remove();
        save.after(h("span", { class: "saved ok", role: "status", text: a.message }));
      } else {
        const fields = { ...values, ...flags, enabled: enabled.checked };
        if (!fields.endpointPath) delete fields.endpointPath;
        if (newId.value.trim()) fields.id = newId.value.trim();
        if (tokenSecret) fields.authTokenEnv = tokenSecret;
        if (duplicate.checked) fields.allowDuplicateName = true;
        if (Object.keys(lim).length) fields.limits = lim;
        const a = await act("inbound.create", fields);
        location.hash = `#/instance/${encodeURIComponent(a.id)}`;
      }
    });
  });
  return section(r ? `Instance ${r.name}` : "New inbound instance", r ? h("p", { class: "muted" }, "id ", h("code", { text: r.id })) : null, f);
}

/** The agent component behind the instance, when its preset runs one, and what it is granted. */
function agent(r, presets) {
  const a = presets.find((p) => p.id === r.preset)?.agent;
  if (!a) return null;
  const l = a.limits;
  return section(
    "Agent",
    h("p", {}, "Agent component ", h("code", { text: a.component }), ` (preset ${r.preset}).`),
    h("p", { "aria-label": "Grants", text: `Grants: ${grantsText(a.grants)}.` }),
    h("p", { class: "muted", text: `Limits: ${l.memoryMib} MiB, ${l.cpuMs} ms CPU and ${l.timeoutMs} ms per turn, ${l.concurrentTurns} turns at once, ${l.keyValueMib} MiB of key-value.` }),
  );
}

/** Switches, the token and removal. */
function manage(r, reload) {
  const box = errorBox();
  const toggle = h("button", { type: "button", text: r.enabled ? "Disable" : "Enable" });
  toggle.addEventListener("click", () => busy(toggle, box, async () => {
    await act(r.enabled ? "inbound.disable" : "inbound.enable", { id: r.id });
    await reload();
  }));
  const remove = h("button", { type: "button", class: "danger", text: "Remove" });
  remove.addEventListener("click", () => {
    if (!confirm(`Remove ${r.name}? Its tasks stay in the store; its endpoint stops answering.`)) return;
    busy(remove, box, async () => {
      await act("inbound.remove", { id: r.id });
      location.hash = "#/";
    });
  });
  const tokenBox = errorBox();
  const hint = r.authTokenEnv ? `Stored as ${r.authTokenEnv}; callers send Authorization: Bearer <token>.` : "At least 16 characters; the card then announces the bearer scheme.";
  const tokens = tokenForm("inbound.setAuth", r.id, r.authTokenEnv, { name: "Bearer token", hint, box: tokenBox, reload });
  return section(
    "Serving",
    h("p", {}, h("span", { class: `badge ${r.served ? "ok" : "off"}`, text: r.served ? "serving" : "not served" }), " ", toggle, " ", h("a", { class: "button", href: `#/console/${encodeURIComponent(r.id)}`, text: "Open console" }), " ", remove),
    box,
    h("dl", { class: "pairs" }, h("dt", { text: "Endpoint" }), h("dd", {}, copyable(r.endpointUrl)), h("dt", { text: "Card" }), h("dd", {}, copyable(r.cardUrl)), h("dt", { text: "Skills" }), h("dd", { text: (r.skills || []).map((s) => s.name || s.id).join(", ") || "—" })),
    tokens,
    tokenBox,
  );
}

/** The card, rendered and raw, with its checks (reachability asked of the runtime). */
function card(r, cardRead) {
  const body = h("div", {}, h("p", { class: "muted", text: "Loading the card…" }));
  (async () => {
    try {
      const c = await cardRead;
      const checks = h("ul", { class: "checks" });
      const draw = (list) => fill(checks, list.map(([label, ok, detail]) => h("li", { class: ok === null ? "pending" : ok ? "ok" : "bad" }, h("span", { class: "mark", "aria-hidden": "true", text: ok === null ? "…" : ok ? "✓" : "✗" }), h("span", { class: "sr", text: ok === null ? "checking: " : ok ? "passes: " : "fails: " }), label, detail ? h("span", { class: "muted", text: ` — ${detail}` }) : null)));
      const local = (await get("/card/checks", { id: r.id })).checks.map((k) => [k.label, k.ok, k.detail]);
      const endpoint = c.supportedInterfaces?.[0]?.url;
      const reachable = () => ["reachable at ", url(r.cardUrl)];
      draw([...local, [reachable(), null, "asking the runtime"]]);
      act("outbound.discover", { agentCardUrl: r.cardUrl })
        .then((d) => draw([...local, [reachable(), d.preview.endpoint === endpoint, d.preview.endpoint === endpoint ? `announces ${endpoint}` : `announces ${d.preview.endpoint}, not ${endpoint}`]]))
        .catch((e) => draw([...local, [reachable(), false, e.message]]));
      const security = Object.keys(c.securitySchemes || {});
      fill(
        body,
        h(
          "div",
          { class: "split" },
          h(
            "div",
            { class: "rendered" },
            h("h3", { text: `${c.name} ${c.version}` }),
            h("p", { text: c.description }),
            h("dl", { class: "pairs" }, h("dt", { text: "Interfaces" }), h("dd", {}, (c.supportedInterfaces || []).map((i) => h("div", {}, url(i.url), ` ${i.protocolBinding} ${i.protocolVersion}`))), h("dt", { text: "Security" }), h("dd", { class: "security", text: security.length ? security.join(", ") : "none" }), h("dt", { text: "Capabilities" }), h("dd", { text: Object.entries(c.capabilities || {}).filter(([, v]) => v).map(([k]) => k).join(", ") || "—" }), h("dt", { text: "Modes" }), h("dd", { text: `${(c.defaultInputModes || []).join(", ")} → ${(c.defaultOutputModes || []).join(", ")}` })),
            table([["Skill", (s) => s.name], ["Id", (s) => h("code", { text: s.id })], ["Description", (s) => s.description], ["Tags", (s) => (s.tags || []).join(", ")]], c.skills || [], "No skills."),
            h("h3", { text: "Checks" }),
            checks,
          ),
          h("pre", { class: "raw", tabindex: 0, "aria-label": "The card as JSON", text: pretty(c) }),
        ),
      );
    } catch (e) {
      fill(body, h("p", { class: "error", role: "alert", text: `Cannot read the card: ${e.message}` }));
    }
  })();
  return section("Agent card", body);
}
