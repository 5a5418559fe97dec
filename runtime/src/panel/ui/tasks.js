// Tasks across instances (the snapshot's filters and paging), and one task: its timeline,
// history, artifacts, and cancel.

import { act, get, request, rpc } from "./api.js";
import { traces } from "./trace.js";
import { busy, copy, debounce, errorBox, field, fill, h, partsText, pretty, section, select, shortId, showError, state, table, time, url } from "./dom.js";

const STATES = ["SUBMITTED", "WORKING", "INPUT_REQUIRED", "AUTH_REQUIRED", "COMPLETED", "CANCELED", "FAILED", "REJECTED"].map((s) => `TASK_STATE_${s}`);
const PAGE = 25;

export function taskList(q) {
  const filters = { taskState: q.get("state") || "", taskContextId: q.get("context") || "", taskServerId: q.get("instance") || "", taskPrincipal: q.get("principal") || "" };
  const offset = Number(q.get("offset") || 0);
  const stateSel = select([["", "any state"], ...STATES.map((s) => [s, s.replace("TASK_STATE_", "").toLowerCase().replace("_", " ")])], filters.taskState, { name: "state" });
  const context = h("input", { name: "context", value: filters.taskContextId, placeholder: "any context", autocomplete: "off" });
  const instanceSel = select([["", "any instance"]], "", { name: "instance" });
  const principal = h("input", { name: "principal", value: filters.taskPrincipal, placeholder: "any caller", autocomplete: "off" });
  const apply = h("button", { type: "submit", text: "Filter" });
  const form = h("form", { class: "row", "aria-label": "Filters" }, field("State", stateSel), field("Context id", context), field("Instance", instanceSel), field("Principal", principal), apply);
  const list = h("div", {}, h("p", { class: "muted", text: "Loading…" }));
  const box = errorBox();
  const pager = h("div", { class: "pager" });

  function go(o) {
    const p = new URLSearchParams();
    if (stateSel.value) p.set("state", stateSel.value);
    if (context.value.trim()) p.set("context", context.value.trim());
    if (instanceSel.value) p.set("instance", instanceSel.value);
    if (principal.value.trim()) p.set("principal", principal.value.trim());
    if (o) p.set("offset", o);
    const target = `#/tasks${p.size ? `?${p}` : ""}`;
    if (location.hash === target) load();
    else location.hash = target;
  }
  form.addEventListener("submit", (e) => {
    e.preventDefault();
    go(0);
  });

  async function load() {
    try {
      const s = await get("", { ...filters, taskLimit: PAGE, taskOffset: offset });
      showError(box, "");
      if (instanceSel.options.length === 1) {
        for (const r of s.inbounds) instanceSel.append(h("option", { value: r.id, selected: r.id === filters.taskServerId, text: r.name && r.name !== r.id ? `${r.name} (${r.id})` : r.id }));
      }
      fill(list, table(
        [
          ["Task", (t) => h("a", { href: `#/task/${encodeURIComponent(t.taskId)}`, text: t.taskId })],
          ["State", (t) => state(t.state)],
          ["Instance", (t) => t.serverId],
          ["Principal", (t) => h("a", { href: `#/tasks?principal=${encodeURIComponent(t.principal)}`, class: "small", text: t.principal })],
          ["Skill", (t) => t.skill],
          ["Asked", (t) => h("span", { class: "clip", text: partsText(t.parts) })],
          // Shortened in the middle: the head of a UUIDv7 is its time, alike for contexts of one minute.
          ["Context", (t) => h("span", { class: "copyable" }, h("a", { href: `#/tasks?context=${encodeURIComponent(t.contextId)}`, class: "small context", title: t.contextId, text: shortId(t.contextId) }), copy(t.contextId))],
          ["Updated", (t) => time(t.updatedAt)],
        ],
        s.tasks,
        "No task matches.",
      ));
      const prev = h("button", { type: "button", text: "Previous", disabled: offset === 0, onclick: () => go(Math.max(offset - PAGE, 0)) });
      const next = h("button", { type: "button", text: "Next", disabled: s.taskNextOffset === null, onclick: () => go(s.taskNextOffset) });
      fill(pager, prev, h("span", { text: ` ${s.tasks.length ? offset + 1 : 0}–${offset + s.tasks.length} of ${s.taskTotal} ` }), next);
    } catch (e) {
      showError(box, `Cannot list tasks: ${e.message}`);
    }
  }
  const later = debounce(load);
  load();
  return { el: section("Tasks", form, box, list, pager), onTask: later, onChange: later, dispose: later.cancel };
}

