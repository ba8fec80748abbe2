// /users — an admin's: every user with their teams and roles, Unix account and state; add one (their first token
// shown once, with the address that opens the UI signed in as them), put one in a team or take them out, set the
// Unix account their jobs run as, disable or enable one; the teams; everyone's tokens (revoke a leaked one); the
// latest changes of anyone. The CLI's `trainyard admin user|team …`, `token ls --all` and `audit`. Forms are drawn
// once, the tables refreshed.
import { api, poll } from "../api.js";
import { css } from "../css.js";
import { auditTable, secretBox, stateBadge, tokenTable } from "../people.js";
import { ago, h, notices, prose, when } from "../ui.js";

const ROLES = ["member", "maintainer", "viewer"];  // a role in a team (spec/identity.py MembershipSet)
const AUDIT_DAYS = 7;

export async function render(root) {
  css("people.css");
  const me = await api("whoami");
  root.append(h("h1", null, "Users"));
  if (!me.admin) {
    root.append(h("p.muted.not-admin", null, "Only an admin manages users, teams and their tokens. Yours are on ",
      h("a", { href: "/account" }, "your account"), " page."));
    return null;
  }
  if (!me.users) {
    root.append(h("p.panel.no-auth", null, prose("This server runs without `--auth`: every request acts as its owner, "
      + "so the users and tokens made here sign nobody in until it runs with `--auth`.")));
  }
  const said = notices("ul.people-said");  // what came of a user's Disable or Enable
  const revoked = notices("ul.people-said");  // of a token's Revoke
  const names = h("datalist", { id: "user-names" });
  const teamNames = h("datalist", { id: "team-names" });
  const users = h("tbody");
  const teams = h("tbody");
  const audit = h("div.audit");
  const refresh = async () => {
    const since = Date.now() / 1000 - AUDIT_DAYS * 86400;
    const [u, t, all, changes] = await Promise.all([api("users"), api("teams"), api("tokens", { query: { user: "*" } }),
      api("audit", { query: { since, limit: 100 } })]);
    u.sort((a, b) => a.name.localeCompare(b.name));
    users.replaceChildren(...u.map((x) => userRow(x, me, said, refresh)));
    names.replaceChildren(...u.map((x) => h("option", { value: x.name })));
    teams.replaceChildren(...(t.length ? t.map(teamRow)
      : [h("tr", null, h("td.muted", { colspan: 3 }, "No team yet: adding a user to one creates it."))]));
    teamNames.replaceChildren(...t.map((x) => h("option", { value: x.name })));
    tokens.refresh(all);
    audit.replaceChildren(auditTable(changes.reverse(), { everyone: true }));
  };
  const tokens = tokenTable({ everyone: true, said: revoked, changed: refresh });
  const fresh = h("div.fresh");
  root.append(names, teamNames,
    addUser(fresh, refresh), fresh, membership(refresh), said.el,
    h("table.list.users", null, h("thead", null, h("tr", null,
      ["user", "teams", "account", "state", "created", ""].map((c) => h("th", null, c)))), users),
    h("h2", null, "Teams"), addTeam(refresh),
    h("table.list.teams", null, h("thead", null, h("tr", null,
      ["team", "members", "created"].map((c) => h("th", null, c)))), teams),
    h("h2", null, "Tokens"), revoked.el, tokens.table,
    h("h2", null, `Changes of the last ${AUDIT_DAYS} days`), audit);
  return poll(refresh, 5000);
}

// A form drawn once: `fields` (inputs and selects) and its button; `send()` posts it, `done(answer, said)` after;
// what came of it shows under it
function form(cls, title, fields, label, send, done) {
  const said = notices("ul.people-said");
  const button = h("button.primary", { type: "submit" }, label);
  return h(`form.panel.${cls}`, { onsubmit: async (e) => {
    e.preventDefault();
    button.disabled = true;
    try {
      await done(await send(), said);
    } catch (err) {
      said.failed(err);
    } finally {
      button.disabled = false;
    }
  } }, h("h2", null, title), h("div.row", null, ...fields, button), said.el);
}

function input(name, placeholder, attrs = {}) {
  return h("input", { name, placeholder, autocomplete: "off", spellcheck: false, ...attrs });
}

