// The bearer-token form of an inbound instance or an outbound connection: set or clear, never
// shown back (the field is a password field, emptied once the token is stored).

import { act } from "./api.js";
import { busy, copy, errorBox, field, h, section, select, table, time } from "./dom.js";

/** The form: `action` is `inbound.setAuth` or `outbound.setAuth`, `stored` the secret's name
 * when one is set; errors go to `box`, and `reload` runs after a change. */
export function tokenForm(action, id, stored, { name, hint, box, reload, small = false }) {
  const size = small ? "small" : null;
  const token = h("input", { type: "password", autocomplete: "new-password", placeholder: stored ? "a token is set (not shown)" : "no token" });
  const set = h("button", { type: "submit", class: size, text: "Set token" });
  const clear = h("button", { type: "button", class: size, text: "Clear token", disabled: !stored });
  const form = h("form", { class: "row", "aria-label": name }, field("Bearer token", token, hint), set, clear);
  form.addEventListener("submit", (e) => {
    e.preventDefault();
    busy(set, box, async () => {
      await act(action, { id, token: token.value });
      token.value = "";
      await reload();
    });
  });
  clear.addEventListener("click", () => busy(clear, box, async () => {
    await act(action, { id, clear: true });
    await reload();
  }));
  return form;
}

/** The API keys of inbound instance `r`: its named clients, a form that creates one (its key
 * shown this once), and revocation. */
export function keysSection(r, reload) {
  const box = errorBox();
  const shown = h("div", { "aria-live": "polite", "data-new-key": "" });
  const name = h("input", { name: "keyName", placeholder: "ci-bot", autocomplete: "off", required: true });
  const skills = h("input", { name: "keySkills", placeholder: "all skills", autocomplete: "off" });
  const create = h("button", { type: "submit", text: "Create key" });
  const form = h("form", { class: "row", "aria-label": "New API key" }, field("Client name", name), field("Skills", skills, "comma-separated; empty: all"), create);
  form.addEventListener("submit", (e) => {
    e.preventDefault();
    busy(create, box, async () => {
      const list = skills.value.split(",").map((s) => s.trim()).filter(Boolean);
      const made = await act("inbound.keys.create", { id: r.id, name: name.value.trim(), ...(list.length ? { skills: list } : {}) });
      await reload();
      // After the reload, on the new page: the key is in this answer only.
      document.querySelector("[data-new-key]")?.replaceChildren(
        h("p", {}, `Key of ${made.name} (shown this once): `, h("code", { text: made.key }), " ", copy(made.key, "Copy key")),
      );
    });
  });
  const rows = table(
    [
      ["Client", (k) => k.name],
      ["Principal", (k) => h("a", { href: `#/tasks?principal=${encodeURIComponent(k.principal)}`, text: k.principal })],
      ["Skills", (k) => (k.skills.length ? k.skills.join(", ") : "all")],
      ["Rate", (k) => (k.ratePerSecond ? `${k.ratePerSecond}/s` : "the instance's")],
      ["Created", (k) => time(k.createdAt)],
      ["State", (k) => (k.revokedAt ? h("span", {}, "revoked ", time(k.revokedAt)) : "active")],
      ["", (k) => {
        if (k.revokedAt) return null;
        const revoke = h("button", { type: "button", class: "danger small", text: "Revoke" });
        // The last credential goes only when the operator says the instance may open.
        const last = r.apiKeys.filter((x) => !x.revokedAt).length === 1 && r.schemes.length === 1;
        revoke.addEventListener("click", () => {
          const words = last ? `Revoke the key of ${k.name}? It is the last credential: the instance then takes calls from anyone.` : `Revoke the key of ${k.name}? It stops working at once.`;
          if (!confirm(words)) return;
          busy(revoke, box, async () => {
            await act("inbound.keys.revoke", { id: r.id, name: k.name, ...(last ? { open: true } : {}) });
            await reload();
          });
        });
        return revoke;
      }],
    ],
    r.apiKeys || [],
    "No API keys: create one per client, each then sees only its own tasks.",
  );
  return section("API keys", rows, shown, form, box);
}

