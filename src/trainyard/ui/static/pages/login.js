// Sign in with an API token (`trainyard token create`, or the local server's via `trainyard ui`).
import { api, setToken, toast } from "../api.js";
import { navigate } from "../app.js";
import { h } from "../ui.js";

export function render(root, { query }) {
  const input = h("input", { type: "password", name: "token", autocomplete: "off", placeholder: "API token", size: 48 });
  const form = h("form.login", {
    onsubmit: async (e) => {
      e.preventDefault();
      setToken(input.value.trim());
      try {
        const me = await api("whoami");
        document.getElementById("who").textContent = me.user || "";
        await api("serve-session", { method: "POST" });  // the HttpOnly cookie /serve/ pages open with
        const next = query.get("next") || "/";
        const local = next.startsWith("/") && !next.startsWith("//") && !next.startsWith("/\\");
        // a service's page is not the app's: a full load, which sends the cookie
        if (local && next.startsWith("/serve/")) location.assign(next);
        else navigate(local ? next : "/");
      } catch (err) {
        setToken(null);
        toast(err.status === 401 ? "That token is not valid on this server" : err);
      }
    },
  }, h("h1", {}, "Sign in"),
  h("p.muted", {}, "Paste an API token: `trainyard token create` makes one; on your own machine `trainyard ui` opens this page signed in."),
  input, h("button", { type: "submit" }, "Sign in"));
  root.append(form);
  input.focus();
}
