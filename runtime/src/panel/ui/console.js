// The console of one instance: compose a message (text, files, data), send it blocking or
// streaming, and watch each frame arrive rendered beside its raw JSON-RPC; continue, cancel or
// resubscribe (with Last-Event-ID) to the task it made.

import { request, rpc, rpcStream } from "./api.js";
import { busy, errorBox, field, fill, h, partsText, pretty, section, state } from "./dom.js";

/** A file as a `raw` part (base64). */
async function filePart(file) {
  const buffer = new Uint8Array(await file.arrayBuffer());
  let binary = "";
  for (let i = 0; i < buffer.length; i += 0x8000) binary += String.fromCharCode(...buffer.subarray(i, i + 0x8000));
  return { raw: btoa(binary), filename: file.name, mediaType: file.type || "application/octet-stream" };
}

/** What a StreamResponse (or a blocking result) is, and its one-line rendering. */
export function describe(result) {
  if (!result || typeof result !== "object") return ["empty", "", null];
  if (result.task) return ["task", `task ${result.task.id}`, result.task.status?.state, partsText(result.task.artifacts?.flatMap((a) => a.parts))];
  if (result.statusUpdate) {
    const u = result.statusUpdate;
    return ["statusUpdate", `status of ${u.taskId}`, u.status?.state, partsText(u.status?.message?.parts)];
  }
  if (result.artifactUpdate) {
    const u = result.artifactUpdate;
    return ["artifactUpdate", `artifact ${u.artifact?.artifactId}${u.append ? " (appended)" : ""}${u.lastChunk ? " (last chunk)" : ""}`, null, partsText(u.artifact?.parts)];
  }
  if (result.message) return ["message", `message from ${result.message.role}`, null, partsText(result.message.parts)];
  if (result.id && result.status) return ["task", `task ${result.id}`, result.status.state, partsText(result.artifacts?.flatMap((a) => a.parts))];
  return ["result", "result", null, JSON.stringify(result).slice(0, 200)];
}

