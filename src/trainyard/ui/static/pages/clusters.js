// /clusters and /clusters/:key — on-demand Dask clusters: the list (status, workers running of wanted, owner),
// and one cluster (its scheduler, its worker jobs linked, a scale control, delete, and its Dask dashboard: opened
// here, through this server, on a server without users; with users, from a port of one's own machine, as the CLI
// says). Refreshed every few seconds.
import { api, poll, toast } from "../api.js";
import { navigate } from "../app.js";
import { css } from "../css.js";
import { gated, whoami, whyNot } from "../may.js";
import { ago, badge, bytes, goneNote, h, pairs, prose, when, withQuery } from "../ui.js";

export function render(root, { params, query }) {
  css("views.css");
  css("services.css");
  return params.key ? one(root, params.key) : list(root, query);
}

function list(root, query) {
  const all = query.get("all") === "1";
  const body = h("tbody");
  root.append(
    h("div.row", null, h("h1", null, "Clusters"), h("span.grow"),
      h("label", null, h("input", { type: "checkbox", name: "all", checked: all,
        onchange: (e) => navigate(`/clusters${withQuery(query, { all: e.target.checked ? "1" : null })}`, { replace: true }) }),
      " with stopped ones")),
    h("table.list.clusters", null, h("thead", null, h("tr", null,
      ["id", "name", "status", "workers", "queue", "owner", "created", "dashboard"].map((c) => h("th", null, c)))), body));
  return poll(async () => {
    const clusters = (await api("clusters", { query: { all, limit: 500 } })).items;
    body.replaceChildren(...(clusters.length ? clusters.map(row)
      : [h("tr", null, h("td", { colspan: 8 }, h("span.muted", null,
        prose("No cluster runs. `trainyard cluster create dask --workers 2` starts one."))))]));
  }, 3000);
}

function wanted(c) {  // running of wanted, as `trainyard cluster ls` says it
  return `${c.workers_running}/${c.workers}`
    + (c.adapt_max !== null && c.adapt_max !== undefined ? ` (${c.adapt_min}..${c.adapt_max})` : "");
}

function row(c) {
  return h("tr", { dataset: { cluster: c.id, status: c.status } },
    h("td.mono", null, h("a", { href: `/clusters/${encodeURIComponent(c.id)}` }, c.id)),
    h("td", null, c.name),
    h("td", null, badge(c.status)),
    h("td.num.workers", { title: "workers running / wanted (adaptive: within min..max)" }, wanted(c)),
    h("td", null, c.queue),
    h("td", null, c.owner || "–"),
    h("td", { title: when(c.created_at) }, ago(c.created_at)),
    h("td", null, c.dashboard && c.status === "running"
      ? h("a", { href: c.dashboard, target: "_blank", rel: "noopener" }, "open") : "–"));
}

