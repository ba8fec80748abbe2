// /notifications — the webhooks you may use (names and kinds: their addresses stay in the server's config, where
// the admin names them), your subscriptions to them (an admin's list: everyone's) with how their deliveries went,
// each one's latest deliveries on demand, and a form to subscribe one to the ends of jobs you may see. The list
// is refreshed every few seconds; the form is drawn once, so a half-filled one survives the refresh.
import { api, poll } from "../api.js";
import { css } from "../css.js";
import { h, notices, prose, when } from "../ui.js";

const EVENTS = ["succeeded", "failed", "cancelled"];  // the ends of a job a subscription may ask for
const DELIVERY_CLASS = { sent: "ok", pending: "wait", failed: "bad" };  // badge classes of style.css
// what the admin writes, as the README has it
const CONFIG = `# trainyard server --config server.yaml
webhooks:
  ml-alerts: {url: "https://hooks.slack.com/services/T0/B0/XXXX", format: slack, teams: [vision]}
  ops: {url: "http://ops.internal:8080/trainyard"}     # format json: the event, as JSON`;

export async function render(root) {
  css("notifications.css");
  const [me, hooks] = await Promise.all([api("whoami"), api("webhooks")]);
  // an admin may watch any team's jobs: every team is offered, the caller's own with its role
  const all = me.admin ? (await api("teams").catch(() => [])).map((t) => t.name) : [];
  const teams = [...new Set([...Object.keys(me.teams), ...all])].sort();

  const said = notices("ul.notify-said");
  const list = subscriptions(me, said);
  root.append(
    h("h1", null, "Notifications"),
    h("p.muted.hint", null, "A subscription POSTs a job's end to a webhook within seconds, tried again for about ",
      "40 minutes while it is not answered. The admin names the webhooks in the server's config (",
      h("code", null, "webhooks:"), "); their addresses stay with the server, and you choose one by name."),
    ...(hooks.length ? [webhookTable(hooks), subscribeForm(hooks, teams, me, said, list.refresh)]
      : [noWebhook(), said.el]),
    h("h2", null, me.admin ? "Subscriptions (everyone's)" : "Your subscriptions"),
    list.table);
  return poll(list.refresh, 3000);
}

function webhookTable(hooks) {
  return h("table.list.webhooks", null,
    h("thead", null, h("tr", null, ["webhook", "format", "for"].map((c) => h("th", null, c)))),
    h("tbody", null, hooks.map((w) => h("tr", { dataset: { webhook: w.name } },
      h("td.mono", null, w.name),
      h("td.format", { title: w.format === "slack" ? "{text}, as Slack's, Mattermost's and Rocket.Chat's incoming webhooks take"
        : "the event as JSON" }, w.format),
      h("td.teams", null, w.teams ? `teams ${w.teams.join(", ")}` : "every team")))));
}

function noWebhook() {
  return h("div.panel.no-webhook", null,
    h("p", null, h("strong", null, "No webhook you may use is configured on this server."),
      " An admin names them in the server's config, each with the address it POSTs to, then restarts it:"),
    h("pre", null, CONFIG),
    h("p.muted", null, "Then subscribe one here, or from the CLI: ",
      h("code", null, "trainyard notify add ml-alerts --on failed")));
}

