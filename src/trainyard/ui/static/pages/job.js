// /jobs/:id — a job's status and attempts, why it waits, its spec, live logs, metric charts, outputs,
// and what one can do with it (cancel, submit again, submit again with other params).
import { api, poll, text, toast } from "../api.js";
import { navigate } from "../app.js";
import { metricCharts } from "../chart.js";
import { LIVE_MS, TERMINAL, artifactsTable, attemptsTable, eventsList, facts, metricSummary, metricsWait, paramsForm }
  from "../jobparts.js";
import { LogView } from "../logview.js";
import { execBox } from "../execbox.js";
import { labelBox } from "../labelbox.js";
import { gated, whoami, whyNot, whyNotSubmit } from "../may.js";
import { stackPanel } from "../stacks.js";
import { badge, h } from "../ui.js";

export async function render(root, { params, query }) {
  const id = params.id;
  const path = `jobs/${encodeURIComponent(id)}`;
  const stops = [];
  let [job, me] = await Promise.all([api(path), whoami()]);
  let charts = [];
  let xMode = query.get("x") === "time" ? "time" : "step";
  let metricCount = -1;

  const title = h("h1", {}); const head = h("div"); const attempts = h("div"); const events = h("div");
  const actions = h("div.row.actions"); const paramsBox = h("div", { hidden: true });
  const chartBox = h("div.charts"); const outputs = h("div"); const specBox = h("pre.yaml", {}, "…");
  const summary = h("div.metric-summary-box");
  const systemBox = h("div.charts");
  const logs = new LogView(id);
  const stacks = stackPanel(path);
  const execs = h("div");  // while the job runs: a command beside it (execbox.js)
  const labelsBox = labelBox(path, async () => { job = await api(path); drawHead(); });
  const xSel = h("select", { name: "x", onchange: () => {
    xMode = xSel.value;
    history.replaceState(null, "", `/jobs/${encodeURIComponent(id)}${xMode === "time" ? "?x=time" : ""}`);
    metricCount = -1;
    drawCharts().catch(toast);
  } },
    h("option", { value: "step", selected: xMode === "step" }, "x: step"), h("option", { value: "time", selected: xMode === "time" }, "x: time"));
  const system = h("details.panel.system", { ontoggle: () => system.open && drawSystem() },
    h("summary", {}, "System samples (CPU, memory, GPU)"), systemBox);

  root.append(title, h("div.panel", {}, head, actions, paramsBox, labelsBox), stacks.el, execs,
    h("h2", {}, "Attempts"), attempts,
    h("h2", {}, "Logs"), h("div.panel", {}, logs.el),
    h("div.row", {}, h("h2.grow", {}, "Metrics"), xSel), h("div.panel", {}, summary, chartBox), system,
    h("h2", {}, "Outputs"), outputs,
    h("details.panel", {}, h("summary", {}, "Spec (YAML)"), specBox),
    h("details.panel", {}, h("summary", {}, "Events"), events));

  function drawHead() {
    title.replaceChildren(job.name, " ", badge(job.status));
    // what the signed-in person's role (or not owning the job) forbids is disabled, its title saying why
    const not = (verb) => whyNot(me, verb, "job", job);
    const copy = whyNotSubmit(me, job);
    if (job.status !== "running") execs.replaceChildren();
    else if (!execs.firstChild) execs.append(execBox(path, job.spec.replicas || 1, not("run commands in")));
    head.replaceChildren(facts(job));
    attempts.replaceChildren(attemptsTable(job));
    if (not("change the labels of")) labelsBox.hidden = true;
    if (copy) paramsBox.hidden = true;
    actions.replaceChildren(
      h("button.danger", gated(not("cancel"), { type: "button", name: "cancel",
        disabled: TERMINAL.has(job.status) || job.status === "cancelling", onclick: cancel }), "Cancel"),
      h("button", gated(copy, { type: "button", name: "resubmit", onclick: () => resubmit(job.spec.params) }),
        "Re-submit"),
      h("button", gated(copy, { type: "button", name: "resubmit-params",
        onclick: () => { paramsBox.hidden = !paramsBox.hidden; } }), "Re-submit with other params…"),
      h("a.button", { href: `/compare?jobs=${encodeURIComponent(id)}` }, "Compare…"),
      h("button", gated(not("change the labels of"), { type: "button", name: "edit-labels",
        onclick: () => { labelsBox.hidden = !labelsBox.hidden; }, title: "set or remove this job's labels" }),
        "Labels…"),
      h("button", gated(not("dump the stacks of"), { type: "button", name: "stacks", disabled: job.status !== "running",
        onclick: stacks.ask, title: "where the running command is: each replica's Python threads (py-spy)" }),
        "Stacks"),
      h("button.danger", gated(not("delete"), { type: "button", name: "delete", disabled: !TERMINAL.has(job.status),
        onclick: remove,
        title: "delete this ended job: its logs, metrics, outputs and folders (its usage stays counted)" }),
      "Delete"));
  }

  async function remove() {
    if (!confirm(`Delete job ${job.name} (${id}) with its logs, metrics and outputs? This cannot be undone.`)) return;
    try {
      await api(path, { method: "DELETE" });
      toast(`deleted ${job.name} (${id})`, { kind: "info" });
      navigate("/jobs");
    } catch (e) { toast(e); }
  }

  async function cancel() {
    if (!confirm(`Cancel job ${job.name} (${id})?`)) return;
    try { job = await api(`${path}/cancel`, { method: "POST" }); drawHead(); } catch (e) { toast(e); }
  }

  async function resubmit(newParams) {
    try {
      // trainyard's own labels (a sweep's, a run's) name what submitted the old job, not this one: refused
      const own = ([k]) => k.startsWith("trainyard.io/");
      const labels = Object.fromEntries(Object.entries(job.spec.labels || {}).filter((kv) => !own(kv)));
      const spec = { ...job.spec, params: newParams, labels };
      const made = await api("jobs", { method: "POST", body: { spec, snapshot: job.snapshot } });
      toast(`submitted ${made.name} (${made.id})`, { kind: "info" });
      navigate(`/jobs/${encodeURIComponent(made.id)}`);
    } catch (e) { toast(e); }
  }

  let metricsAt = 0;
  async function drawCharts({ force = true } = {}) {
    if (!force && Date.now() - metricsAt < metricsWait(metricCount)) return;
    metricsAt = Date.now();
    const points = await api(`${path}/metrics`);
    if (points.length === metricCount) return;
    metricCount = points.length;
    summary.replaceChildren(...[metricSummary(points)].filter(Boolean));
    const key = (p) => `attempt ${p.attempt} · replica ${p.replica}`;
    charts = await metricCharts(chartBox, points, { x: xMode, key, previous: charts });
  }

  let systemCharts = [];
  async function drawSystem() {
    try {
      const points = (await api(`${path}/metrics`, { query: { system: true } })).filter((p) => p.name.startsWith("system/"));
      systemCharts.forEach((c) => c.destroy());
      systemCharts = await metricCharts(systemBox, points, { x: "time", key: (p) => `attempt ${p.attempt} · replica ${p.replica}` });
    } catch (e) { toast(e); }
  }

  drawHead();
  paramsBox.append(h("h2", {}, "Re-submit with other params"), paramsForm(job.spec.params, resubmit));
  text(`${path}/spec.yaml`).then((y) => { specBox.textContent = y; }, (e) => { specBox.textContent = `could not load the spec: ${e.message}`; });
  api(`${path}/outputs`).then((items) => outputs.replaceChildren(artifactsTable(id, items)), toast);
  api(`${path}/events`).then((items) => events.replaceChildren(eventsList(items)), toast);
  stops.push(logs.start());

  // while the job is active its header, attempts and charts refresh; once it ends, one last time
  let ended = TERMINAL.has(job.status);
  let changed = job.updated_at;
  const stopJob = poll(async () => {
    if (ended) return;
    job = await api(path);
    ended = TERMINAL.has(job.status);
    drawHead();
    await drawCharts({ force: ended });
    // each change of the job (a retry, a preemption, its start) is an event: read them again as they come
    if (job.updated_at !== changed) {
      changed = job.updated_at;
      api(`${path}/events`).then((items) => events.replaceChildren(eventsList(items)), toast);
    }
    if (ended) api(`${path}/outputs`).then((items) => outputs.replaceChildren(artifactsTable(id, items)), toast);
  }, LIVE_MS);
  stops.push(stopJob);
  if (ended) drawCharts().catch(toast);

  return () => { stops.forEach((s) => s()); charts.forEach((c) => c.destroy()); systemCharts.forEach((c) => c.destroy()); };
}
