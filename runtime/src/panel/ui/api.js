// The control API, as the panel calls it: reads, actions, the console's JSON-RPC (answers and
// streams) and the activity feed. Every failure becomes an Error whose message is the API's.

const BASE = "/a2a/api";

async function answer(r) {
  const text = await r.text();
  let body = null;
  try {
    body = text ? JSON.parse(text) : null;
  } catch {
    // not JSON: the status says enough
  }
  if (!r.ok) {
    const why = body?.message || body?.error?.message || body?.error || text || r.statusText;
    throw new Error(`${why} (HTTP ${r.status})`);
  }
  return body;
}

/** GET a read, `path` relative to /a2a/api, `query` an object of parameters. */
export async function get(path = "", query = {}) {
  const q = new URLSearchParams(Object.entries(query).filter(([, v]) => v !== undefined && v !== null && v !== ""));
  const url = `${BASE}${path}${q.size ? `?${q}` : ""}`;
  return answer(await fetch(url, { headers: { accept: "application/json" } }));
}

/** Runs an action: its answer, or an Error with its message. */
export async function act(action, fields = {}) {
  const r = await fetch(BASE, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ action, ...fields }),
  });
  return answer(r);
}

let rpcIds = 0;

/** A JSON-RPC request of `method` with `params`. */
export function request(method, params) {
  return { jsonrpc: "2.0", id: ++rpcIds, method, params };
}

function rpcInit(body, accept, lastEventId) {
  const headers = { "content-type": "application/json", accept, "a2a-version": "1.0" };
  if (lastEventId) headers["last-event-id"] = lastEventId;
  return { method: "POST", headers, body: JSON.stringify(body) };
}

/** Sends `body` (a JSON-RPC request) to instance `id`: the whole JSON-RPC answer. */
export async function rpc(id, body) {
  const r = await fetch(`${BASE}/rpc?id=${encodeURIComponent(id)}`, rpcInit(body, "application/json"));
  const text = await r.text();
  try {
    return JSON.parse(text);
  } catch {
    throw new Error(`HTTP ${r.status}: ${text}`);
  }
}

/** Sends `body` asking for SSE and calls `onEvent({id, data, raw})` for each event as it
 * arrives; a JSON answer instead (an error) is passed as one event. `signal` aborts. */
export async function rpcStream(id, body, onEvent, { lastEventId, signal } = {}) {
  const init = { ...rpcInit(body, "text/event-stream", lastEventId), signal };
  const r = await fetch(`${BASE}/rpc?id=${encodeURIComponent(id)}`, init);
  if (!(r.headers.get("content-type") || "").startsWith("text/event-stream")) {
    const text = await r.text();
    let data;
    try {
      data = JSON.parse(text);
    } catch {
      data = { error: { message: `HTTP ${r.status}: ${text}` } };
    }
    onEvent({ id: null, data, raw: text });
    return;
  }
  const reader = r.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += value.replace(/\r\n?/g, "\n");
    let end;
    while ((end = buffer.indexOf("\n\n")) >= 0) {
      const block = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      const event = parseEvent(block);
      if (event) onEvent(event);
    }
  }
}

function parseEvent(block) {
  let id = null;
  const data = [];
  for (const line of block.split("\n")) {
    if (line.startsWith(":")) continue;
    const i = line.indexOf(":");
    const [name, value] = i < 0 ? [line, ""] : [line.slice(0, i), line.slice(i + 1).replace(/^ /, "")];
    if (name === "id") id = value;
    else if (name === "data") data.push(value);
  }
  if (!data.length) return null;
  const raw = data.join("\n");
  try {
    return { id, data: JSON.parse(raw), raw };
  } catch {
    return { id, data: { error: { message: `not JSON: ${raw}` } }, raw };
  }
}

/** The activity feed: `handlers[kind](data)` for `hello`, `task`, `change`, `metrics` and
 * `lagged`; `onState(open)` when it connects or drops (the browser reconnects by itself). */
export function feed(handlers, onState) {
  const source = new EventSource(`${BASE}/events`);
  for (const kind of ["hello", "task", "change", "metrics", "lagged"]) {
    source.addEventListener(kind, (e) => handlers[kind]?.(JSON.parse(e.data)));
  }
  source.onopen = () => onState(true);
  source.onerror = () => onState(false);
  return source;
}
