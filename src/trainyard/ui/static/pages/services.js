// /services — the live services: replicas ready of wanted, traffic (requests, error rate, p50) and the
// address each is reached at through this server. Refreshed every few seconds.
import { api, poll } from "../api.js";
import { navigate } from "../app.js";
import { css } from "../css.js";
import { badge, h, prose, withQuery } from "../ui.js";
import { errorRate, latency } from "./service.js";

export function render(root, { query }) {
  css("services.css");
  const all = query.get("all") === "1";
  const body = h("tbody");
  root.append(
    h("div.row", null, h("h1", null, "Services"), h("span.grow"),
      h("label", null, h("input", { type: "checkbox", name: "all", checked: all,
        onchange: (e) => navigate(`/services${withQuery(query, { all: e.target.checked ? "1" : null })}`, { replace: true }) }),
      " with stopped ones")),
    h("table.list.services", null, h("thead", null, h("tr", null,
      ["name", "status", "version", "ready", "requests", "errors", "p50", "address"].map((c) => h("th", null, c)))), body));
  return poll(async () => {
    const services = (await api("services", { query: { all, limit: 500 } })).items;  // the newest 500
    body.replaceChildren(...(services.length ? services.map(row)
      : [h("tr", null, h("td", { colspan: 8 }, h("span.muted", null,
        prose("No service runs. `trainyard serve JOB --name NAME` starts one."))))]));
  }, 3000);
}

function row(s) {
  const link = `/services/${encodeURIComponent(s.name)}`;
  const t = s.traffic;
  return h("tr", { dataset: { service: s.name, status: s.status } },
    h("td", null, h("a", { href: link }, s.name)),
    h("td", null, badge(s.status)),
    h("td.num", null, String(s.version)),
    h("td.num.ready", { title: "ready replicas / wanted" }, `${s.ready}/${s.wanted}`),
    h("td.num.requests", null, String(t.requests)),
    h("td.num.errors", { title: `${t.errors} answers of 5xx` }, errorRate(t)),
    h("td.num.p50", null, latency(t.p50_ms)),
    h("td.mono", null, s.url));
}