export function consoleView(id) {
  const frames = h("ol", { class: "frames", "aria-live": "polite", "aria-label": "Frames" });
  const text = h("textarea", { name: "text", rows: 3, placeholder: "What to send" });
  const files = h("input", { type: "file", name: "files", multiple: true });
  const data = h("textarea", { name: "data", rows: 2, placeholder: '{"key": "value"} (optional data part)' });
  const contextId = h("input", { name: "contextId", placeholder: "new context", autocomplete: "off" });
  const taskId = h("input", { name: "taskId", placeholder: "new task", autocomplete: "off" });
  const streaming = h("input", { type: "radio", name: "mode", value: "stream", checked: true, id: "mode-stream" });
  const blocking = h("input", { type: "radio", name: "mode", value: "block", id: "mode-block" });
  const send = h("button", { type: "submit", text: "Send" });
  const box = errorBox();
  const current = h("p", { class: "muted", text: "No task yet." });
  const cancel = h("button", { type: "button", text: "Cancel task", disabled: true });
  const resubscribe = h("button", { type: "button", text: "Resubscribe", disabled: true });
  const refresh = h("button", { type: "button", text: "Get task", disabled: true });
  const actionBox = errorBox();
  const stop = h("button", { type: "button", text: "Stop watching", disabled: true });
  const clear = h("button", { type: "button", class: "small", text: "Clear frames" });
  let task = null;
  let lastEventId = null;
  let abort = null;

  function track(t, st) {
    if (!t) return;
    task = { id: t.id ?? t.taskId, contextId: t.contextId, state: st ?? t.status?.state ?? task?.state };
    fill(current, "Task ", h("a", { href: `#/task/${encodeURIComponent(task.id)}`, text: task.id }), " ", state(task.state), " in context ", h("code", { text: task.contextId || "?" }));
    for (const b of [cancel, resubscribe, refresh]) b.disabled = false;
    contextId.value = task.contextId || contextId.value;
    if (task.state === "TASK_STATE_INPUT_REQUIRED" || task.state === "TASK_STATE_AUTH_REQUIRED") {
      taskId.value = task.id;
      current.append(h("strong", { text: " — it waits for your reply: the next message continues it." }));
    } else if (task.state && !["TASK_STATE_WORKING", "TASK_STATE_SUBMITTED"].includes(task.state)) taskId.value = "";
  }

  function frame(sent, answer, eventId) {
    const result = answer?.result;
    const error = answer?.error;
    const [kind, title, st, detail] = error ? ["error", `error ${error.code ?? ""}`, null, error.message] : describe(result);
    if (!error && result) {
      if (kind === "task") track(result.task ?? result);
      else if (kind === "statusUpdate") track({ id: result.statusUpdate.taskId, contextId: result.statusUpdate.contextId }, result.statusUpdate.status?.state);
      else if (kind === "artifactUpdate" && !task) track({ id: result.artifactUpdate.taskId, contextId: result.artifactUpdate.contextId });
    }
    if (eventId) lastEventId = eventId;
    const final = kind === "task" ? !["TASK_STATE_WORKING", "TASK_STATE_SUBMITTED"].includes(st) : kind === "statusUpdate" && st && !["TASK_STATE_WORKING", "TASK_STATE_SUBMITTED"].includes(st);
    frames.append(
      h(
        "li",
        { class: `frame kind-${kind}`, "data-kind": kind, "data-state": st || "", "data-final": final ? "true" : null },
        h("div", { class: "rendered" }, h("div", {}, h("strong", { text: title }), " ", st ? state(st) : null, eventId ? h("span", { class: "muted small", text: ` #${eventId}` }) : null), detail ? h("div", { class: "text", text: detail }) : null),
        h("pre", { class: "raw", text: `${sent ? `→ ${pretty(sent)}\n` : ""}← ${pretty(answer)}` }),
      ),
    );
    frames.lastElementChild.scrollIntoView({ block: "nearest" });
  }

  async function stream(body, lastId) {
    abort?.abort();
    abort = new AbortController();
    stop.disabled = false;
    let first = body;
    try {
      await rpcStream(id, body, (e) => {
        frame(first, e.data, e.id);
        first = null;
      }, { lastEventId: lastId, signal: abort.signal });
      frames.append(h("li", { class: "frame end", "data-kind": "end", text: "stream ended" }));
    } catch (e) {
      if (e.name !== "AbortError") throw e;
      frames.append(h("li", { class: "frame end", "data-kind": "end", text: "stopped watching" }));
    } finally {
      stop.disabled = true;
    }
  }

  const form = h(
    "form",
    { class: "grid", "aria-label": "Message" },
    h("div", { class: "wide" }, field("Text", text)),
    field("Files", files, "Sent as raw parts (base64)."),
    field("Data part (JSON)", data),
    field("Context id", contextId, "Empty starts a new context."),
    field("Task id", taskId, "Set to continue an interrupted task."),
    h("fieldset", { class: "wide" }, h("legend", { text: "Mode" }), h("span", { class: "check" }, streaming, h("label", { for: "mode-stream", text: "Streaming (SendStreamingMessage)" })), h("span", { class: "check" }, blocking, h("label", { for: "mode-block", text: "Blocking (SendMessage)" }))),
    h("div", { class: "wide" }, send, " ", stop, box),
  );
  form.addEventListener("submit", (e) => {
    e.preventDefault();
    busy(send, box, async () => {
      const parts = [];
      if (text.value.trim()) parts.push({ text: text.value });
      for (const f of files.files) parts.push(await filePart(f));
      if (data.value.trim()) {
        try {
          parts.push({ data: JSON.parse(data.value) });
        } catch (err) {
          throw new Error(`The data part is not JSON: ${err.message}`);
        }
      }
      if (!parts.length) throw new Error("Write some text, attach a file or give a data part.");
      const message = { messageId: crypto.randomUUID(), role: "ROLE_USER", parts };
      if (contextId.value.trim()) message.contextId = contextId.value.trim();
      if (taskId.value.trim()) message.taskId = taskId.value.trim();
      if (streaming.checked) await stream(request("SendStreamingMessage", { message }));
      else {
        const body = request("SendMessage", { message });
        frame(body, await rpc(id, body));
      }
      text.value = "";
      files.value = "";
    });
  });
  cancel.addEventListener("click", () => busy(cancel, actionBox, async () => {
    const body = request("CancelTask", { id: task.id });
    frame(body, await rpc(id, body));
  }));
  refresh.addEventListener("click", () => busy(refresh, actionBox, async () => {
    const body = request("GetTask", { id: task.id, historyLength: 20 });
    frame(body, await rpc(id, body));
  }));
  resubscribe.addEventListener("click", () => busy(resubscribe, actionBox, () => stream(request("SubscribeToTask", { id: task.id }), lastEventId)));
  stop.addEventListener("click", () => abort?.abort());
  clear.addEventListener("click", () => frames.replaceChildren());

  const el = h(
    "div",
    { class: "stack" },
    section(`Console: ${id}`, h("p", { class: "muted" }, "Requests run on this instance's component as the operator (no bearer token needed). ", h("a", { href: `#/instance/${encodeURIComponent(id)}`, text: "Instance settings" })), form),
    section("Task", current, h("div", { class: "actions" }, refresh, cancel, resubscribe, h("span", { class: "muted small", text: "Resubscribe sends Last-Event-ID of the latest frame, so only newer frames come." })), actionBox),
    section("Frames", h("p", {}, clear), frames),
  );
  return {
    el,
    dispose: () => abort?.abort(),
    onTask(t) {
      if (task && t.taskId === task.id && t.state !== task.state) track({ id: t.taskId, contextId: t.contextId }, t.state);
    },
  };
}
