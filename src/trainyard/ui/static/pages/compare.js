// /compare?jobs=ID1,ID2,… (or ?pipeline=RUN_ID: that run's step jobs; ?label=SELECTOR: the newest jobs a label
// selector picks, oldest first) — metrics overlaid, one chart per
// metric and one series per job, and params side by side with the values that differ marked. While a job compared
// runs, its status and metrics are read again as its own page reads them; a chart zoomed into keeps its range.
import { api, poll, toast } from "../api.js";
import { navigate } from "../app.js";
import { metricCharts } from "../chart.js";
import { css } from "../assets.js";
import { LIVE_MS, TERMINAL, metricsWait } from "../jobparts.js";
import { badge, h } from "../ui.js";

const BY_LABEL = 20;  // jobs a label selector brings, the newest: more series than a chart can tell apart

// ids from pasted text: ids, or links to job pages, separated by commas, spaces or lines
export function parseIds(textIn) {
  return [...new Set(textIn.split(/[\s,]+/).map((s) => s.replace(/^.*\/jobs\//, "").replace(/[?#].*$/, "")).filter(Boolean))];
}

export async function render(root, { query }) {
  css("/ui/views.css");
  let ids = parseIds(query.get("jobs") || "");
  const run = query.get("pipeline");
  if (run) {
    const info = await api(`pipelines/${encodeURIComponent(run)}`);
    ids = [...new Set([...ids, ...info.steps.map((s) => s.job_id).filter(Boolean)])];
  }
  const selector = query.get("label");
  let cut = false;
  if (selector) {
    const page = await api("jobs", { query: { label: selector, limit: BY_LABEL } });
    ids = [...new Set([...ids, ...page.items.map((j) => j.id).reverse()])];
    cut = page.more;
  }
  const x = query.get("x") === "time" ? "time" : "step";
  const input = h("textarea", { name: "jobs", rows: 2, cols: 70, placeholder: "job ids or links to jobs, separated by commas or spaces" }, ids.join(", "));
  const go = (e) => {
    e.preventDefault();
    const picked = parseIds(input.value);
    navigate(`/compare?jobs=${picked.map(encodeURIComponent).join(",")}${x === "time" ? "&x=time" : ""}`);
  };
  const xSel = h("select", { name: "x", onchange: () => navigate(`/compare?jobs=${ids.map(encodeURIComponent).join(",")}${xSel.value === "time" ? "&x=time" : ""}`, { replace: true }) },
    h("option", { value: "step", selected: x === "step" }, "x: step"), h("option", { value: "time", selected: x === "time" }, "x: time"));
  root.append(h("h1", {}, "Compare jobs"),
    h("form.panel.row", { onsubmit: go }, input, h("button.primary", { type: "submit" }, "Compare")));
  if (selector) {
    root.append(h("p.muted.by-label", {}, cut ? `The newest ${BY_LABEL} jobs labelled ` : "The jobs labelled ",
      h("code", {}, selector), ids.length ? "." : ": none."));
  }
  if (!ids.length) {
    if (!selector) root.append(h("p.muted", {}, "Paste two or more job ids (or links to their pages), open /compare?pipeline=RUN_ID for a pipeline's steps, or /compare?label=k=v for the jobs with a label."));
    return;
  }
  let jobs = (await Promise.all(ids.map((id) => api(`jobs/${encodeURIComponent(id)}`)
    .catch((e) => { toast(e); return null; })))).filter(Boolean);
  const names = label(jobs);
  const chartBox = h("div.charts");
  const params = h("div");
  root.append(h("h2", {}, "Params"), params, h("div.row", {}, h("h2.grow", {}, "Metrics"), xSel),
    h("div.panel", {}, chartBox));
  const points = new Map();  // each job's points as last read: an ended job's are read no more
  let charts = [];
  let count = -1;
  let statuses = "";
  let metricsAt = 0;
  const read = (j) => api(`jobs/${encodeURIComponent(j.id)}/metrics`)
    .then((ps) => ps.map((p) => ({ ...p, job: j.id })));

  // the params table (its badges say how each job stands) redrawn when a status changes, the charts when points
  // came: updated in place (chart.js), so a range zoomed into stays
  async function draw() {
    const now = JSON.stringify(jobs.map((j) => j.status));
    if (now !== statuses) { statuses = now; params.replaceChildren(paramsTable(jobs, names)); }
    const all = [...points.values()].flat();
    if (all.length === count) return;
    count = all.length;
    charts = await metricCharts(chartBox, all,
      { x, key: (p) => p.job, label: (id) => names.get(id), previous: charts });
  }

  await Promise.all(jobs.map((j) => read(j)
    .then((ps) => points.set(j.id, ps), (e) => { toast(e); points.set(j.id, []); })));
  await draw();
  // as the job page: while a job is active it is read again every LIVE_MS, once more when it ends, then no more
  let live = jobs.filter((j) => !TERMINAL.has(j.status)).map((j) => j.id);
  const stop = poll(async () => {
    if (!live.length || Date.now() - metricsAt < metricsWait(count)) return;
    metricsAt = Date.now();
    const fresh = new Map(await Promise.all(live.map(async (id) => {
      try {
        const job = await api(`jobs/${encodeURIComponent(id)}`);
        return [id, { job, ps: await read(job) }];  // after the job: once it has ended, they hold its last points
      } catch (e) {
        if (e.status === 404) return [id, { gone: true }];  // deleted meanwhile: shown as last read, read no more
        throw e;
      }
    })));
    jobs = jobs.map((j) => fresh.get(j.id)?.job || j);
    for (const [id, { ps }] of fresh) if (ps) points.set(id, ps);
    live = live.filter((id) => fresh.get(id).job && !TERMINAL.has(fresh.get(id).job.status));
    await draw();
  }, LIVE_MS);
  return () => { stop(); charts.forEach((c) => c.destroy()); };
}

// each job's name, with its id where two share a name
function label(jobs) {
  const count = new Map();
  for (const j of jobs) count.set(j.name, (count.get(j.name) || 0) + 1);
  return new Map(jobs.map((j) => [j.id, count.get(j.name) > 1 ? `${j.name} (${j.id})` : j.name]));
}

function paramsTable(jobs, names) {
  const keys = [...new Set(jobs.flatMap((j) => Object.keys(j.spec.params || {})))].sort();
  const show = (v) => (v === undefined ? "—" : typeof v === "string" ? v : JSON.stringify(v));
  const rows = keys.map((k) => {
    const values = jobs.map((j) => JSON.stringify((j.spec.params || {})[k]));
    const differs = new Set(values).size > 1;
    return h("tr", { dataset: { param: k } }, h("th", {}, k),
      jobs.map((j) => h(differs ? "td.differs" : "td", {}, show((j.spec.params || {})[k]))));
  });
  return h("table.list.compare", {},
    h("thead", {}, h("tr", {}, h("th", {}, "param"), jobs.map((j) => h("th", {}, h("a", { href: `/jobs/${encodeURIComponent(j.id)}` }, names.get(j.id)), " ", badge(j.status))))),
    h("tbody", {}, rows.length ? rows : h("tr", {}, h("td.muted", { colspan: jobs.length + 1 }, "These jobs have no params."))));
}
