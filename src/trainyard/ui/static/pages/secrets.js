// /secrets — your teams' secrets: name, team, length, who set each and when; never their values, which go
// in through the form's password field and are not shown or kept anywhere by the page. A team's maintainers
// (and admins) set, replace and delete them; a job reads one with `secrets: [NAME]` in its spec.
import { api, poll } from "../api.js";
import { css } from "../css.js";
import { whyNotSecrets } from "../may.js";
import { ago, h, notices, prose, when } from "../ui.js";

export async function render(root) {
  css("secrets.css");
  const me = await api("whoami");
  // an admin may set any team's: every team is offered, the caller's own with its role
  const all = me.admin ? (await api("teams").catch(() => [])).map((t) => t.name) : [];
  const teams = [...new Set([...Object.keys(me.teams), ...all])].sort();
  // "-" names no team (an admin's own secrets) even for an admin who is in a team
  const noTeam = me.admin;
  const cols = ["name", "team", "length", "set by", "updated", ""];
  const body = h("tbody");
  const { el: said, say, failed } = notices("ul.secret-errors");

  const name = h("input", { name: "name", placeholder: "NAME", required: true, autocomplete: "off", spellcheck: false });
  const team = h("select", { name: "team" },
    teams.map((t) => h("option", { value: t }, me.teams[t] ? `${t} (${me.teams[t]})` : t)),
    noTeam ? h("option", { value: "-" }, "no team") : null);
  const value = h("input", { type: "password", name: "value", autocomplete: "off", placeholder: "value", required: true });
  const usage = [h("code"), h("code")];
  const hint = () => {
    const n = name.value || "NAME";
    usage[0].textContent = `secrets: [${n}]`;
    usage[1].textContent = `secrets: {VARIABLE: ${n}}`;
  };
  name.addEventListener("input", hint);
  hint();

  const refresh = async () => {
    const secrets = await api("secrets");
    body.replaceChildren(...(secrets.length ? secrets.map(row) : [h("tr", null, h("td", { colspan: cols.length },
      h("span.muted", null, prose("No secret is set. `trainyard secret set NAME` sets one from standard input."))))]));
  };
  const row = (s) => {
    const off = whyNotSecrets(me, s.team);
    return h("tr", { dataset: { secret: s.name, team: s.team || "" } },
      h("td.mono", null, s.name),
      h("td", null, s.team || "—"),
      h("td.num.length", { title: "characters in the value" }, String(s.length)),
      h("td", null, s.updated_by || "—"),
      h("td", { title: when(s.updated_at) }, ago(s.updated_at)),
      h("td", null,
        h("button.small", { type: "button", name: "replace", disabled: Boolean(off), title: off, onclick: () => replace(s) },
          "Replace"), " ",
        h("button.small.danger", { type: "button", name: "delete", disabled: Boolean(off), title: off,
          onclick: () => remove(s) }, "Delete")));
  };
  const replace = (s) => {  // into the form: a new value, same name and team
    if (s.team && ![...team.options].some((o) => o.value === s.team)) team.append(h("option", { value: s.team }, s.team));
    team.value = s.team || "-";
    settable();
    name.value = s.name;
    name.dispatchEvent(new Event("input"));
    value.focus();
  };
  const remove = async (s) => {
    const whose = s.team ? `team ${s.team}` : "no team";
    if (!confirm(`Delete secret ${s.name} of ${whose}? Jobs naming it are refused from now on.`)) return;
    try {
      await api(`secrets/${encodeURIComponent(s.name)}`, { method: "DELETE", query: { team: s.team || "-" } });
      say(h("li.ok", null, `✓ secret ${s.name} deleted`));
      await refresh();
    } catch (e) { failed(e); }
  };

  const set = h("button.primary", { type: "submit" }, "Set");
  // a team whose secrets the signed-in person may not change (a member's, a viewer's) disables Set, saying why
  const settable = () => {
    const why = whyNotSecrets(me, team.value === "-" ? null : team.value);
    set.disabled = Boolean(why);
    set.title = why || "";
  };
  team.addEventListener("change", settable);
  settable();
  const form = h("form.panel.secret-form", { onsubmit: async (e) => {
    e.preventDefault();
    set.disabled = true;
    try {
      const s = await api(`secrets/${encodeURIComponent(name.value)}`,
        { method: "PUT", query: { team: team.value }, body: { value: value.value } });
      value.value = "";
      say(h("li.ok", null, `✓ secret ${s.name} of ${s.team ? `team ${s.team}` : "no team"} set (${s.length} characters)`));
      await refresh();
    } catch (err) {
      failed(err);
    } finally {
      settable();
    }
  } },
  h("h2", null, "Set a secret"),
  h("div.row", null, name, team, value, set),
  said,
  h("p.muted", null, "A job of the team reads it from its environment: ", usage[0], " in its spec, or ", usage[1],
    " to name the variable. Its value is never shown again; setting a name again replaces it."));

  root.append(h("h1", null, "Secrets"), form,
    h("table.list.secrets", null, h("thead", null, h("tr", null, cols.map((c) => h("th", null, c)))), body));
  return poll(refresh, 5000);
}