// The form that subscribes: which webhook, which ends, whose jobs, narrowed by queue, name or labels. The server's
// refusal shows by the field it names; `changed()` redraws the list after a subscription is made.
function subscribeForm(hooks, teams, me, said, changed) {
  const webhook = h("select", { name: "webhook" }, hooks.map((w) => h("option", { value: w.name }, `${w.name} (${w.format})`)));
  const on = EVENTS.map((ev) => h("input", { type: "checkbox", name: "on", value: ev, checked: ev === "failed" }));
  const noTeam = teams.length ? null : "you are in no team";
  const scope = h("select", { name: "scope" },
    h("option", { value: "mine" }, "my jobs"),
    h("option", { value: "team", disabled: Boolean(noTeam), title: noTeam }, "a team's jobs"),
    h("option", { value: "all", disabled: !me.admin, title: me.admin ? null : "admins only" }, "all jobs"));
  const team = h("select", { name: "team", hidden: true },
    teams.map((t) => h("option", { value: t }, me.teams[t] ? `${t} (${me.teams[t]})` : t)));
  scope.addEventListener("change", () => { team.hidden = scope.value !== "team"; });
  const queue = h("input", { name: "queue", placeholder: "any queue", autocomplete: "off", spellcheck: false });
  // a pipeline run's own end (its steps are jobs, and have a queue; the run has none)
  const kind = h("select", { name: "kind" }, h("option", { value: "job" }, "jobs"),
    h("option", { value: "pipeline_run" }, "pipeline runs"));
  const name = h("input", { name: "name", placeholder: "any name, or a glob: nightly-*", autocomplete: "off",
    spellcheck: false });
  const labels = h("input", { name: "labels", placeholder: "any labels, or: stage=prod,!scratch", autocomplete: "off",
    spellcheck: false, title: "a label selector, as trainyard ls --label takes: k=v, k!=v, k in (a,b), k, !k" });
  kind.addEventListener("change", () => { queue.hidden = labels.hidden = kind.value !== "job"; });

  const add = h("button.primary", { type: "submit" }, "Subscribe");
  return h("form.panel.notify-form", { onsubmit: async (e) => {
    e.preventDefault();
    add.disabled = true;
    const body = { webhook: webhook.value, on: on.filter((c) => c.checked).map((c) => c.value), scope: scope.value,
      kind: kind.value };
    if (scope.value === "team") body.team = team.value;
    if (kind.value === "job" && queue.value.trim()) body.queue = queue.value.trim();
    if (name.value) body.name = name.value;
    if (kind.value === "job" && labels.value.trim()) body.labels = labels.value.trim();
    try {
      const s = await api("subscriptions", { method: "POST", body });
      said.say(h("li.ok", null, `✓ ${s.webhook} hears of ${s.on.join(", ")} of ${jobsText(s, me)} (${s.id})`));
      queue.value = "";
      name.value = "";
      labels.value = "";
      await changed();
    } catch (err) {
      said.failed(err);
    } finally {
      add.disabled = false;
    }
  } },
  h("h2", null, "Subscribe"),
  h("div.row", null, webhook, h("span.muted", null, "on"),
    on.map((c) => h("label.event", null, c, ` ${c.value}`)),
    h("span.muted", null, "of"), scope, team, kind, queue, name, labels, add),
  said.el);
}