/** The status timeline of a task: created, each message of its history, its current status. */
function timeline(record, task) {
  const rows = [[record.createdAt, "created", "TASK_STATE_SUBMITTED", ""]];
  for (const m of task?.history || []) rows.push([null, m.role === "ROLE_AGENT" ? "agent said" : "user said", null, partsText(m.parts)]);
  const st = task?.status;
  rows.push([st?.timestamp ? Date.parse(st.timestamp) : record.updatedAt, "now", st?.state || record.state, partsText(st?.message?.parts)]);
  return h("ol", { class: "timeline" }, rows.map(([at, what, s, text]) => h("li", {}, at ? time(at) : h("span", { class: "muted", text: "·" }), " ", h("strong", { text: what }), " ", s ? state(s) : null, text ? h("div", { class: "text", text }) : null)));
}

export function taskDetail(id) {
  const el = h("div", { class: "stack" }, h("p", { class: "muted", text: "Loading…" }));
  async function load() {
    const box = errorBox();
    try {
      const r = await get("/task", { id });
      const push = await get("/push", { id: r.serverId, taskId: id }).catch(() => ({ configs: [] }));
      let task = null;
      try {
        const answer = await rpc(r.serverId, request("GetTask", { id, historyLength: 100 }));
        task = answer.result ?? null;
      } catch {
        // the instance may be gone: the record still shows
      }
      const cancel = h("button", { type: "button", class: "danger", text: "Cancel task", disabled: !["TASK_STATE_SUBMITTED", "TASK_STATE_WORKING", "TASK_STATE_INPUT_REQUIRED", "TASK_STATE_AUTH_REQUIRED"].includes(r.state) });
      cancel.addEventListener("click", () => busy(cancel, box, async () => {
        await act("task.cancel", { id });
        await load();
      }));
      fill(
        el,
        section(
          `Task ${id}`,
          h("p", {}, state(r.state), " on ", h("a", { href: `#/instance/${encodeURIComponent(r.serverId)}`, text: r.serverId }), " · skill ", h("code", { text: r.skill }), " · context ", h("a", { href: `#/tasks?context=${encodeURIComponent(r.contextId)}`, text: r.contextId }), r.peerId ? ` · from ${r.peerId}` : ""),
          h("p", {}, cancel, " ", h("a", { class: "button", href: `#/console/${encodeURIComponent(r.serverId)}`, text: "Console" })),
          box,
          r.error ? h("p", { class: "error", text: `${r.error.code}: ${r.error.message}` }) : null,
          r.error?.detail ? h("p", { class: "error-detail" }, h("strong", { text: "Why (operators only): " }), h("span", { text: r.error.detail })) : null,
        ),
        section("Timeline", timeline(r, task)),
        section("Trace", r.traceId ? h("p", { class: "muted" }, "Created in trace ", h("code", { text: r.traceId })) : null, traces(r.trace, id)),
        section("Push notifications", table([["Config", (c) => h("code", { text: c.id })], ["Webhook", (c) => url(c.url)], ["Delivered", (c) => String(c.delivered)], ["Failed", (c) => String(c.failed)], ["Waiting", (c) => String(c.pending)], ["Last attempt", (c) => (c.lastAttemptAt ? h("span", {}, c.lastStatus || "", " · ", time(c.lastAttemptAt)) : "—")], ["Next retry", (c) => (c.nextRetryAt ? time(c.nextRetryAt) : "—")]], push.configs || [], "No webhooks registered for this task.")),
        section("Artifacts", table([["Artifact", (a) => a.name || a.artifactId], ["Content", (a) => h("div", { class: "text", text: partsText(a.parts) })]], r.artifacts || [], "No artifacts.")),
        section("Raw", h("div", { class: "split" }, h("pre", { class: "raw", "aria-label": "Task record", tabindex: 0, text: pretty(r) }), h("pre", { class: "raw", "aria-label": "A2A task", tabindex: 0, text: task ? pretty(task) : "GetTask did not answer." }))),
      );
    } catch (e) {
      fill(el, box);
      showError(box, `Cannot read task ${id}: ${e.message}`);
    }
  }
  load();
  return {
    el,
    onTask(t) {
      if (t.taskId === id) load();
    },
  };
}
