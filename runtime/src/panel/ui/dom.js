// Building the page: elements from data (text only, never HTML), times, copy buttons, and the
// busy and error states of a form.

/** An element: `attrs` are properties (`class`, `text`, `onclick`, …) or attributes; children
 * are nodes or strings (as text), nested arrays flattened, null and false skipped. */
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === "class") el.className = v;
    else if (k === "text") el.textContent = String(v);
    else if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else if (k === "value") el.value = v;
    else if (k === "checked" || k === "disabled" || k === "selected") el[k] = Boolean(v);
    else el.setAttribute(k, v === true ? "" : String(v));
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const c of children) {
    if (c === null || c === undefined || c === false) continue;
    if (Array.isArray(c)) append(el, c);
    else el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
}

/** An SVG element. */
export function svg(tag, attrs = {}, ...children) {
  const el = document.createElementNS("http://www.w3.org/2000/svg", tag);
  for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, String(v));
  for (const c of children) el.append(c);
  return el;
}

/** Replaces the children of `el`. */
export function fill(el, ...children) {
  el.replaceChildren();
  append(el, children);
  return el;
}

const relative = new Intl.RelativeTimeFormat(undefined, { numeric: "auto" });

/** How long ago (or from now) `ms` is, in words. */
export function ago(ms) {
  const s = Math.round((ms - Date.now()) / 1000);
  const steps = [[60, "second"], [60, "minute"], [24, "hour"], [Infinity, "day"]];
  let v = s;
  for (const [n, unit] of steps) {
    if (Math.abs(v) < n) return relative.format(v, unit);
    v = Math.round(v / n);
  }
  return "";
}

/** A time shown relative, with the absolute time as its title and datetime. */
export function time(ms) {
  if (!ms) return h("span", { class: "muted", text: "—" });
  const d = new Date(ms);
  return h("time", { datetime: d.toISOString(), title: d.toLocaleString(), "data-ms": ms, text: ago(ms) });
}

/** Refreshes every relative time on the page (called each few seconds). */
export function retime() {
  for (const t of document.querySelectorAll("time[data-ms]")) t.textContent = ago(Number(t.dataset.ms));
}

/** A button copying `value` to the clipboard. */
export function copy(value, label = "Copy") {
  const b = h("button", { type: "button", class: "small", "aria-label": `${label}: ${value}`, text: label });
  b.addEventListener("click", async () => {
    try {
      await navigator.clipboard.writeText(value);
      b.textContent = "Copied";
    } catch {
      b.textContent = "Select and copy";
    }
    setTimeout(() => (b.textContent = label), 1500);
  });
  return b;
}

/** A URL as code that wraps only between its parts: a `<wbr>` after each `/` (the last of a
 * run, so never inside `//`), `.`, `?`, `&`, `=` and `#`, the whole URL as its title. Copying
 * it copies the URL as it is (`<wbr>` adds no character). */