function addUser(fresh, refresh) {
  const name = input("name", "name", { required: true });
  const team = input("team", "team", { list: "team-names" });
  const role = h("select", { name: "role" }, [...ROLES, "admin"].map((r) => h("option", { value: r }, r)));
  const account = input("os_user", "Unix account (optional)");
  return form("add-user", "Add a user", [name, team, role, account], "Add",
    () => api("users", { method: "POST", body: { name: name.value.trim(), team: team.value.trim() || null,
      role: role.value, os_user: account.value.trim() || null } }),
    async (made, said) => {
      said.say(h("li.ok", null, `✓ user ${made.user.name} added`));
      fresh.replaceChildren(secretBox(made.token.info, made.token.secret, { link: true }));
      name.value = account.value = "";
      await refresh();
    });
}

function membership(refresh) {
  const user = input("member", "user", { list: "user-names", required: true });
  const team = input("team", "team", { list: "team-names", required: true });
  const role = h("select", { name: "role" }, ROLES.map((r) => h("option", { value: r }, r)),
    h("option", { value: "" }, "out of the team"));
  return form("membership", "Put a user in a team", [user, team, role], "Set",
    () => api(`users/${encodeURIComponent(user.value.trim())}/teams`, { method: "PUT",
      body: { team: team.value.trim(), role: role.value || null } }),
    async (info, said) => {
      const now = info.teams[team.value.trim()];
      said.say(h("li.ok", null, now ? `✓ ${info.name} is a ${now} of ${team.value.trim()}`
        : `✓ ${info.name} is out of ${team.value.trim()}`));
      await refresh();
    });
}

function addTeam(refresh) {
  const name = input("team", "name", { required: true });
  return form("add-team", "Add a team", [name], "Add",
    () => api("teams", { method: "POST", body: { name: name.value.trim() } }),
    async (t, said) => {
      said.say(h("li.ok", null, `✓ team ${t.name} added`));
      name.value = "";
      await refresh();
    });
}

function userRow(u, me, said, refresh) {
  const own = u.name === me.user;
  const flip = async () => {
    const verb = u.disabled ? "enable" : "disable";
    if (!u.disabled && !confirm(`Disable ${u.name}? Their tokens stop working at once; their jobs and history stay.`)) {
      return;
    }
    try {
      await api(`users/${encodeURIComponent(u.name)}/${verb}`, { method: "POST" });
      said.say(h("li.ok", null, `✓ ${u.name} ${verb}d`));
      await refresh();
    } catch (e) { said.failed(e); }
  };
  const account = async () => {  // where a root server runs the user's jobs (a Unix account of their own)
    const asked = prompt(`The Unix account ${u.name}'s jobs run as from their next attempt on (empty: none of their own)`,
      u.os_user || "");
    if (asked === null) return;
    try {
      const info = await api(`users/${encodeURIComponent(u.name)}/os-user`, { method: "PUT",
        body: { os_user: asked.trim() || null } });
      said.say(h("li.ok", null, info.os_user ? `✓ ${u.name}'s jobs run as ${info.os_user} from their next attempt on`
        : `✓ ${u.name} has no account of their own`));
      await refresh();
    } catch (e) { said.failed(e); }
  };
  const teams = Object.entries(u.teams).sort(([a], [b]) => a.localeCompare(b));
  return h("tr", { dataset: { user: u.name } },
    h("td", null, u.name, u.admin ? [" ", h("span.badge.run", null, "admin")] : null),
    h("td.teams", null, teams.length ? teams.map(([t, r]) => `${t} (${r})`).join(", ") : h("span.muted", null, "none")),
    h("td.account", null, h("span.mono", null, u.os_user || ""), " ",
      h("button.small", { type: "button", name: "account", onclick: account }, u.os_user ? "Change" : "Set")),
    h("td.state", null, stateBadge(u.disabled ? "disabled" : "active")),
    h("td", { title: when(u.created_at) }, ago(u.created_at)),
    h("td", null, h(`button.small${u.disabled ? "" : ".danger"}`, { type: "button", name: u.disabled ? "enable" : "disable",
      disabled: own, title: own ? "your own user: another admin may disable it" : "", onclick: flip },
    u.disabled ? "Enable" : "Disable")));
}

function teamRow(t) {
  const members = Object.entries(t.members).sort(([a], [b]) => a.localeCompare(b));
  return h("tr", { dataset: { team: t.name } },
    h("td", null, t.name),
    h("td.members", null, members.length ? members.map(([u, r]) => `${u} (${r})`).join(", ")
      : h("span.muted", null, prose("none: `trainyard admin user team USER TEAM` or the form above"))),
    h("td", { title: when(t.created_at) }, ago(t.created_at)));
}
