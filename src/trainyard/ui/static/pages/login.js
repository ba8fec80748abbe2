// Sign in with an API token (`trainyard token create`, or the local server's via `trainyard ui`).
import { api, setToken, toast, token } from "../api.js";
import { navigate, signedIn } from "../app.js";
import { h, prose } from "../ui.js";

// Where to go once signed in: a path on this server only (never //elsewhere)
function destination(next) {
  return next && next.startsWith("/") && !next.startsWith("//") && !next.startsWith("/\\") ? next : "/";
}

// Pages the server serves outside this app, which the HttpOnly cookie opens: a service's, a cluster's Dask dashboard
const OUTSIDE = /^\/(serve\/|api\/v1\/clusters\/[^/]+\/dashboard\/)/;

// The cookie, then on: a page outside the app by a full load
async function proceed(next) {
  await api("serve-session", { method: "POST" });
  if (OUTSIDE.test(next)) location.assign(next);
  else navigate(next);
}

export function render(root, { query }) {
  const next = destination(query.get("next"));
  // sent here from such a page (its cookie missing or stale) while this browser holds a token: no form
  // (once a few seconds: a browser that keeps no cookie would come straight back here)
  const last = Number(sessionStorage.getItem("trainyard.serve-retry") || 0);
  if (token() && OUTSIDE.test(next) && Date.now() - last > 10_000) {
    sessionStorage.setItem("trainyard.serve-retry", String(Date.now()));
    proceed(next).catch(() => {});
  }
  const input = h("input", { type: "password", name: "token", autocomplete: "off", placeholder: "API token", size: 48 });
  const form = h("form.login", {
    onsubmit: async (e) => {
      e.preventDefault();
      setToken(input.value.trim());
      try {
        const me = await api("whoami");
        signedIn(me.user, me.admin);
        await proceed(next);
      } catch (err) {
        setToken(null);
        toast(err.status === 401 ? "That token is not valid on this server" : err);
      }
    },
  }, h("h1", {}, "Sign in"),
  h("p.muted", {}, prose("Paste an API token: `trainyard token create` makes one; "
    + "on your own machine `trainyard ui` opens this page signed in.")),
  input, h("button", { type: "submit" }, "Sign in"));
  root.append(form);
  input.focus();
}