// The subscriptions table, redrawn only when something in it changed (a click under the poll is not lost),
// with each opened subscription's deliveries under its row. `refresh()` reads them again and redraws.
function subscriptions(me, said) {
  const cols = ["webhook", "on", "jobs", "sent", "pending", "failed", "owner", ""];
  const body = h("tbody");
  const open = new Set();  // the subscriptions whose deliveries show
  let drawn = "";
  let seq = 0;

  const refresh = async () => {
    const mine = ++seq;
    const subs = (await api("subscriptions", { query: { limit: 500 } })).items;  // the newest 500
    for (const id of open) if (!subs.some((s) => s.id === id)) open.delete(id);  // removed meanwhile
    const shown = [...open];
    const lists = await Promise.all(shown.map((id) => api(`subscriptions/${encodeURIComponent(id)}/deliveries`)));
    if (mine !== seq) return;  // a later refresh (a click) draws what is newer
    const deliveries = Object.fromEntries(shown.map((id, i) => [id, lists[i]]));
    const sig = JSON.stringify([subs, deliveries]);
    if (sig === drawn) return;
    drawn = sig;
    const rows = subs.flatMap((s) => [row(s), ...(open.has(s.id) ? [deliveryRow(s, deliveries[s.id])] : [])]);
    body.replaceChildren(...(rows.length ? rows : [h("tr", null, h("td", { colspan: cols.length }, h("span.muted", null,
      prose("No subscription yet (`trainyard notify add WEBHOOK --on failed` makes one too)."))))]));
  };
  const toggle = (s) => {
    if (open.has(s.id)) open.delete(s.id); else open.add(s.id);
    refresh().catch(said.failed);
  };
  const remove = async (s, button) => {
    if (!confirm(`Remove subscription ${s.id} (${s.webhook} on ${s.on.join(", ")} of ${jobsText(s, me)})? `
      + "Its deliveries not sent yet are dropped.")) return;
    button.disabled = true;
    try {
      await api(`subscriptions/${encodeURIComponent(s.id)}`, { method: "DELETE" });
      said.say(h("li.ok", null, `✓ subscription ${s.id} removed`));
      await refresh();
    } catch (e) {
      said.failed(e);
      button.disabled = false;
    }
  };
  const row = (s) => h("tr", { dataset: { subscription: s.id, webhook: s.webhook } },
    h("td.mono", null, s.webhook),
    h("td.on", null, s.on.join(", ")),
    h("td.jobs", null, jobsText(s, me), s.queue ? [" · queue ", h("code", null, s.queue)] : null,
      s.name ? [" · name ", h("code", null, s.name)] : null, s.labels ? [" · labels ", h("code", null, s.labels)] : null),
    h("td.num.sent", { title: "delivered (answered 2xx)" }, String(s.delivered)),
    h("td.num.pending", { title: "not answered yet: tried again after 5 s, 30 s, 2 min, 10 min, 30 min" }, String(s.pending)),
    h(`td.num.failed${s.failed ? ".bad" : ""}`, { title: "given up after its retries" }, String(s.failed)),
    h("td", null, s.owner),
    h("td.actions", null,
      h("button.small", { type: "button", name: "deliveries", "aria-expanded": String(open.has(s.id)),
        onclick: () => toggle(s) }, open.has(s.id) ? "Hide deliveries" : "Deliveries"), " ",
      h("button.small.danger", { type: "button", name: "remove", onclick: (e) => remove(s, e.currentTarget) }, "Remove")));
  const deliveryRow = (s, ds) => h("tr.deliveries", { dataset: { deliveriesOf: s.id } },
    h("td", { colspan: cols.length }, ds.length ? deliveryTable(ds)
      : h("span.muted", null, "None yet: each end of a job it watches is one delivery, listed here (the latest 50).")));
  const table = h("table.list.subscriptions", null,
    h("thead", null, h("tr", null, cols.map((c) => h("th", null, c)))), body);
  return { table, refresh };
}

function deliveryTable(ds) {
  return h("table.list.delivery-list", null,
    h("thead", null, h("tr", null, ["job", "event", "status", "attempts", "time", "last error"].map((c) => h("th", null, c)))),
    h("tbody", null, ds.map((d) => h("tr", { dataset: { delivery: String(d.id), job: d.object_id, status: d.status } },
      h("td", null, h("a.mono", { href: `/${d.kind === "job" ? "jobs" : "pipelines"}/${encodeURIComponent(d.object_id)}` },
        d.object_id)),
      h("td.event", null, d.event),
      h("td", null, h(`span.badge.${DELIVERY_CLASS[d.status] || "off"}`, { "data-status": d.status }, d.status)),
      h("td.num.attempts", null, String(d.attempts)),
      h("td.time", { title: `owed ${when(d.created_at)}` }, when(d.sent_at ?? d.created_at)),
      h("td.reason", null, d.last_error || "")))));
}

// Which jobs a subscription watches, in words: the owner's own, a team's, every job
function jobsText(s, me) {
  const what = s.kind === "pipeline_run" ? "pipeline runs" : "jobs";
  if (s.scope === "team") return `team ${s.team}'s ${what}`;
  if (s.scope === "all") return `all ${what}`;
  return s.owner === me.user ? `my ${what}` : `${s.owner}'s ${what}`;
}
