// /account — who you are on this server (your teams and roles) and your API tokens: make one for a laptop or a
// notebook (shown once, in this page only), see when each was last used, revoke one; and your latest changes as
// the audit log has them. The CLI's `trainyard token create|ls|revoke` and `trainyard audit`.
import { api, poll } from "../api.js";
import { css } from "../css.js";
import { auditTable, secretBox, tokenTable } from "../people.js";
import { h, notices, pairs, prose } from "../ui.js";

const EXPIRIES = [["90 days", 90], ["30 days", 30], ["7 days", 7], ["1 year", 365], ["never", 0]];
const LOCAL = "local";  // who the server's own token is (auth/permissions.py LOCAL_ADMIN): no user, no tokens
const AUDIT_DAYS = 30;

export async function render(root) {
  css("views.css");
  css("people.css");
  const me = await api("whoami");
  const teams = Object.entries(me.teams).sort(([a], [b]) => a.localeCompare(b));
  root.append(h("h1", null, "Your account"), h("dl.kv.panel.identity", null, pairs([
    ["user", me.user],
    ["admin", me.admin ? "yes: every team's work, the users and the queues" : "no"],
    ["teams", teams.length ? teams.map(([t, role]) => `${t} (${role})`).join(", ") : "none"]])));
  if (me.user === LOCAL) {
    root.append(h("p.muted.local-token", null, prose((me.users ? "You are signed in with the server's own token"
      : "This server runs without `--auth`, so every request acts as its owner, with the server's own token")
      + ": it is no user and has no tokens of its own. A server shared by several people runs with `--auth`; an "
      + "admin gives each person a user (the Users page, or `trainyard admin user create NAME --team TEAM`), and "
      + "they make their tokens here.")));
    return null;
  }

  const said = notices("ul.people-said");
  const refresh = async () => {
    const since = Date.now() / 1000 - AUDIT_DAYS * 86400;
    const [mine, changes] = await Promise.all([api("tokens"), api("audit", { query: { since, limit: 50 } })]);
    tokens.refresh(mine);
    audit.replaceChildren(auditTable(changes.reverse()));
  };
  const tokens = tokenTable({ said, changed: refresh, current: me.token });
  const audit = h("div.audit");
  const fresh = h("div.fresh");
  const name = h("input", { name: "name", placeholder: "what it is for, e.g. laptop", required: true,
    autocomplete: "off", spellcheck: false, size: 28 });
  const expires = h("select", { name: "expires" }, EXPIRIES.map(([label, days]) => h("option", { value: days }, label)));
  const create = h("button.primary", { type: "submit" }, "Create");
  const form = h("form.panel.token-form", { onsubmit: async (e) => {
    e.preventDefault();
    create.disabled = true;
    try {
      const days = Number(expires.value);
      const made = await api("tokens", { method: "POST",
        body: { name: name.value.trim(), expires_in: days ? days * 86400 : null } });
      name.value = "";
      said.say();
      fresh.replaceChildren(secretBox(made.info, made.secret));
      await refresh();
    } catch (err) {
      said.failed(err);
    } finally {
      create.disabled = false;
    }
  } },
  h("h2", null, "New token"),
  h("div.row", null, name, h("label", null, "expires in ", expires), create),
  said.el,
  h("p.muted", null, "A token acts as you, with your teams and roles, until it expires or is revoked. "
    + "One per machine or notebook: revoking one leaves the others working."));

  root.append(h("h2", null, "API tokens"), form, fresh, tokens.table,
    h("h2", null, `Your changes of the last ${AUDIT_DAYS} days`), audit);
  return poll(refresh, 5000);
}