export function url(value) {
  const text = String(value ?? "");
  const parts = text.split(/(?<=[.?&=#]|\/(?!\/))/).filter(Boolean);
  return h("code", { class: "url", title: text }, parts.map((p, i) => (i ? [h("wbr"), p] : p)));
}

/** A value and its copy button (a URL wrapping only between its parts). */
export function copyable(value) {
  const shown = /^[a-z][a-z0-9+.-]*:\/\//i.test(String(value)) ? url(value) : h("code", { text: value });
  return h("span", { class: "copyable" }, shown, copy(value));
}

/** A long id (a UUID) shortened in the middle: its first 6 and last 8 characters. The tail
 * tells apart ids made close together (a UUIDv7 begins with its creation time, so ids of the
 * same minute share their first 8 characters); the whole id is the title. */
export function shortId(id) {
  const s = String(id ?? "");
  return s.length > 18 ? `${s.slice(0, 6)}…${s.slice(-8)}` : s;
}

/** An inbound instance named so that two of one name are told apart: its name linking to its
 * page, then its id. */
export function instanceRef(id, name) {
  return h(
    "span",
    { class: "instance-ref" },
    h("a", { href: `#/instance/${encodeURIComponent(id)}`, title: id, text: name || id }),
    name && name !== id ? h("span", { class: "muted small", text: ` (${id})` }) : null,
  );
}

/** A place for a form's error, shown next to it. */
export function errorBox() {
  return h("p", { class: "error", role: "alert", hidden: true });
}

/** Shows `message` in `box` (or hides it when empty). */
export function showError(box, message) {
  box.textContent = message || "";
  box.hidden = !message;
}

/** Runs `work` with `button` disabled and marked busy; its error goes to `box`, or is thrown
 * when there is none. What `work` returns is returned. */
export async function busy(button, box, work) {
  const label = button.textContent;
  button.disabled = true;
  button.setAttribute("aria-busy", "true");
  button.textContent = `${label}…`;
  if (box) showError(box, "");
  try {
    return await work();
  } catch (e) {
    if (!box) throw e;
    showError(box, e.message);
    return undefined;
  } finally {
    button.disabled = false;
    button.removeAttribute("aria-busy");
    button.textContent = label;
  }
}

let fieldIds = 0;

/** A labelled form field around `input` (its id set here); `hint` is shown under it. */
export function field(label, input, hint) {
  input.id ||= `f${++fieldIds}`;
  const hintEl = hint ? h("small", { id: `${input.id}-hint`, text: hint }) : null;
  if (hintEl) input.setAttribute("aria-describedby", hintEl.id);
  return h("div", { class: "field" }, h("label", { for: input.id, text: label }), input, hintEl);
}

/** A labelled checkbox (its id set here), the label after it; `hint` is shown under both. */
export function checkField(label, input, hint) {
  input.id ||= `f${++fieldIds}`;
  const hintEl = hint ? h("small", { id: `${input.id}-hint`, text: hint }) : null;
  if (hintEl) input.setAttribute("aria-describedby", hintEl.id);
  return h("div", { class: "field switch" }, h("div", { class: "check" }, input, h("label", { for: input.id, text: label })), hintEl);
}

/** A `<select>` of `options` ([value, label] pairs or plain values), `selected` chosen. */
export function select(options, selected, attrs = {}) {
  return h(
    "select",
    attrs,
    options.map((o) => {
      const [value, label] = Array.isArray(o) ? o : [o, o];
      return h("option", { value, selected: value === selected, text: label });
    }),
  );
}

/** A table: `columns` are [heading, cell(row)] pairs; `empty` shows when there are no rows. */
export function table(columns, rows, empty = "Nothing yet.") {
  if (!rows.length) return h("p", { class: "muted", text: empty });
  return h(
    "div",
    { class: "scroll" },
    h(
      "table",
      {},
      h("thead", {}, h("tr", {}, columns.map(([head]) => h("th", { scope: "col", text: head })))),
      h("tbody", {}, rows.map((r) => h("tr", {}, columns.map(([, cell]) => h("td", {}, cell(r)))))),
    ),
  );
}

/** A task state as a coloured badge. */
export function state(s) {
  const name = String(s || "").replace("TASK_STATE_", "").toLowerCase().replace(/_/g, " ");
  return h("span", { class: `badge state-${name.replace(/ /g, "-")}`, text: name || "—" });
}

/** Pretty JSON. */
export function pretty(v) {
  return JSON.stringify(v, null, 2);
}

/** A section with a heading. */
export function section(title, ...children) {
  return h("section", { class: "card" }, h("h2", { text: title }), children);
}

/** Bytes in words. */
export function bytes(n) {
  if (n == null) return "—";
  const units = ["B", "KiB", "MiB", "GiB"];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) (n /= 1024), i++;
  return `${n.toFixed(i ? 1 : 0)} ${units[i]}`;
}

/** Microseconds in words. */
export function micros(us) {
  if (us == null) return "—";
  return us >= 1e6 ? `${(us / 1e6).toFixed(2)} s` : us >= 1000 ? `${(us / 1000).toFixed(1)} ms` : `${us} µs`;
}

/** The text of message or artifact parts, with a word for each part that is not text. */
export function partsText(parts) {
  return (parts || [])
    .map((p) => (p.text !== undefined ? p.text : p.data !== undefined ? `[data ${JSON.stringify(p.data)}]` : `[file ${p.filename || p.url || p.mediaType || ""}]`))
    .join(" ");
}

/** `run`, called once things have been quiet for `ms` (a burst of feed events redraws once);
 * `.cancel()` drops a pending call. */
export function debounce(run, ms = 400) {
  let timer = null;
  const later = () => {
    clearTimeout(timer);
    timer = setTimeout(run, ms);
  };
  later.cancel = () => clearTimeout(timer);
  return later;
}
