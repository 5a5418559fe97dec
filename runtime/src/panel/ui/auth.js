// The bearer-token form of an inbound instance or an outbound connection: set or clear, never
// shown back (the field is a password field, emptied once the token is stored).

import { act } from "./api.js";
import { busy, field, h } from "./dom.js";

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