async function one(root, key) {
  const path = `clusters/${encodeURIComponent(key)}`;
  const title = h("h1"); const facts = h("dl.kv"); const scale = h("form.row.scale"); const workers = h("div");
  const dash = h("div.dashboard"); const actions = h("div.row.actions");
  root.append(title, h("div.panel", null, facts, actions), h("h2", null, "Dashboard"), h("div.panel", null, dash),
    h("h2", null, "Workers"), h("div.panel", null, scale, workers));
  const me = await whoami();
  let drawn = "";
  let shownScale = "";

  function draw(c) {
    const sig = JSON.stringify(c);  // redrawn only on a change: a click under the poll is not lost
    if (sig === drawn) return;
    drawn = sig;
    const ended = ["stopping", "stopped", "failed"].includes(c.status);
    title.replaceChildren(c.name, " ", badge(c.status));
    actions.replaceChildren(h("button.danger", gated(whyNot(me, "delete", "cluster", c), { name: "delete",
      disabled: ended, onclick: () => remove(c) }), "Delete"));
    const s = c.spec;
    facts.replaceChildren(...pairs([
      ["reason", c.reason || ""], ["scheduler", h("span.mono", null, c.address || "–")],
      ["scheduler job", c.scheduler_job ? h("a.mono", { href: `/jobs/${encodeURIComponent(c.scheduler_job)}` },
        c.scheduler_job) : "–"],
      ["node", c.scheduler_node || "–"],
      ["workers", h("span.workers", null, `${c.workers_running} running of ${c.workers} wanted`
        + (c.adapt_max !== null && c.adapt_max !== undefined ? ` (adaptive ${c.adapt_min}..${c.adapt_max})` : ""))],
      ["each worker", `${s.worker_cpu} cpu, ${s.worker_memory ? bytes(s.worker_memory) : "no memory limit"}`
        + (s.worker_gpu ? `, ${s.worker_gpu} GPU` : "")],
      ["queue", c.queue], ["owner", c.owner || "–"],
      ["created", h("span", { title: when(c.created_at) }, ago(c.created_at))], ["id", h("span.mono", null, c.id)]]));
    dash.replaceChildren(...(c.dashboard && c.status === "running" ? [
      h("p", null, h("a.open-dashboard", { href: c.dashboard, target: "_blank", rel: "noopener" }, "Open the Dask dashboard"),
        " (through this server, live plots included)."),
      h("p.muted", null, ...prose(`On a server with users it opens from a port of your own machine: `
        + `\`trainyard cluster dashboard ${c.id}\`.`))]
      : [h("p.muted", null, "No dashboard now.")]));
    const scaleKey = JSON.stringify([c.status, c.workers, c.adapt_max]);
    if (scaleKey !== shownScale) { shownScale = scaleKey; drawScale(c, ended); }  // not while someone types in it
    workers.replaceChildren(c.worker_jobs.length ? workerTable(c) : h("p.muted", null, "No worker job now."));
  }

  function drawScale(c, ended) {
    scale.replaceChildren(h("label", null, "workers ", h("input", { type: "number", name: "workers", min: 0, max: 1000,
      value: c.workers, required: true, style: "width:5em" })),
    h("button", gated(whyNot(me, "scale", "cluster", c), { type: "submit", name: "scale", disabled: ended }), "Scale"),
    c.adapt_max !== null && c.adapt_max !== undefined ? h("span.muted", null, "a fixed number ends adaptive scaling") : "");
    scale.onsubmit = async (e) => {
      e.preventDefault();
      const n = Number(new FormData(scale).get("workers"));
      try { draw(await api(`${path}/scale`, { method: "POST", body: { workers: n } })); toast(`scaled ${c.name} to ${n}`, { kind: "info" }); } catch (err) { toast(err); }
    };
  }

  async function remove(c) {
    if (!confirm(`Delete cluster ${c.name} (${c.id})? Its scheduler and workers are stopped.`)) return;
    try { draw(await api(path, { method: "DELETE" })); } catch (err) { toast(err); }
  }

  let stop = null;
  stop = poll(async () => {
    try {
      draw(await api(path));
    } catch (e) {
      if (e.status !== 404) throw e;
      stop();
      root.replaceChildren(goneNote(`No cluster ${key}`, "/clusters", "All clusters"));
    }
  }, 2000);
  return () => stop();
}

function workerTable(c) {
  return h("table.list.workers", null,
    h("thead", null, h("tr", null, ["job", "state", "node", "dask address", "reason"].map((t) => h("th", null, t)))),
    h("tbody", null, c.worker_jobs.map((w) => h("tr", { dataset: { job: w.job_id } },
      h("td.mono", null, h("a", { href: `/jobs/${encodeURIComponent(w.job_id)}` }, w.job_id)),
      h("td", null, badge(w.status)),
      h("td", null, w.node || "–"),
      h("td.mono", null, w.address || "–"),
      h("td.muted", null, w.reason || "")))));
}
