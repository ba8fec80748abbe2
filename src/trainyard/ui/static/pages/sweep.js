// /sweeps/:id — one sweep: its optimization history (sweep_chart.js), its best trial, every trial (best first,
// each a job, linked) with its value and params, a link comparing the trials' metrics, and cancel. Refreshed
// while the sweep runs.
import { api, poll, toast } from "../api.js";
import { navigate } from "../app.js";
import { css } from "../css.js";
import { gated, whoami, whyNot } from "../may.js";
import { ago, badge, duration, goneNote, h, pairs, when } from "../ui.js";
import { HistoryChart } from "./sweep_chart.js";

const COMPARED = 20;  // the compare page reads every job and its metrics: the best this many

// The searched parameters' names: those given as {values} or {min, max}, not the constants
export function searched(spec) {
  return Object.keys(spec.parameters).filter((k) => isObject(spec.parameters[k]));
}

// How many trials the sweep will run (SweepSpec.max_trials): grid tries every combination
export function planned(spec) {
  if (spec.method !== "grid") return spec.trials || 10;
  const combos = searched(spec).reduce((n, k) => n * (spec.parameters[k].values || []).length, 1);
  return spec.trials ? Math.min(spec.trials, combos) : combos;
}

function ended(trials) {
  return trials.filter((t) => t.state !== "running").length;
}

// a metric value as the CLI prints it (6 significant digits)
export function num(v) {
  return v === null || v === undefined ? "–" : String(Number(v.toPrecision(6)));
}

// Complete trials by value for the goal (ties by number), then the others by number
export function bestFirst(trials, goal) {
  const sign = goal === "minimize" ? 1 : -1;
  const scored = (t) => t.state === "complete" && t.value !== null;
  const done = trials.filter(scored).sort((a, b) => sign * (a.value - b.value) || a.number - b.number);
  return [...done, ...trials.filter((t) => !scored(t)).sort((a, b) => a.number - b.number)];
}

export async function render(root, { params }) {
  css("views.css");
  css("sweeps.css");
  const path = `sweeps/${encodeURIComponent(params.id)}`;
  const head = h("div"); const facts = h("dl.kv"); const best = h("div.panel.best"); const trials = h("div");
  const chart = new HistoryChart(num);
  root.append(head, h("div.panel", null, facts), chart.el, h("h2", null, "Best trial"), best, h("h2", null, "Trials"), trials);
  let sweep = null;
  let drawn = "";
  const me = await whoami();

  function draw(force = false) {
    // redrawn only when something changed: a click on a link under a poll is not lost
    const sig = JSON.stringify([sweep.status, sweep.reason, sweep.trials]);
    if (!force && sig === drawn) return;
    drawn = sig;
    head.replaceChildren(header(sweep, cancel, remove, me));
    facts.replaceChildren(...pairs(factList(sweep)));
    chart.update(sweep.trials, sweep.spec.metric).catch(toast);
    best.replaceChildren(bestTrial(sweep));
    trials.replaceChildren(sweep.trials.length ? trialTable(sweep) : h("p.muted", null, "No trial has started yet."));
  }

  async function cancel() {
    if (!confirm(`Cancel sweep ${sweep.name} (${sweep.id})? Its running trials stop; the best so far stays.`)) return;
    try {
      sweep = await api(`${path}/cancel`, { method: "POST" });
      toast(`Cancelled sweep ${sweep.name}`, { kind: "info" });
      draw(true);
    } catch (e) { toast(e); }
  }

  async function remove() {
    if (!confirm(`Delete sweep ${sweep.name} (${sweep.id}) with its trials' jobs, their logs, metrics and outputs? ` +
      "This cannot be undone.")) return;
    try {
      await api(path, { method: "DELETE" });
      toast(`Deleted sweep ${sweep.name}`, { kind: "info" });
      navigate("/sweeps");
    } catch (e) { toast(e); }
  }

  let stop = null;
  stop = poll(async () => {
    try {
      sweep = await api(path);
    } catch (e) {
      if (e.status === 404) {  // never there, or deleted while shown: said once, no more reads
        stop();
        root.replaceChildren(goneNote(`No sweep ${params.id}`, "/sweeps", "All sweeps"));
        return;
      }
      if (!sweep) head.replaceChildren(h("p.error", null, e.message));
      throw e;
    }
    draw();
    if (sweep.status !== "running" && stop) stop();  // an ended sweep changes no more
  }, 2000);
  return () => { stop(); chart.destroy(); };
}

