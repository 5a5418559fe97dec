// Sessions (one per instance and context) with their conversation, and the remote peers with
// their open streams; cancel or close either.

import { act, get } from "./api.js";
import { busy, debounce, errorBox, fill, h, partsText, section, showError, state, table, time } from "./dom.js";

function button(label, box, work, cls = "small") {
  const b = h("button", { type: "button", class: cls, text: label });
  b.addEventListener("click", () => busy(b, box, work));
  return b;
}

export function sessions() {
  const box = errorBox();
  const sessionList = h("div", {}, h("p", { class: "muted", text: "Loading…" }));
  const peerList = h("div", {});
  const conversation = h("div", {});

  async function show(s) {
    try {
      const c = await get("/session", { contextId: s.contextId, serverId: s.serverId });
      fill(conversation, section(
        `Conversation ${s.contextId}`,
        h("ol", { class: "timeline" }, c.tasks.map((t) => h("li", {}, time(t.createdAt), " ", h("a", { href: `#/task/${encodeURIComponent(t.taskId)}`, text: t.taskId.slice(0, 8) }), " ", state(t.state), h("div", { class: "text", text: `you: ${partsText(t.parts)}` }), h("div", { class: "text", text: `agent: ${partsText((t.artifacts || []).flatMap((a) => a.parts))}` })))),
      ));
    } catch (e) {
      showError(box, e.message);
    }
  }

  async function load() {
    try {
      const s = await get("", { taskLimit: 1 });
      showError(box, "");
      fill(sessionList, table(
        [
          ["Context", (r) => h("code", { text: r.contextId })],
          ["Instance", (r) => r.serverName || r.serverId],
          ["Status", (r) => h("span", { class: `badge ${r.status === "running" ? "ok" : "off"}`, text: r.status })],
          ["Tasks", (r) => `${r.taskCount} (${r.activeCount} active)`],
          ["Streaming", (r) => (r.streaming ? h("span", { class: "badge ok", text: "stream open" }) : "—")],
          ["Last seen", (r) => time(r.lastSeen)],
          ["Actions", (r) => h("div", { class: "actions" },
            button("Conversation", box, () => show(r)),
            button("Cancel", box, async () => { await act("session.cancel", { id: r.contextId, serverId: r.serverId }); await load(); }),
            button("Close", box, async () => { await act("session.close", { id: r.contextId, serverId: r.serverId }); await load(); }))],
        ],
        s.sessions,
        "No sessions yet.",
      ));
      fill(peerList, table(
        [
          ["Peer", (p) => h("div", {}, p.label, h("div", { class: "muted small", text: p.id }))],
          ["Instance", (p) => p.serverId],
          ["Tasks", (p) => `${p.taskCount} (${p.activeTaskIds.length} active)`],
          ["Stream", (p) => (p.streaming ? h("span", { class: "badge ok", text: "open" }) : "—")],
          ["First seen", (p) => time(p.firstSeen)],
          ["Last seen", (p) => time(p.lastSeen)],
          ["Actions", (p) => button("Close streams and cancel", box, async () => { await act("inbound.close", { id: p.id }); await load(); })],
        ],
        s.peers,
        "No remote peer has called yet.",
      ));
    } catch (e) {
      showError(box, `Cannot read sessions: ${e.message}`);
    }
  }
  const later = debounce(load);
  load();
  return {
    el: h("div", { class: "stack" }, box, section("Sessions", sessionList), section("Peers and live streams", peerList), conversation),
    onTask: later,
    onChange: later,
    dispose: later.cancel,
  };
}
