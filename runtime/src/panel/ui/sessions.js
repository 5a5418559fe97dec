// Sessions (one per instance and context) with their conversation, and the remote peers with
// their open streams; cancel or close either.

import { act, get } from "./api.js";
import { busy, debounce, errorBox, fill, h, instanceRef, partsText, section, shortId, showError, state, table, time } from "./dom.js";

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
        h("ol", { class: "timeline" }, c.tasks.map((t) => h("li", {}, time(t.createdAt), " ", h("a", { href: `#/task/${encodeURIComponent(t.taskId)}`, title: t.taskId, text: shortId(t.taskId) }), " ", state(t.state), h("div", { class: "text", text: `you: ${partsText(t.parts)}` }), h("div", { class: "text", text: `agent: ${partsText((t.artifacts || []).flatMap((a) => a.parts))}` })))),
      ));
    } catch (e) {
      showError(box, e.message);
    }
  }

  async function load() {
    try {
      const s = await get("", { taskLimit: 1 });
      showError(box, "");
      const columns = [
        ["Context", (r) => h("code", { text: r.contextId })],
        ["Status", (r) => h("span", { class: `badge ${r.status === "running" ? "ok" : "off"}`, text: r.status })],
        ["Tasks", (r) => `${r.taskCount} (${r.activeCount} active)`],
        ["Streaming", (r) => (r.streaming ? h("span", { class: "badge ok", text: "stream open" }) : "—")],
        ["Last seen", (r) => time(r.lastSeen)],
        ["Actions", (r) => h("div", { class: "actions" },
          button("Conversation", box, () => show(r)),
          button("Cancel", box, async () => { await act("session.cancel", { id: r.contextId, serverId: r.serverId }); await load(); }),
          button("Close", box, async () => { await act("session.close", { id: r.contextId, serverId: r.serverId }); await load(); }))],
      ];
      // Grouped by instance, then by the peer that opened them; idle sessions of a single task
      // (one-shot calls) folded under one line.
      const grouped = (rows, key) => {
        const by = new Map();
        for (const r of rows) {
          if (!by.has(key(r))) by.set(key(r), []);
          by.get(key(r)).push(r);
        }
        return [...by];
      };
      const oneShot = (r) => r.status === "idle" && r.taskCount === 1 && !r.streaming;
      const plural = (n, what) => `${n} ${what}${n === 1 ? "" : "s"}`;
      const byPeer = ([, rows]) => {
        const folded = rows.filter(oneShot);
        const open = rows.filter((r) => !oneShot(r));
        return h("div", { class: "peer-group" },
          h("h4", {}, `from ${rows[0].peer || "an unknown caller"}`, h("span", { class: "muted", text: ` · ${plural(rows.length, "session")}` })),
          open.length ? table(columns, open) : null,
          folded.length ? h("details", {}, h("summary", { text: plural(folded.length, "idle one-shot session") }), table(columns, folded)) : null);
      };
      const byInstance = grouped(s.sessions, (r) => r.serverId);
      fill(sessionList, byInstance.length
        ? byInstance.map(([id, rows]) => h("div", { class: "group" },
          h("h3", {}, instanceRef(id, rows[0].serverName), h("span", { class: "muted", text: ` · ${plural(rows.length, "session")}` })),
          grouped(rows, (r) => r.peerId || "").map(byPeer)))
        : h("p", { class: "muted", text: "No sessions yet." }));
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
