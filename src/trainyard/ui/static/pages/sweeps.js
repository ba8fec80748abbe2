// /sweeps — the hyperparameter sweeps, newest first: status, metric, best value so far and trials ended of
// planned. Refreshed every few seconds; ?all=0 keeps to the running ones.
import { api, poll } from "../api.js";
import { navigate } from "../app.js";
import { css } from "../css.js";
import { ago, badge, h, when, withQuery } from "../ui.js";
import { num, planned } from "./sweep.js";

export function render(root, { query }) {
  css("sweeps.css");
  const all = query.get("all") !== "0";  // as the API: ended ones too unless asked not to
  const body = h("tbody");
  const cols = ["name", "status", "metric", "best", "trials", "started", "reason", "id"];
  root.append(
    h("div.row", null, h("h1", null, "Sweeps"), h("span.grow"),
      h("label", null, h("input", { type: "checkbox", name: "all", checked: all,
        onchange: (e) => navigate(`/sweeps${withQuery(query, { all: e.target.checked ? null : "0" })}`, { replace: true }) }),
      " with ended ones")),
    h("table.list.sweeps", null, h("thead", null, h("tr", null, cols.map((c) => h("th", null, c)))), body));
  return poll(async () => {
    const sweeps = (await api("sweeps", { query: { all, limit: 500 } })).items;  // the newest 500
    body.replaceChildren(...(sweeps.length ? sweeps.map(row)
      : [h("tr", null, h("td", { colspan: cols.length }, h("span.muted", null,
        `${all ? "No sweep has run yet." : "No sweep is running."} \`trainyard sweep run sweep.yaml\` starts one.`)))]));
  }, 3000);
}

function row(s) {
  const done = Object.entries(s.counts).reduce((n, [state, k]) => n + (state === "running" ? 0 : k), 0);
  const link = `/sweeps/${encodeURIComponent(s.id)}`;
  const m = s.spec.metric;
  return h("tr", { dataset: { sweep: s.id, name: s.name, status: s.status } },
    h("td", null, h("a", { href: link }, s.name)),
    h("td", null, badge(s.status)),
    h("td", null, `${m.name} `, h("span.muted", null, m.goal)),
    h("td.num.best", null, s.best ? [num(s.best.value), h("span.muted", null, ` trial ${s.best.number}`)] : "–"),
    h("td.num.trials", { title: "trials ended / planned" }, `${done}/${planned(s.spec)}`),
    h("td", { title: when(s.created_at) }, ago(s.created_at)),
    h("td.reason", null, s.reason || ""),
    h("td.mono", null, h("a", { href: link }, s.id)));
}