function header(s, cancel, remove, me) {
  const not = (verb) => whyNot(me, verb, "sweep", s);
  const ids = bestFirst(s.trials, s.spec.metric.goal).slice(0, COMPARED).map((t) => t.job_id);
  const compare = `/compare?jobs=${ids.map(encodeURIComponent).join(",")}`;
  return h("div", null,
    h("div.row", null,
      h("h1", null, s.name), h("span.sweep-status", null, badge(s.status)), h("span.grow"),
      h("a.button", { href: `/jobs?label=${encodeURIComponent(`trainyard.io/sweep=${s.id}`)}`, id: "trial-jobs",
        title: "its trials in the jobs list (trainyard ls -l trainyard.io/sweep=…)" }, "Trials' jobs"),
      ids.length ? h("a.button", { href: compare, id: "compare-trials",
        title: s.trials.length > COMPARED ? `the best ${COMPARED} trials` : "every trial" }, "Compare trials") : null,
      h("button.danger", gated(not("cancel"), { type: "button", name: "cancel", disabled: s.status !== "running",
        onclick: cancel }), "Cancel"),
      h("button.danger", gated(not("delete"), { type: "button", name: "delete", disabled: s.status === "running",
        onclick: remove, title: "delete this ended sweep with its trials' jobs (their usage stays counted)" }),
      "Delete")),
    s.reason && h("p.reason", { class: s.status === "failed" ? "error" : "muted" }, s.reason));
}

function factList(s) {
  const spec = s.spec;
  const m = spec.metric;
  const constants = Object.keys(spec.parameters).filter((k) => !isObject(spec.parameters[k]));
  const stopping = spec.early_stopping;
  return [
    ["metric", `${m.name} (${m.goal}, ${m.use} value)`], ["method", spec.method],
    ["trials", h("span.done", null, `${ended(s.trials)} ended of ${planned(spec)}`)], ["parallel", String(spec.parallel)],
    ["searched", searched(spec).map((k) => `${k} ${range(spec.parameters[k])}`).join("; ")],
    ["constants", constants.map((k) => `${k}=${show(spec.parameters[k])}`).join(", ") || "–"],
    ["early stopping", stopping ? stopping.type : "none"], ["owner", s.owner || "–"],
    ["created", h("span", { title: when(s.created_at) }, ago(s.created_at))],
    ["took", duration((s.ended_at || Date.now() / 1000) - s.created_at)], ["id", h("span.mono", null, s.id)]];
}

function bestTrial(s) {
  const b = s.best;
  if (!b) return h("p.muted", null, s.status === "running" ? "No trial has completed yet." : "No trial gave a value.");
  return h("dl.kv", null, ...pairs([
    ["trial", h("span.best-number", null, String(b.number))],
    [s.spec.metric.name, h("span.best-value", null, num(b.value))],
    ["params", h("span.best-params.mono", null, Object.entries(b.params).map(([k, v]) => `${k}=${show(v)}`).join(", "))],
    ["job", h("a.mono", { href: `/jobs/${encodeURIComponent(b.job_id)}` }, b.job_id)],
    // the sweep's id stands for its best finished trial in both commands
    ...(b.state === "complete" ? [["its model", h("span.best-model", null,
      h("code", null, `trainyard serve ${s.id} --name NAME`), " or ", h("code", null, `trainyard download ${s.id}`))]]
      : [])]));
}

function trialTable(s) {
  const names = searched(s.spec);
  const bestNo = s.best ? s.best.number : null;
  return h("table.list.trials", null,
    h("thead", null, h("tr", null, ["#", "job", "state", s.spec.metric.name, "step", ...names, "reason"].map((c) => h("th", null, c)))),
    h("tbody", null, bestFirst(s.trials, s.spec.metric.goal).map((t) =>
      h(t.number === bestNo ? "tr.best" : "tr", { dataset: { trial: String(t.number), state: t.state, job: t.job_id } },
        h("td.num", null, String(t.number)),
        h("td.mono", null, h("a", { href: `/jobs/${encodeURIComponent(t.job_id)}` }, t.job_id)),
        h("td", null, badge(t.state)),
        h("td.num.value", null, num(t.value)),
        h("td.num", null, t.step === null ? "–" : String(t.step)),
        names.map((k) => h("td.param", { dataset: { param: k } }, show(t.params[k]))),
        h("td.reason", null, t.reason || "")))));
}

function range(p) {
  if (p.values) return `in ${p.values.map(show).join(", ")}`;
  return `${show(p.min)}..${show(p.max)}${p.log ? " (log)" : ""}${p.step ? ` step ${p.step}` : ""}`;
}

function show(v) {
  if (typeof v === "number" && !Number.isInteger(v)) return num(v);
  return v === undefined ? "–" : typeof v === "string" ? v : JSON.stringify(v);
}

function isObject(v) {
  return v !== null && typeof v === "object" && !Array.isArray(v);
}
