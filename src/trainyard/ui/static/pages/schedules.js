// /schedules — the schedules (a job submitted on a cron): each one's cron in words, its next fire, its last run
// with the job it started, the runs still going; pause or resume, run now, delete. /schedules/:key — one
// schedule: its spec and its latest runs. Both refreshed every few seconds. Schedules are made from the CLI or
// the SDK, not here.
import { api, poll, toast } from "../api.js";
import { navigate } from "../app.js";
import { css } from "../css.js";
import { gated, whoami, whyNot } from "../may.js";
import { resourceText } from "../resources.js";
import { ago, duration, h, pairs, when } from "../ui.js";

const HINT = 'trainyard schedule create job.yaml --cron "0 3 * * *"';
// a fire's outcome as colour and text, in the badge classes of style.css
const OUTCOME_CLASS = { started: "ok", skipped: "wait", missed: "warn", failed: "bad" };

export function render(root, { params }) {
  css("schedules.css");
  return params.key === undefined ? list(root) : detail(root, params.key);
}

function list(root) {
  const cols = ["name", "cron", "timezone", "next fire", "last run", "active", "owner", "team", ""];
  const body = h("tbody");
  const said = h("p.schedule-said", { role: "status" });
  root.append(
    h("h1", null, "Schedules"),
    h("p.muted.hint", null, "A schedule submits its job on a cron. Create one from the CLI: ", h("code", null, HINT),
      " (or the SDK)."),
    said,
    h("table.list.schedules", null, h("thead", null, h("tr", null, cols.map((c) => h("th", null, c)))), body));
  let drawn = "";
  let me;  // the signed-in person (may.js), read with the first list

  const refresh = async () => {
    if (me === undefined) me = await whoami();
    const schedules = (await api("schedules", { query: { limit: 500 } })).items;  // the newest 500
    // redrawn only when something changed: a click on a row's button under the poll is not lost
    const sig = JSON.stringify(schedules);
    if (sig === drawn) return;
    drawn = sig;
    const act = { say: (...items) => said.replaceChildren(...items), changed: refresh, gone: refresh, small: true, me };
    body.replaceChildren(...(schedules.length ? schedules.map((s) => row(s, controls(s, act)))
      : [h("tr", null, h("td", { colspan: cols.length }, h("span.muted", null, "No schedule is set up.")))]));
  };
  return poll(refresh, 3000);
}

function row(s, buttons) {
  const link = `/schedules/${encodeURIComponent(s.id)}`;
  const last = s.runs[0];
  return h("tr", { dataset: { schedule: s.id, name: s.name, state: s.suspended ? "paused" : "active" } },
    h("td", null, h("a", { href: link }, s.name)),
    h("td.cron", null, h("code", null, s.spec.cron), h("div.explain.muted", null, s.explain)),
    h("td", null, s.spec.timezone),
    h("td.next", null, nextFire(s)),
    h("td.last", { title: last ? runTitle(last) : null }, last ? [outcome(last.outcome), " ", jobLink(last.job_id, last.run_id, last.gone)]
      : h("span.muted", null, "not fired yet")),
    h("td.num.active", { title: s.active.join(", ") || "none running" }, String(s.active.length)),
    h("td", null, s.owner || "–"),
    h("td", null, s.team || "–"),
    h("td.actions", null, buttons));
}

