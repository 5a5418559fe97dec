// The panel: routes a location hash to its view, and hands the activity feed to the view on
// screen so it redraws what changed.

import { feed } from "./api.js";
import { fill, h, retime } from "./dom.js";
import { overview } from "./overview.js";
import { instance } from "./instance.js";
import { consoleView } from "./console.js";
import { taskList, taskDetail } from "./tasks.js";
import { sessions } from "./sessions.js";
import { outbound } from "./outbound.js";
import { components } from "./components.js";
import { metricsView } from "./metrics.js";

const routes = [
  [/^$/, () => overview()],
  [/^instance\/new$/, () => instance(null)],
  [/^instance\/(.+)$/, (m) => instance(decodeURIComponent(m[1]))],
  [/^console\/(.+)$/, (m) => consoleView(decodeURIComponent(m[1]))],
  [/^tasks$/, (m, q) => taskList(q)],
  [/^task\/(.+)$/, (m) => taskDetail(decodeURIComponent(m[1]))],
  [/^sessions$/, () => sessions()],
  [/^outbound$/, () => outbound()],
  [/^components$/, () => components()],
  [/^metrics$/, () => metricsView()],
];

const main = document.getElementById("view");
let current = null;

/** Shows the view the hash names; `moved` (a navigation, not the first load) puts the focus
 * on it, so keyboard and screen-reader users land on what they asked for. */
function show(moved) {
  const [path, query] = location.hash.replace(/^#\/?/, "").split("?");
  const q = new URLSearchParams(query || "");
  current?.dispose?.();
  current = null;
  const room = path.split("/")[0];
  for (const a of document.querySelectorAll("nav a[data-routes]")) {
    if (a.dataset.routes.split(" ").includes(room)) a.setAttribute("aria-current", "page");
    else a.removeAttribute("aria-current");
  }
  for (const [pattern, make] of routes) {
    const m = path.match(pattern);
    if (m) {
      current = make(m, q);
      fill(main, current.el);
      if (moved) main.focus({ preventScroll: true });
      return;
    }
  }
  fill(main, h("section", { class: "card" }, h("h2", { text: "Not found" }), h("p", {}, "Nothing lives at ", h("code", { text: location.hash }), ". ", h("a", { href: "#/", text: "Back to the overview" }))));
}

const live = document.getElementById("live");
const version = document.getElementById("version");

feed(
  {
    hello: (d) => (version.textContent = `a2a-edge ${d.version}`),
    task: (d) => current?.onTask?.(d),
    change: (d) => current?.onChange?.(d),
    metrics: (d) => current?.onMetrics?.(d),
    lagged: () => current?.onChange?.({ action: "lagged" }),
  },
  (open) => {
    live.textContent = open ? "live" : "reconnecting…";
    live.className = open ? "badge ok" : "badge warn";
  },
);

window.addEventListener("hashchange", () => show(true));
// The skip link moves the focus, not the route (the hash names views).
document.querySelector("a.skip").addEventListener("click", (e) => {
  e.preventDefault();
  main.focus();
});
setInterval(retime, 5000);
show(false);
