// What the account and users pages share: the tokens table with its Revoke, the box that shows a token just made,
// the audit log's table. A token's secret is in the page only in that box, until it is dismissed or the page left:
// never stored, never listed again (the server keeps its SHA-256 only).
import { api } from "./api.js";
import { ago, h, prose, when } from "./ui.js";

const STATE_CLASS = { active: "ok", expired: "warn", revoked: "off", disabled: "off" };

export function tokenState(t, now = Date.now() / 1000) {
  if (t.revoked_at) return "revoked";
  return t.expires_at && t.expires_at <= now ? "expired" : "active";
}

// A state as colour and text, as ui.js badge() draws a job's
export function stateBadge(state) {
  return h(`span.badge.${STATE_CLASS[state] || "off"}`, { dataset: { status: state } }, state);
}

// A day, as a person reads a date ahead (an expiry): 2027-03-01
function day(t) {
  return new Date(t * 1000).toISOString().slice(0, 10);
}

// The tokens table (`everyone`: a column saying whose); `refresh(tokens)` redraws it. Revoke asks first, says
// what came of it in `said` (ui.js notices), then calls `changed`
// `current`: the id of the token this browser signs in with (whoami's `token`), marked, and revoking it signs out
export function tokenTable({ everyone = false, said, changed, current = null }) {
  const cols = [...(everyone ? ["user"] : []), "name", "id", "created", "last used", "expires", "state", ""];
  const body = h("tbody");
  const table = h("table.list.tokens", null, h("thead", null, h("tr", null, cols.map((c) => h("th", null, c)))), body);
  const revoke = async (t) => {
    const mine = t.id === current;
    if (!confirm(`Revoke token ${t.name} (${t.id}) of ${t.user}? Whatever signs in with it is refused from now on.`
      + (mine ? " This browser signs in with it: you will be signed out here." : ""))) {
      return;
    }
    try {
      await api(`tokens/${encodeURIComponent(t.id)}/revoke`, { method: "POST" });
      if (mine) { document.getElementById("signout").click(); return; }
      said.say(h("li.ok", null, `✓ token ${t.name} of ${t.user} revoked`));
      await changed();
    } catch (e) { said.failed(e); }
  };
  const row = (t) => {
    const state = tokenState(t);
    return h("tr", { dataset: { token: t.id, name: t.name, user: t.user } },
      everyone ? h("td", null, t.user) : null,
      h("td", null, t.name, t.id === current
        ? h("span.badge.this-browser", { title: "the token this browser signs in with" }, "this browser") : null),
      h("td.mono", null, t.id),
      h("td", { title: when(t.created_at) }, ago(t.created_at)),
      h("td.used", { title: when(t.last_used_at) }, t.last_used_at ? ago(t.last_used_at) : "never"),
      h("td.expires", { title: when(t.expires_at) }, t.expires_at ? day(t.expires_at) : "never"),
      h("td.state", null, stateBadge(state)),
      h("td", null, state === "active" ? h("button.small.danger", { type: "button", name: "revoke",
        onclick: () => revoke(t) }, "Revoke") : null));
  };
  const refresh = (tokens) => {
    const rows = [...tokens].sort((a, b) => b.created_at - a.created_at).map(row);
    body.replaceChildren(...(rows.length ? rows : [h("tr", null, h("td.muted", { colspan: cols.length },
      everyone ? "No user has a token." : "You have no token yet."))]));
  };
  return { table, refresh };
}

// A token just made, shown this once: copy it, and how the CLI and SDK take it; `link` adds the address that opens
// the UI signed in with it (for a new user: they are asked to confirm whose it is before the page keeps it)
export function secretBox(info, secret, { link = false } = {}) {
  const signIn = `${location.origin}/#token=${encodeURIComponent(secret)}`;
  const copyable = (text, name) => {
    const code = h("code.secret", { dataset: { copy: name } }, text);
    const button = h("button.small", { type: "button", name: `copy-${name}`, onclick: async () => {
      try {
        await navigator.clipboard.writeText(text);
        button.textContent = "Copied";
      } catch {  // no clipboard here (a page not served over https): the text selected, for Ctrl+C
        getSelection().selectAllChildren(code);
        button.textContent = "Selected: Ctrl+C copies it";
      }
    } }, "Copy");
    return h("div.row.copyable", null, code, button);
  };
  const box = h("div.panel.new-token", { role: "status", dataset: { token: info.id } },
    h("p", null, h("strong", null, `${info.user}'s token “${info.name}”`),
      ": copy it now. It is shown this once; the server keeps only its SHA-256."),
    copyable(secret, "token"),
    h("p.muted", null, prose(`The CLI: \`trainyard login --server ${location.origin}\` and paste it; the SDK and `
      + "jobs' tools: `TRAINYARD_TOKEN`.")),
    link ? [h("p.muted", null, "This address opens the UI signed in with it, once its holder confirms whose it is:"),
      copyable(signIn, "link")] : null,
    h("button.small", { type: "button", name: "dismiss", onclick: () => box.remove() }, "Done: hide it"));
  return box;
}

// A value of a record's detail as read: a time (`expires_at`) as its day
function detail(key, value) {
  if (key.endsWith("_at") && typeof value === "number") return day(value);
  return typeof value === "object" ? JSON.stringify(value) : value;
}

// The audit log's records, newest first (`everyone`: a column saying who)
export function auditTable(records, { everyone = false } = {}) {
  const cols = ["when", ...(everyone ? ["user"] : []), "action", "target", "detail", "from"];
  const rows = records.map((r) => h("tr", { dataset: { action: r.action } },
    h("td", { title: when(r.at) }, ago(r.at)),
    everyone ? h("td", null, r.user) : null,
    h("td.mono", null, r.action),
    h("td.mono", null, r.target || ""),
    h("td.detail.mono", null, Object.entries(r.detail || {}).filter(([, v]) => v !== null)
      .map(([k, v]) => `${k}=${detail(k, v)}`).join(" ")),
    h("td.muted", null, r.source || "")));
  return h("table.list.audit", null, h("thead", null, h("tr", null, cols.map((c) => h("th", null, c)))),
    h("tbody", null, rows.length ? rows : h("tr", null, h("td.muted", { colspan: cols.length }, "No change yet."))));
}