function detail(root, key) {
  css("views.css");
  const path = `schedules/${encodeURIComponent(key)}`;
  const head = h("div");
  const said = h("p.schedule-said", { role: "status" });
  const facts = h("dl.kv");
  const runs = h("div");
  const shown = h("div", { hidden: true }, h("div.panel", null, facts), h("h2", null, "Runs"), runs);  // once found
  root.append(head, said, shown);
  let s = null;
  let drawn = "";

  const act = {
    me: undefined,  // the signed-in person (may.js), read with the schedule the first time
    say: (...items) => said.replaceChildren(...items),
    changed: async (info) => { if (info) { s = info; draw(); } else await refresh(); },
    gone: () => { toast(`Deleted schedule ${s.name}`, { kind: "info" }); navigate("/schedules"); },
  };
  function draw() {
    const sig = JSON.stringify(s);
    if (sig === drawn) return;
    drawn = sig;
    shown.hidden = false;
    head.replaceChildren(h("div.row", null, h("h1", null, s.name), h("span.schedule-state", null, state(s)),
      h("span.grow"), controls(s, act)));
    facts.replaceChildren(...pairs(factList(s)));
    runs.replaceChildren(s.runs.length ? runTable(s.runs) : h("p.muted", null, "It has not fired yet."));
  }
  async function refresh() {
    try {
      if (act.me === undefined) act.me = await whoami();
      s = await api(path);
    } catch (e) {
      if (!s) head.replaceChildren(h("p.error", null, e.status === 404 ? `No schedule ${key}` : e.message));
      throw e;
    }
    draw();
  }
  return poll(refresh, 2000);
}

function factList(s) {
  const spec = s.spec;
  const job = spec.job;
  return [
    ["cron", [h("code", null, spec.cron), " ", h("span.explain", null, s.explain)]], ["timezone", spec.timezone],
    ["next fire", nextFire(s)], ["last cron fire", s.last_at ? h("span", { title: zoned(s.last_at, spec.timezone) }, when(s.last_at)) : "–"],
    ["concurrency", h("span", { title: CONCURRENCY[spec.concurrency] }, spec.concurrency)],
    ["starting deadline", h("span", { title: "a fire not made within this (the server was down) is missed" },
      duration(spec.starting_deadline))],
    ...(job ? [["command", h("code.command", null, commandText(job.command))], ["queue", job.queue],
      ["resources", resourceText(job)], ["job name", job.name]]
      : [["pipeline", `${spec.pipeline.name || "pipeline"}: ${Object.keys(spec.pipeline.steps || {}).join(", ")}`],
        ["params", JSON.stringify(spec.params)]]),
    ["active", s.active.length ? s.active.map((id, i) => [i ? ", " : "", id.startsWith("j-") ? jobLink(id) : jobLink(null, id)])
      : "none"],
    ["owner", s.owner || "–"], ["team", s.team || "–"],
    ["created", h("span", { title: when(s.created_at) }, ago(s.created_at))], ["id", h("span.mono", null, s.id)]];
}

const CONCURRENCY = {
  forbid: "a fire while the last run has not ended is skipped",
  allow: "runs may overlap",
  replace: "the runs still going are cancelled, then the new one is submitted",
};

function runTable(runs) {
  return h("table.list.runs", null,
    h("thead", null, h("tr", null, ["due", "fired", "outcome", "job", "message", ""].map((c) => h("th", null, c)))),
    h("tbody", null, runs.map((r) => h("tr", { dataset: { outcome: r.outcome, job: r.job_id || r.run_id || "", manual: String(r.manual) } },
      h("td.due", null, when(r.at)),
      h("td.fired", null, when(r.fired_at)),
      h("td", null, outcome(r.outcome)),
      h("td.mono", null, jobLink(r.job_id, r.run_id, r.gone)),
      h("td.reason", null, r.message || ""),
      h("td", null, r.manual ? h("span.manual", { title: "run now (trigger), not the cron" }, "manual") : "")))));
}

