// /pipelines — the runs, newest first; the filters (status, name) and the page live in the URL.
import { api, poll } from "../api.js";
import { navigate } from "../app.js";
import { css } from "../css.js";
import { DONE, statusMix } from "../steps.js";
import { ago, badge, duration, h, when, withQuery } from "../ui.js";

const STATUSES = ["running", "cancelling", "succeeded", "failed", "cancelled"];
const PAGE = 50;

export function render(root, { query }) {
  css("dag.css");
  const status = query.getAll("status");
  const name = query.get("name") || "";
  const cursor = query.get("cursor");
  // from the address as it is now, not as it was at render: the name box's timer can fire after a checkbox
  // already moved the page on, and must not put back the filter that the checkbox took away
  const live = () => new URLSearchParams(location.search);
  const set = (changes) => navigate(`/pipelines${withQuery(live(), { cursor: null, ...changes })}`, { replace: true });

  const search = h("input", { type: "search", name: "name", placeholder: "name contains…", value: name });
  let typing = null;
  search.addEventListener("input", () => {
    clearTimeout(typing);
    typing = setTimeout(() => set({ name: search.value.trim() }), 300);
  });
  const filters = h("div.row.panel", null,
    h("span.muted", null, "Status"),
    STATUSES.map((s) => h("label", null, h("input", {
      type: "checkbox", name: "status", value: s, checked: status.includes(s),
      onchange: (e) => {
        const now = live().getAll("status").filter((x) => x !== s);
        set({ status: e.target.checked ? [...now, s] : now });
      },
    }), " ", s)),
    h("span.grow"), search);
  const body = h("tbody");
  const more = h("div.row");
  root.append(h("div.row", null, h("h1", null, "Pipeline runs"), h("span.grow"), h("a.button", { href: "/submit" }, "Run a pipeline")),
    filters,
    h("table.list.runs", null, h("thead", null, h("tr", null, ["status", "name", "steps", "started", "duration", "owner", "id"].map((c) => h("th", null, c)))), body),
    more);
  if (name) setTimeout(() => { search.focus(); search.setSelectionRange(name.length, name.length); });

  return poll(async () => {
    const page = await api("pipelines", { query: { status, name, cursor, limit: PAGE } });
    body.replaceChildren(...(page.items.length ? page.items.map(row)
      : [h("tr", null, h("td", { colspan: 7 }, h("span.muted", null, status.length || name ? "No run matches these filters." : "No pipeline has run yet.")))]));
    more.replaceChildren(...[
      cursor ? h("a.button", { href: `/pipelines${withQuery(query, { cursor: null })}` }, "« newest") : null,
      page.next_cursor ? h("a.button", { href: `/pipelines${withQuery(query, { cursor: page.next_cursor })}` }, "older »") : null].filter(Boolean));
  }, 3000);
}

function row(run) {
  const done = run.steps.filter((s) => DONE.has(s.status)).length;
  const end = run.ended_at || Date.now() / 1000;
  const link = `/pipelines/${encodeURIComponent(run.id)}`;
  return h("tr", { dataset: { run: run.id, status: run.status } },
    h("td", null, badge(run.status)),
    h("td", null, h("a", { href: link }, run.name)),
    h("td.steps", null, h("div.row", null, h("span", null, `${done}/${run.steps.length}`), h("div.grow", { style: "min-width:120px" }, run.steps.length ? statusMix(run.steps) : null))),
    h("td", { title: when(run.created_at) }, ago(run.created_at)),
    h("td", null, duration(end - run.created_at)),
    h("td", null, run.owner || ""),
    h("td.mono", null, h("a", { href: link }, run.id)));
}