/** A button that stops scheme `what` of `r` through `action` (`{clear: true}`), asking first;
 * the last credential goes only when the operator says the instance may open. */
function stopButton(r, action, what, box, reload) {
  const stop = h("button", { type: "button", class: "danger small", text: `Stop accepting ${what}` });
  const last = r.schemes.length === 1;
  stop.addEventListener("click", () => {
    const words = last ? `Stop accepting ${what}? They are the last credential: the instance then takes calls from anyone.` : `Stop accepting ${what}? Callers using them are refused at once.`;
    if (!confirm(words)) return;
    busy(stop, box, async () => {
      await act(action, { id: r.id, clear: true, ...(last ? { open: true } : {}) });
      await reload();
    });
  });
  return stop;
}

/** OpenID Connect tokens and client certificates of inbound instance `r`: what it takes, forms
 * that set each, and buttons that stop them. */
export function schemesSection(r, reload) {
  const box = errorBox();
  const o = r.oidc;
  const issuer = h("input", { name: "oidcIssuer", type: "url", placeholder: "https://login.example.com", value: o?.issuer || "", required: true });
  const audience = h("input", { name: "oidcAudience", placeholder: "a2a-edge", value: o?.audience || "", required: true });
  const scopes = h("input", { name: "oidcScopes", placeholder: "none", value: (o?.scopes || []).join(" ") });
  const claim = h("input", { name: "oidcClaim", placeholder: "sub", value: o?.principalClaim || "" });
  const save = h("button", { type: "submit", text: o ? "Update" : "Accept tokens" });
  const oidcForm = h("form", { class: "row", "aria-label": "OpenID Connect" }, field("Issuer", issuer), field("Audience", audience), field("Scopes", scopes, "space-separated; every token must grant them"), field("Principal claim", claim), save);
  oidcForm.addEventListener("submit", (e) => {
    e.preventDefault();
    busy(save, box, async () => {
      const list = scopes.value.split(/\s+/).filter(Boolean);
      await act("inbound.setOidc", { id: r.id, issuer: issuer.value.trim(), audience: audience.value.trim(), ...(list.length ? { scopes: list } : {}), ...(claim.value.trim() ? { principalClaim: claim.value.trim() } : {}) });
      await reload();
    });
  });
  const oidcState = o
    ? h("p", { class: "oidc-state" }, `Accepts tokens from ${o.issuer} for ${o.audience}; principal oidc:<${o.principalClaim}>. `, stopButton(r, "inbound.setOidc", "OpenID Connect tokens", box, reload))
    : h("p", { class: "muted oidc-state", text: "No OpenID Connect tokens accepted." });
  const from = select([["subject", "the subject's common name"], ["san", "the first alternative name"]], r.mtls?.principalFrom || "subject", { name: "mtlsFrom" });
  const accept = h("button", { type: "submit", text: r.mtls ? "Update" : "Accept client certificates" });
  const mtlsForm = h("form", { class: "row", "aria-label": "Mutual TLS" }, field("Principal from", from, "needs [tls] clientCaFile on the listener"), accept);
  mtlsForm.addEventListener("submit", (e) => {
    e.preventDefault();
    busy(accept, box, async () => {
      await act("inbound.setMtls", { id: r.id, principalFrom: from.value });
      await reload();
    });
  });
  const mtlsState = r.mtls
    ? h("p", { class: "mtls-state" }, `Accepts client certificates the listener verifies; principal mtls:<${r.mtls.principalFrom === "san" ? "alternative name" : "common name"}>. `, stopButton(r, "inbound.setMtls", "client certificates", box, reload))
    : h("p", { class: "muted mtls-state", text: "No client certificates accepted." });
  return section("OpenID Connect and mutual TLS", oidcState, oidcForm, mtlsState, mtlsForm, box);
}