// Pause or resume, run now, delete. `act.say(...)` shows what came of one, the server's message where it
// refused; `act.changed(info?)` redraws (with the schedule as the server now has it, when it said);
// `act.gone()` follows a delete. What `act.me` may not do is disabled, its title saying why.
function controls(s, act) {
  const not = (what) => whyNot(act.me, what, "schedule", s);
  const verb = s.suspended ? "resume" : "pause";
  const path = `schedules/${encodeURIComponent(s.id)}`;
  const run = (fn) => async (e) => {
    const button = e.currentTarget;
    button.disabled = true;
    try {
      await fn();
    } catch (err) {
      act.say(h("span.error", null, `${s.name}: ${err.message}`));
    } finally {
      button.disabled = false;
    }
  };
  const toggle = run(async () => {
    const info = await api(`${path}/${s.suspended ? "resume" : "pause"}`, { method: "POST" });
    act.say(h("span.ok", null, info.suspended ? `✓ ${info.name} paused: it fires no more until resumed`
      : `✓ ${info.name} resumed: next fire ${info.next_at ? when(info.next_at) : "never"}`));
    await act.changed(info);
  });
  const trigger = run(async () => {
    const r = await api(`${path}/trigger`, { method: "POST" });
    act.say(fired(s, r));
    await act.changed();
  });
  const remove = run(async () => {
    if (!confirm(`Delete schedule ${s.name} (${s.id})? It fires no more; the jobs it started go on.`)) return;
    await api(path, { method: "DELETE" });
    act.say(h("span.ok", null, `✓ schedule ${s.name} deleted`));
    await act.gone();
  });
  const cls = act.small ? ".small" : "";
  return [
    h(`button${cls}`, gated(not(verb), { type: "button", name: verb, onclick: toggle }),
      s.suspended ? "Resume" : "Pause"),
    " ",
    h(`button${cls}`, gated(not("run"), { type: "button", name: "trigger", onclick: trigger,
      title: "fire once now, out of the cron (paused or not)" }), "Run now"),
    " ",
    h(`button${cls}.danger`, gated(not("delete"), { type: "button", name: "delete", onclick: remove }), "Delete")];
}

// What a run now came to: the job it started, or why none was
function fired(s, r) {
  if (r.outcome === "started") {
    return h("span.ok", null, `✓ ${s.name}: started ${r.run_id ? "pipeline run" : "job"} `, jobLink(r.job_id, r.run_id, r.gone), r.message ? ` (${r.message})` : "");
  }
  return h(r.outcome === "failed" ? "span.error" : "span.warn", null, `${s.name}: no job started, ${r.outcome}`,
    r.message ? `: ${r.message}` : "");
}

function nextFire(s) {
  if (s.held) return h("span.paused", { title: s.held }, "held paused: its cron is refused now");
  if (s.suspended) return h("span.paused", null, "paused");
  if (s.next_at === null || s.next_at === undefined) return h("span.muted", null, "never");
  return h("span", { title: zoned(s.next_at, s.spec.timezone) }, when(s.next_at));
}

function state(s) {
  return h(`span.badge.${s.suspended ? "wait" : "run"}`, { "data-status": s.suspended ? "paused" : "active" },
    s.suspended ? "paused" : "active");
}

function outcome(o) {
  return h(`span.badge.${OUTCOME_CLASS[o] || "off"}`, { dataset: { outcome: o } }, o);
}

// the job a run started, or the pipeline run
function jobLink(id, runId, gone) {
  // deleted since it fired (rm, or the jobs retention): its id stays, with no link to a page that is gone
  if (gone) return h("span.mono.muted", { title: "deleted since" }, `${runId || id} (deleted)`);
  if (runId) return h("a.mono", { href: `/pipelines/${encodeURIComponent(runId)}` }, runId);
  return id ? h("a.mono", { href: `/jobs/${encodeURIComponent(id)}` }, id) : h("span.muted", null, "–");
}

function runTitle(r) {
  return `${r.manual ? "run now" : "due " + when(r.at)}, fired ${when(r.fired_at)}${r.message ? `: ${r.message}` : ""}`;
}

// A time on the schedule's own clock (its cron's), for a title; the page shows the browser's
function zoned(t, tz) {
  try {
    return `${new Date(t * 1000).toLocaleString(undefined, { timeZone: tz, timeZoneName: "short" })} (${tz})`;
  } catch {
    return tz;  // a zone this browser does not know
  }
}

// A command as a shell line: a list's items quoted where a shell would need it
function commandText(cmd) {
  if (!Array.isArray(cmd)) return cmd;
  return cmd.map((a) => (/^[\w@%+=:,./-]+$/.test(a) ? a : `'${a.replaceAll("'", "'\\''")}'`)).join(" ");
}
